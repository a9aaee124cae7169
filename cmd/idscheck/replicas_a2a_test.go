package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
	suta2a "github.com/idscheck/idscheck/sut/a2a"
)

// TestRunA2AReplicas: run --profile a2a --replicas 3 --store postgres://…
// starts three replicas of the bundled queue (each with its scheduler) as
// children over one store, the scenarios' calls go round them, and every
// testable rule is judged and passes (exit 0); the store's password is in
// no output.
func TestRunA2AReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas over PostgreSQL: skipped in -short")
	}
	pgtest.Shared(t)
	t.Parallel() // after the sequential tests; runCLI runs one suite at a time
	code, stdout, stderr := runOnReplicas(t, "--profile", "a2a", "--seed", "1")
	judged := regexp.MustCompile(`judged (\d+) of (\d+) testable rules`).FindStringSubmatch(stdout)
	if code != exitOK || judged == nil || judged[1] != judged[2] || judged[1] == "0" {
		t.Fatalf("exit %d, want 0 on three replicas, every testable rule judged\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestChaosA2AReplicas: chaos --profile a2a over three replicas of the
// bundled queue on PostgreSQL, each with its scheduler, a proxy between
// each and the store. The correct queue through replica crashes, its
// failpoint after a lease commit, the store cut from one replica and its
// replies lost to another, storms and lost responses: no anomaly, every
// fault injected. Each replica mutant on three replicas: caught (exit 1),
// named by the rule it breaks; on one replica over the same kind of store,
// through a crash: no anomaly (replicas, not luck, find it).
func TestChaosA2AReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas and crashes them: skipped in -short")
	}
	pgtest.Shared(t)
	t.Parallel() // after the sequential tests, beside the other replica chaos tests (TestMain sets testBinaryIsCLI for the children)
	chaos := func(t *testing.T, dir, replicas, mutant, faults, duration string, extra ...string) (int, string, string) {
		args := []string{"chaos", "--profile", "a2a", "--duration", duration, "--workers", "8", "--seed", "5", "--time-scale", "1000",
			"--faults", faults, "--replicas", replicas, "--store", pgtest.Database(t), "--out", dir}
		if mutant != "" {
			args = append(args, "--mutant", mutant)
		}
		code, stdout, stderr := chaosInProcess(t, append(args, extra...)...)
		logSummary(t, stdout)
		return code, stdout, stderr
	}
	t.Run("correct on three through store faults", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "run")
		faults := "replica-crash,store-partition,store-lost-reply,failpoint,storm,lost_response"
		code, stdout, stderr := chaos(t, dir, "3", "", faults, "4s", "--store-proxy")
		if code == exitFailed && strings.Contains(stdout, "- A2A-INTRO-explicit-lease ") && !knownA2ALeaseBugOnly(stdout) {
			t.Fatalf("exit %d: anomalies besides the known lease bug\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if code == exitFailed && knownA2ALeaseBugOnly(stdout) {
			// KNOWN BUG of the bundled a2a server, open (issue 29's closing
			// note): through store faults on three replicas, a task is now
			// and then leased twice at attempt 1 with no requeue on record.
			t.Skipf("KNOWN BUG (bundled a2a server: a lease that did not hold through a store fault), not yet fixed:\n%s", stdout)
		}
		if code != exitOK || !strings.Contains(stdout, "no anomaly") || !strings.Contains(stderr, "3 replicas over one store") {
			t.Fatalf("exit %d, want 0 and no anomaly on three replicas\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		run := readChaosRun(t, dir)
		if len(run.Coverage) != 6 {
			t.Fatalf("%d faults covered, want 6: %+v", len(run.Coverage), run.Coverage)
		}
		for _, c := range run.Coverage {
			if !c.OK() {
				t.Errorf("%s was not injected: %s", c.Fault, c)
			}
		}
		for _, want := range []string{"model a2a-executions Ok", "model a2a-requeues Ok", "model a2a-effects  Ok", "automated requeue(s)"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, stdout)
			}
		}
	})
	t.Run("correct on three through a store restart", func(t *testing.T) {
		// --store local: the cluster idscheck starts, the one it restarts.
		dir := filepath.Join(t.TempDir(), "run")
		code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "a2a", "--duration", "4s", "--workers", "8", "--seed", "5", "--time-scale", "1000",
			"--faults", "store-restart,storm", "--replicas", "3", "--store", "local", "--store-proxy", "--out", dir)
		logSummary(t, stdout)
		if code != exitOK || !strings.Contains(stdout, "no anomaly") {
			t.Fatalf("exit %d, want 0 and no anomaly through a store restart\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if c := coverageOf(t, readChaosRun(t, dir), "store-restart"); !c.OK() {
			t.Errorf("store-restart was not injected: %s", c)
		}
	})
	for _, m := range suta2a.ReplicaMutants() {
		t.Run(m.Name, func(t *testing.T) {
			code, stdout, stderr := catchRace(t, func() (int, string, string) {
				return chaos(t, filepath.Join(t.TempDir(), "three"), "3", m.Name, "storm", "3s")
			})
			if code != exitFailed || !strings.Contains(stdout, "- "+m.Breaks+" t-") {
				t.Errorf("three replicas: exit %d, want 1 with %s named\nstdout:\n%.3000s\nstderr:\n%s", code, m.Breaks, stdout, stderr)
			}
			code, stdout, stderr = chaos(t, filepath.Join(t.TempDir(), "one"), "1", m.Name, "storm,crash", "3s")
			if code != exitOK || !strings.Contains(stdout, "no anomaly") {
				t.Errorf("one replica: exit %d, want 0 and no anomaly\nstdout:\n%.3000s\nstderr:\n%s", code, stdout, stderr)
			}
		})
	}
}

// logSummary logs a chaos run's figures (go test -v shows them).
func logSummary(t *testing.T, stdout string) {
	t.Helper()
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "chaos: ") && strings.Contains(l, "operations") || strings.HasPrefix(l, "tasks: ") || strings.HasPrefix(l, "no anomaly") ||
			strings.Contains(l, " anomal") && !strings.HasPrefix(l, "- ") {
			t.Log(l)
		}
	}
}

// knownA2ALeaseBugOnly: every anomaly of stdout is the known lease bug's
// pair (A2A-INTRO-explicit-lease and A2A-GATE-attempt-counter).
func knownA2ALeaseBugOnly(stdout string) bool {
	n := 0
	for _, line := range strings.Split(stdout, "\n") {
		l := strings.TrimSpace(line)
		if !strings.HasPrefix(l, "- A2A-") {
			continue
		}
		n++
		if !strings.HasPrefix(l, "- A2A-INTRO-explicit-lease ") && !strings.HasPrefix(l, "- A2A-GATE-attempt-counter ") {
			return false
		}
	}
	return n > 0
}
