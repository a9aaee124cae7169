package faults

import (
	"bytes"
	"testing"
	"time"
)

func TestSlicerDeliversRequestsInPieces(t *testing.T) {
	ctx := testCtx(t)
	c := newCounter(t, []byte("ok"))
	n := newNet(t, c)
	f := &Slicer{Network: n, AverageSize: 64, Delay: 5 * time.Millisecond, Stream: "upstream"}
	end, err := f.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	body := string(bytes.Repeat([]byte("0123456789abcdef"), 64)) // 1 KiB: 16 slices of 64 bytes
	if _, err := post(ctx, n.URL(), 10*time.Second, body); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	got, reads := string(c.got), c.rds
	c.mu.Unlock()
	if got != body {
		t.Fatalf("the target got %d bytes, want the %d sent, intact", len(got), len(body))
	}
	// 16 slices 5 ms apart cannot all arrive in one read.
	if reads < 2 {
		t.Errorf("the target read the sliced body in %d reads, want ≥ 2", reads)
	}
	t.Logf("1 KiB sliced into 64-byte pieces: %d reads at the target", reads)
	if in, err := end(); err != nil || in.Params["stream"] != "upstream" {
		t.Errorf("end: %+v, %v", in, err)
	}
}
