package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildIDSCheck builds this command into a temporary directory: chaos owns
// the bundled server as a child process (os.Executable), which a test binary
// cannot be.
func buildIDSCheck(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "idscheck")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runChaosBinary runs the built command with args, bounded in time, and
// returns its exit code and output.
func runChaosBinary(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("chaos: %v\nstderr:\n%s", err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// TestChaosCrashesTheBundledServer runs chaos with SIGKILL crashes and
// failpoint crashes of the bundled server as a real child process, then
// re-checks the run directory offline.
func TestChaosCrashesTheBundledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and crashes a server: skipped in -short")
	}
	bin := buildIDSCheck(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runChaosBinary(t, bin, "chaos", "--duration", "6s", "--workers", "8", "--seed", "11",
		"--faults", "crash,failpoint", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, "no anomaly") {
		t.Fatalf("want exit 0 and no anomaly, got exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var run chaosRun
	b, err := os.ReadFile(filepath.Join(dir, "chaos.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	crashes := 0
	for _, in := range run.Timeline {
		if in.Kind == "crash" || in.Kind == "failpoint" {
			crashes++
		}
	}
	if crashes == 0 {
		t.Fatalf("no crash was injected: timeline %+v", run.Timeline)
	}
	for _, f := range []string{"history.jsonl", "ledger.jsonl", "check.json", "index.html", "result.json", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}
	// Offline re-check: same verdict, no target needed.
	var out2 bytes.Buffer
	if code := cli(context.Background(), []string{"check", dir}, &out2, &out2); code != exitOK {
		t.Fatalf("idscheck check: exit %d\n%s", code, out2.String())
	}
}

// TestChaosCatchesLostOnCrash: a server that acknowledges before its commit
// is durable loses acknowledged intents when it crashes; chaos must say so.
func TestChaosCatchesLostOnCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and crashes a server: skipped in -short")
	}
	bin := buildIDSCheck(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runChaosBinary(t, bin, "chaos", "--duration", "6s", "--workers", "8", "--seed", "5",
		"--faults", "failpoint/after-commit-before-reply", "--mutant", "lost-on-crash", "--out", dir)
	if code != exitFailed || !strings.Contains(stdout, "lost") {
		t.Fatalf("want exit %d and a lost anomaly, got exit %d\nstdout:\n%s\nstderr:\n%s", exitFailed, code, stdout, stderr)
	}
	if !strings.Contains(stdout, "replay: idscheck chaos --seed 5") {
		t.Fatalf("a failure must print the command that replays it:\n%s", stdout)
	}
}
