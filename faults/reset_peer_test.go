package faults

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

func TestResetPeerResetsTheConnection(t *testing.T) {
	ctx := testCtx(t)
	c := newCounter(t, []byte("reply"))
	n := newNet(t, c)
	f := &ResetPeer{Network: n}
	end, err := f.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := get(ctx, n.URL(), 10*time.Second)
	if _, eerr := end(); eerr != nil {
		t.Fatal(eerr)
	}
	if err == nil {
		t.Fatalf("request through reset_peer answered %q, want a reset", b)
	}
	// The reset hits the response: the request reached the target.
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("error = %v, want connection reset by peer", err)
	}
	t.Logf("client saw: %v", err)
	if got := c.waitHits(1); got != 1 {
		t.Errorf("target saw %d requests, want 1", got)
	}
	// Healed: the next request goes through.
	if b, err := get(ctx, n.URL(), 10*time.Second); err != nil || string(b) != "reply" {
		t.Errorf("after the fault: %q, %v", b, err)
	}
}
