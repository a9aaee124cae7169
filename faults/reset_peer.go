package faults

import (
	"context"
	"math/rand/v2"
	"time"
)

// ResetPeer resets (TCP RST) every connection After its first data arrives on
// the stream, with no reply: the client sees "connection reset by peer". With
// Stream "" (downstream) the request has reached the target and the reset
// hits its response; with "upstream" the reset comes as the request arrives.
type ResetPeer struct {
	Network *Network
	After   time.Duration
	Stream  string
}

var _ Holdable = (*ResetPeer)(nil)

// Name is "reset_peer".
func (f *ResetPeer) Name() string { return "reset_peer" }

// Kind is KindNet.
func (f *ResetPeer) Kind() Kind { return KindNet }

// Available needs a Network.
func (f *ResetPeer) Available() error { return networkAvailable(f.Name(), f.Network) }

// Begin adds the reset_peer toxic.
func (f *ResetPeer) Begin(ctx context.Context, rnd *rand.Rand) (func() (Injection, error), error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	return f.Network.beginToxic(f.Name(), "reset_peer", f.Stream, map[string]int64{"timeout": ms(f.After)},
		map[string]string{"after_ms": msParam(f.After)})
}

// Inject holds the resets for d.
func (f *ResetPeer) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}
