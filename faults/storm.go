package faults

import (
	"context"
	"errors"
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
	return StormPrepared(ctx, n, func(ctx context.Context, i int) (func(context.Context), error) {
		return func(ctx context.Context) { do(ctx, i) }, nil
	})
}

// StormPrepared is Storm in two phases: before the barrier, each goroutine
// runs prepare(ctx, i), which does the slow part of request i (open and warm
// its own connection, build the body) and returns fire, which sends it. Only
// fire runs after the release, so the requests leave closer together than
// with Storm, whose calls still dial after the release. A prepare that fails
// is not fired; the storm goes on with the others, and the error counts them
// (Params "prepare_failed").
func StormPrepared(ctx context.Context, n int, prepare func(ctx context.Context, i int) (fire func(ctx context.Context), err error)) (Injection, error) {
	in := Injection{Fault: "storm", Kind: KindStorm, Params: map[string]string{"n": strconv.Itoa(n)}}
	if n < 1 || n > MaxStorm {
		err := fmt.Errorf("storm: n=%d: want 1..%d", n, MaxStorm)
		in.Err = err.Error()
		return in, err
	}
	barrier := make(chan struct{})
	var ready, done sync.WaitGroup
	left := make([]time.Time, n)
	var prepMu sync.Mutex
	var prepFailed int
	var prepErr error // the first prepare error
	ready.Add(n)
	done.Add(n)
	began := time.Now()
	for i := range n {
		go func() {
			defer done.Done()
			fire, err := prepare(ctx, i)
			ready.Done()
			if err != nil || fire == nil {
				prepMu.Lock()
				prepFailed++
				if prepErr == nil {
					prepErr = err
				}
				prepMu.Unlock()
				return
			}
			select {
			case <-barrier:
			case <-ctx.Done():
				return
			}
			left[i] = time.Now()
			fire(ctx)
		}()
	}
	allReady := make(chan struct{})
	go func() { ready.Wait(); close(allReady) }()
	select {
	case <-allReady:
	case <-ctx.Done():
		// Nothing was released; the goroutines return on ctx once prepared.
		err := fmt.Errorf("storm: before release: %w", ctx.Err())
		if !waitGrace(ctx, &done) {
			err = fmt.Errorf("storm: preparations still running %s after: %w", stormGrace, ctx.Err())
		}
		in.Err = err.Error()
		return in, err
	}
	in.Params["ready_us"] = strconv.FormatInt(time.Since(began).Microseconds(), 10)
	in.Start = time.Now()
	close(barrier)

	var err error
	if !waitGrace(ctx, &done) {
		err = fmt.Errorf("storm: calls still running %s after: %w", stormGrace, ctx.Err())
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
	prepMu.Lock()
	if prepFailed > 0 {
		in.Params["prepare_failed"] = strconv.Itoa(prepFailed)
		err = errors.Join(err, fmt.Errorf("storm: %d of %d requests not prepared (first: %v)", prepFailed, n, prepErr))
	}
	prepMu.Unlock()
	if err != nil {
		in.Err = err.Error()
	}
	return in, err
}

// waitGrace waits for wg; once ctx is done it waits at most stormGrace more.
// It reports whether wg finished.
func waitGrace(ctx context.Context, wg *sync.WaitGroup) bool {
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
		return true
	case <-ctx.Done():
	}
	t := time.NewTimer(stormGrace)
	defer t.Stop()
	select {
	case <-finished:
		return true
	case <-t.C:
		return false
	}
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
