package faults

import (
	"context"
	"math/rand/v2"
	"time"
)

// Blackhole drops every byte from the clients to the target (a timeout toxic
// of 0 on the upstream stream): a request sent while it holds never arrives,
// and its client waits until its own timeout. When the fault ends, the
// connections it held are closed.
type Blackhole struct {
	Network *Network
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
	return f.Network.beginToxic(f.Name(), "timeout", "upstream", map[string]int64{"timeout": 0}, nil)
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
// instead of waiting for its own timeout; the reply is lost either way.
type LostResponse struct {
	Network *Network
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
	return f.Network.beginToxic(f.Name(), "timeout", "downstream", map[string]int64{"timeout": 0}, nil)
}

// Inject holds the loss for d.
func (f *LostResponse) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}
