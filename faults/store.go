package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"
)

// The faults between the replicas of a target and the store they share.
// Each replica reaches the store through a proxy of its own (a Network
// whose upstream is the store's host:port, one per replica, in replica
// order); the fault draws the replica it acts on from the run's seeded
// source and records which.

// StorePartition cuts one replica from the store for the injection's
// duration: its proxy refuses new connections and closes the open ones
// (the replica's queries fail, the other replicas go on), then heals.
type StorePartition struct {
	Proxies []*Network
}

var _ Fault = (*StorePartition)(nil)

// Name is "store-partition".
func (f *StorePartition) Name() string { return "store-partition" }

// Kind is KindNet.
func (f *StorePartition) Kind() Kind { return KindNet }

// Available needs a proxy between each replica and the store.
func (f *StorePartition) Available() error { return storeProxiesAvailable(f.Name(), f.Proxies) }

// Inject partitions replica i (drawn from rnd) from the store for d.
func (f *StorePartition) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	if err := f.Available(); err != nil {
		now := time.Now()
		return Injection{Fault: f.Name(), Kind: f.Kind(), Start: now, End: now, Err: err.Error()}, err
	}
	i := rnd.IntN(len(f.Proxies))
	end, err := f.Proxies[i].beginPartition(f.Name())
	return storeHeld(ctx, f.Name(), f.Kind(), end, err, i, len(f.Proxies), d)
}

// StoreLostReply drops the store's response bytes on one replica's
// connections for the injection's duration, and closes each such
// connection CloseAfter after its bytes stop (0: 500 ms): a statement or a
// commit the store ran whose reply never reaches the replica, which sees
// its connection fail and cannot tell whether the commit happened.
type StoreLostReply struct {
	Proxies    []*Network
	CloseAfter time.Duration
}

var _ Fault = (*StoreLostReply)(nil)

// Name is "store-lost-reply".
func (f *StoreLostReply) Name() string { return "store-lost-reply" }

// Kind is KindNet.
func (f *StoreLostReply) Kind() Kind { return KindNet }

// Available needs a proxy between each replica and the store.
func (f *StoreLostReply) Available() error { return storeProxiesAvailable(f.Name(), f.Proxies) }

// Inject drops the store's replies to replica i (drawn from rnd) for d.
func (f *StoreLostReply) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	if err := f.Available(); err != nil {
		now := time.Now()
		return Injection{Fault: f.Name(), Kind: f.Kind(), Start: now, End: now, Err: err.Error()}, err
	}
	after := f.CloseAfter
	if after <= 0 {
		after = 500 * time.Millisecond
	}
	i := rnd.IntN(len(f.Proxies))
	end, err := f.Proxies[i].beginToxic(f.Name(), "timeout", "downstream", map[string]int64{"timeout": ms(after)},
		map[string]string{"close_after_ms": msParam(after)})
	return storeHeld(ctx, f.Name(), f.Kind(), end, err, i, len(f.Proxies), d)
}

// storeHeld holds a begun store fault for d, ends it and records the
// replica it acted on.
func storeHeld(ctx context.Context, name string, kind Kind, end func() (Injection, error), err error, i, n int, d time.Duration) (Injection, error) {
	if err != nil {
		now := time.Now()
		return Injection{Fault: name, Kind: kind, Start: now, End: now, Err: err.Error(),
			Params: map[string]string{"replica": strconv.Itoa(i), "replicas": strconv.Itoa(n)}}, err
	}
	herr := hold(ctx, d)
	in, err := end()
	in.Params["replica"] = strconv.Itoa(i)
	in.Params["replicas"] = strconv.Itoa(n)
	if err == nil && herr != nil {
		err = fmt.Errorf("%s: hold cut short: %w", name, herr)
		in.Err = err.Error()
	}
	return in, err
}

func storeProxiesAvailable(name string, proxies []*Network) error {
	if len(proxies) == 0 {
		return notAvailable(name, "no proxy stands between the target's replicas and their store (--store-proxy, or \"proxy\": true in the target file's \"store\")")
	}
	for _, p := range proxies {
		if p == nil {
			return notAvailable(name, "a replica has no proxy to its store")
		}
	}
	return nil
}

// StoreRestart restarts the store the replicas share (every connection
// cut at once, what was committed kept) and waits for it to answer again,
// bounded by StoreRestartTimeout: only a store the harness started, whose
// Restart it holds. Without one it is not available, for the reason Why.
type StoreRestart struct {
	Restart func(ctx context.Context) error
	Why     string
}

var _ Fault = (*StoreRestart)(nil)

// StoreRestartTimeout bounds one restart of the store.
const StoreRestartTimeout = 60 * time.Second

// Name is "store-restart".
func (f *StoreRestart) Name() string { return "store-restart" }

// Kind is KindCrash.
func (f *StoreRestart) Kind() Kind { return KindCrash }

// Available needs the restart of a store the harness started.
func (f *StoreRestart) Available() error {
	if f.Restart == nil {
		why := f.Why
		if why == "" {
			why = "the harness did not start the store: it restarts only one it started"
		}
		return notAvailable(f.Name(), why)
	}
	return nil
}

// Inject restarts the store; d is not used (the store is down for as long
// as its restart takes, which the injection records).
func (f *StoreRestart) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	in := Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{}, Start: time.Now()}
	if err := f.Available(); err != nil {
		in.End, in.Err = time.Now(), err.Error()
		return in, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StoreRestartTimeout)
	defer cancel()
	err := f.Restart(rctx)
	in.End = time.Now()
	in.Params["restart_ms"] = strconv.FormatInt(in.End.Sub(in.Start).Milliseconds(), 10)
	if err != nil {
		err = fmt.Errorf("%s: %w", f.Name(), err)
		in.Err = err.Error()
	}
	return in, err
}

// StoreFaultNames are the names of the faults between replicas and their
// store, outside the fixed list (All): a target of several replicas over
// a store adds them.
func StoreFaultNames() []string {
	return []string{(&StorePartition{}).Name(), (&StoreLostReply{}).Name(), (&StoreRestart{}).Name()}
}
