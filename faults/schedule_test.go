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

// loadEnd records when RunLoad ended the load; done closes then.
type loadEnd struct {
	mu    sync.Mutex
	at    time.Time
	calls int
	done  chan struct{}
}

func newLoadEnd() *loadEnd { return &loadEnd{done: make(chan struct{})} }

func (l *loadEnd) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.at.IsZero() {
		l.at = time.Now()
		close(l.done)
	}
}

// wait waits (bounded by ctx) until the load ended.
func (l *loadEnd) wait(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-l.done:
	case <-ctx.Done():
		t.Fatal("the load never ended")
	}
}

// gate is a fault held until release closes (or ctx ends).
type gate struct {
	name    string
	release <-chan struct{}
}

func (f *gate) Name() string     { return f.name }
func (f *gate) Kind() Kind       { return KindNet }
func (f *gate) Available() error { return nil }
func (f *gate) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	in := Injection{Fault: f.name, Kind: KindNet, Start: time.Now()}
	var err error
	select {
	case <-f.release:
	case <-ctx.Done():
		err = ctx.Err()
		in.Err = err.Error()
	}
	in.End = time.Now()
	return in, err
}

// TestRunLoadGivesEveryFaultItsTurn: a step that overran its plan past the
// load's planned end (a restart on a loaded machine) does not rob a fault
// of its turn: the first step of a fault not yet begun starts late, says
// so, and the load runs on until it ended; a step of a fault that had its
// turn is not started late; what started holds its whole planned time.
func TestRunLoadGivesEveryFaultItsTurn(t *testing.T) {
	ctx := testCtx(t)
	a, b := &stub{name: "a"}, &stub{name: "b"}
	sched := []Planned{
		{At: 0, For: 150 * time.Millisecond, Fault: "a"}, // overruns the load's planned end
		{At: 50 * time.Millisecond, For: 50 * time.Millisecond, Fault: "b"},
		{At: 60 * time.Millisecond, For: 10 * time.Millisecond, Fault: "a"}, // a had its turn
	}
	var tl Timeline
	load := newLoadEnd()
	start := time.Now()
	if err := RunLoad(ctx, 100*time.Millisecond, sched, []Fault{a, b}, &tl, load.end); err != nil {
		t.Fatal(err)
	}
	if len(a.held) != 1 || a.held[0] < 150*time.Millisecond {
		t.Errorf("a held %v, want its whole 150ms once", a.held)
	}
	if len(b.held) != 1 {
		t.Fatalf("b held %v, want one late turn", b.held)
	}
	ins := tl.Injections()
	if len(ins) != 2 || ins[0].Fault != "a" || ins[1].Fault != "b" || ins[1].Params[ParamLate] == "" {
		t.Fatalf("injections %v: want a, then b marked late", ins)
	}
	if load.calls != 1 || load.at.Before(ins[1].End) || load.at.Before(start.Add(100*time.Millisecond)) {
		t.Errorf("load ended at %v (%d calls); want once, after b's late turn ended at %v", load.at.Sub(start), load.calls, ins[1].End.Sub(start))
	}
	cov := Cover([]string{"a", "b"}, nil, sched, ins)
	if !cov[0].OK() || !cov[1].OK() || cov[1].Late != 1 || !strings.Contains(cov[1].String(), "after the load's planned end") {
		t.Errorf("coverage %+v, want both injected, b late (%s)", cov, cov[1])
	}
}

// TestRunLoadNotRunPastLateStart: a fault whose turn would come more than
// the late bound after the load's planned end is not started, the load
// ends, and Cover says not run.
func TestRunLoadNotRunPastLateStart(t *testing.T) {
	ctx := testCtx(t)
	a, b := &stub{name: "a"}, &stub{name: "b"}
	sched := []Planned{
		{At: 0, For: 150 * time.Millisecond, Fault: "a"},
		{At: 50 * time.Millisecond, For: 50 * time.Millisecond, Fault: "b"},
	}
	var tl Timeline
	load := newLoadEnd()
	if err := runLoad(ctx, 100*time.Millisecond, 0, sched, []Fault{a, b}, &tl, load.end); err != nil {
		t.Fatal(err)
	}
	if len(b.held) != 0 || load.calls != 1 {
		t.Errorf("b held %v, load ended %d times; want b not started, the load ended once", b.held, load.calls)
	}
	cov := Cover([]string{"a", "b"}, nil, sched, tl.Injections())
	if cov[0].Status != StatusInjected || cov[1].Status != StatusNotRun || !strings.Contains(cov[1].Reason, "overran") {
		t.Errorf("coverage %+v, want a injected and b not run", cov)
	}
}

// TestRunLoadEndsTheLoadAtItsPlannedEnd: a schedule done early does not
// end the load early, and one with nothing owed ends it at startBy while
// the step under way still holds its planned time.
func TestRunLoadEndsTheLoadAtItsPlannedEnd(t *testing.T) {
	ctx := testCtx(t)
	a := &stub{name: "a"}
	var tl Timeline
	load := newLoadEnd()
	start := time.Now()
	if err := RunLoad(ctx, 200*time.Millisecond, []Planned{{At: 0, For: 10 * time.Millisecond, Fault: "a"}}, []Fault{a}, &tl, load.end); err != nil {
		t.Fatal(err)
	}
	load.wait(t, ctx)
	if load.calls != 1 || load.at.Before(start.Add(200*time.Millisecond)) {
		t.Errorf("load ended after %v (%d calls), want once, not before 200ms", load.at.Sub(start), load.calls)
	}

	// A fault's first step under way at startBy: the load runs on until
	// it ended.
	load1 := newLoadEnd()
	var tl1 Timeline
	if err := RunLoad(ctx, 100*time.Millisecond, []Planned{{At: 0, For: 150 * time.Millisecond, Fault: "a"}}, []Fault{a}, &tl1, load1.end); err != nil {
		t.Fatal(err)
	}
	if ins := tl1.Injections(); len(ins) != 1 || load1.calls != 1 || load1.at.Before(ins[0].End) {
		t.Fatalf("injections %v, load ended %d times at %v; want it ended after a's first step", ins, load1.calls, load1.at)
	}

	// A step under way at startBy that is not its fault's first, nothing
	// owed: the load ends at startBy while the step holds on (the step is
	// held until the load ended: were the load to wait for it, neither
	// would end).
	load2 := newLoadEnd()
	g := &gate{name: "g", release: load2.done}
	sched := []Planned{{At: 0, For: 10 * time.Millisecond, Fault: "a"}, {At: 20 * time.Millisecond, For: time.Second, Fault: "a"}}
	var tl2 Timeline
	if err := RunLoad(ctx, 100*time.Millisecond, sched, []Fault{&gateAfter{a: a, g: g}}, &tl2, load2.end); err != nil {
		t.Fatal(err)
	}
	if ins := tl2.Injections(); len(ins) != 2 || ins[1].Err != "" || load2.calls != 1 {
		t.Fatalf("injections %v, load ended %d times; want two steps, the second released by the load's end", ins, load2.calls)
	}
}

// gateAfter is a's first injection, then g's.
type gateAfter struct {
	a    *stub
	g    *gate
	once sync.Once
}

func (f *gateAfter) Name() string     { return f.a.Name() }
func (f *gateAfter) Kind() Kind       { return KindNet }
func (f *gateAfter) Available() error { return nil }
func (f *gateAfter) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	firstTime := false
	f.once.Do(func() { firstTime = true })
	if firstTime {
		return f.a.Inject(ctx, rnd, d)
	}
	in, err := f.g.Inject(ctx, rnd, d)
	in.Fault = f.a.Name()
	return in, err
}
