package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/reports"
)

// servedReplica is the target file entry of a replica of the bundled
// http-idempotency endpoint on its own SQLite file, started by its cmd at
// a free address.
func servedReplica(t *testing.T, i int) map[string]string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := fmt.Sprintf("HTTPIDEM_CALLERS=tok_start_1 %s serve --profile http-idempotency --addr %s --db %s --sink http://127.0.0.1:1 --time-scale 20000",
		shellQuote(exe), addr, shellQuote(filepath.Join(t.TempDir(), fmt.Sprintf("r%d.db", i))))
	return map[string]string{"url": "http://" + addr, "cmd": cmd}
}

// replicasFile writes a target file of the replicas reps.
func replicasFile(t *testing.T, reps []map[string]string) string {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"replicas": reps, "time_scale": 20000,
		"http_idempotency": map[string]any{"path": "/v1/payments", "body": map[string]any{"amount": 1, "reference": "{{unique}}"}}})
	return writeFile(t, "target.json", string(raw))
}

// unreachableCause is the cause result.json of the run in out records.
func unreachableCause(t *testing.T, out string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, reports.ResultFile))
	if err != nil {
		t.Fatalf("no result.json: %v", err)
	}
	var doc struct {
		Unreachable string `json:"unreachable"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Unreachable
}

// TestRunReplicaAddressTaken: a replica whose address another server
// already answers on (its port taken) is not taken for the replica: the
// run stops before any scenario (exit 3), naming the replica and the
// address another process holds, and never runs its cmd (it would fail to
// bind and exit while the other server's answers passed for its own).
// (Before: "2 replicas answer GET /health", the other server judged.)
func TestRunReplicaAddressTaken(t *testing.T) {
	t.Setenv(testBinaryIsCLI, "1")
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"status":"ok"}`)) }))
	defer other.Close()
	marker := filepath.Join(t.TempDir(), "ran")
	taken := map[string]string{"url": other.URL, "cmd": "touch " + shellQuote(marker) + "; echo 'listen tcp: bind: address already in use' >&2; exit 1"}
	out := filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := runCLI(t, "--profile", "http-idempotency", "--target-file", replicasFile(t, []map[string]string{servedReplica(t, 0), taken}),
		"--seed", "1", "--out", out)
	host := strings.TrimPrefix(other.URL, "http://")
	if out := stdout + stderr; code != exitUnreachable || !strings.Contains(out, "replica 1 ("+other.URL+")") || !strings.Contains(out, "another process holds "+host) ||
		strings.Contains(out, "replicas answer GET /health") {
		t.Fatalf("exit %d, want 3 naming replica 1 and the address another process holds\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the replica's cmd ran although its address was taken")
	}
	if c := unreachableCause(t, out); !strings.Contains(c, "another process holds") {
		t.Errorf("result.json's cause %q does not say so", c)
	}
}

// TestRunReplicaExitsBeforeHealthy: a replica whose cmd exits before it
// answers GET /health stops the run before any scenario (exit 3), its own
// output quoted on stderr and in result.json, its secrets redacted.
func TestRunReplicaExitsBeforeHealthy(t *testing.T) {
	t.Setenv(testBinaryIsCLI, "1")
	addr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dies := map[string]string{"url": "http://" + addr,
		"cmd": "DB_PASSWORD=replica-pw-7731 sh -c 'echo \"replica 1: cannot open the store with $DB_PASSWORD: connection refused\" >&2; exit 3'"}
	out := filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := runCLI(t, "--profile", "http-idempotency", "--target-file", replicasFile(t, []map[string]string{servedReplica(t, 0), dies}),
		"--seed", "1", "--out", out)
	if out := stdout + stderr; code != exitUnreachable || !strings.Contains(out, "replica 1 (http://"+addr+") exited before it answered GET /health") ||
		!strings.Contains(out, "its output:\n    replica 1: cannot open the store with") || !strings.Contains(out, "connection refused") {
		t.Fatalf("exit %d, want 3 quoting the replica's output\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if c := unreachableCause(t, out); !strings.Contains(c, "cannot open the store") {
		t.Errorf("result.json's cause %q does not quote the replica's output", c)
	}
	b, _ := os.ReadFile(filepath.Join(out, reports.ResultFile))
	if strings.Contains(stdout+stderr+string(b), "replica-pw-7731") {
		t.Error("the replica's secret is in the output")
	}
}

// TestBundledReplicaDiesIsUnreachable: a replica of the bundled server
// that dies before it is healthy (its store refuses connections) stops run
// and chaos with exit 3, the replica named and its own output quoted, the
// store's password nowhere. (Before: exit 2, a usage error.)
func TestBundledReplicaDiesIsUnreachable(t *testing.T) {
	t.Setenv(testBinaryIsCLI, "1")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close() // nothing listens there now: the store refuses connections (or,
	// should a parallel test take the port meanwhile, never answers as one)
	const pw = "dead-store-pw-5150"
	store := "postgres://app:" + pw + "@" + closed + "/payments"
	check := func(t *testing.T, code int, stdout, stderr string) {
		t.Helper()
		if out := stdout + stderr; code != exitUnreachable || !strings.Contains(out, "replica 0 of the bundled server") ||
			!strings.Contains(out, "exited before it answered GET /health; its output:") || !strings.Contains(out, "open: postgres: failed to connect") {
			t.Errorf("exit %d, want 3 with replica 0's output quoted\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if strings.Contains(stdout+stderr, pw) {
			t.Error("the store's password is in the output")
		}
	}
	t.Run("run", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, "--profile", "http-idempotency", "--replicas", "2", "--store", store, "--out", filepath.Join(t.TempDir(), "report"))
		check(t, code, stdout, stderr)
	})
	t.Run("chaos", func(t *testing.T) {
		code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--replicas", "2", "--store", store, "--duration", "1s",
			"--faults", "storm", "--out", filepath.Join(t.TempDir(), "run"))
		check(t, code, stdout, stderr)
	})
}

// catchRace runs a replica mutant's chaos run until it is caught, at most
// three times: the mutant's second effect needs two replicas to race on
// one key, and on a loaded machine a short run can make too few
// operations for the race (seen: 7 commands in 5 s). A correct server
// is never caught, however often it runs; a mutant caught once is
// caught. Any other exit than a clean one ends the attempts at once.
func catchRace(t *testing.T, run func() (int, string, string)) (int, string, string) {
	t.Helper()
	var code int
	var stdout, stderr string
	for attempt := 1; attempt <= 3; attempt++ {
		code, stdout, stderr = run()
		if code != exitOK {
			break
		}
		t.Logf("attempt %d of 3: no race this time (exit 0); again", attempt)
	}
	return code, stdout, stderr
}
