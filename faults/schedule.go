package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Planned is one step of a fault schedule: run Fault, At this offset from the
// schedule's start, holding it For this long, with its own random source
// seeded by Seed (so one step replays alone). A Planned is plain data: it is
// written to the run directory and read back.
type Planned struct {
	At    time.Duration `json:"at"`
	For   time.Duration `json:"for"`
	Fault string        `json:"fault"`
	Seed  uint64        `json:"seed"`
}

// String renders the step as "+1.2s latency for 800ms (seed 42)".
func (p Planned) String() string {
	return fmt.Sprintf("+%s %s for %s (seed %d)", p.At, p.Fault, p.For, p.Seed)
}

// ScheduleOptions bound the holds of faults and the quiet gaps between them.
// Zero fields take the defaults: holds of 200 ms to 2 s, gaps of 200 ms to 1 s.
type ScheduleOptions struct {
	MinHold, MaxHold time.Duration
	MinGap, MaxGap   time.Duration
}

// maxPlanned bounds the length of a schedule, whatever the options.
const maxPlanned = 10000

// WithDefaults returns the options with every zero field at its default.
func (o ScheduleOptions) WithDefaults() ScheduleOptions { return o.withDefaults() }

func (o ScheduleOptions) withDefaults() ScheduleOptions {
	if o.MinHold <= 0 {
		o.MinHold = 200 * time.Millisecond
	}
	if o.MaxHold < o.MinHold {
		o.MaxHold = max(2*time.Second, o.MinHold)
	}
	if o.MinGap <= 0 {
		o.MinGap = 200 * time.Millisecond
	}
	if o.MaxGap < o.MinGap {
		o.MaxGap = max(time.Second, o.MinGap)
	}
	return o
}

// coverShare is the share of a schedule's span that its first steps, one per
// fault, may take: the rest is slack for steps that overrun their plan (a
// crash's restart, a failpoint's) and for the random steps after them.
const coverShare = 0.6

// NewSchedule draws a fault schedule covering total from rnd, one fault at a
// time, each step a quiet gap then a fault held for a drawn time. The first
// len(faults) steps are every fault once, in an order drawn from rnd: a
// requested fault is never left out by chance. They share the first 60% of
// total; when the options' holds and gaps do not fit in it, they are drawn
// shorter (never below MinHold and MinGap). After them each step's fault is
// chosen uniformly. A run too short to hold even the minimum step of every
// fault gets the ones that fit; Coverage reports the others as not drawn.
//
// It is a pure function of rnd's state, the fault names and the arguments:
// the same seed gives the same schedule. It does not check Available; pass
// the usable faults (see Usable).
func NewSchedule(rnd *rand.Rand, faults []Fault, total time.Duration, opts ScheduleOptions) []Planned {
	if len(faults) == 0 || total <= 0 {
		return nil
	}
	o := opts.withDefaults()
	var out []Planned
	var at time.Duration
	// Every fault once, in a seed-drawn order, within coverShare of total.
	slot := time.Duration(float64(total) * coverShare / float64(len(faults)))
	for _, i := range rnd.Perm(len(faults)) {
		gap := between(rnd, o.MinGap, clamp(o.MaxGap, o.MinGap, slot/3))
		d := between(rnd, o.MinHold, clamp(o.MaxHold, o.MinHold, slot-gap))
		seed := rnd.Uint64()
		if at+gap+d > total || len(out) >= maxPlanned {
			break // not long enough: the rest are not drawn
		}
		at += gap
		out = append(out, Planned{At: at, For: d, Fault: faults[i].Name(), Seed: seed})
		at += d
	}
	at += between(rnd, o.MinGap, o.MaxGap)
	for at < total && len(out) < maxPlanned {
		f := faults[rnd.IntN(len(faults))]
		d := between(rnd, o.MinHold, o.MaxHold)
		seed := rnd.Uint64()
		if at+d > total {
			d = total - at
		}
		out = append(out, Planned{At: at, For: d, Fault: f.Name(), Seed: seed})
		at += d + between(rnd, o.MinGap, o.MaxGap)
	}
	return out
}

// clamp returns hi limited to limit, but never below lo.
func clamp(hi, lo, limit time.Duration) time.Duration {
	return max(lo, min(hi, limit))
}

// between draws a duration uniformly from [lo, hi], in whole milliseconds
// when the bounds allow it (schedules read better).
func between(rnd *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	d := lo + time.Duration(rnd.Int64N(int64(hi-lo)+1))
	if r := d.Round(time.Millisecond); r >= lo && r <= hi {
		return r
	}
	return d
}

// Run carries out schedule against the faults of list (looked up by name)
// and records every injection in tl. Each step starts at its offset from
// Run's start, or as soon as the step before it ends if that is later. Run
// stops when ctx is done, which is not an error; it returns the errors of the
// injections joined (each is also recorded, in its Injection's Err). A step
// naming no fault of list is recorded as a failed injection.
func Run(ctx context.Context, schedule []Planned, list []Fault, tl *Timeline) error {
	return RunUntil(ctx, 0, schedule, list, tl)
}

// RunUntil is Run, except that with startBy > 0 no step starts later than
// startBy after RunUntil's start (steps that overran push the later ones past
// it: those are left out, and Coverage reports them as not run), and a step
// that started holds its fault for its planned time even past startBy: ctx
// alone cuts it short. The chaos workload stops at startBy; a fault begun
// just before it still takes its whole effect.
func RunUntil(ctx context.Context, startBy time.Duration, schedule []Planned, list []Fault, tl *Timeline) error {
	byName := make(map[string]Fault, len(list))
	for _, f := range list {
		byName[f.Name()] = f
	}
	start := time.Now()
	var errs []error
	for i, p := range schedule {
		if err := hold(ctx, time.Until(start.Add(p.At))); err != nil {
			break
		}
		if startBy > 0 && time.Since(start) >= startBy {
			break
		}
		f, ok := byName[p.Fault]
		if !ok {
			err := fmt.Errorf("schedule step %d: no fault %q in the list", i, p.Fault)
			now := time.Now()
			tl.Record(Injection{Fault: p.Fault, Start: now, End: now, Err: err.Error()})
			errs = append(errs, err)
			continue
		}
		rnd := rand.New(rand.NewPCG(p.Seed, uint64(i)))
		_, err := tl.Inject(ctx, rnd, f, p.For)
		if err != nil && !(ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))) {
			errs = append(errs, fmt.Errorf("schedule step %d (%s): %w", i, p, err))
		}
	}
	return errors.Join(errs...)
}
