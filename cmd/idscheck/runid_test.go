package main

import (
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/reports"
	sutintent "github.com/idscheck/idscheck/sut/intent"
)

// TestRunReplayMeetsAFreshTarget: a run repeated as its reproduce line says
// (the same seed) against the same live bus makes the same choices with
// keys and names of its own, so it never meets the first run's intents;
// the second run used to reuse the first's namespaces and fail
// (INTENT-7.3-highest-priority claimed the first run's leftovers). Each
// run records its run ID, and the note under the reproduce line says what
// a replay repeats.
func TestRunReplayMeetsAFreshTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("serves a bus: skipped in -short")
	}
	url, key := startServeTargetAt(t, 60)
	var ids []string
	for i := range 2 {
		out := filepath.Join(t.TempDir(), "report")
		code, stdout, stderr := runCLI(t, "--target", url, "--api-key", key, "--rules", "INTENT-7.3*", "--seed", "9", "--out", out)
		if code != exitOK {
			t.Fatalf("run %d: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", i+1, code, stdout, stderr)
		}
		doc, err := reports.ReadResult(out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stdout, "same seed: same choices and order, fresh keys; add --run-id "+doc.RunID) {
			t.Errorf("run %d: the reproduce line does not say what it repeats:\n%s", i+1, stdout)
		}
		ids = append(ids, doc.RunID)
	}
	if ids[0] == "" || ids[0] == ids[1] {
		t.Errorf("run IDs %q: want one of its own each", ids)
	}
}

// TestChaosReplayMeetsAFreshTarget: a clean chaos run replayed as printed
// (the same seed) against the same live bus is clean too: its keys and
// namespace are its own (another run ID). The replay used to reuse every
// key and fail (not-linearizable: a status read of fulfilled for an intent
// the replay never saw created). --run-id gives a run ID back.
func TestChaosReplayMeetsAFreshTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos runs: skipped in -short")
	}
	const key = "replay-key-3c9a"
	srv, err := sutintent.Open(t.Context(), sutintent.Config{DBPath: filepath.Join(t.TempDir(), "bus.db"), Secret: key,
		CleanupInterval: sutintent.DefaultCleanupInterval, TimeScale: 60})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	var ids []string
	for i, extra := range [][]string{nil, nil, {"--run-id", "givenback1"}} {
		dir := filepath.Join(t.TempDir(), "run")
		args := append([]string{"chaos", "--profile", "intent", "--target", hs.URL, "--api-key", key, "--duration", "3s", "--workers", "8",
			"--seed", "17", "--faults", "storm,latency", "--out", dir}, extra...)
		code, stdout, stderr := chaosInProcess(t, args...)
		if code != exitOK || !strings.Contains(stdout, "no anomaly") {
			t.Fatalf("run %d: exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", i+1, code, stdout, stderr)
		}
		run := readChaosRun(t, dir)
		if !strings.Contains(stdout, "same seed: same choices and order, fresh keys; add --run-id "+run.RunID) || strings.Contains(run.Command, "--run-id") {
			t.Errorf("run %d: the replay line (%q) or what it says it repeats:\n%s", i+1, run.Command, stdout)
		}
		ids = append(ids, run.RunID)
	}
	if ids[0] == "" || ids[0] == ids[1] || ids[2] != "givenback1" {
		t.Errorf("run IDs %q: want one of its own each, and the one given back", ids)
	}
}
