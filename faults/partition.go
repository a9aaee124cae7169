package faults

import (
	"context"
	"math/rand/v2"
	"time"
)

// Partition cuts the clients off the target: the proxy stops listening (new
// connections are refused) and closes every open connection; requests in
// flight get a connection error. Healing starts the proxy again on the same
// address. Partitions nest: the network heals when the last one ends.
type Partition struct {
	Network *Network
}

var _ Holdable = (*Partition)(nil)

// Name is "partition".
func (f *Partition) Name() string { return "partition" }

// Kind is KindNet.
func (f *Partition) Kind() Kind { return KindNet }

// Available needs a Network.
func (f *Partition) Available() error { return networkAvailable(f.Name(), f.Network) }

// Begin partitions; the returned function heals.
func (f *Partition) Begin(ctx context.Context, rnd *rand.Rand) (func() (Injection, error), error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	return f.Network.beginPartition(f.Name())
}

// Inject partitions for d, then heals.
func (f *Partition) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}
