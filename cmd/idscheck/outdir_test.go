package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutRefusesAnotherKindOfRun: a run into a chaos run's directory (or a
// chaos run into a run's, or either into a folder of other files) is
// refused, saying what it holds, and leaves it untouched; --force replaces
// it; a run into an earlier run's directory replaces that run whole (no
// file of it is left beside the new one).
func TestOutRefusesAnotherKindOfRun(t *testing.T) {
	chaosDir := t.TempDir()
	for _, f := range []string{"chaos.json", "history.jsonl", "ledger.jsonl"} {
		writeIn(t, chaosDir, f, `{"seed": 1, "files": ["record.jsonl"]}`)
	}
	writeIn(t, chaosDir, "record.jsonl", "{}")
	unreachable := []string{"--target", "http://127.0.0.1:1", "--api-key", "k", "--health-wait", "200ms"}
	code, _, stderr := runCLI(t, append(unreachable, "--out", chaosDir)...)
	if code != exitUsage || !strings.Contains(stderr, "--out "+chaosDir+" holds a chaos run (chaos.json, history.jsonl, ledger.jsonl, record.jsonl): writing the report of an idscheck run there") || !strings.Contains(stderr, "--force to replace it") {
		t.Errorf("run into a chaos directory: exit %d, stderr %q", code, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(chaosDir, "history.jsonl")); !strings.Contains(string(b), `"seed"`) {
		t.Errorf("the refused run touched the chaos run's history: %q", b)
	}

	runDir := t.TempDir()
	writeIn(t, runDir, "result.json", `{"command": "idscheck run --seed=1"}`)
	writeIn(t, runDir, "scenarios.json", `[]`)
	writeIn(t, runDir, "history.jsonl", `{"stale": true}`)
	var out, errb strings.Builder
	code = cli(t.Context(), []string{"chaos", "--out", runDir, "--duration", "1s"}, &out, &errb)
	if code != exitUsage || !strings.Contains(errb.String(), "holds the report of an idscheck run (history.jsonl, result.json, scenarios.json): writing a chaos run there") {
		t.Errorf("chaos into a run directory: exit %d, stderr %q", code, errb.String())
	}

	other := t.TempDir()
	writeIn(t, other, "main.go", "package main")
	code, _, stderr = runCLI(t, append(unreachable, "--out", other)...)
	if code != exitUsage || !strings.Contains(stderr, "holds files that are no idscheck run (main.go)") {
		t.Errorf("run into a folder of other files: exit %d, stderr %q", code, stderr)
	}

	// The same kind: the earlier run is replaced whole.
	code, _, stderr = runCLI(t, append(unreachable, "--out", runDir)...)
	if code != exitUnreachable {
		t.Fatalf("run into an earlier run's directory: exit %d, %s", code, stderr)
	}
	for _, stale := range []string{"scenarios.json", "history.jsonl"} {
		if fileExists(filepath.Join(runDir, stale)) {
			t.Errorf("the earlier run's %s is left beside the new run", stale)
		}
	}
	// --force replaces another kind, its records too.
	code, _, stderr = runCLI(t, append(unreachable, "--out", chaosDir, "--force")...)
	if code != exitUnreachable {
		t.Fatalf("--force: exit %d, %s", code, stderr)
	}
	for _, gone := range []string{"chaos.json", "ledger.jsonl", "record.jsonl"} {
		if fileExists(filepath.Join(chaosDir, gone)) {
			t.Errorf("--force left the chaos run's %s", gone)
		}
	}
	if !fileExists(filepath.Join(chaosDir, "result.json")) {
		t.Errorf("--force wrote no report")
	}
}

func writeIn(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
