package atp

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

// TestServeCommand: serve --profile atp needs the rail's URL and a known
// --readings; given them it serves the bundled server, asking the API key
// of ATP_API_KEY, until its context ends.
func TestServeCommand(t *testing.T) {
	sc := Profile().Serve
	if sc == nil || sc.Flags == nil || !strings.Contains(sc.Env, EnvAPIKey) {
		t.Fatalf("Profile().Serve = %+v", sc)
	}
	parse := func(args ...string) func(context.Context, harness.ServeConfig) error {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		run := sc.Flags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return run
	}
	cfg := func() harness.ServeConfig {
		return harness.ServeConfig{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "atp.db"), TimeScale: 60,
			Getenv: func(k string) string {
				if k == EnvAPIKey {
					return "served-key"
				}
				return ""
			}}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "needs --sink"},
		{[]string{"--sink", "http://127.0.0.1:1", "--readings", "odd"}, "want default or alternate"},
	} {
		err := parse(tc.args...)(t.Context(), cfg())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}

	s, err := sink.Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	RailOf(s)
	ctx, cancel := context.WithCancel(t.Context())
	urls := make(chan string, 1)
	c := cfg()
	c.Ready = func(u string) { urls <- u }
	done := make(chan error, 1)
	go func() { done <- parse("--sink", s.URL(), "--reading", DecisionNonceSameKey+"=nonce")(ctx, c) }()
	var base string
	select {
	case base = <-urls:
	case err := <-done:
		t.Fatalf("serve ended before listening: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not listen")
	}
	// The API key comes from ATP_API_KEY: refused without it, taken with it.
	for _, key := range []string{"", "served-key"} {
		req, _ := http.NewRequest(http.MethodGet, base+PathIntents+"int_none", nil)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if refused := resp.StatusCode == http.StatusUnauthorized; refused != (key == "") {
			t.Errorf("GET %s with key %q: %d", PathIntents+"int_none", key, resp.StatusCode)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after its context ended: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// TestServeSharedStore: serve takes --store and --replica-id (SharedStore),
// and a child started for a run follows the readings it declares
// (--reading ID=NAME, parsed back by serve's flags).
func TestServeSharedStore(t *testing.T) {
	sc := serveCommand()
	if !sc.SharedStore || sc.Readings == nil {
		t.Fatalf("SharedStore %v, Readings %v", sc.SharedStore, sc.Readings != nil)
	}
	if args := sc.Readings(nil); len(args) != 0 {
		t.Fatalf("no readings declared: %q", args)
	}
	args := sc.Readings(alternateReadings())
	if strings.Join(args, " ") != "--reading "+DecisionNonceSameKey+"=nonce" {
		t.Fatalf("the alternate readings: %q", args)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sc.Flags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("serve's flags refuse %q: %v", args, err)
	}
}
