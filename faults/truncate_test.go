package faults

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

func TestTruncateCutsTheResponse(t *testing.T) {
	ctx := testCtx(t)
	body := bytes.Repeat([]byte("y"), 10*1024)
	c := newCounter(t, body)
	n := newNet(t, c)
	end, err := (&Truncate{Network: n, Bytes: 1024}).Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := get(ctx, n.URL(), 5*time.Second)
	if _, eerr := end(); eerr != nil {
		t.Fatal(eerr)
	}
	if err == nil || len(b) >= len(body) {
		t.Fatalf("got %d bytes, %v; want a cut-off response", len(b), err)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		t.Errorf("error = %v, want an unexpected EOF", err)
	}
	t.Logf("client got %d of %d bytes: %v", len(b), len(body), err)
	if got := c.waitHits(1); got != 1 {
		t.Errorf("target saw %d requests, want 1", got)
	}
	if b, err := get(ctx, n.URL(), 5*time.Second); err != nil || len(b) != len(body) {
		t.Errorf("after the fault: %d bytes, %v", len(b), err)
	}
}
