package main

import (
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/profiles"
)

// TestChaosProgressHasColumnNames: the progress lines come under one line
// of column names (and what each counts: executions, duplicates included,
// named apart from the keys executed), printed once.
func TestChaosProgressHasColumnNames(t *testing.T) {
	var b bytes.Buffer
	intent, _ := profiles.Lookup("intent")
	p := newChaosProgress(&b, intent.Chaos.Columns)
	p.show(chaosProgressLine(chaos.Progress{Phase: "faults", Elapsed: 3 * time.Second, Ops: 120, Unknown: 2, Published: 40, Executed: 41, Fault: "partition"}))
	p.last = time.Time{}
	p.show(chaosProgressLine(chaos.Progress{Phase: "drain", Elapsed: 9 * time.Second, Ops: 300, Published: 90, Executed: 95}))
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 4 || strings.Count(b.String(), "published") != 2 {
		t.Fatalf("want the header (2 lines) once, then 2 lines:\n%s", b.String())
	}
	head := strings.Fields(lines[0])
	want := []string{"chaos", "phase", "elapsed", "ops", "unknown", "published", "executions", "fault"}
	if strings.Join(head, " ") != strings.Join(want, " ") {
		t.Errorf("header %q, want %q", head, want)
	}
	if f := strings.Fields(lines[2]); len(f) != len(want) || f[5] != "40" || f[6] != "41" || f[7] != "partition" {
		t.Errorf("line %q does not fill the columns %q", lines[2], want)
	}
	// Each value ends under the end of its column name.
	for _, col := range []string{"ops", "published", "executions"} {
		end := strings.Index(lines[0], col) + len(col)
		if end > len(lines[2]) || lines[2][end-1] == ' ' || (end < len(lines[2]) && lines[2][end] != ' ') {
			t.Errorf("column %s is not aligned:\n%s\n%s", col, lines[0], lines[2])
		}
	}
	if !strings.Contains(lines[1], "duplicates included") {
		t.Errorf("the header does not say what executions count: %s", lines[1])
	}
}

// TestChaosHealthWait: --health-wait bounds the wait for a target that
// does not answer (exit 3 within it, saying so).
func TestChaosHealthWait(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing answers there now
	began := time.Now()
	var stdout, stderr bytes.Buffer
	code := cli(t.Context(), []string{"chaos", "--target", "http://" + addr, "--api-key", "k3y-value", "--health-wait", "300ms",
		"--duration", "1s", "--out", t.TempDir()}, &stdout, &stderr)
	if code != exitUnreachable || !strings.Contains(stdout.String(), "no healthy answer within 300ms") {
		t.Errorf("exit %d, stdout %q", code, stdout.String())
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Errorf("--health-wait 300ms waited %s", d)
	}
	if strings.Contains(stdout.String()+stderr.String(), "k3y-value") {
		t.Errorf("the key is printed")
	}
}

// TestChaosFaultsNone: --faults none runs the workload alone and judges
// it: exit 0 against the bundled server, no injection, every check run.
func TestChaosFaultsNone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the bundled server: skipped in -short")
	}
	t.Parallel() // after the sequential tests, beside the other chaos runs
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--faults", "none", "--duration", "1s",
		"--workers", "4", "--seed", "2", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, " 0 fault injections") || !strings.Contains(stdout, "no anomaly") ||
		!strings.Contains(stdout, "--faults none") {
		t.Fatalf("exit %d, want 0, no injection, no anomaly, and a replay line with --faults none\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}
