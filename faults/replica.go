package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// ReplicaCrash kills one replica of a target that is several processes
// over one store (the harness owns each) with SIGKILL, keeps it down for
// the injection's duration while the others serve, and restarts it on
// its flags, waiting for health. The replica is drawn from the run's
// seeded source; the injection records which.
type ReplicaCrash struct {
	Replicas []*Process
}

var _ Fault = (*ReplicaCrash)(nil)

// Name is "replica-crash".
func (f *ReplicaCrash) Name() string { return "replica-crash" }

// Kind is KindCrash.
func (f *ReplicaCrash) Kind() Kind { return KindCrash }

// Available needs two replicas or more, each a process the harness owns.
func (f *ReplicaCrash) Available() error {
	if len(f.Replicas) < 2 {
		return notAvailable(f.Name(), "the target is not several replicas the harness owns (--replicas N with the bundled server)")
	}
	for _, p := range f.Replicas {
		if p == nil {
			return notAvailable(f.Name(), "a replica's process is not the harness's (no start command)")
		}
	}
	return nil
}

// Inject kills replica i (drawn from rnd), waits d (bounded by ctx) and
// restarts it, even when ctx is done (bounded by ProcessStartTimeout).
func (f *ReplicaCrash) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	in := Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{"down_ms": msParam(d)}}
	if err := f.Available(); err != nil {
		in.Start, in.End, in.Err = time.Now(), time.Now(), err.Error()
		return in, err
	}
	i := rnd.IntN(len(f.Replicas))
	p := f.Replicas[i]
	in.Params["replica"] = strconv.Itoa(i)
	in.Params["replicas"] = strconv.Itoa(len(f.Replicas))
	in.Params["pid_killed"] = strconv.Itoa(p.PID())
	in.Start = time.Now()
	if err := p.Kill(); err != nil {
		in.End = time.Now()
		err = fmt.Errorf("replica-crash: %w", err)
		in.Err = err.Error()
		return in, err
	}
	herr := hold(ctx, d)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartTimeout)
	defer cancel()
	err := p.Restart(rctx)
	in.End = time.Now()
	in.Params["pid_restarted"] = strconv.Itoa(p.PID())
	switch {
	case err != nil:
		err = fmt.Errorf("replica-crash: %w", err)
	case herr != nil:
		err = fmt.Errorf("replica-crash: down time cut short: %w", herr)
	}
	if err != nil {
		in.Err = err.Error()
	}
	return in, err
}
