package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"
)

// MaxStorm is the largest duplicate storm: N identical requests, N ≤ 1,000.
const MaxStorm = 1000

// stormGrace bounds how long Storm waits, after ctx is done, for calls of do
// that ignore ctx. Past it, Storm returns and reports the stragglers.
const stormGrace = 5 * time.Second

// Storm runs do(ctx, i) for i in [0, n) on n goroutines that first all wait on
// one barrier (a channel closed once every goroutine is ready) and are then
// released together: n identical requests arriving at once. It returns when
// every call has returned, or, once ctx is done, after a short grace.
//
// The Injection runs from the release to the last return; its Params hold n,
// "ready_us" (time for all goroutines to reach the barrier) and "spread_us"
// (the time between the first and the last goroutine to leave the barrier:
// how together the release was, as this process saw it).
func Storm(ctx context.Context, n int, do func(ctx context.Context, i int)) (Injection, error) {
	in := Injection{Fault: "storm", Kind: KindStorm, Params: map[string]string{"n": strconv.Itoa(n)}}
	if n < 1 || n > MaxStorm {
		err := fmt.Errorf("storm: n=%d: want 1..%d", n, MaxStorm)
		in.Err = err.Error()
		return in, err
	}
	barrier := make(chan struct{})
	var ready, done sync.WaitGroup
	left := make([]time.Time, n)
	ready.Add(n)
	done.Add(n)
	began := time.Now()
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			select {
			case <-barrier:
			case <-ctx.Done():
				return
			}
			left[i] = time.Now()
			do(ctx, i)
		}()
	}
	allReady := make(chan struct{})
	go func() { ready.Wait(); close(allReady) }()
	select {
	case <-allReady:
	case <-ctx.Done():
		// The goroutines return on ctx too; nothing was released.
		done.Wait()
		err := fmt.Errorf("storm: before release: %w", ctx.Err())
		in.Err = err.Error()
		return in, err
	}
	in.Params["ready_us"] = strconv.FormatInt(time.Since(began).Microseconds(), 10)
	in.Start = time.Now()
	close(barrier)

	finished := make(chan struct{})
	go func() { done.Wait(); close(finished) }()
	var err error
	select {
	case <-finished:
	case <-ctx.Done():
		t := time.NewTimer(stormGrace)
		select {
		case <-finished:
		case <-t.C:
			err = fmt.Errorf("storm: calls still running %s after: %w", stormGrace, ctx.Err())
		}
		t.Stop()
	}
	in.End = time.Now()
	if err == nil {
		// Every goroutine has returned: left is safe to read.
		var first, last time.Time
		for _, t := range left {
			if t.IsZero() {
				continue
			}
			if first.IsZero() || t.Before(first) {
				first = t
			}
			if t.After(last) {
				last = t
			}
		}
		in.Params["spread_us"] = strconv.FormatInt(last.Sub(first).Microseconds(), 10)
	}
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("storm: %w", ctx.Err())
	}
	if err != nil {
		in.Err = err.Error()
	}
	return in, err
}

// DuplicateStorm is the storm as a Fault: each injection draws n in [Min, Max]
// from rnd and sends n identical requests through Do (which builds and sends
// request i; the same request for every i is the point). A storm lasts as
// long as its requests take: Inject ignores d.
type DuplicateStorm struct {
	Min, Max int
	Do       func(ctx context.Context, i int)
}

var _ Fault = (*DuplicateStorm)(nil)

// Name is "storm".
func (f *DuplicateStorm) Name() string { return "storm" }

// Kind is KindStorm.
func (f *DuplicateStorm) Kind() Kind { return KindStorm }

// Available needs a request to send and 2 ≤ Min ≤ Max ≤ MaxStorm.
func (f *DuplicateStorm) Available() error {
	if f.Do == nil {
		return notAvailable(f.Name(), "no request to duplicate")
	}
	if f.Min < 2 || f.Max < f.Min || f.Max > MaxStorm {
		return notAvailable(f.Name(), fmt.Sprintf("sizes %d..%d: want 2 ≤ min ≤ max ≤ %d", f.Min, f.Max, MaxStorm))
	}
	return nil
}

// Inject releases one storm of a size drawn from rnd.
func (f *DuplicateStorm) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	if err := f.Available(); err != nil {
		now := time.Now()
		return Injection{Fault: f.Name(), Kind: f.Kind(), Start: now, End: now, Err: err.Error()}, err
	}
	n := f.Min
	if f.Max > f.Min {
		n += rnd.IntN(f.Max - f.Min + 1)
	}
	return Storm(ctx, n, f.Do)
}
