package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChaosATPBundledServer: chaos --profile atp against the bundled ATP
// site as a child process, through a crash, both failpoints, storms and
// the rail's faults (partition, lost replies, dropped and delayed
// callbacks): no anomaly, every fault injected, and check re-judges the
// directory offline.
func TestChaosATPBundledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes a server: skipped in -short")
	}
	t.Setenv(testBinaryIsCLI, "1")
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "atp", "--duration", "6s", "--workers", "8", "--seed", "5",
		"--faults", "crash,failpoint,storm,rail-partition,rail-lost-replies,rail-callback-drop,rail-callback-delay", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, "no anomaly") {
		t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	run := readChaosRun(t, dir)
	if run.Profile != "atp" || len(run.Coverage) != 8 {
		t.Fatalf("profile %q, %d faults covered", run.Profile, len(run.Coverage))
	}
	for _, c := range run.Coverage {
		if !c.OK() {
			t.Errorf("%s was not injected: %s", c.Fault, c)
		}
	}
	var out bytes.Buffer
	if code := cli(t.Context(), []string{"check", dir}, &out, &out); code != exitOK || !strings.Contains(out.String(), "model atp-effects") {
		t.Fatalf("idscheck check: exit %d\n%s", code, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "check.json")); err != nil {
		t.Error(err)
	}
}

// TestChaosATPCatchesDoubleCharge: the double-charge mutant's second
// charge is named, with the replay line.
func TestChaosATPCatchesDoubleCharge(t *testing.T) {
	if testing.Short() {
		t.Skip("real runs: skipped in -short")
	}
	t.Setenv(testBinaryIsCLI, "1")
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "atp", "--duration", "3s", "--workers", "8", "--seed", "7",
		"--faults", "lost_response", "--mutant", "double-charge-on-retry", "--out", dir)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, stdout, stderr)
	}
	for _, want := range []string{"- ATP-2-no-second-effect ", "charged 2 times at the rail",
		"replay: idscheck chaos --profile atp --seed 7 --duration 3s --workers 8 --faults lost_response --time-scale 60 --mutant double-charge-on-retry"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}
