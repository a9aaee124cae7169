package faults

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"
)

// Truncate lets Bytes bytes of each connection's stream through, counted from
// the fault's start, then closes the connection: with Stream "" (downstream)
// the target processed the request and the client gets a cut-off response
// (an unexpected EOF: its outcome is unknown); with "upstream" the target
// gets a cut-off request.
type Truncate struct {
	Network *Network
	Bytes   int64
	Stream  string
}

var _ Holdable = (*Truncate)(nil)

// Name is "truncate".
func (f *Truncate) Name() string { return "truncate" }

// Kind is KindNet.
func (f *Truncate) Kind() Kind { return KindNet }

// Available needs a Network.
func (f *Truncate) Available() error { return networkAvailable(f.Name(), f.Network) }

// Begin adds the limit_data toxic.
func (f *Truncate) Begin(ctx context.Context, rnd *rand.Rand) (func() (Injection, error), error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	return f.Network.beginToxic(f.Name(), "limit_data", f.Stream, map[string]int64{"bytes": f.Bytes},
		map[string]string{"bytes": strconv.FormatInt(f.Bytes, 10)})
}

// Inject holds the truncation for d.
func (f *Truncate) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}
