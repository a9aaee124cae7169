package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"

	"github.com/idscheck/idscheck/faults"
	sutids "github.com/idscheck/idscheck/sut/ids"
	sutintent "github.com/idscheck/idscheck/sut/intent"
)

// silentHealth wraps a bundled server's handler so that GET /health
// publishes nothing of how it runs (time_scale, key_ttl_seconds, readings
// removed): a server the harness is told nothing about.
func silentHealth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var m map[string]any
		if json.Unmarshal(rec.Body.Bytes(), &m) == nil {
			delete(m, "time_scale")
			delete(m, "key_ttl_seconds")
			delete(m, "readings")
		}
		b, _ := json.Marshal(m)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		w.Write(b)
	})
}

// TestChaosJudgesTimeByTheTargetsAnswers: a correct bundled server run at a
// time scale the harness was neither told nor shown (GET /health silent on
// it) gives no anomaly in chaos: durations are judged from what the target
// answers (a lease's end against its clock, a key's replays, a command's
// ttl_expires_at), never from an assumed time scale of 1. Chaos used to
// assume real time and call a faster target's lapsed leases double leases,
// its forgotten keys broken retries, its expired commands duplicate effects.
func TestChaosJudgesTimeByTheTargetsAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs: skipped in -short")
	}
	t.Run("intent", func(t *testing.T) {
		const key = "assumed-scale-key-5d1f"
		srv, err := sutintent.Open(t.Context(), sutintent.Config{DBPath: filepath.Join(t.TempDir(), "bus.db"), Secret: key,
			AdminSecret: "assumed-scale-admin", CleanupInterval: sutintent.DefaultCleanupInterval, TimeScale: 60})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(silentHealth(srv.Handler()))
		t.Cleanup(func() { hs.Close(); srv.Close() })
		dir := filepath.Join(t.TempDir(), "run")
		code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "intent", "--target", hs.URL, "--api-key", key,
			"--duration", "6s", "--workers", "8", "--seed", "11", "--faults", "storm,latency,lost_response", "--out", dir)
		if code != exitOK || !strings.Contains(stdout, "no anomaly") {
			t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if strings.Contains(stderr, "the target publishes") {
			t.Errorf("the target published nothing, yet:\n%s", stderr)
		}
		// Each lease is recorded as the target granted it (60 protocol
		// seconds at its scale of 60: one second, as its claim_expires_at
		// shows), not as an assumed real-time minute.
		claims := 0
		for _, op := range readChaosHistory(t, dir) {
			if op.Kind != "claim" || op.Output.Token == "" {
				continue
			}
			claims++
			if d := time.Duration(op.Output.LeaseNs); d < 900*time.Millisecond || d > 1100*time.Millisecond {
				t.Fatalf("claim of %s recorded with a lease of %s; the target grants 1s", op.Output.ID, d)
			}
		}
		if claims == 0 {
			t.Fatal("no claim recorded")
		}
	})
	t.Run("http-idempotency", func(t *testing.T) {
		sinkAddr, err := faults.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		url := serveHTTPIdemWith(t, 20000, sinkAddr, silentHealth)
		file := httpIdemTargetFile(t, url, sinkAddr, 86400)
		dir := filepath.Join(t.TempDir(), "run")
		code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--target-file", file, "--duration", "10s",
			"--workers", "16", "--seed", "7", "--faults", "storm,lost_response,latency", "--out", dir)
		if code != exitOK || !strings.Contains(stdout, "no anomaly") {
			t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stdout, "time scale is not known: a key was taken to live") {
			t.Errorf("the summary does not say what key life was judged by:\n%s", stdout)
		}
	})
	t.Run("ids", func(t *testing.T) {
		sinkAddr, err := faults.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		srv, err := sutids.Open(t.Context(), sutids.Config{DBPath: filepath.Join(t.TempDir(), "ids.db"), SinkURL: "http://" + sinkAddr, TimeScale: 60})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(silentHealth(srv.Handler()))
		t.Cleanup(func() { hs.Close(); srv.Close() })
		dir := filepath.Join(t.TempDir(), "run")
		code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "ids", "--target", hs.URL, "--effect-sink", sinkAddr,
			"--duration", "8s", "--workers", "8", "--seed", "3", "--faults", "storm,lost_response,latency", "--out", dir)
		if code != exitOK || !strings.Contains(stdout, "no anomaly") {
			t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
}

// readChaosHistory reads history.jsonl of a chaos run directory.
func readChaosHistory(t *testing.T, dir string) []checker.Operation {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ops []checker.Operation
	dec := json.NewDecoder(f)
	for dec.More() {
		var op checker.Operation
		if err := dec.Decode(&op); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	return ops
}
