package httpidem

import (
	"context"
	"flag"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/sink"
)

// serveWith parses args into the profile's serve flags and returns the
// function that serves.
func serveWith(t *testing.T, args ...string) func(context.Context, harness.ServeConfig) error {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := Serve().Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return run
}

// TestServe: the served endpoint listens where it says, takes a payment
// of a caller from HTTPIDEM_CALLERS, replays it under its key, and stops
// cleanly with its context.
func TestServe(t *testing.T) {
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	run := serveWith(t, "--sink", s.URL(), "--variant", "stripe")
	go func() {
		done <- run(ctx, harness.ServeConfig{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "p.db"), TimeScale: 1,
			Getenv: func(k string) string { return map[string]string{CallersEnv: " tok_one , tok_two"}[k] }, Ready: func(u string) { ready <- u }})
	}()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("serve ended before it listened: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("never listened")
	}
	pay := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/payments", strings.NewReader(`{"amount": 1250, "currency": "EUR", "reference": "r-1"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Idempotency-Key", "k-serve-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, first := pay("tok_two")
	if status/100 != 2 {
		t.Fatalf("a payment of the second caller: %d %s", status, first)
	}
	if status, again := pay("tok_two"); status/100 != 2 || again != first {
		t.Errorf("its retry: %d %s, want the first answer %s", status, again, first)
	}
	if status, body := pay("tok_nobody"); status/100 == 2 {
		t.Errorf("a caller it was not given was served: %d %s", status, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve ended with %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop with its context")
	}
}

// TestServeRefusesAnIncompleteConfiguration: no sink, no callers, a
// negative time scale are each refused before anything listens.
func TestServeRefusesAnIncompleteConfiguration(t *testing.T) {
	callers := func(k string) string { return map[string]string{CallersEnv: "tok_one"}[k] }
	for _, tc := range []struct {
		name string
		args []string
		cfg  harness.ServeConfig
		want string
	}{
		{"no sink", nil, harness.ServeConfig{Getenv: callers}, "--sink"},
		{"no callers", []string{"--sink", "http://127.0.0.1:1"}, harness.ServeConfig{Getenv: func(string) string { return "" }}, CallersEnv},
		{"time scale", []string{"--sink", "http://127.0.0.1:1"}, harness.ServeConfig{Getenv: callers, TimeScale: -1}, "--time-scale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Addr = "127.0.0.1:0"
			tc.cfg.Ready = func(string) { t.Error("it listened") }
			err := serveWith(t, tc.args...)(t.Context(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}
