package ids

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/sink"
)

// TestServeCommand runs the bundled server as serve --profile ids does:
// its flag parsed, it listens, says where, asks for the API key it was
// given, and stops when its context ends.
func TestServeCommand(t *testing.T) {
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	run := ServeCommand().Flags(fs)
	if err := fs.Parse([]string{"--sink", s.URL()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, harness.ServeConfig{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "ids.db"), TimeScale: 60,
			Getenv: func(k string) string {
				if k == EnvAPIKey {
					return "serve-key"
				}
				return ""
			}, Ready: func(u string) { ready <- u }})
	}()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("serve ended before it listened: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve never listened")
	}
	for key, want := range map[string]int{"": http.StatusUnauthorized, "serve-key": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, base+PathRegistry, nil)
		if key != "" {
			req.Header.Set(HeaderAPIKey, key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s with key %q: %d, want %d", PathRegistry, key, resp.StatusCode, want)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop with its context")
	}
}

// TestServeRefusesWhatItCannotServe: no sink, or a negative time scale, is
// a usage error, and nothing listens.
func TestServeRefusesWhatItCannotServe(t *testing.T) {
	for name, tc := range map[string]struct {
		sink  string
		scale float64
	}{"no sink": {"", 1}, "negative time scale": {"http://127.0.0.1:1", -1}} {
		t.Run(name, func(t *testing.T) {
			err := Serve(t.Context(), tc.sink, harness.ServeConfig{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "ids.db"), TimeScale: tc.scale,
				Ready: func(string) { t.Error("it listened") }})
			if !errors.Is(err, ErrServeUsage) {
				t.Fatalf("err %v, want a usage error", err)
			}
		})
	}
}
