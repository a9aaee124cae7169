package atp

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/sink"
)

// The faults of the payment rail the harness hosts for ATP (docs/atp-
// binding.md, "The rail"): the site is cut off the rail (a partition of
// the proxy in front of the sink), the rail charges and loses its reply,
// drops its callbacks, or delays them. Each leaves the row executing until
// a callback or the reconciliation sweep resolves it (§6). All are network
// faults: --faults net selects them.
const (
	FaultRailPartition     = "rail-partition"
	FaultRailLostReplies   = "rail-lost-replies"
	FaultRailCallbackDrop  = "rail-callback-drop"
	FaultRailCallbackDelay = "rail-callback-delay"
)

// ATPRailFaults returns the rail's faults: the partition (the sink's, under
// the rail's name: the rail's callbacks to the site are not cut) needs the
// proxy in front of the sink, the others the sink itself; one whose need is nil is
// listed, unavailable (its Available says why).
func ATPRailFaults(proxy *chaos.SinkProxy, s *sink.Sink) []faults.Fault {
	r := RailOf(s)
	return []faults.Fault{&chaos.SinkPartition{Proxy: proxy, As: FaultRailPartition}, &RailLostReplies{Rail: r}, &RailCallbackDrop{Rail: r}, &RailCallbackDelay{Rail: r}}
}

// ATPRailFaultNames are the names of ATPRailFaults, in order.
func ATPRailFaultNames() []string {
	var out []string
	for _, f := range ATPRailFaults(nil, nil) {
		out = append(out, f.Name())
	}
	return out
}

func railNeeded(name string, r *Rail) error {
	if r == nil {
		return fmt.Errorf("%s: %w: no payment rail (effect sink)", name, faults.ErrNotAvailable)
	}
	return nil
}

// RailLostReplies makes every confirm that charges during the hold drop its
// reply after charging (Rail.LoseReplies): the site cannot tell
// whether the payment happened. It took effect when at least one reply was
// lost (Params "fired", "lost"); when no confirm charged during the hold,
// it waits up to 2 s more for one.
type RailLostReplies struct {
	Rail *Rail
}

var _ faults.Fault = (*RailLostReplies)(nil)

// Name is FaultRailLostReplies.
func (f *RailLostReplies) Name() string { return FaultRailLostReplies }

// Kind is KindNet.
func (f *RailLostReplies) Kind() faults.Kind { return faults.KindNet }

// Available needs the sink.
func (f *RailLostReplies) Available() error { return railNeeded(f.Name(), f.Rail) }

func lostCharges(r *Rail) int {
	n := 0
	for _, c := range r.AllCharges() {
		if c.LostReply {
			n++
		}
	}
	return n
}

// Inject loses the reply of every charging confirm during d (at most
// maxLostReplies).
func (f *RailLostReplies) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	in := faults.Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{}, Start: time.Now()}
	if err := f.Available(); err != nil {
		in.End, in.Err = in.Start, err.Error()
		return in, err
	}
	before := lostCharges(f.Rail)
	f.Rail.LoseReplies(chaos.MaxLostReplies)
	herr := chaos.HoldFor(ctx, d)
	for t := time.Now(); herr == nil && lostCharges(f.Rail) == before && time.Since(t) < 2*time.Second; {
		herr = chaos.HoldFor(ctx, 20*time.Millisecond)
	}
	f.Rail.LoseReplies(0)
	in.End = time.Now()
	lost := lostCharges(f.Rail) - before
	in.Params["lost"] = strconv.Itoa(lost)
	in.Params[faults.ParamFired] = strconv.FormatBool(lost > 0)
	var err error
	if herr != nil {
		err = fmt.Errorf("%s: hold cut short: %w", f.Name(), herr)
		in.Err = err.Error()
	}
	return in, err
}

// RailCallbackDrop makes the rail drop every callback it would send during
// the hold (Rail.DropAllCallbacks): the site learns the outcome of those
// confirms only from their replies or its reconciliation sweep. Params
// "dropped" counts them ("fired": at least one).
type RailCallbackDrop struct {
	Rail *Rail
}

var _ faults.Fault = (*RailCallbackDrop)(nil)

// Name is FaultRailCallbackDrop.
func (f *RailCallbackDrop) Name() string { return FaultRailCallbackDrop }

// Kind is KindNet.
func (f *RailCallbackDrop) Kind() faults.Kind { return faults.KindNet }

// Available needs the sink.
func (f *RailCallbackDrop) Available() error { return railNeeded(f.Name(), f.Rail) }

func droppedCallbacks(r *Rail) int {
	n := 0
	for _, c := range r.Callbacks() {
		if c.Dropped {
			n++
		}
	}
	return n
}

// Inject drops every callback during d.
func (f *RailCallbackDrop) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	in := faults.Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{}, Start: time.Now()}
	if err := f.Available(); err != nil {
		in.End, in.Err = in.Start, err.Error()
		return in, err
	}
	before := droppedCallbacks(f.Rail)
	f.Rail.DropAllCallbacks(true)
	herr := chaos.HoldFor(ctx, d)
	f.Rail.DropAllCallbacks(false)
	in.End = time.Now()
	n := droppedCallbacks(f.Rail) - before
	in.Params["dropped"] = strconv.Itoa(n)
	in.Params[faults.ParamFired] = strconv.FormatBool(n > 0)
	var err error
	if herr != nil {
		err = fmt.Errorf("%s: hold cut short: %w", f.Name(), herr)
		in.Err = err.Error()
	}
	return in, err
}

// RailCallbackDelay delays every callback of a confirm made during the hold
// (Rail.SetCallbackDelay) by a delay drawn between d/2 and d (at most
// 5 s): the callback may arrive after the site's reply, after a poll,
// after its sweep. Params "delay".
type RailCallbackDelay struct {
	Rail *Rail
}

var _ faults.Fault = (*RailCallbackDelay)(nil)

// Name is FaultRailCallbackDelay.
func (f *RailCallbackDelay) Name() string { return FaultRailCallbackDelay }

// Kind is KindNet.
func (f *RailCallbackDelay) Kind() faults.Kind { return faults.KindNet }

// Available needs the sink.
func (f *RailCallbackDelay) Available() error { return railNeeded(f.Name(), f.Rail) }

// maxCallbackDelay bounds the delay of one callback.
const maxCallbackDelay = 5 * time.Second

// Inject delays the callbacks of d's confirms.
func (f *RailCallbackDelay) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	in := faults.Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{}, Start: time.Now()}
	if err := f.Available(); err != nil {
		in.End, in.Err = in.Start, err.Error()
		return in, err
	}
	delay := max(d, time.Millisecond)
	if rnd != nil {
		delay = delay/2 + time.Duration(rnd.Int64N(int64(delay/2)+1))
	}
	delay = min(delay, maxCallbackDelay)
	f.Rail.SetCallbackDelay(delay)
	herr := chaos.HoldFor(ctx, d)
	f.Rail.SetCallbackDelay(0)
	in.End = time.Now()
	in.Params["delay"] = delay.String()
	var err error
	if herr != nil {
		err = fmt.Errorf("%s: hold cut short: %w", f.Name(), herr)
		in.Err = err.Error()
	}
	return in, err
}

// Summary of RailLostReplies (chaos -h).
func (f *RailLostReplies) Summary() string {
	return "the rail charges each confirm, then drops its reply: the site cannot tell whether the payment happened"
}

// Summary of RailCallbackDrop (chaos -h).
func (f *RailCallbackDrop) Summary() string {
	return "the rail's callbacks dropped: the site learns those outcomes from replies or its reconciliation sweep"
}

// Summary of RailCallbackDelay (chaos -h).
func (f *RailCallbackDelay) Summary() string {
	return "the rail's callbacks delayed (up to 5 s): they may arrive after the reply, a poll or the sweep"
}
