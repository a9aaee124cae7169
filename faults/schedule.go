package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
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
	return RunLoad(ctx, 0, schedule, list, tl, nil)
}

// LateStart bounds how long after the planned end of a run's load (startBy
// of RunLoad) the first step of a requested fault still starts when the
// steps before it overran their plan: on a loaded machine a restart (a
// crash's, the store's, a failpoint's) can take many times its planned hold,
// and pushes every later step along. It is the wait a restart is given
// (ProcessStartTimeout): a fault still not begun by then has truly no room,
// and is reported not run.
const LateStart = ProcessStartTimeout

// ParamLate is the Params key of an injection that started after the planned
// end of the load (RunLoad): how long after, in milliseconds. The load ran on
// while it was held.
const ParamLate = "late_ms"

// RunBound bounds a whole RunLoad of a load of d under opts, for the
// context a caller gives it: the load, the late starts LateStart allows, and
// the longest a step begun last can take (its hold, a trigger's drive, a
// restart).
func RunBound(d time.Duration, opts ScheduleOptions) time.Duration {
	return d + LateStart + opts.WithDefaults().MaxHold + FailpointTriggerTimeout + ProcessStartTimeout
}

// RunUntil is RunLoad without a load to end: a caller that stops its load
// at startBy by itself.
func RunUntil(ctx context.Context, startBy time.Duration, schedule []Planned, list []Fault, tl *Timeline) error {
	return RunLoad(ctx, startBy, schedule, list, tl, nil)
}

// RunLoad is Run for a run whose load is planned to last startBy (> 0) from
// RunLoad's start: it says when the load ends by calling endLoad, once.
//
// Every requested fault gets its turn, under load: a step of a fault that
// has not begun in this run starts even past startBy, when the steps before
// it overran their plan (a restart on a loaded machine), as long as it is
// not more than LateStart late; such an injection carries ParamLate. The
// load runs on until every fault's first step ended: the late ones, and
// the one under way at startBy if it is its fault's first. Other steps due
// at or after startBy (their fault had its turn) are left out. A fault's
// turn is its first step: a fault whose injection failed or took no effect
// is not tried again after startBy.
//
// endLoad is called at startBy when no requested fault is still owed its
// turn, else as soon as the last one owed ended (or could not start in
// time, or ctx ended); never before startBy unless ctx ended. A step that
// is not its fault's first holds its fault for its planned time even after
// the load ended: ctx alone cuts it short. A fault left without its turn
// is reported not run by Cover.
func RunLoad(ctx context.Context, startBy time.Duration, schedule []Planned, list []Fault, tl *Timeline, endLoad func()) error {
	return runLoad(ctx, startBy, LateStart, schedule, list, tl, endLoad)
}

func runLoad(ctx context.Context, startBy, late time.Duration, schedule []Planned, list []Fault, tl *Timeline, endLoad func()) error {
	if endLoad == nil {
		endLoad = func() {}
	}
	endLoad = sync.OnceFunc(endLoad)
	byName := make(map[string]Fault, len(list))
	for _, f := range list {
		byName[f.Name()] = f
	}
	start := time.Now()
	var mu sync.Mutex
	next := 0                  // the first step not yet started nor left out
	begun := map[string]bool{} // the faults a step of which started
	first := false             // the step under way is its fault's first
	owed := func() bool {      // a fault's first step is under way or still to come; mu held
		if first {
			return true
		}
		for _, p := range schedule[next:] {
			if !begun[p.Fault] {
				return true
			}
		}
		return false
	}
	if startBy > 0 {
		// At startBy the load ends unless a fault is owed its turn; the
		// loop below ends it once none is.
		t := time.AfterFunc(startBy, func() {
			mu.Lock()
			o := owed()
			mu.Unlock()
			if !o {
				endLoad()
			}
		})
		defer func() {
			if time.Since(start) >= startBy || ctx.Err() != nil {
				t.Stop()
				endLoad()
			} // else the timer ends the load at startBy: nothing is owed any more
		}()
	} else {
		defer endLoad()
	}
	var errs []error
	for i, p := range schedule {
		if err := hold(ctx, time.Until(start.Add(p.At))); err != nil {
			break
		}
		params := map[string]string(nil)
		if startBy > 0 {
			if over := time.Since(start) - startBy; over >= 0 {
				mu.Lock()
				if begun[p.Fault] {
					next = i + 1 // had its turn
					o := owed()
					mu.Unlock()
					if !o {
						break
					}
					continue
				}
				mu.Unlock()
				if over > late {
					break // no room left: Cover says not run
				}
				params = map[string]string{ParamLate: msParam(over)}
			}
		}
		mu.Lock()
		first = !begun[p.Fault]
		begun[p.Fault], next = true, i+1
		mu.Unlock()
		f, ok := byName[p.Fault]
		if !ok {
			err := fmt.Errorf("schedule step %d: no fault %q in the list", i, p.Fault)
			now := time.Now()
			tl.Record(Injection{Fault: p.Fault, Start: now, End: now, Err: err.Error(), Params: params})
			errs = append(errs, err)
			mu.Lock()
			first = false
			mu.Unlock()
			continue
		}
		rnd := rand.New(rand.NewPCG(p.Seed, uint64(i)))
		_, err := tl.inject(ctx, rnd, f, p.For, params)
		mu.Lock()
		first = false
		mu.Unlock()
		if err != nil && !(ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))) {
			errs = append(errs, fmt.Errorf("schedule step %d (%s): %w", i, p, err))
		}
	}
	mu.Lock()
	next, first = len(schedule), false
	mu.Unlock()
	return errors.Join(errs...)
}
