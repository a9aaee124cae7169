package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
	suthttpidem "github.com/idscheck/idscheck/sut/httpidem"
)

// TestChaosHTTPIdemReplicas: chaos --profile http-idempotency over the
// bundled endpoint on PostgreSQL. Three replicas of the correct endpoint,
// one of them killed and restarted: no anomaly. Each replica mutant on
// three replicas: caught (exit 1), the broken rule named with its
// duplicated payments; the same mutant on one replica over the same
// store: no anomaly (replicas, not luck, find it).
func TestChaosHTTPIdemReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas and crashes them: skipped in -short")
	}
	pgtest.Shared(t)
	t.Parallel() // after the sequential tests, beside the other replica chaos tests (TestMain sets testBinaryIsCLI for the children)
	chaos := func(t *testing.T, replicas, mutant, faults string) (int, string, string) {
		args := []string{"chaos", "--profile", "http-idempotency", "--duration", "4s", "--workers", "8", "--seed", "3",
			"--faults", faults, "--replicas", replicas, "--store", pgtest.Database(t), "--out", filepath.Join(t.TempDir(), "run")}
		if mutant != "" {
			args = append(args, "--mutant", mutant)
		}
		return chaosInProcess(t, args...)
	}
	t.Run("correct on three", func(t *testing.T) {
		code, stdout, stderr := chaos(t, "3", "", "replica-crash,storm,lost_response")
		if code != exitOK || !strings.Contains(stdout, "no anomaly") || !strings.Contains(stdout, "replica-crash") ||
			!strings.Contains(stderr, "3 replicas over one store") {
			t.Fatalf("exit %d, want 0, no anomaly, replica-crash injected\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
	for _, m := range suthttpidem.ReplicaMutants() {
		t.Run(m.Name, func(t *testing.T) {
			code, stdout, stderr := catchRace(t, func() (int, string, string) { return chaos(t, "3", m.Name, "storm") })
			if code != exitFailed || !strings.Contains(stdout, "- "+m.Breaks) && !strings.Contains(stdout, "IETF-2.6-retry-result") ||
				!strings.Contains(stdout, "created 2 things") {
				t.Errorf("three replicas: exit %d, want 1 with duplicated payments named\nstdout:\n%.3000s\nstderr:\n%s", code, stdout, stderr)
			}
			code, stdout, stderr = chaos(t, "1", m.Name, "storm,crash")
			if code != exitOK || !strings.Contains(stdout, "no anomaly") {
				t.Errorf("one replica: exit %d, want 0 and no anomaly\nstdout:\n%.3000s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}
