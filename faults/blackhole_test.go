package faults

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestBlackholeAndLostResponse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fault    func(*Network) Holdable
		wantHits int64 // requests that reached the target while the fault held
		eofOK    bool  // the target closes the connection (Connection: close): EOF instead of a timeout
	}{
		// The request never arrives.
		{"blackhole", func(n *Network) Holdable { return &Blackhole{Network: n} }, 0, false},
		// The request is processed; its response never arrives.
		{"lost_response", func(n *Network) Holdable { return &LostResponse{Network: n} }, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := newCounter(t, []byte("reply"))
			n := newNet(t, c)
			f := tc.fault(n)
			end, err := f.Begin(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := get(ctx, n.URL(), 500*time.Millisecond)
			if err == nil {
				t.Fatalf("request answered %q through %s, want no answer", b, tc.name)
			}
			if !isTimeout(err) && !(tc.eofOK && errors.Is(err, io.EOF)) {
				t.Errorf("error = %v, want a client timeout", err)
			}
			t.Logf("client saw: %v", err)
			if tc.wantHits > 0 {
				c.waitHits(tc.wantHits)
			}
			if got := c.hits.Load(); got != tc.wantHits {
				t.Errorf("target saw %d requests, want %d", got, tc.wantHits)
			}
			in, err := end()
			if err != nil || in.Fault != tc.name || in.End.IsZero() {
				t.Fatalf("end: %+v, %v", in, err)
			}
			// Healed: the next request goes through and is counted.
			if b, err := get(ctx, n.URL(), 10*time.Second); err != nil || string(b) != "reply" {
				t.Errorf("after the fault: %q, %v", b, err)
			}
			if got := c.hits.Load(); got != tc.wantHits+1 {
				t.Errorf("target saw %d requests after healing, want %d", got, tc.wantHits+1)
			}
		})
	}
}

// TestLostResponseOnKeptAliveConnection: the harness's clients keep
// connections alive; a response lost on such a connection leaves the client
// waiting until its own timeout, while the target did process the request.
func TestLostResponseOnKeptAliveConnection(t *testing.T) {
	ctx := testCtx(t)
	c := newCounter(t, []byte("reply"))
	n := newNet(t, c)
	client := &http.Client{}
	defer client.CloseIdleConnections()
	do := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL(), nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	if err := do(10 * time.Second); err != nil {
		t.Fatalf("before the fault: %v", err)
	}
	end, err := (&LostResponse{Network: n}).Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = do(500 * time.Millisecond)
	if _, eerr := end(); eerr != nil {
		t.Fatal(eerr)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want the client's deadline", err)
	}
	if got := c.waitHits(2); got != 2 {
		t.Errorf("target saw %d requests, want 2: the lost one was processed", got)
	}
}

// TestBlackholeCloseAfter: with CloseAfter the black-holed connection is
// closed by the network, and the client sees the close, not its own timeout.
func TestBlackholeCloseAfter(t *testing.T) {
	ctx := testCtx(t)
	c := newCounter(t, []byte("reply"))
	n := newNet(t, c)
	end, err := (&Blackhole{Network: n, CloseAfter: 100 * time.Millisecond}).Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	_, err = get(ctx, n.URL(), 20*time.Second)
	if err == nil || isTimeout(err) {
		t.Errorf("error = %v, want the connection closed by the network", err)
	}
	if got := c.hits.Load(); got != 0 {
		t.Errorf("target saw %d requests, want 0", got)
	}
	if in, err := end(); err != nil || in.Params["close_after_ms"] != "100" {
		t.Errorf("end: %+v, %v", in, err)
	}
}
