package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/pgtest"
	profhttpidem "github.com/idscheck/idscheck/profiles/httpidem"
)

// replicaEndpoint readies the bundled endpoint's replicas as a test
// starts them: this test binary (it serves as idscheck), a free address
// for the effect sink, and the endpoint described with one caller per
// token, each caller's header read from the variable envPrefix_N.
func replicaEndpoint(t *testing.T, envPrefix string, tokens ...string) (exe, sinkAddr string, ep *profhttpidem.Endpoint) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if sinkAddr, err = faults.FreeAddr(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(profhttpidem.CallersEnv, strings.Join(tokens, ","))
	ep = profhttpidem.BundledEndpoint("ietf", nil)
	for i, tok := range tokens {
		name := fmt.Sprintf("%s_%d", envPrefix, i+1)
		t.Setenv(name, "Bearer "+tok)
		ep.Callers = append(ep.Callers, profhttpidem.Caller{HeadersEnv: map[string]string{"Authorization": name}})
	}
	return exe, sinkAddr, ep
}

// replicasTargetFile writes a target file of three replicas of the
// bundled endpoint, each started by its "cmd" (idscheck serve over
// $IDSCHECK_STORE_URL) over one store whose URL carries password pw;
// extra fields are added to the file.
func replicasTargetFile(t *testing.T, pw string, extra map[string]any) string {
	t.Helper()
	exe, sinkAddr, ep := replicaEndpoint(t, "HI_REPLICA_CALLER", "tok_replica_one_71ac", "tok_replica_two_c2d9")
	dir := t.TempDir()
	var reps []map[string]string
	for i := range 3 {
		addr, err := faults.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		cmd := fmt.Sprintf(`%s serve --profile http-idempotency --variant ietf --addr %s --db %s --store "$IDSCHECK_STORE_URL" --replica-id r-%d --sink http://%s --time-scale 20000`,
			shellQuote(exe), addr, shellQuote(filepath.Join(dir, fmt.Sprintf("r%d.db", i))), i, sinkAddr)
		reps = append(reps, map[string]string{"url": "http://" + addr, "cmd": cmd})
	}
	doc := map[string]any{"replicas": reps, "store": map[string]string{"url": withPassword(t, pgtest.Database(t), pw)},
		"time_scale": 20000, "effect_sink": map[string]string{"listen": sinkAddr}, "http_idempotency": ep}
	for k, v := range extra {
		doc[k] = v
	}
	raw, _ := json.Marshal(doc)
	file := filepath.Join(dir, "target.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestReplicasTargetFile: a target file of three replicas over one store,
// each started by its cmd: run passes on it (exit 0), chaos kills and
// restarts one replica with no anomaly; the store's password and the
// callers' tokens are in no output.
func TestReplicasTargetFile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas over PostgreSQL: skipped in -short")
	}
	pgtest.Shared(t)
	t.Setenv(testBinaryIsCLI, "1")
	const pw = "file-store-pw-4417"
	noSecret := func(t *testing.T, outs ...string) {
		for _, o := range outs {
			if strings.Contains(o, pw) || strings.Contains(o, "tok_replica") {
				t.Errorf("a secret is in the output:\n%s", o)
			}
		}
	}
	t.Run("run", func(t *testing.T) {
		file := replicasTargetFile(t, pw, nil)
		out := filepath.Join(t.TempDir(), "report")
		code, stdout, stderr := runCLI(t, "--profile", "http-idempotency", "--target-file", file, "--seed", "2", "--out", out)
		if code != exitOK || !strings.Contains(stderr, "3 replicas answer GET /health") {
			t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(out, "result.json"))
		noSecret(t, stdout, stderr, string(b))
	})
	t.Run("chaos", func(t *testing.T) {
		file := replicasTargetFile(t, pw, nil)
		dir := filepath.Join(t.TempDir(), "run")
		code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--target-file", file, "--duration", "4s",
			"--workers", "8", "--seed", "3", "--faults", "replica-crash,storm", "--out", dir)
		if code != exitOK || !strings.Contains(stdout, "no anomaly") || !strings.Contains(stdout, "replica-crash") ||
			!strings.Contains(stderr, "3 replicas over one store") {
			t.Fatalf("exit %d, want 0, no anomaly, replica-crash injected\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "chaos.json"))
		noSecret(t, stdout, stderr, string(b))
	})
}
