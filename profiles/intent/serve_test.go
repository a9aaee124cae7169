package intent

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/harness"
	sut "github.com/idscheck/idscheck/sut/intent"
)

// startServe parses args with the serve command's flags and runs it with
// env as its environment; ready receives the base URL once it listens.
func startServe(t *testing.T, ctx context.Context, args []string, env map[string]string, ready func(string)) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := serve().Flags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return run(ctx, harness.ServeConfig{Addr: "127.0.0.1:0", DB: filepath.Join(t.TempDir(), "s.db"),
		Getenv: func(k string) string { return env[k] }, Ready: ready})
}

// TestServeRefuses: a reading that is not the server's, a base that is
// neither default nor alternate, or no BUS_SECRET stop the server before
// it listens, with an error that says why.
func TestServeRefuses(t *testing.T) {
	secret := map[string]string{"BUS_SECRET": "serve-test-secret"}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"unknown decision", []string{"--reading", "nope=x"}, secret, []string{`unknown reading "nope"`, DecisionLeaseExpiry, sut.ReadingBounds}},
		{"unknown name", []string{"--reading", DecisionExtend + "=later"}, secret, []string{`unknown name "later"`, "from-now, added"}},
		{"unknown name after alternate", []string{"--readings", "alternate", "--reading", sut.ReadingAccess + "=410"}, secret, []string{"403, 404"}},
		{"decision without readings", []string{"--reading", DecisionMaintenance + "=x"}, secret, []string{"unknown reading"}},
		{"bad base", []string{"--readings", "other"}, secret, []string{"default or alternate"}},
		{"no secret", nil, nil, []string{"BUS_SECRET"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := startServe(t, t.Context(), tc.args, tc.env, func(u string) { t.Errorf("listening on %s", u) })
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if err := startServe(t, t.Context(), []string{"--reading", DecisionExtend}, secret, nil); err == nil || !strings.Contains(err.Error(), "want ID=NAME") {
		t.Errorf("--reading without =: %v", err)
	}
}

func TestServeHelpListsReadings(t *testing.T) {
	help := serve().Env
	for _, k := range sut.ReadingKeys() {
		if !strings.Contains(help, k.Key+": "+strings.Join(k.Names, ", ")) {
			t.Errorf("help does not list %s", k.Key)
		}
	}
	for _, v := range []string{"BUS_SECRET", "BUS_REQUIRE_SIGNATURES", "--readings default"} {
		if !strings.Contains(help, v) {
			t.Errorf("help does not mention %s", v)
		}
	}
}

func TestChooseReadings(t *testing.T) {
	got, err := chooseReadings("alternate", map[string]string{DecisionExtend: "from-now"})
	if err != nil {
		t.Fatal(err)
	}
	want := sut.AlternateReadings()
	want[DecisionExtend] = "from-now"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("alternate with one override: %v, want %v", got, want)
	}
	got, err = chooseReadings("default", map[string]string{sut.ReadingBounds: "clamp"})
	if err != nil || !reflect.DeepEqual(got, map[string]string{sut.ReadingBounds: "clamp"}) {
		t.Fatalf("default with one override: %v %v", got, err)
	}
}

// TestServeReadingsInHealth serves the bus on a free port and reads the
// readings in effect from GET /health; once ctx ends it stops cleanly.
func TestServeReadingsInHealth(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string
	}{
		{"default", nil, sut.DefaultReadings()},
		{"alternate", []string{"--readings", "alternate"}, sut.AlternateReadings()},
		{"default plus one", []string{"--reading", DecisionLeaseExpiry + "=immediate"}, func() map[string]string {
			m := sut.DefaultReadings()
			m[DecisionLeaseExpiry] = "immediate"
			return m
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			urls := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				done <- startServe(t, ctx, tc.args, map[string]string{"BUS_SECRET": "serve-test-secret"}, func(u string) { urls <- u })
			}()
			var base string
			select {
			case base = <-urls:
			case err := <-done:
				t.Fatalf("serve ended before listening: %v", err)
			}
			hc := &http.Client{Timeout: 10 * time.Second}
			res, err := hc.Get(base + PathHealth)
			if err != nil {
				t.Fatal(err)
			}
			var h struct {
				OK       bool              `json:"ok"`
				Readings map[string]string `json:"readings"`
			}
			err = json.NewDecoder(res.Body).Decode(&h)
			res.Body.Close()
			if err != nil || !h.OK || !reflect.DeepEqual(h.Readings, tc.want) {
				t.Fatalf("health: %+v (%v), want readings %v", h, err, tc.want)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("serve: %v", err)
			}
		})
	}
}
