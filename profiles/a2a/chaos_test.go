package a2a

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
	suta2a "github.com/idscheck/idscheck/sut/a2a"
)

// chaosQueue serves the bundled queue in-process on 127.0.0.1 with its
// scheduler on, at time scale 1000 (a pass every 60 ms, leases stale
// after 300 ms).
func chaosQueue(t *testing.T, mutant string) (string, string) {
	t.Helper()
	sched, err := bundledScheduler(1000)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := suta2a.Open(t.Context(), suta2a.Config{DBPath: filepath.Join(t.TempDir(), "a2a.db"), APIKey: "chaos-key", Scheduler: sched, Mutant: mutant})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs.URL, "chaos-key"
}

// runChaosQueue runs the workload for d with storms against the queue.
func runChaosQueue(t *testing.T, mutant string, d time.Duration) (*WorkloadResult, checker.Report) {
	t.Helper()
	base, key := chaosQueue(t, mutant)
	storm := faults.Select(faults.All(faults.Config{StormDo: func(context.Context, int) {}}), []string{"storm"})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	res, err := RunWorkload(ctx, WorkloadConfig{BaseURL: base, APIKey: key, Seed: 3, Duration: d, Workers: 8, TimeScale: 1000,
		Faults: storm, StormMin: 20, StormMax: 40})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Drained {
		t.Fatal("the drain did not end in time")
	}
	return res, Check(res.History, res.Ledger, res.Record, CheckOptions{})
}

// TestChaosWorkloadBundledQueue: the bundled queue under the workload
// (abandoned leases requeued by the gate and the scheduler, storms,
// duplicate enqueues, cache replays): no anomaly, the gate requeued (the
// third sender's first task, idempotent with a key, is abandoned; the
// drain ends only once a gate pass over stale leases requeues nothing),
// and the record read back judges the same.
func TestChaosWorkloadBundledQueue(t *testing.T) {
	res, rep := runChaosQueue(t, "", 2*time.Second)
	if rep.Verdict() != "PASS" || len(rep.Anomalies) > 0 {
		t.Fatalf("verdict %s, anomalies %+v, detail %+v", rep.Verdict(), rep.Anomalies, rep.Detail)
	}
	d := rep.Detail.(*CheckDetail)
	if d.Requeued == 0 || d.Abandoned == 0 || rep.Queue.Attempted == 0 || rep.Queue.Effected == 0 {
		t.Fatalf("the run exercised too little: %+v, %+v", d, rep.Queue)
	}
	var b bytes.Buffer
	if err := WriteRecord(&b, res.Record); err != nil {
		t.Fatal(err)
	}
	rec, err := ReadRecord(&b)
	if err != nil {
		t.Fatal(err)
	}
	if again := Check(res.History, res.Ledger, rec, CheckOptions{}); again.Verdict() != rep.Verdict() || len(again.Models) != 5 {
		t.Fatalf("re-judged: %s, %d models", again.Verdict(), len(again.Models))
	}
}

// TestChaosWorkloadCatchesUnsafeRequeued: under unsafe-requeued the gate
// requeues the first sender's first task (unsafe with a key, abandoned by
// its receiver, certainly stale when the drain's gate pass runs): it is
// leased and executed again, named by A2A-CLASS-unsafe-not-requeued with
// its auto_requeue row.
func TestChaosWorkloadCatchesUnsafeRequeued(t *testing.T) {
	_, rep := runChaosQueue(t, suta2a.MutantUnsafeRequeued, time.Second)
	if rep.Counts[RuleUnsafeNotRequeued] == 0 {
		t.Fatalf("no %s: counts %v", RuleUnsafeNotRequeued, rep.Counts)
	}
	for _, a := range rep.Anomalies {
		if string(a.Kind) == RuleUnsafeNotRequeued && strings.Contains(a.Explanation, "auto_requeue") && strings.Contains(a.Explanation, "executed") && strings.Contains(a.Explanation, "unsafe") {
			return
		}
	}
	t.Fatalf("no anomaly names the execution and its auto_requeue row: %+v", rep.Anomalies)
}
