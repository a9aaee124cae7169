package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStoreFaults: store-partition cuts the replica it draws from its
// store (its proxy refuses) and heals; store-lost-reply drops the replies
// on that replica's proxy alone; each injection names the replica. The
// other replica's proxy goes on.
func TestStoreFaults(t *testing.T) {
	ctx := testCtx(t)
	c := newCounter(t, []byte("reply"))
	a, b := newNet(t, c), newNet(t, c)
	proxies := []*Network{a, b}
	rnd := rand.New(rand.NewPCG(1, 2))
	// The replica drawn is the first of IntN(2) from the same seed.
	drawn := rand.New(rand.NewPCG(1, 2)).IntN(2)
	cut, other := proxies[drawn], proxies[1-drawn]
	done := make(chan Injection, 1)
	go func() {
		in, _ := (&StorePartition{Proxies: proxies}).Inject(ctx, rnd, 500*time.Millisecond)
		done <- in
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := get(ctx, cut.URL(), 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the replica cut from its store: %v, want connection refused", err)
	}
	if r, err := get(ctx, other.URL(), 5*time.Second); err != nil || string(r) != "reply" {
		t.Errorf("the other replica: %q, %v", r, err)
	}
	in := <-done
	if in.Fault != "store-partition" || in.Params["replicas"] != "2" || in.Params["replica"] == "" || in.Err != "" {
		t.Errorf("injection = %+v", in)
	}
	if r, err := get(ctx, cut.URL(), 5*time.Second); err != nil || string(r) != "reply" {
		t.Errorf("healed: %q, %v", r, err)
	}

	go func() {
		in, _ := (&StoreLostReply{Proxies: proxies, CloseAfter: 100 * time.Millisecond}).Inject(ctx, rand.New(rand.NewPCG(1, 2)), 800*time.Millisecond)
		done <- in
	}()
	time.Sleep(100 * time.Millisecond)
	if r, err := get(ctx, cut.URL(), 2*time.Second); err == nil {
		t.Errorf("the store's reply reached the replica: %q", r)
	}
	in = <-done
	if in.Fault != "store-lost-reply" || in.Params["close_after_ms"] != "100" || in.Params["replica"] == "" {
		t.Errorf("injection = %+v", in)
	}
}

// TestStoreFaultsUnavailable: without proxies, or without the restart of
// a store the harness started, the store faults say why.
func TestStoreFaultsUnavailable(t *testing.T) {
	for _, f := range []Fault{&StorePartition{}, &StoreLostReply{}, &StoreRestart{Why: "not started here"}} {
		if err := f.Available(); !errors.Is(err, ErrNotAvailable) {
			t.Errorf("%s: Available() = %v, want ErrNotAvailable", f.Name(), err)
		}
	}
	if err := (&StoreRestart{Why: "not started here"}).Available(); !strings.Contains(err.Error(), "not started here") {
		t.Errorf("store-restart: %v", err)
	}
	restarted := 0
	in, err := (&StoreRestart{Restart: func(context.Context) error { restarted++; return nil }}).Inject(context.Background(), nil, time.Second)
	if err != nil || restarted != 1 || in.Params["restart_ms"] == "" || in.Kind != KindCrash {
		t.Errorf("store-restart: %+v, %v, %d restarts", in, err, restarted)
	}
	for _, name := range StoreFaultNames() {
		if _, err := ParseKinds(name); err != nil {
			t.Errorf("ParseKinds(%q): %v", name, err)
		}
	}
}
