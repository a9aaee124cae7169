package chaos

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/sink"
)

// The faults of the effect sink, for profiles whose commands have external
// effects (IDS): the target's calls to the sink are cut off (a partition of
// the toxiproxy proxy the target is given as its sink), or the sink acts and
// loses its replies. Both are network faults: --faults net selects them.
const (
	FaultSinkPartition   = "sink-partition"
	FaultSinkLostReplies = "sink-lost-replies"
)

// SinkFaults returns the sink's faults: the partition needs the proxy in
// front of the sink, the lost replies the sink itself; one whose need is
// nil is listed, unavailable (its Available says why).
func SinkFaults(sinkNet *faults.Network, s *sink.Sink) []faults.Fault {
	return []faults.Fault{&SinkPartition{Network: sinkNet}, &SinkLostReplies{Sink: s}}
}

// SinkFaultNames are the names of SinkFaults, in order.
func SinkFaultNames() []string {
	var out []string
	for _, f := range SinkFaults(nil, nil) {
		out = append(out, f.Name())
	}
	return out
}

// SinkPartition cuts the target off its effect sink: the proxy in front of
// the sink stops (new calls are refused, open ones closed), and heals.
type SinkPartition struct {
	Network *faults.Network
}

var _ faults.Fault = (*SinkPartition)(nil)

// Name is FaultSinkPartition.
func (f *SinkPartition) Name() string { return FaultSinkPartition }

// Kind is KindNet.
func (f *SinkPartition) Kind() faults.Kind { return faults.KindNet }

// Available needs the proxy in front of the sink.
func (f *SinkPartition) Available() error {
	if f.Network == nil {
		return fmt.Errorf("%s: %w: no proxy in front of the effect sink (the target calls the sink directly)", f.Name(), faults.ErrNotAvailable)
	}
	return nil
}

// Inject partitions the sink for d, then heals.
func (f *SinkPartition) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	if err := f.Available(); err != nil {
		now := time.Now()
		return faults.Injection{Fault: f.Name(), Kind: f.Kind(), Start: now, End: now, Err: err.Error()}, err
	}
	end, err := (&faults.Partition{Network: f.Network}).Begin(ctx, rnd)
	if err != nil {
		now := time.Now()
		return faults.Injection{Fault: f.Name(), Kind: f.Kind(), Start: now, End: now, Err: err.Error()}, err
	}
	herr := holdFor(ctx, d)
	in, err := end()
	in.Fault = f.Name()
	if in.Params == nil {
		in.Params = map[string]string{}
	}
	in.Params["upstream"] = f.Network.Upstream()
	if err == nil && herr != nil {
		err = fmt.Errorf("%s: hold cut short: %w", f.Name(), herr)
	}
	if err != nil {
		in.Err = err.Error()
	}
	return in, err
}

// SinkLostReplies makes the sink act on its next calls and drop their
// replies (sink.LoseReplies): the target cannot tell whether its effect
// happened. It took effect when at least one reply was lost during the
// hold (Params "fired", "lost"); when the target called the sink not once
// in the hold, it waits up to 2 s more for one call.
type SinkLostReplies struct {
	Sink *sink.Sink
}

var _ faults.Fault = (*SinkLostReplies)(nil)

// Name is FaultSinkLostReplies.
func (f *SinkLostReplies) Name() string { return FaultSinkLostReplies }

// Kind is KindNet.
func (f *SinkLostReplies) Kind() faults.Kind { return faults.KindNet }

// Available needs the sink.
func (f *SinkLostReplies) Available() error {
	if f.Sink == nil {
		return fmt.Errorf("%s: %w: no effect sink", f.Name(), faults.ErrNotAvailable)
	}
	return nil
}

// Inject loses the replies of up to 1..5 calls during d.
func (f *SinkLostReplies) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	in := faults.Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{}, Start: time.Now()}
	if err := f.Available(); err != nil {
		in.End, in.Err = in.Start, err.Error()
		return in, err
	}
	n := 1 + rnd.IntN(5)
	before := f.Sink.LostReplies()
	f.Sink.LoseReplies(n)
	herr := holdFor(ctx, d)
	for t := time.Now(); herr == nil && f.Sink.LostReplies() == before && time.Since(t) < 2*time.Second; {
		herr = holdFor(ctx, 20*time.Millisecond)
	}
	f.Sink.LoseReplies(0)
	in.End = time.Now()
	lost := f.Sink.LostReplies() - before
	in.Params["n"] = strconv.Itoa(n)
	in.Params["lost"] = strconv.Itoa(lost)
	in.Params[faults.ParamFired] = strconv.FormatBool(lost > 0)
	var err error
	if herr != nil {
		err = fmt.Errorf("%s: hold cut short: %w", f.Name(), herr)
		in.Err = err.Error()
	}
	return in, err
}

// holdFor waits d or until ctx ends (its error).
func holdFor(ctx context.Context, d time.Duration) error {
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
