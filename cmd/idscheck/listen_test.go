package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/faults"
	profhttpidem "github.com/idscheck/idscheck/profiles/httpidem"
	"github.com/idscheck/idscheck/reports"
	suthttpidem "github.com/idscheck/idscheck/sut/httpidem"
)

// TestRunUsesThePublishedTimeScale: a bus served at time scale 60 by hand
// publishes it on GET /health; run told nothing of it used to judge the
// backoff at time scale 1 (INTENT-3.3-fail-backoff FAIL, exit 1). It now
// uses the scale the target publishes, says so in one line, and records
// it in result.json and the reproduce line.
func TestRunUsesThePublishedTimeScale(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a bus: skipped in -short")
	}
	url, key := startServeTargetAt(t, 60)
	out := filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := runCLI(t, "--target", url, "--api-key", key, "--rules", "INTENT-3.3-fail-backoff", "--seed", "3", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "the target publishes time_scale 60: using it") {
		t.Errorf("stderr does not say the published time scale is used:\n%s", stderr)
	}
	doc, err := reports.ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.Target.TimeScale != 60 || !strings.Contains(doc.Command, "--time-scale=60") {
		t.Errorf("result.json records time scale %g, reproduce line %q: want 60 in both", doc.Target.TimeScale, doc.Command)
	}
}

// TestRunRefusesAContradictedTimeScale: a time scale given that the target
// publishes otherwise is exit 2, naming both values and where each came
// from, before any scenario.
func TestRunRefusesAContradictedTimeScale(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a bus: skipped in -short")
	}
	url, key := startServeTargetAt(t, 60)
	file := writeFile(t, "target.json", fmt.Sprintf(`{"url": %q, "time_scale": 1}`, url))
	for _, args := range [][]string{
		{"--target", url, "--api-key", key, "--time-scale", "1"},
		{"--target-file", file, "--api-key", key},
	} {
		out := filepath.Join(t.TempDir(), "report")
		code, stdout, stderr := runCLI(t, append(args, "--rules", "INTENT-3.3-fail-backoff", "--out", out)...)
		if code != exitUsage {
			t.Fatalf("%v: exit %d, want 2\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
		where := "--time-scale"
		if args[0] == "--target-file" {
			where = `"time_scale" in ` + file
		}
		for _, want := range []string{"time_scale is 1 by " + where, "the target publishes time_scale 60 (GET /health of the target)"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, stderr)
			}
		}
	}
}

// serveHTTPIdem serves the bundled payments endpoint (variant ietf, two
// callers) at time scale scale on a loopback port, calling the effect sink
// at sinkAddr; strip removes what GET /health publishes of it beyond its
// status (a server that says nothing of its time scale). It returns the
// endpoint's URL.
func serveHTTPIdem(t *testing.T, scale float64, sinkAddr string, strip bool) string {
	t.Helper()
	wrap := func(h http.Handler) http.Handler { return h }
	if strip {
		wrap = func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/health" {
					w.Header().Set("Content-Type", "application/json")
					w.Write([]byte(`{"status":"ok"}`))
					return
				}
				h.ServeHTTP(w, r)
			})
		}
	}
	return serveHTTPIdemWith(t, scale, sinkAddr, wrap)
}

// serveHTTPIdemWith is serveHTTPIdem with the handler wrapped by wrap.
func serveHTTPIdemWith(t *testing.T, scale float64, sinkAddr string, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	srv, err := suthttpidem.Open(t.Context(), suthttpidem.Config{DBPath: filepath.Join(t.TempDir(), "payments.db"),
		SinkURL: "http://" + sinkAddr, Variant: "ietf", Callers: []string{"tok_listen_one_7c1d", "tok_listen_two_2e9b"}, TimeScale: scale})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(wrap(srv.Handler()))
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs.URL
}

// httpIdemTargetFile writes docs/http-idempotency.md's target file for the
// endpoint at url (no time_scale; key_ttl_seconds ttl, left out when 0),
// its callers' tokens in variables, and returns its path.
func httpIdemTargetFile(t *testing.T, url, sinkAddr string, ttl float64) string {
	t.Helper()
	ep := profhttpidem.BundledEndpoint("ietf", nil)
	ep.KeyTTLSeconds = profhttpidem.Lifetime(ttl)
	for i, tok := range []string{"tok_listen_one_7c1d", "tok_listen_two_2e9b"} {
		name := fmt.Sprintf("HI_LISTEN_CALLER_%d", i+1)
		t.Setenv(name, "Bearer "+tok)
		ep.Callers = append(ep.Callers, profhttpidem.Caller{HeadersEnv: map[string]string{"Authorization": name}})
	}
	raw, _ := json.Marshal(map[string]any{"url": url, "effect_sink": map[string]string{"listen": sinkAddr}, "http_idempotency": ep})
	file := filepath.Join(t.TempDir(), "target.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestChaosUsesThePublishedTimeScale is the README's worked example of
// http-idempotency: the endpoint served at time scale 20,000 (a key lives
// 4.3 s), the page's target file (no time_scale). Chaos used to take real
// time, keep retrying keys the endpoint had rightly forgotten, and call
// each new payment a broken retry (IETF-2.6-retry-result anomalies). It
// now runs at the scale the target publishes, says so, and finds nothing.
func TestChaosUsesThePublishedTimeScale(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run: skipped in -short")
	}
	sinkAddr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	url := serveHTTPIdem(t, 20000, sinkAddr, false)
	file := httpIdemTargetFile(t, url, sinkAddr, 86400)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--target-file", file, "--duration", "10s", "--workers", "16",
		"--seed", "7", "--faults", "storm,lost_response,latency", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, "no anomaly") {
		t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "the target publishes time_scale 20000: using it") {
		t.Errorf("stderr does not say the published time scale is used:\n%s", stderr)
	}
	if run := readChaosRun(t, dir); run.TimeScale != 20000 || !strings.Contains(run.Command, "--time-scale 20000") {
		t.Errorf("chaos.json: time scale %g, replay %q: want 20000 in both", run.TimeScale, run.Command)
	}
}

// TestChaosRefusesAContradictedKeyLifetime: a key lifetime the target file
// declares that the endpoint publishes otherwise is exit 2 naming both,
// before the workload runs; one the file leaves out is taken from the
// endpoint.
func TestChaosRefusesAContradictedKeyLifetime(t *testing.T) {
	sinkAddr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	url := serveHTTPIdem(t, 20000, sinkAddr, false)
	file := httpIdemTargetFile(t, url, sinkAddr, 1800)
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--target-file", file, "--duration", "1s",
		"--faults", "storm", "--out", filepath.Join(t.TempDir(), "run"))
	if code != exitUsage {
		t.Fatalf("exit %d, want 2\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{`key_ttl_seconds is 1800 by "http_idempotency.key_ttl_seconds" in ` + file, "the target publishes key_ttl_seconds 86400"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
