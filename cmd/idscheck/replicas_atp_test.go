package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
	sutatp "github.com/idscheck/idscheck/sut/atp"
)

// TestRunATPReplicas: run --profile atp --replicas 3 --store postgres://…
// starts three replicas of the bundled ATP site as children over one
// store, the scenarios spread each logical request's deliveries over
// them, and the suite passes (exit 0); the store's password is in no
// output.
func TestRunATPReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas over PostgreSQL: skipped in -short")
	}
	pgtest.Shared(t)
	t.Parallel() // after the sequential tests; runCLI runs one suite at a time
	code, stdout, stderr := runOnReplicas(t, "--profile", "atp", "--seed", "1")
	if code != exitOK {
		t.Fatalf("exit %d, want 0 on three replicas\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestChaosATPReplicas: chaos --profile atp over the bundled site on
// PostgreSQL. Three replicas of the correct site, a proxy between each
// and the store, through a replica's crash, a store partition, the
// store's lost replies, storms and the rail's lost replies: no anomaly.
// Each replica mutant on three replicas: caught (exit 1), the double
// charge named by its rule; the same mutant on one replica over the same
// kind of store: no anomaly (replicas, not luck, find it).
//
// How many times the racing replicas charge one intent depends on how
// many of the storm's deliveries won the race: two or more is the catch.
func TestChaosATPReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas and crashes them: skipped in -short")
	}
	pgtest.Shared(t)
	t.Parallel() // after the sequential tests, beside the other replica chaos tests (TestMain sets testBinaryIsCLI for the children)
	chaos := func(t *testing.T, replicas, mutant, faults string, extra ...string) (int, string, string) {
		duration := "3s"
		if mutant != "" {
			duration = "2s"
		}
		args := []string{"chaos", "--profile", "atp", "--duration", duration, "--workers", "8", "--seed", "3",
			"--faults", faults, "--replicas", replicas, "--store", pgtest.Database(t), "--out", filepath.Join(t.TempDir(), "run")}
		if mutant != "" {
			args = append(args, "--mutant", mutant)
		}
		code, stdout, stderr := chaosInProcess(t, append(args, extra...)...)
		t.Logf("chaos --replicas %s --mutant %q --faults %s: exit %d\n%s", replicas, mutant, faults, code, stdout)
		return code, stdout, stderr
	}
	t.Run("correct on three", func(t *testing.T) {
		// --store local: the cluster idscheck starts, the one store-restart restarts.
		dir := filepath.Join(t.TempDir(), "run")
		faults := "replica-crash,store-partition,store-lost-reply,store-restart,storm,rail-lost-replies"
		code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "atp", "--duration", "3s", "--workers", "8", "--seed", "3",
			"--faults", faults, "--replicas", "3", "--store", "local", "--store-proxy", "--out", dir)
		t.Logf("chaos --replicas 3 --faults %s: exit %d\n%s", faults, code, stdout)
		if code != exitOK || !strings.Contains(stdout, "no anomaly") || !strings.Contains(stderr, "3 replicas over one store") {
			t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		run := readChaosRun(t, dir)
		for _, c := range run.Coverage {
			if !c.OK() {
				t.Errorf("%s was not injected: %s", c.Fault, c)
			}
		}
		if len(run.Coverage) != 6 {
			t.Errorf("%d faults covered, want 6", len(run.Coverage))
		}
	})
	for _, m := range sutatp.ReplicaMutants() {
		t.Run(m.Name, func(t *testing.T) {
			code, stdout, stderr := catchRace(t, func() (int, string, string) { return chaos(t, "3", m.Name, "storm") })
			if code != exitFailed || !strings.Contains(stdout, "- "+m.Breaks+" ") || !doubleCharge.MatchString(stdout) {
				t.Errorf("three replicas: exit %d, want 1 with the double charge named\nstdout:\n%.3000s\nstderr:\n%s", code, stdout, stderr)
			}
			code, stdout, stderr = chaos(t, "1", m.Name, "storm,crash")
			if code != exitOK || !strings.Contains(stdout, "no anomaly") {
				t.Errorf("one replica: exit %d, want 0 and no anomaly\nstdout:\n%.3000s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}

// doubleCharge: an intent charged two or more times, as the ATP check
// words it ("charged 3 times at the rail").
var doubleCharge = regexp.MustCompile(`charged ([2-9]|[1-9][0-9]+) times at the rail`)
