package faults

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestScheduleIsDrawnFromTheSeed(t *testing.T) {
	list := All(Config{})
	opts := ScheduleOptions{}
	draw := func(seed uint64) []Planned {
		return NewSchedule(rand.New(rand.NewPCG(seed, seed)), list, time.Minute, opts)
	}
	a, b, c := draw(1), draw(1), draw(2)
	if len(a) == 0 {
		t.Fatal("empty schedule for a minute")
	}
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different schedules:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("different seeds, same schedule: %v", a)
	}
	o := opts.withDefaults()
	var prevEnd time.Duration
	for i, p := range a {
		if p.At < prevEnd+o.MinGap || p.At+p.For > time.Minute || p.For <= 0 || p.For > o.MaxHold {
			t.Errorf("step %d %v: outside the bounds (previous ended at %s)", i, p, prevEnd)
		}
		prevEnd = p.At + p.For
	}
	t.Logf("seed 1, one minute: %d steps; first %v", len(a), a[0])
	if got := NewSchedule(rand.New(rand.NewPCG(1, 1)), nil, time.Minute, opts); got != nil {
		t.Errorf("no faults: %v, want no schedule", got)
	}
}

func TestRunCarriesOutTheSchedule(t *testing.T) {
	ctx := testCtx(t)
	c := newCounter(t, nil)
	n := newNet(t, c)
	list := []Fault{&Latency{Network: n, Delay: time.Millisecond}, &Partition{Network: n}}
	opts := ScheduleOptions{MinHold: 20 * time.Millisecond, MaxHold: 50 * time.Millisecond, MinGap: 10 * time.Millisecond, MaxGap: 30 * time.Millisecond}
	sched := NewSchedule(rand.New(rand.NewPCG(5, 5)), list, 400*time.Millisecond, opts)
	var tl Timeline
	if err := Run(ctx, sched, list, &tl); err != nil {
		t.Fatal(err)
	}
	got := tl.Injections()
	if len(got) != len(sched) {
		t.Fatalf("%d injections recorded for %d steps", len(got), len(sched))
	}
	for i, in := range got {
		if in.Fault != sched[i].Fault || in.Err != "" || in.Duration() < sched[i].For {
			t.Errorf("step %d %v: recorded %v", i, sched[i], in)
		}
	}
	// The network is healed at the end.
	if _, err := get(ctx, n.URL(), 5*time.Second); err != nil {
		t.Errorf("after the schedule: %v", err)
	}

	// A step naming a fault that is not in the list fails, and is recorded.
	var tl2 Timeline
	err := Run(ctx, []Planned{{Fault: "earthquake"}}, list, &tl2)
	if err == nil || !strings.Contains(err.Error(), "earthquake") || len(tl2.Injections()) != 1 {
		t.Errorf("unknown fault: %v, %v", err, tl2.Injections())
	}
}
