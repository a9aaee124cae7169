package faults

import (
	"context"
	"math/rand/v2"
	"strconv"
	"time"
)

// Slicer cuts the data of one stream into small TCP segments of about
// AverageSize bytes (plus or minus SizeVariation, which must be smaller), each
// delayed by Delay: a request or response arrives in pieces. Stream "" means
// downstream.
type Slicer struct {
	Network       *Network
	AverageSize   int
	SizeVariation int
	Delay         time.Duration
	Stream        string
}

var _ Holdable = (*Slicer)(nil)

// Name is "slicer".
func (f *Slicer) Name() string { return "slicer" }

// Kind is KindNet.
func (f *Slicer) Kind() Kind { return KindNet }

// Available needs a Network.
func (f *Slicer) Available() error { return networkAvailable(f.Name(), f.Network) }

// Begin adds the slicer toxic.
func (f *Slicer) Begin(ctx context.Context, rnd *rand.Rand) (func() (Injection, error), error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	attrs := map[string]int64{"average_size": int64(f.AverageSize), "size_variation": int64(f.SizeVariation),
		"delay": f.Delay.Microseconds()}
	return f.Network.beginToxic(f.Name(), "slicer", f.Stream, attrs, map[string]string{
		"average_size": strconv.Itoa(f.AverageSize), "size_variation": strconv.Itoa(f.SizeVariation),
		"delay_us": strconv.FormatInt(f.Delay.Microseconds(), 10)})
}

// Inject holds the slicing for d.
func (f *Slicer) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}
