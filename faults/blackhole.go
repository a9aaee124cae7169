package faults

import (
	"context"
	"math/rand/v2"
	"time"
)

// Blackhole drops every byte from the clients to the target (a timeout toxic
// of 0 on the upstream stream): a request sent while it holds never arrives,
// and its client waits until its own timeout, on a connection that looks
// open (half-open: no reset, no close). With CloseAfter > 0 each connection is
// closed that long after the fault reaches it (toxiproxy's timeout), like a
// middlebox dropping an idle flow. When the fault ends, the connections it
// held are closed.
type Blackhole struct {
	Network    *Network
	CloseAfter time.Duration
}

var _ Holdable = (*Blackhole)(nil)

// Name is "blackhole".
func (f *Blackhole) Name() string { return "blackhole" }

// Kind is KindNet.
func (f *Blackhole) Kind() Kind { return KindNet }

// Available needs a Network.
func (f *Blackhole) Available() error { return networkAvailable(f.Name(), f.Network) }

// Begin adds the upstream timeout toxic.
func (f *Blackhole) Begin(ctx context.Context, rnd *rand.Rand) (func() (Injection, error), error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	return f.Network.beginToxic(f.Name(), "timeout", "upstream", map[string]int64{"timeout": ms(f.CloseAfter)},
		map[string]string{"close_after_ms": msParam(f.CloseAfter)})
}

// Inject holds the black hole for d.
func (f *Blackhole) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}

// LostResponse drops every byte from the target to the clients (a timeout
// toxic of 0 on the downstream stream): a request sent while it holds is
// processed by the target, and its response never arrives — the outcome the
// client records is unknown. When the fault ends, the connections it held are
// closed. A target that closes the connection after replying (the request
// said Connection: close) makes the client see that close (EOF) at once
// instead of waiting for its own timeout; the reply is lost either way. With
// CloseAfter > 0 each connection is closed that long after the fault reaches
// it.
type LostResponse struct {
	Network    *Network
	CloseAfter time.Duration
}

var _ Holdable = (*LostResponse)(nil)

// Name is "lost_response".
func (f *LostResponse) Name() string { return "lost_response" }

// Kind is KindNet.
func (f *LostResponse) Kind() Kind { return KindNet }

// Available needs a Network.
func (f *LostResponse) Available() error { return networkAvailable(f.Name(), f.Network) }

// Begin adds the downstream timeout toxic.
func (f *LostResponse) Begin(ctx context.Context, rnd *rand.Rand) (func() (Injection, error), error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	return f.Network.beginToxic(f.Name(), "timeout", "downstream", map[string]int64{"timeout": ms(f.CloseAfter)},
		map[string]string{"close_after_ms": msParam(f.CloseAfter)})
}

// Inject holds the loss for d.
func (f *LostResponse) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}
