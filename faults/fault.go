// Package faults injects the faults idscheck drives a target through:
// network faults through a toxiproxy embedded in this process (latency,
// bandwidth, slicer, reset_peer, black hole, lost response, partition),
// duplicate storms released by one barrier, crashes of a process the harness
// owns (SIGKILL and restart on the same data), and named failpoints
// (github.com/pingcap/failpoint) in this process or in a child process.
//
// Every fault is a value of the explicit list returned by All; each has a
// Name, a Kind, an Available check and an Inject that returns the Injection
// it made, with its start and end. A Timeline collects injections for the run
// directory; a Schedule, drawn from one seed, says which fault runs when.
//
// faults is a leaf: it imports the standard library, toxiproxy, failpoint and
// zerolog (only to silence toxiproxy), and nothing else of idscheck.
package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Kind groups faults for the chaos command's --faults flag.
type Kind string

// The kinds of fault.
const (
	KindNet       Kind = "net"       // toxiproxy between the harness's clients and the target
	KindStorm     Kind = "storm"     // N identical requests released by one barrier
	KindCrash     Kind = "crash"     // SIGKILL and restart of the target process the harness owns
	KindFailpoint Kind = "failpoint" // a named failpoint fired in the reference server
)

// Kinds lists every Kind, in the order the --faults flag documents them.
var Kinds = []Kind{KindNet, KindStorm, KindCrash, KindFailpoint}

// ErrNotAvailable marks a fault that cannot run against this target (no
// managed process for a crash, no network proxy, …). Rules that need it are
// N/A; the wrapped message says why.
var ErrNotAvailable = errors.New("fault not available")

// notAvailable returns an error wrapping ErrNotAvailable with the reason.
func notAvailable(name, reason string) error {
	return fmt.Errorf("%s: %w: %s", name, ErrNotAvailable, reason)
}

// Injection is one fault as it happened: which fault, with which parameters,
// from Start (the fault took effect) to End (it was removed or healed). Err is
// empty when the injection and its removal both succeeded. An Injection is
// plain data: it is written to the run directory and read back.
type Injection struct {
	Fault  string            `json:"fault"`
	Kind   Kind              `json:"kind"`
	Params map[string]string `json:"params,omitempty"`
	Start  time.Time         `json:"start"`
	End    time.Time         `json:"end"`
	Err    string            `json:"err,omitempty"`
}

// Duration is End - Start, or 0 when the injection never ended.
func (in Injection) Duration() time.Duration {
	if in.End.IsZero() || in.Start.IsZero() {
		return 0
	}
	return in.End.Sub(in.Start)
}

// Overlaps reports whether the injection was in effect at some moment of
// [from, to]. An injection with no End is taken to last for ever.
func (in Injection) Overlaps(from, to time.Time) bool {
	if in.Start.IsZero() || in.Start.After(to) {
		return false
	}
	return in.End.IsZero() || !in.End.Before(from)
}

// String renders the injection on one line, for logs and reports.
func (in Injection) String() string {
	s := fmt.Sprintf("%s %s %s..%s (%s)", in.Kind, in.Fault, in.Start.UTC().Format("15:04:05.000"),
		in.End.UTC().Format("15:04:05.000"), in.Duration().Round(time.Millisecond))
	for _, k := range sortedKeys(in.Params) {
		s += " " + k + "=" + in.Params[k]
	}
	if in.Err != "" {
		s += " err=" + in.Err
	}
	return s
}

// Fault is one kind of trouble the harness can cause. Implementations are
// values built with what they act on (a *Network, a *Process, …); they hold
// no randomness of their own: every random choice comes from rnd.
type Fault interface {
	// Name identifies the fault in the list, schedules and timelines
	// ("latency", "partition", "crash", "failpoint/after-commit-before-reply").
	Name() string
	// Kind is the group the --faults flag selects by.
	Kind() Kind
	// Available returns nil if the fault can run against this target, or an
	// error wrapping ErrNotAvailable that says why not.
	Available() error
	// Inject applies the fault, holds it for d (bounded by ctx), removes it and
	// returns what happened. The returned Injection has Start set whenever the
	// fault took effect, and End whenever it was removed, even on error; Err
	// carries the error's text. Inject never leaves the fault in place when it
	// returns, unless removal itself failed (then the error says so).
	Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error)
}

// Holdable is a Fault the caller can hold open between two steps instead of
// for a fixed duration (e.g. "Given responses are lost … Then heal"). Begin
// applies the fault and returns end, which removes it and returns the
// Injection; end must be called exactly once, and is safe after ctx is done.
type Holdable interface {
	Fault
	Begin(ctx context.Context, rnd *rand.Rand) (end func() (Injection, error), err error)
}

// hold waits for d or ctx, whichever comes first. It returns ctx's error when
// the hold was cut short.
func hold(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// injectHeld implements Fault.Inject for a Holdable: Begin, hold for d, end.
// A hold cut short by ctx is reported as an error, after the fault is removed.
func injectHeld(ctx context.Context, h Holdable, rnd *rand.Rand, d time.Duration) (Injection, error) {
	end, err := h.Begin(ctx, rnd)
	if err != nil {
		now := time.Now()
		return Injection{Fault: h.Name(), Kind: h.Kind(), Start: now, End: now, Err: err.Error()}, err
	}
	herr := hold(ctx, d)
	in, err := end()
	if err == nil && herr != nil {
		err = fmt.Errorf("%s: hold cut short: %w", h.Name(), herr)
		in.Err = err.Error()
	}
	return in, err
}
