package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// restartTimeout bounds a restart that must happen after the caller's ctx is
// done: a crash fault never leaves the target down.
const restartTimeout = ProcessStartTimeout

// Crash kills the target process the harness owns with SIGKILL (no chance to
// flush, reply or clean up), keeps it down for the injection's duration, and
// restarts it on the same data, waiting for health. Without a managed process
// (no --target-cmd) it is not available, and crash rules are N/A.
type Crash struct {
	Process *Process
}

var _ Fault = (*Crash)(nil)

// Name is "crash".
func (f *Crash) Name() string { return "crash" }

// Kind is KindCrash.
func (f *Crash) Kind() Kind { return KindCrash }

// Available needs a managed process.
func (f *Crash) Available() error {
	if f.Process == nil {
		return notAvailable(f.Name(), "the harness does not own the target process (no --target-cmd)")
	}
	return nil
}

// Inject kills the process, waits d (the time it stays down; bounded by ctx)
// and restarts it. The Injection runs from the kill to the restarted process
// answering its health check. The restart happens even when ctx is done,
// bounded by ProcessStartTimeout.
func (f *Crash) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	in := Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{"down_ms": msParam(d)}}
	if err := f.Available(); err != nil {
		in.Start, in.End, in.Err = time.Now(), time.Now(), err.Error()
		return in, err
	}
	in.Params["pid_killed"] = strconv.Itoa(f.Process.PID())
	in.Start = time.Now()
	if err := f.Process.Kill(); err != nil {
		in.End = time.Now()
		err = fmt.Errorf("crash: %w", err)
		in.Err = err.Error()
		return in, err
	}
	herr := hold(ctx, d)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartTimeout)
	defer cancel()
	err := f.Process.Restart(rctx)
	in.End = time.Now()
	in.Params["pid_restarted"] = strconv.Itoa(f.Process.PID())
	switch {
	case err != nil:
		err = fmt.Errorf("crash: %w", err)
	case herr != nil:
		err = fmt.Errorf("crash: down time cut short: %w", herr)
	}
	if err != nil {
		in.Err = err.Error()
	}
	return in, err
}
