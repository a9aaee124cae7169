package faults

import (
	"fmt"
	"strings"
)

// Status says what became of one requested fault in a run.
type Status string

// The statuses of a requested fault. Only StatusInjected means the run went
// through the fault; a run with any other status of a requested fault has
// not done what it was asked and can pass no verdict (UNKNOWN).
const (
	StatusInjected    Status = "injected"    // at least one injection took effect without error
	StatusUnavailable Status = "unavailable" // it cannot run against this target (Reason says why)
	StatusNotDrawn    Status = "not-drawn"   // available, but the schedule had no room for it
	StatusNotRun      Status = "not-run"     // scheduled, but the run ended before its step started
	StatusNoEffect    Status = "no-effect"   // injected, but it never took effect (a failpoint that never fired)
	StatusFailed      Status = "failed"      // every injection of it failed (Reason is the last error)
)

// Coverage is what became of one requested fault: how often the schedule
// drew it, how often it was injected with effect, and how often an injection
// failed or took no effect. It is plain data, written to the run directory.
type Coverage struct {
	Fault     string `json:"fault"`
	Kind      Kind   `json:"kind,omitempty"`
	Status    Status `json:"status"`
	Scheduled int    `json:"scheduled"`
	Injected  int    `json:"injected"`
	Errors    int    `json:"errors"`
	NoEffect  int    `json:"no_effect,omitempty"`
	// Late counts the injections that started after the planned end of the
	// load, the steps before them having overrun (RunLoad): the load ran
	// on while they were held.
	Late   int    `json:"late,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// OK reports whether the run went through the fault at least once.
func (c Coverage) OK() bool { return c.Status == StatusInjected }

// String renders the entry on one line for the terminal:
// "crash  3 injected, 1 error" or "crash  0 injected: unavailable: …".
func (c Coverage) String() string {
	s := fmt.Sprintf("%d injected", c.Injected)
	if c.Errors > 0 {
		s += fmt.Sprintf(", %d failed", c.Errors)
	}
	if c.NoEffect > 0 {
		s += fmt.Sprintf(", %d without effect", c.NoEffect)
	}
	if c.Scheduled > c.Injected+c.Errors+c.NoEffect {
		s += fmt.Sprintf(", %d scheduled", c.Scheduled)
	}
	if c.Late > 0 {
		s += fmt.Sprintf(" (%d begun after the load's planned end: earlier steps overran, the load ran on)", c.Late)
	}
	if !c.OK() {
		s += ": " + strings.ToUpper(string(c.Status))
		if c.Reason != "" {
			s += ": " + c.Reason
		}
	}
	return s
}

// Cover says, for each requested fault (names, in order), what became of it
// in a run: unavailable maps the requested faults that could not run to why
// (faults that Usable set aside, and requested tokens that matched no fault);
// schedule is what was planned and timeline what was injected. An injection
// counts as injected when its Err is empty and it took effect (it has a Start
// and its ParamFired, if any, is not "false").
func Cover(names []string, unavailable map[string]string, schedule []Planned, timeline []Injection) []Coverage {
	out := make([]Coverage, 0, len(names))
	for _, name := range names {
		c := Coverage{Fault: name}
		c.Kind, _ = KindOf(name)
		for _, p := range schedule {
			if p.Fault == name {
				c.Scheduled++
			}
		}
		var lastErr string
		for _, in := range timeline {
			if in.Fault != name {
				continue
			}
			switch {
			case in.Err != "":
				c.Errors++
				lastErr = in.Err
			case in.Start.IsZero() || in.Params[ParamFired] == "false":
				c.NoEffect++
			default:
				c.Injected++
				if in.Params[ParamLate] != "" {
					c.Late++
				}
			}
		}
		why, isUnavailable := unavailable[name]
		switch {
		case c.Injected > 0:
			c.Status = StatusInjected
		case isUnavailable:
			c.Status, c.Reason = StatusUnavailable, why
		case c.Errors > 0:
			c.Status, c.Reason = StatusFailed, "every injection failed; last: "+lastErr
		case c.NoEffect > 0:
			c.Status, c.Reason = StatusNoEffect, fmt.Sprintf("armed %d time(s), never took effect", c.NoEffect)
		case c.Scheduled > 0:
			c.Status, c.Reason = StatusNotRun, fmt.Sprintf("scheduled, but the run ended before its step started (earlier steps overran its start past the %s a fault's first step may start after the load's planned end, or the run was stopped)", LateStart)
		default:
			c.Status, c.Reason = StatusNotDrawn, "the schedule had no room for it: the run is too short for every requested fault (raise --duration)"
		}
		out = append(out, c)
	}
	return out
}

// Missing returns the entries of cov that were not injected.
func Missing(cov []Coverage) []Coverage {
	var out []Coverage
	for _, c := range cov {
		if !c.OK() {
			out = append(out, c)
		}
	}
	return out
}
