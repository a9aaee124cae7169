package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	profa2a "github.com/idscheck/idscheck/profiles/a2a"
)

// TestChaosA2ABundledQueue: chaos --profile a2a against the bundled queue
// as a child process (its scheduler on, at 1000×: leases stale after
// 300 ms), through a crash, its failpoint after a lease commit, storms
// and lost responses: no anomaly, every fault injected, no API key in the
// run directory, and check re-judges the directory offline.
func TestChaosA2ABundledQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes a server: skipped in -short")
	}
	t.Setenv(testBinaryIsCLI, "1")
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "a2a", "--duration", "4s", "--workers", "8", "--seed", "3",
		"--time-scale", "1000", "--faults", "crash,failpoint,storm,lost_response", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, "no anomaly") {
		t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	run := readChaosRun(t, dir)
	if run.Profile != "a2a" || len(run.Coverage) != 4 || run.TimeScale != 1000 {
		t.Fatalf("profile %q, %d faults covered, time scale %g", run.Profile, len(run.Coverage), run.TimeScale)
	}
	for _, c := range run.Coverage {
		if !c.OK() {
			t.Errorf("%s was not injected: %s", c.Fault, c)
		}
	}
	for _, want := range []string{"model a2a-executions Ok", "model a2a-requeues Ok", "automated requeue(s)", "replay: idscheck chaos --profile a2a --seed 3"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"history.jsonl", "ledger.jsonl", profa2a.RecordFile, "chaos.json", "check.json"} {
		if _, err := os.ReadFile(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if code := cli(t.Context(), []string{"check", dir}, &out, &out); code != exitOK || !strings.Contains(out.String(), "model a2a-executions Ok") {
		t.Fatalf("idscheck check: exit %d\n%s", code, out.String())
	}
}

// TestChaosA2ACatchesUnsafeRequeued: under the unsafe-requeued mutant the
// gate requeues unsafe tasks abandoned by their receivers: exit 1, the
// duplicated executions named by A2A-CLASS-unsafe-not-requeued with their
// auto_requeue rows, and the replay line.
func TestChaosA2ACatchesUnsafeRequeued(t *testing.T) {
	if testing.Short() {
		t.Skip("real runs: skipped in -short")
	}
	t.Setenv(testBinaryIsCLI, "1")
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "a2a", "--duration", "2s", "--workers", "8", "--seed", "3",
		"--time-scale", "1000", "--faults", "storm", "--mutant", "unsafe-requeued", "--out", dir)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, stdout, stderr)
	}
	for _, want := range []string{"- A2A-CLASS-unsafe-not-requeued t-", "a2a-executions: task t-", "auto_requeue (lease", "model a2a-executions Illegal",
		"replay: idscheck chaos --profile a2a --seed 3 --duration 2s --workers 8 --faults storm --time-scale 1000 --mutant unsafe-requeued"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}
