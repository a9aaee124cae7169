package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	profhttpidem "github.com/idscheck/idscheck/profiles/httpidem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/faults"
	suthttpidem "github.com/idscheck/idscheck/sut/httpidem"
)

// TestChaosHTTPIdemBundledServer: chaos --profile http-idempotency against
// the bundled payments endpoint as a child process (its callers' tokens
// drawn for the run, 20,000× so a key lives 4.3 s), through a crash, both
// failpoints, storms of 200 and more identical requests and lost
// responses: no anomaly, every fault injected, no token in the run
// directory, and check re-judges the directory offline.
func TestChaosHTTPIdemBundledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes a server: skipped in -short")
	}
	t.Setenv(testBinaryIsCLI, "1")
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--duration", "6s", "--workers", "8", "--seed", "5",
		"--faults", "crash,failpoint,storm,lost_response", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, "no anomaly") {
		t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	run := readChaosRun(t, dir)
	if run.Profile != "http-idempotency" || len(run.Coverage) != 5 || run.TimeScale != 20000 || !strings.Contains(run.Command, "--profile http-idempotency") {
		t.Fatalf("profile %q, %d faults covered, time scale %g, replay %q", run.Profile, len(run.Coverage), run.TimeScale, run.Command)
	}
	for _, c := range run.Coverage {
		if !c.OK() {
			t.Errorf("%s was not injected: %s", c.Fault, c)
		}
	}
	// A passing run says how to run it again too.
	for _, want := range []string{"model http-idem-effects Ok", "model http-idem-replay Ok", "under the ietf variant", "replay: idscheck chaos --profile http-idempotency --seed 5"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	rec, err := os.ReadFile(filepath.Join(dir, profhttpidem.RecordFile))
	if err != nil || !bytes.Contains(rec, []byte(`"variant":"ietf"`)) {
		t.Fatalf("%s: %v %.200s", profhttpidem.RecordFile, err, rec)
	}
	for _, f := range []string{"history.jsonl", "ledger.jsonl", profhttpidem.RecordFile, "chaos.json", "check.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("tok_")) {
			t.Errorf("%s holds a caller's token", f)
		}
	}
	var out bytes.Buffer
	if code := cli(t.Context(), []string{"check", dir}, &out, &out); code != exitOK || !strings.Contains(out.String(), "model http-idem-effects") {
		t.Fatalf("idscheck check: exit %d\n%s", code, out.String())
	}
}

// TestChaosHTTPIdemCatchesNoReservation: the no-reservation mutant (the
// key looked up, not reserved; its racy window widened by its failpoint)
// pays more than once under a storm: the duplicate creation is named with
// the request, its caller and its key, and the replay line reproduces the
// run.
func TestChaosHTTPIdemCatchesNoReservation(t *testing.T) {
	if testing.Short() {
		t.Skip("real runs: skipped in -short")
	}
	t.Setenv(testBinaryIsCLI, "1")
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--duration", "3s", "--workers", "8", "--seed", "7",
		"--faults", "storm", "--mutant", "no-reservation", "--out", dir)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, stdout, stderr)
	}
	for _, want := range []string{"- IETF-2.6-retry-result caller", "http-idem-effects: the request of caller", "things (pay_",
		"model http-idem-replay Illegal",
		"replay: idscheck chaos --profile http-idempotency --seed 7 --duration 3s --workers 8 --faults storm --time-scale 20000 --mutant no-reservation"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// TestChaosHTTPIdemVariant: --variant reaches the bundled child (t0: the
// key in the body, duplicates wait) and the replay line, and the checks
// name t0's rule: a replay that pays again (effect-on-replay) is caught.
func TestChaosHTTPIdemVariant(t *testing.T) {
	if testing.Short() {
		t.Skip("real runs: skipped in -short")
	}
	t.Setenv(testBinaryIsCLI, "1")
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--variant", "t0", "--duration", "2s", "--workers", "8",
		"--seed", "3", "--faults", "lost_response", "--mutant", "effect-on-replay", "--out", dir)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, stdout, stderr)
	}
	for _, want := range []string{"under the t0 variant", "- T0-0-no-further-effect caller", "times at the sink",
		"replay: idscheck chaos --profile http-idempotency --variant t0 --seed 3 --duration 2s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// TestChaosHTTPIdemTarget: --target-file describing an endpoint (its
// callers' tokens in variables, the effect sink where it calls it): the
// workload runs against it through the network's faults, no token shows.
func TestChaosHTTPIdemTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("real runs: skipped in -short")
	}
	sinkAddr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	tokens := []string{"tok_target_one_5f0c", "tok_target_two_9a1e"}
	srv, err := suthttpidem.Open(t.Context(), suthttpidem.Config{DBPath: filepath.Join(t.TempDir(), "payments.db"),
		SinkURL: "http://" + sinkAddr, Variant: "stripe", Callers: tokens, TimeScale: 20000})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	ep := profhttpidem.BundledEndpoint("stripe", nil)
	for i, tok := range tokens {
		name := fmt.Sprintf("HI_CHAOS_CALLER_%d", i+1)
		t.Setenv(name, "Bearer "+tok)
		ep.Callers = append(ep.Callers, profhttpidem.Caller{HeadersEnv: map[string]string{"Authorization": name}})
	}
	raw, _ := json.Marshal(map[string]any{"url": hs.URL, "time_scale": 20000, "effect_sink": map[string]string{"listen": sinkAddr}, "http_idempotency": ep})
	file := filepath.Join(t.TempDir(), "target.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "http-idempotency", "--target-file", file, "--duration", "2s", "--workers", "8",
		"--seed", "4", "--faults", "storm,lost_response", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, "no anomaly") || !strings.Contains(stdout, "under the stripe variant") {
		t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "tok_target") {
		t.Error("a caller's token was printed")
	}
	if run := readChaosRun(t, dir); !strings.Contains(run.Command, "--target-file=") || run.Bundled || run.TimeScale != 20000 {
		t.Errorf("replay line %q, bundled %t, time scale %g", run.Command, run.Bundled, run.TimeScale)
	}
}
