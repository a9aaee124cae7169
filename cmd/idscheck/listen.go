package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// listen resolves what a target publishes on GET /health (pub) into the
// description: its time scale, the numbers of the profile's section it
// publishes (http-idempotency's key_ttl_seconds), and its readings of the
// profile's decisions. A value the user declared none of is taken from the
// target, and a line says so (the notes returned); one declared otherwise
// is a *harness.ContradictionError naming both values and where each came
// from (exit 2). Nothing published leaves the description as it was.
func (t *targetFlags) listen(pub harness.Published) ([]string, error) {
	if t.origin == nil {
		t.origin = map[string]string{}
	}
	var notes []string
	scale, err := harness.Param{Name: "time_scale", Declared: t.TimeScale, From: t.name("time_scale", "time-scale")}.Resolve(pub)
	if err != nil {
		return nil, err
	}
	if scale.Note != "" {
		t.TimeScale, t.origin["time_scale"] = scale.Value, scale.From
		notes = append(notes, scale.Note)
	}
	if s := t.prof.Section; s != nil {
		for _, p := range s.Published {
			from := `"` + s.Key + "." + p.Name + `"`
			if t.File != "" {
				from += " in " + t.File
			}
			r, err := harness.Param{Name: p.Name, Declared: p.Get(t.Described), From: from}.Resolve(pub)
			if err != nil {
				return nil, err
			}
			if r.Note != "" && t.Described != nil {
				t.Described = p.Set(t.Described, r.Value)
				notes = append(notes, r.Note)
			}
		}
	}
	if t.prof.Decisions != nil {
		decisions := map[string][]string{}
		for _, d := range t.prof.Decisions() {
			for _, r := range d.Readings {
				decisions[d.ID] = append(decisions[d.ID], r.Name)
			}
		}
		from := func(d string) string {
			if t.readingFromFile[d] {
				return `"readings" in ` + t.File
			}
			return "--reading"
		}
		readings, more, err := harness.ResolveReadings(pub, decisions, t.Readings, from)
		if err != nil {
			return nil, err
		}
		if len(more) > 0 {
			t.Readings = readings
			notes = append(notes, more...)
		}
	}
	return notes, nil
}

// listenToTarget reads GET base/health once (bounded by timeout) and
// resolves what it publishes into t (listen), printing each note on stderr
// after prefix ("idscheck run: ").
func listenToTarget(ctx context.Context, t *targetFlags, base string, timeout time.Duration, stderr io.Writer, prefix string) error {
	notes, err := t.listen(harness.ReadPublished(ctx, base, timeout))
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "%s%s\n", prefix, n)
	}
	return nil
}

// listen is listenToTarget for run: the target's description takes what
// it publishes, and a time scale taken from it is written into the
// reproduce line, which then repeats the run at the scale it ran at.
func (c *runConfig) listen(ctx context.Context, target *features.Target, stderr io.Writer) error {
	if err := listenToTarget(ctx, &c.tgt, target.BaseURL, min(c.requestTimeout, maxHealthProbe), stderr, "idscheck run: "); err != nil {
		return err
	}
	t := c.tgt.Target()
	target.TimeScale, target.Described, target.Readings = t.TimeScale, t.Described, t.Readings
	if c.tgt.origin["time_scale"] == harness.PublishedHealth && !containsString(c.setFlags, "time-scale") {
		c.setFlags = append(c.setFlags, "time-scale")
		if c.values == nil {
			c.values = map[string]string{}
		}
		c.values["time-scale"] = harness.FormatNumber(c.tgt.TimeScale)
	}
	return nil
}

// listen is listenToTarget for chaos: the run's time scale, the target's
// description and readings take what the target publishes. A published
// time scale chaos cannot run at is refused as a declared one is.
func (c *chaosConfig) listen(ctx context.Context, tgt *chaosTarget, stderr io.Writer) error {
	if err := listenToTarget(ctx, &c.tgt, tgt.url, maxHealthProbe, stderr, "chaos: "); err != nil {
		return err
	}
	c.timeScale = c.tgt.withDefaultTimeScale(1)
	if c.timeScale < 1 || c.timeScale > max(3600, c.maxTimeScale) {
		return fmt.Errorf("the target publishes time_scale %s: chaos runs at time scales 1 to %s", harness.FormatNumber(c.timeScale), harness.FormatNumber(max(3600, c.maxTimeScale)))
	}
	tgt.t.TimeScale, tgt.t.Described = c.timeScale, c.tgt.Described
	tgt.t.Readings = c.readings()
	return nil
}

// timeScaleAssumed says the run's time scale is an assumption: a target
// that neither declared nor published one (the bundled server's is the
// scale chaos started it at).
func (c *chaosConfig) timeScaleAssumed() bool {
	return c.target != "" && c.tgt.TimeScale <= 0
}

// replayRepeats says what a replay line repeats of a run whose run ID is
// runID: the seed's choices and their order, with fresh keys and ids (the
// target may still hold the run's), and how to repeat those too.
func replayRepeats(runID string) string {
	return "same seed: same choices and order, fresh keys; add --run-id " + runID + " to repeat this run's keys and ids too, against a fresh target"
}
