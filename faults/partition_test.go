package faults

import (
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPartitionRefusesThenHeals(t *testing.T) {
	ctx := testCtx(t)
	c := newCounter(t, []byte("reply"))
	n := newNet(t, c)
	if _, err := get(ctx, n.URL(), 10*time.Second); err != nil {
		t.Fatalf("before the partition: %v", err)
	}
	p1, p2 := &Partition{Network: n}, &Partition{Network: n}
	end1, err := p1.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	end2, err := p2.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	refused := func(when string) {
		t.Helper()
		_, err := get(ctx, n.URL(), 5*time.Second)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: error = %v, want connection refused", when, err)
		}
	}
	refused("partitioned")
	if _, err := end1(); err != nil {
		t.Fatal(err)
	}
	refused("one of two partitions healed")
	in, err := end2()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := get(ctx, n.URL(), 10*time.Second); err != nil || string(b) != "reply" {
		t.Errorf("healed: %q, %v", b, err)
	}
	if in.Fault != "partition" || in.Params["addr"] != n.Addr() || in.Duration() <= 0 {
		t.Errorf("injection = %+v", in)
	}
	if got := c.hits.Load(); got != 2 {
		t.Errorf("target saw %d requests, want 2 (before and after)", got)
	}
}

func TestNetworkFaultsUnavailableWithoutNetwork(t *testing.T) {
	for _, f := range []Fault{&Latency{}, &Bandwidth{}, &Slicer{}, &ResetPeer{}, &Blackhole{}, &LostResponse{}, &Partition{}, &Truncate{}} {
		t.Run(f.Name(), func(t *testing.T) {
			if err := f.Available(); !errors.Is(err, ErrNotAvailable) {
				t.Errorf("Available() = %v, want ErrNotAvailable", err)
			}
			in, err := f.Inject(t.Context(), nil, time.Millisecond)
			if !errors.Is(err, ErrNotAvailable) || in.Err == "" {
				t.Errorf("Inject = %+v, %v; want ErrNotAvailable recorded", in, err)
			}
		})
	}
}

// TestPartitionHealFailsWhileThePortIsTaken: a heal that cannot listen again
// says so; the next partition's heal recovers once the port is free.
func TestPartitionHealFailsWhileThePortIsTaken(t *testing.T) {
	ctx := testCtx(t)
	c := newCounter(t, []byte("reply"))
	n := newNet(t, c)
	end, err := (&Partition{Network: n}).Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	squatter, err := net.Listen("tcp", n.Addr())
	if err != nil {
		t.Fatalf("take the proxy's port: %v", err)
	}
	in, err := end()
	squatter.Close()
	if err == nil || !strings.Contains(err.Error(), "heal") || in.Err == "" {
		t.Fatalf("heal with the port taken: %+v, %v; want a heal error, recorded", in, err)
	}
	end, err = (&Partition{Network: n}).Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := end(); err != nil {
		t.Fatal(err)
	}
	if b, err := get(ctx, n.URL(), 10*time.Second); err != nil || string(b) != "reply" {
		t.Errorf("after a later heal: %q, %v", b, err)
	}
}
