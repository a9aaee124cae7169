package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
	"github.com/idscheck/idscheck/profiles/ids"
	sutids "github.com/idscheck/idscheck/sut/ids"
)

// TestRunIDSReplicas: run --profile ids --replicas 3 --store postgres://…
// starts three replicas of the bundled IDS server as children over one
// store, and the suite passes (exit 0); the store's password is in no
// output. (The alternate replay form, by reference, is served on three
// replicas in TestChaosIDSReplicas.)
func TestRunIDSReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas over PostgreSQL: skipped in -short")
	}
	pgtest.Shared(t)
	t.Setenv(testBinaryIsCLI, "1")
	const pw = "ids-r3plicas-pw"
	store := withPassword(t, pgtest.Database(t), pw)
	out := filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := runCLI(t, "--profile", "ids", "--seed", "1", "--replicas", "3", "--store", store, "--out", out)
	if code != exitOK || !strings.Contains(stderr, "3 replicas over one store") || !strings.Contains(stdout, "every MUST passed") {
		t.Fatalf("exit %d, want 0 on three replicas\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Logf("run --replicas 3: exit %d\n%s", code, stdout)
	if strings.Contains(stdout, pw) || strings.Contains(stderr, pw) || fileHas(t, filepath.Join(out, "result.json"), pw) {
		t.Errorf("the store's password is in the output")
	}
}

// TestChaosIDSReplicas: chaos --profile ids over the bundled server on
// PostgreSQL. Three replicas of the correct server, one killed and
// restarted, one cut from its store, one losing the store's replies, the
// effect sink losing replies, storms spread over the three: no anomaly.
// Each replica mutant on three replicas: caught (exit 1), named by the
// rule it breaks (IDS-V-exactly-once-effects: effects duplicated); the same
// mutant on one replica over the same kind of store: no anomaly.
func TestChaosIDSReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas and crashes them: skipped in -short")
	}
	pgtest.Shared(t)
	t.Setenv(testBinaryIsCLI, "1")
	chaos := func(t *testing.T, replicas, mutant, faults, duration string, extra ...string) (int, string, string) {
		args := append([]string{"chaos", "--profile", "ids", "--duration", duration, "--workers", "8", "--seed", "3",
			"--faults", faults, "--replicas", replicas, "--store", pgtest.Database(t), "--out", filepath.Join(t.TempDir(), "run")}, extra...)
		if mutant != "" {
			args = append(args, "--mutant", mutant)
		}
		code, stdout, stderr := chaosInProcess(t, args...)
		t.Logf("chaos --replicas %s --mutant %q: exit %d\n%s", replicas, mutant, code, stdout)
		return code, stdout, stderr
	}
	t.Run("correct on three", func(t *testing.T) {
		code, stdout, stderr := chaos(t, "3", "", "replica-crash,store-partition,store-lost-reply,storm,sink-lost-replies", "4s", "--store-proxy",
			"--reading", ids.DecisionReplayForm+"="+sutids.ReplayReference)
		if code != exitOK || !strings.Contains(stdout, "no anomaly") || !strings.Contains(stderr, "3 replicas over one store") {
			t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		for _, f := range []string{"replica-crash", "store-partition", "store-lost-reply"} {
			if !regexp.MustCompile(`(?m)^.*` + f + `.*$`).MatchString(stdout) {
				t.Errorf("%s is not in the timeline\nstdout:\n%s", f, stdout)
			}
		}
	})
	for _, m := range sutids.ReplicaMutants() {
		t.Run(m.Name, func(t *testing.T) {
			code, stdout, stderr := chaos(t, "3", m.Name, "storm", "2s")
			if code != exitFailed || !strings.Contains(stdout, "- "+m.Breaks) {
				t.Errorf("three replicas: exit %d, want 1 with %s named\nstdout:\n%.3000s\nstderr:\n%s", code, m.Breaks, stdout, stderr)
			}
			code, stdout, stderr = chaos(t, "1", m.Name, "storm,crash", "2s")
			if code != exitOK || !strings.Contains(stdout, "no anomaly") {
				t.Errorf("one replica: exit %d, want 0 and no anomaly\nstdout:\n%.3000s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}
