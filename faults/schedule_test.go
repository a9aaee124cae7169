package faults

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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

// defaultFaults are the faults of the chaos command's default --faults
// (net,storm,crash), every one usable in the schedule's eyes.
func defaultFaults() []Fault { return Select(All(Config{}), []string{"net", "storm", "crash"}) }

// allFaults are the faults of --faults all against the bundled server.
func allFaults() []Fault {
	return All(Config{Failpoints: map[string]string{
		"github.com/idscheck/idscheck/sut/intent/after-commit-before-reply":   `return("exit")`,
		"github.com/idscheck/idscheck/sut/intent/after-claim-before-response": `return("exit")`,
		"github.com/idscheck/idscheck/sut/intent/inside-cleanup":              `return("exit")`,
	}})
}

// TestScheduleDrawsEveryFaultFirst: whatever the seed, the first steps of a
// schedule are every requested fault once, in a seed-drawn order, within 60%
// of the span: a 30 s run with the default faults always draws a crash, and
// one with every fault draws every fault.
func TestScheduleDrawsEveryFaultFirst(t *testing.T) {
	for _, tc := range []struct {
		name  string
		list  []Fault
		total time.Duration
	}{
		{"default faults, 30 s", defaultFaults(), 30 * time.Second},
		{"all faults, 30 s", allFaults(), 30 * time.Second},
		{"all faults, 10 s", allFaults(), 10 * time.Second},
		{"truncate alone, 2 s", Select(All(Config{}), []string{"truncate"}), 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := names(tc.list)
			slices.Sort(want)
			firsts := map[string]bool{}
			for seed := uint64(1); seed <= 300; seed++ {
				s := NewSchedule(rand.New(rand.NewPCG(seed, seed)), tc.list, tc.total, ScheduleOptions{})
				if len(s) < len(want) {
					t.Fatalf("seed %d: %d steps for %d faults: %v", seed, len(s), len(want), s)
				}
				got := make([]string, len(want))
				for i := range want {
					got[i] = s[i].Fault
				}
				firsts[got[0]] = true
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d: first %d steps %v, want each of %v once", seed, len(want), got, want)
				}
				if end := s[len(want)-1].At + s[len(want)-1].For; end > time.Duration(float64(tc.total)*coverShare) {
					t.Fatalf("seed %d: the covering steps end at %s, past 60%% of %s", seed, end, tc.total)
				}
				if last := s[len(s)-1]; last.At+last.For > tc.total {
					t.Fatalf("seed %d: last step %v ends past %s", seed, last, tc.total)
				}
			}
			if len(want) > 1 && len(firsts) < 2 {
				t.Errorf("the order does not depend on the seed: always %v first", firsts)
			}
		})
	}
}

// TestScheduleTooShortSaysSo: a span that cannot hold one minimal step per
// fault leaves some out, and Cover reports them as not drawn.
func TestScheduleTooShortSaysSo(t *testing.T) {
	list := allFaults()
	s := NewSchedule(rand.New(rand.NewPCG(1, 1)), list, 2*time.Second, ScheduleOptions{})
	drawn := map[string]bool{}
	for _, p := range s {
		drawn[p.Fault] = true
	}
	if len(drawn) == 0 || len(drawn) >= len(list) {
		t.Fatalf("2 s drew %d of %d faults; want some but not all", len(drawn), len(list))
	}
	cov := Cover(names(list), nil, s, nil)
	notDrawn := 0
	for _, c := range cov {
		if c.Status == StatusNotDrawn {
			notDrawn++
			if !strings.Contains(c.Reason, "--duration") {
				t.Errorf("%s: reason %q does not say what to do", c.Fault, c.Reason)
			}
		}
	}
	if notDrawn != len(list)-len(drawn) {
		t.Errorf("%d not drawn, want %d: %+v", notDrawn, len(list)-len(drawn), cov)
	}
}

// stub is a fault that records its holds and fails when told.
type stub struct {
	name string
	fail error
	mu   sync.Mutex
	held []time.Duration
}

func (f *stub) Name() string     { return f.name }
func (f *stub) Kind() Kind       { return KindNet }
func (f *stub) Available() error { return nil }
func (f *stub) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	in := Injection{Fault: f.name, Kind: KindNet, Start: time.Now()}
	err := hold(ctx, d)
	if err == nil {
		err = f.fail
	}
	in.End = time.Now()
	f.mu.Lock()
	f.held = append(f.held, in.Duration())
	f.mu.Unlock()
	if err != nil {
		in.Err = err.Error()
	}
	return in, err
}

// TestRunUntilStartsNothingLateAndHoldsWhatStarted: no step starts after
// startBy; the one running at startBy holds its whole planned time.
func TestRunUntilStartsNothingLateAndHoldsWhatStarted(t *testing.T) {
	ctx := testCtx(t)
	a, b := &stub{name: "a"}, &stub{name: "b"}
	sched := []Planned{
		{At: 0, For: 150 * time.Millisecond, Fault: "a"},
		{At: 200 * time.Millisecond, For: 50 * time.Millisecond, Fault: "b"}, // starts late: a overran into it
	}
	var tl Timeline
	start := time.Now()
	if err := RunUntil(ctx, 100*time.Millisecond, sched, []Fault{a, b}, &tl); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("RunUntil took %s", took)
	}
	if len(a.held) != 1 || a.held[0] < 150*time.Millisecond {
		t.Errorf("a held %v, want its whole 150ms", a.held)
	}
	// b was due at 200 ms, after startBy: never started.
	if len(b.held) != 0 {
		t.Errorf("b started after startBy: %v", b.held)
	}
	cov := Cover([]string{"a", "b"}, nil, sched, tl.Injections())
	if cov[0].Status != StatusInjected || cov[1].Status != StatusNotRun {
		t.Errorf("coverage %+v, want a injected and b not run", cov)
	}
}
