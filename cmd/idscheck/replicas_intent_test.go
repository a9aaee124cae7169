package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
	sutintent "github.com/idscheck/idscheck/sut/intent"
)

// TestRunIntentReplicas: run --profile intent --replicas 3 --store
// postgres://… starts three replicas of the bus as children over one
// store, following the alternate readings; the suite's requests go round
// the replicas (a key generated on one is used on the next, a claim's
// fulfil lands on another replica) and every MUST passes (exit 0); the
// store's password is in no output.
func TestRunIntentReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas over PostgreSQL: skipped in -short")
	}
	pgtest.Shared(t)
	t.Parallel() // after the sequential tests; runCLI runs one suite at a time
	// --budget 5s: the scenario of a KV entry's 600 s default TTL (9 s of
	// waiting) is N/A, for time.
	code, stdout, stderr := runOnReplicas(t, "--profile", "intent", "--readings", "alternate", "--seed", "1", "--budget", "5s")
	if code != exitOK || !strings.Contains(stdout, "INTENT-3.3-expiry-backoff  follows immediate") {
		t.Fatalf("exit %d, want 0 on three replicas following the alternate readings\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestChaosIntentReplicas: chaos --profile intent over the bus on
// PostgreSQL. Three replicas of the correct bus, a proxy between each and
// the store: through replica crashes, store partitions, lost store
// replies, failpoints, storms and lost responses, no anomaly, each store
// fault in the timeline. Each replica mutant on three replicas: caught
// (exit 1), its rule named; on one replica over the same store: no
// anomaly.
func TestChaosIntentReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas and crashes them: skipped in -short")
	}
	pgtest.Shared(t)
	t.Parallel() // after the sequential tests, beside the other replica chaos tests (TestMain sets testBinaryIsCLI for the children)
	chaos := func(t *testing.T, replicas, mutant, dur string, faults ...string) (int, string, string, string) {
		dir := filepath.Join(t.TempDir(), "run")
		args := []string{"chaos", "--profile", "intent", "--duration", dur, "--workers", "8", "--seed", "3",
			"--replicas", replicas, "--store", pgtest.Database(t), "--out", dir}
		args = append(args, faults...)
		if mutant != "" {
			args = append(args, "--mutant", mutant)
		}
		code, stdout, stderr := chaosInProcess(t, args...)
		b, _ := os.ReadFile(filepath.Join(dir, "chaos.json"))
		return code, stdout, stderr, string(b)
	}
	t.Run("correct on three", func(t *testing.T) {
		code, stdout, stderr, run := chaos(t, "3", "", "5s", "--store-proxy",
			"--faults", "replica-crash,store-partition,store-lost-reply,failpoint,storm,lost_response")
		if code != exitOK || !strings.Contains(stdout, "no anomaly") || !strings.Contains(stderr, "3 replicas over one store") {
			t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		var doc struct {
			Timeline []struct {
				Fault  string            `json:"fault"`
				Params map[string]string `json:"params"`
				Err    string            `json:"err"`
			} `json:"timeline"`
		}
		if err := json.Unmarshal([]byte(run), &doc); err != nil {
			t.Fatalf("chaos.json: %v", err)
		}
		did := map[string]bool{}
		for _, in := range doc.Timeline {
			if in.Err != "" {
				t.Errorf("%s failed: %s", in.Fault, in.Err)
			}
			did[in.Fault] = true
		}
		for _, f := range []string{"replica-crash", "store-partition", "store-lost-reply"} {
			if !did[f] {
				t.Errorf("no %s in the timeline\n%s", f, run)
			}
		}
	})
	for _, m := range sutintent.ReplicaMutants() {
		t.Run(m.Name, func(t *testing.T) {
			code, stdout, stderr := catchRace(t, func() (int, string, string) {
				c, o, e, _ := chaos(t, "3", m.Name, "2s", "--faults", "storm")
				return c, o, e
			})
			if code != exitFailed || !strings.Contains(stdout, "ANOMALIES") || !strings.Contains(stdout, "("+m.Breaks+")") {
				t.Errorf("three replicas: exit %d, want 1 with %s named\nstdout:\n%.3000s\nstderr:\n%s", code, m.Breaks, stdout, stderr)
			}
			code, stdout, stderr, _ = chaos(t, "1", m.Name, "2s", "--faults", "storm,crash")
			if code != exitOK || !strings.Contains(stdout, "no anomaly") {
				t.Errorf("one replica: exit %d, want 0 and no anomaly\nstdout:\n%.3000s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}
