package faults

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"
)

// Latency delays every chunk of data on one stream of the proxy by Delay,
// plus or minus Jitter. The jitter is drawn once per injection from the
// injection's rnd (not by toxiproxy's global source), so a seed replays the
// same delays. Stream "" means downstream (responses); "upstream" delays
// requests.
type Latency struct {
	Network *Network
	Delay   time.Duration
	Jitter  time.Duration
	Stream  string
}

var _ Holdable = (*Latency)(nil)

// Name is "latency".
func (f *Latency) Name() string { return "latency" }

// Kind is KindNet.
func (f *Latency) Kind() Kind { return KindNet }

// Available needs a Network.
func (f *Latency) Available() error { return networkAvailable(f.Name(), f.Network) }

// Begin adds the latency toxic.
func (f *Latency) Begin(ctx context.Context, rnd *rand.Rand) (func() (Injection, error), error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	delay := f.Delay
	if f.Jitter > 0 && rnd != nil {
		delay += time.Duration(rnd.Int64N(int64(2*f.Jitter)+1)) - f.Jitter
	}
	delay = max(delay, 0)
	attrs := map[string]int64{"latency": ms(delay), "jitter": 0}
	return f.Network.beginToxic(f.Name(), "latency", f.Stream, attrs,
		map[string]string{"latency_ms": msParam(delay), "jitter_ms": msParam(f.Jitter)})
}

// Inject holds the latency for d.
func (f *Latency) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}

// Bandwidth limits one stream of the proxy to KBps kilobytes per second.
// Stream "" means downstream.
type Bandwidth struct {
	Network *Network
	KBps    int64
	Stream  string
}

var _ Holdable = (*Bandwidth)(nil)

// Name is "bandwidth".
func (f *Bandwidth) Name() string { return "bandwidth" }

// Kind is KindNet.
func (f *Bandwidth) Kind() Kind { return KindNet }

// Available needs a Network.
func (f *Bandwidth) Available() error { return networkAvailable(f.Name(), f.Network) }

// Begin adds the bandwidth toxic.
func (f *Bandwidth) Begin(ctx context.Context, rnd *rand.Rand) (func() (Injection, error), error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	return f.Network.beginToxic(f.Name(), "bandwidth", f.Stream, map[string]int64{"rate": f.KBps},
		map[string]string{"rate_kbps": strconv.FormatInt(f.KBps, 10)})
}

// Inject holds the limit for d.
func (f *Bandwidth) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}
