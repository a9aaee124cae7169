package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
	suthttpidem "github.com/idscheck/idscheck/sut/httpidem"
	sutids "github.com/idscheck/idscheck/sut/ids"
)

// failedReplicas are the replicas the exchanges of rule's evidence in the
// report in out went to.
func failedReplicas(t *testing.T, out, rule string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rules []struct {
			Result struct {
				RuleID   string `json:"rule_id"`
				Verdict  string `json:"verdict"`
				Evidence []struct {
					Exchanges []struct {
						Replica string `json:"replica"`
					} `json:"exchanges"`
				} `json:"evidence"`
			} `json:"result"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range doc.Rules {
		if r.Result.RuleID != rule {
			continue
		}
		for _, ev := range r.Result.Evidence {
			for _, ex := range ev.Exchanges {
				seen[ex.Replica] = true
			}
		}
	}
	return seen
}

// TestRunCatchesReplicaMutants: run on three replicas sends a retry or a
// duplicate to another replica than its original's, so a bug that only
// several replicas have is caught by the scenarios themselves: a
// per-process key cache in front of the store (replica-local-cache) FAILs
// a MUST of http-idempotency (its evidence naming the replicas that
// answered) and of ids on three replicas, and passes on one. (Before:
// every delivery of these profiles went to the first replica: exit 0.)
func TestRunCatchesReplicaMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas over PostgreSQL: skipped in -short")
	}
	pgtest.Shared(t)
	t.Parallel() // after the sequential tests; runCLI runs one suite at a time
	run := func(t *testing.T, replicas, profile, mutant, rules string) (int, string, string, string) {
		out := filepath.Join(t.TempDir(), "report")
		code, stdout, stderr := runCLI(t, "--profile", profile, "--mutant", mutant, "--rules", rules, "--seed", "1",
			"--replicas", replicas, "--store", pgtest.Database(t), "--out", out)
		return code, stdout, stderr, out
	}
	t.Run("http-idempotency", func(t *testing.T) {
		code, stdout, stderr, out := run(t, "3", "http-idempotency", suthttpidem.MutantReplicaLocalCache, "IETF-2.6-*")
		const rule = "IETF-2.6-concurrent-conflict"
		if code != exitFailed || !strings.Contains(stdout, "FAIL       "+rule) {
			t.Fatalf("three replicas: exit %d, want 1 with %s failed\nstdout:\n%s\nstderr:\n%s", code, rule, stdout, stderr)
		}
		if seen := failedReplicas(t, out, rule); len(seen) < 2 || seen[""] {
			t.Errorf("the evidence of %s names the replicas %v: want the two that answered the original and its retry", rule, seen)
		}
		code, stdout, stderr, _ = run(t, "1", "http-idempotency", suthttpidem.MutantReplicaLocalCache, "IETF-2.6-*")
		if code != exitOK {
			t.Errorf("one replica: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
	t.Run("ids", func(t *testing.T) {
		const rule = "IDS-V-exactly-once-effects"
		code, stdout, stderr, _ := run(t, "3", "ids", sutids.MutantReplicaLocalCache, rule)
		if code != exitFailed || !strings.Contains(stdout, "FAIL       "+rule) {
			t.Fatalf("three replicas: exit %d, want 1 with %s failed\nstdout:\n%s\nstderr:\n%s", code, rule, stdout, stderr)
		}
	})
}
