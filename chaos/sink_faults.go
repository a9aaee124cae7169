package chaos

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/sink"
)

// The faults of the effect sink, for profiles whose commands have external
// effects: the target's calls to the sink are cut off (a partition of
// the toxiproxy proxy the target is given as its sink), or the sink acts and
// loses its replies. Both are network faults: --faults net selects them.
const (
	FaultSinkPartition   = "sink-partition"
	FaultSinkLostReplies = "sink-lost-replies"
)

// SinkFaults returns the sink's faults: the partition needs the proxy in
// front of the sink, the lost replies the sink itself; one whose need is
// nil is listed, unavailable (its Available says why).
func SinkFaults(proxy *SinkProxy, s *sink.Sink) []faults.Fault {
	return []faults.Fault{&SinkPartition{Proxy: proxy}, &SinkLostReplies{Sink: s}}
}

// SinkFaultNames are the names of SinkFaults, in order.
func SinkFaultNames() []string {
	var out []string
	for _, f := range SinkFaults(nil, nil) {
		out = append(out, f.Name())
	}
	return out
}

// SinkProxy is a TCP proxy (toxiproxy, embedded) in front of the effect
// sink, listening where the target calls the sink: a SinkPartition stops it
// (new calls refused, open ones closed) and starts it again on the same
// address. Unlike faults.Network it listens on an address it is given (a
// target file's effect_sink.listen), or a free port of 127.0.0.1.
// Partitions nest.
type SinkProxy struct {
	upstream string
	proxy    *toxiproxy.Proxy

	mu         sync.Mutex
	addr       string
	partitions int
	closed     bool
}

// NewSinkProxy starts a proxy listening on listen ("": 127.0.0.1:0) in
// front of upstream (the sink's host:port).
func NewSinkProxy(listen, upstream string) (*SinkProxy, error) {
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "effect-sink", listen, upstream)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("effect sink proxy on %s: %w", listen, err)
	}
	return &SinkProxy{upstream: upstream, proxy: p, addr: p.Listen}, nil
}

// Addr is the address the proxy listens on.
func (p *SinkProxy) Addr() string { return p.addr }

// URL is the sink's base URL through the proxy.
func (p *SinkProxy) URL() string { return "http://" + p.addr }

// Upstream is the sink's address.
func (p *SinkProxy) Upstream() string { return p.upstream }

// Close stops the proxy.
func (p *SinkProxy) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.closed = true
		p.proxy.Stop()
	}
	return nil
}

// partition stops the proxy (the first of nested partitions) and returns
// the function that heals it once the last partition ends.
func (p *SinkProxy) partition() (func() error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errors.New("effect sink proxy closed")
	}
	p.partitions++
	if p.partitions == 1 {
		p.proxy.Stop()
	}
	var once sync.Once
	var herr error
	return func() error {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.partitions--
			if p.partitions > 0 || p.closed {
				return
			}
			for range 20 {
				herr = p.proxy.Start()
				if herr == nil || errors.Is(herr, toxiproxy.ErrProxyAlreadyStarted) {
					herr = nil
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			herr = fmt.Errorf("heal: %w", herr)
		})
		return herr
	}, nil
}

// SinkPartition cuts the target off its effect sink: the proxy in front of
// the sink stops (new calls are refused, open ones closed), and heals.
type SinkPartition struct {
	Proxy *SinkProxy
	// As is the fault's name ("": FaultSinkPartition): a profile whose
	// target calls the sink under another name names the fault after it.
	As string
}

var _ faults.Fault = (*SinkPartition)(nil)

// Name is As, or FaultSinkPartition.
func (f *SinkPartition) Name() string {
	if f.As != "" {
		return f.As
	}
	return FaultSinkPartition
}

// Kind is KindNet.
func (f *SinkPartition) Kind() faults.Kind { return faults.KindNet }

// Available needs the proxy in front of the sink.
func (f *SinkPartition) Available() error {
	if f.Proxy == nil {
		return fmt.Errorf("%s: %w: no proxy in front of the effect sink (the payment rail)", f.Name(), faults.ErrNotAvailable)
	}
	return nil
}

// Inject partitions the sink for d, then heals.
func (f *SinkPartition) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	in := faults.Injection{Fault: f.Name(), Kind: f.Kind(), Start: time.Now()}
	fail := func(err error) (faults.Injection, error) {
		in.End, in.Err = time.Now(), err.Error()
		return in, err
	}
	if err := f.Available(); err != nil {
		return fail(err)
	}
	heal, err := f.Proxy.partition()
	if err != nil {
		return fail(fmt.Errorf("%s: %w", f.Name(), err))
	}
	in.Start = time.Now()
	in.Params = map[string]string{"addr": f.Proxy.Addr(), "upstream": f.Proxy.Upstream()}
	herr := HoldFor(ctx, d)
	err = heal()
	in.End = time.Now()
	switch {
	case err != nil:
		return fail(fmt.Errorf("%s: %w", f.Name(), err))
	case herr != nil:
		return fail(fmt.Errorf("%s: hold cut short: %w", f.Name(), herr))
	}
	return in, nil
}

// SinkLostReplies makes the sink act on every call of the hold and drop its
// reply (sink.LoseReplies): the target cannot tell whether its effect
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

// MaxLostReplies bounds the replies one injection loses.
const MaxLostReplies = 200

// Inject loses the reply of every call during d (at most MaxLostReplies).
func (f *SinkLostReplies) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	in := faults.Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{}, Start: time.Now()}
	if err := f.Available(); err != nil {
		in.End, in.Err = in.Start, err.Error()
		return in, err
	}
	n := MaxLostReplies
	before := f.Sink.LostReplies()
	f.Sink.LoseReplies(n)
	herr := HoldFor(ctx, d)
	for t := time.Now(); herr == nil && f.Sink.LostReplies() == before && time.Since(t) < 2*time.Second; {
		herr = HoldFor(ctx, 20*time.Millisecond)
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

// HoldFor waits d or until ctx ends (its error).
func HoldFor(ctx context.Context, d time.Duration) error {
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

// Summary of SinkPartition (chaos -h).
func (f *SinkPartition) Summary() string {
	if f.As != "" && f.As != FaultSinkPartition {
		return "the target cut off what it calls for its effects (the proxy in front of it stops), then healed"
	}
	return "the target cut off the effect sink (the proxy in front of it stops), then healed"
}

// Summary of SinkLostReplies (chaos -h).
func (f *SinkLostReplies) Summary() string {
	return "the effect sink acts on each call, then drops its reply: the target cannot tell whether its effect happened"
}
