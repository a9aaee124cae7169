package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestCoverSaysWhatBecameOfEachFault: one injection with effect is enough;
// anything less (unavailable, not drawn, not run, failed every time, armed
// but never fired) is named, with why.
func TestCoverSaysWhatBecameOfEachFault(t *testing.T) {
	t0 := time.Now()
	ok := func(name string) Injection { return Injection{Fault: name, Start: t0, End: t0.Add(time.Second)} }
	failed := func(name, err string) Injection {
		return Injection{Fault: name, Start: t0, End: t0, Err: err}
	}
	sched := []Planned{{Fault: "latency"}, {Fault: "latency"}, {Fault: "crash"}, {Fault: "truncate"}, {Fault: "failpoint/x"}, {Fault: "partition"}}
	tl := []Injection{
		ok("latency"), failed("latency", "boom"),
		failed("crash", "crash: restart: process exited"),
		{Fault: "failpoint/x", Start: t0, End: t0, Params: map[string]string{ParamFired: "false"}},
	}
	cov := Cover([]string{"latency", "crash", "truncate", "failpoint/x", "storm", "partition", "failpoint"},
		map[string]string{"storm": "no storm sender", "failpoint": "the target has no named failpoints"}, sched, tl)
	want := []struct {
		status         Status
		injected, errs int
		reason         string
	}{
		{StatusInjected, 1, 1, ""},
		{StatusFailed, 0, 1, "restart: process exited"},
		{StatusNotRun, 0, 0, "ended before"},
		{StatusNoEffect, 0, 0, "never took effect"},
		{StatusUnavailable, 0, 0, "no storm sender"},
		{StatusNotRun, 0, 0, "ended before"},
		{StatusUnavailable, 0, 0, "no named failpoints"},
	}
	for i, w := range want {
		c := cov[i]
		if c.Status != w.status || c.Injected != w.injected || c.Errors != w.errs || !strings.Contains(c.Reason, w.reason) {
			t.Errorf("%s: %+v, want %s injected %d errors %d reason ~%q", c.Fault, c, w.status, w.injected, w.errs, w.reason)
		}
		if c.OK() != (w.status == StatusInjected) {
			t.Errorf("%s: OK() = %v", c.Fault, c.OK())
		}
	}
	if m := Missing(cov); len(m) != len(want)-1 {
		t.Errorf("Missing = %d entries, want %d", len(m), len(want)-1)
	}
	if s := cov[1].String(); !strings.Contains(s, "0 injected, 1 failed: FAILED") {
		t.Errorf("String() = %q", s)
	}
	if kind := cov[3].Kind; kind != KindFailpoint {
		t.Errorf("failpoint/x kind %q", kind)
	}
}

// TestEveryInjectionFailingIsNotCoverage runs a fault that always fails
// through a real schedule: the run says FAILED, not injected.
func TestEveryInjectionFailingIsNotCoverage(t *testing.T) {
	bad := &stub{name: "bad", fail: errors.New("cannot remove the toxic")}
	good := &stub{name: "good"}
	list := []Fault{bad, good}
	opts := ScheduleOptions{MinHold: 10 * time.Millisecond, MaxHold: 20 * time.Millisecond, MinGap: 5 * time.Millisecond, MaxGap: 10 * time.Millisecond}
	sched := NewSchedule(rand.New(rand.NewPCG(3, 3)), list, 300*time.Millisecond, opts)
	var tl Timeline
	if err := Run(context.Background(), sched, list, &tl); err == nil {
		t.Fatal("Run: no error from a failing fault")
	}
	cov := Cover([]string{"bad", "good"}, nil, sched, tl.Injections())
	if cov[0].Status != StatusFailed || cov[0].Errors == 0 || !strings.Contains(cov[0].Reason, "cannot remove the toxic") {
		t.Errorf("bad: %+v", cov[0])
	}
	if cov[1].Status != StatusInjected {
		t.Errorf("good: %+v", cov[1])
	}
}

func TestNamesAreTheOneList(t *testing.T) {
	if got, want := strings.Join(Names(), ","), strings.Join(names(All(Config{})), ","); got != want {
		t.Errorf("Names() = %s, want the list All builds: %s", got, want)
	}
	help := FlagHelp()
	for _, n := range Names() {
		if !strings.Contains(help, n) {
			t.Errorf("FlagHelp lacks %s: %s", n, help)
		}
		if _, err := ParseKinds(n); err != nil {
			t.Errorf("ParseKinds(%s): %v", n, err)
		}
		if _, ok := KindOf(n); !ok {
			t.Errorf("KindOf(%s): unknown", n)
		}
	}
	if k, ok := KindOf("failpoint/after-commit-before-reply"); !ok || k != KindFailpoint {
		t.Errorf("KindOf(failpoint/…) = %s, %v", k, ok)
	}
	if _, ok := KindOf("quake"); ok {
		t.Error("KindOf(quake): known")
	}
	names, unmatched := Requested(All(Config{}), []string{"truncate", "failpoint", "crash", "failpoint/nope"})
	if strings.Join(names, ",") != "truncate,crash" || strings.Join(unmatched, ",") != "failpoint,failpoint/nope" {
		t.Errorf("Requested = %v, %v", names, unmatched)
	}
}
