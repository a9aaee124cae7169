package a2a

import (
	"bytes"
	"context"
	"fmt"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	suta2a "github.com/idscheck/idscheck/sut/a2a"
)

// Chaos is the a2a profile's chaos workload (RunWorkload): senders
// enqueue tasks of every class, receivers lease them, execute them at the
// effect sink and post results, some abandon their task after the work
// (stale leases), the operator runs the retry gate enabled with its bounds
// and repairs by hand, beside the queue's own scheduler; enqueues are
// duplicated and stormed. Judged by Check: no task that is not idempotent
// with a key executed again by automation (A2A-CLASS-unsafe-not-requeued
// and its kin), every automated requeue with its auto_requeue row, attempt
// counters that only grow, one effect per idempotency key, cache replays
// that execute nothing, no new task id on a retry. The bundled queue
// crashes at its failpoint after a lease commit.
func Chaos() *harness.ChaosWorkload {
	fps := map[string]string{}
	for _, p := range suta2a.Failpoints() {
		fps[p] = `return("exit")`
	}
	return &harness.ChaosWorkload{
		Summary:    "senders enqueue idempotent, unsafe and keyless tasks (duplicated, stormed), receivers lease, execute at the effect sink and post results or abandon them, the operator runs the retry gate enabled and repairs by hand beside the queue's scheduler",
		StormMin:   50,
		StormMax:   200,
		Failpoints: fps,
		Tally:      Tally,
		Columns:    chaos.Columns{Units: chaos.Column{Name: "tasks", Means: "tasks made"}, Effects: chaos.Column{Name: "effects", Means: "executions at the effect sink, duplicates included"}},
		Run:        runChaos,
		Check:      checkChaos,
	}
}

func runChaos(ctx context.Context, c harness.ChaosConfig) (*harness.ChaosResult, error) {
	res, err := RunWorkload(ctx, WorkloadConfig{BaseURL: c.BaseURL, Replicas: c.Replicas, APIKey: c.APIKey, Sink: c.Sink, Seed: c.Seed, RunID: c.RunID,
		Duration: c.Duration, Workers: c.Workers, TimeScale: c.TimeScale, Faults: c.Faults, StormMin: 50,
		StormMax: max(50, c.StormMax), RequestTimeout: c.Timeout, Recorder: c.Recorder, Logger: c.Logger, Progress: c.Progress})
	if res == nil {
		return nil, err
	}
	var rec bytes.Buffer
	if werr := WriteRecord(&rec, res.Record); werr != nil {
		return nil, werr
	}
	classes := map[string]int{}
	for _, t := range res.Record.Tasks {
		classes[t.Class]++
	}
	return &harness.ChaosResult{Start: res.Start, End: res.End, Namespace: "a2a", Schedule: res.Schedule, Timeline: res.Timeline,
		History: res.History, Ledger: res.Ledger, Series: res.Series, Drained: res.Drained,
		Files: map[string][]byte{RecordFile: rec.Bytes()},
		Summary: fmt.Sprintf("%d tasks (%d idempotent with a key, %d under an earlier task's cache key, %d unsafe with a key, %d unsafe without, %d without metadata, %d idempotent without a key), %d gate calls, %d storms, min lease age %d ms",
			len(res.Record.Tasks), classes[ClassIdempotent], classes[ClassCacheHit], classes[ClassUnsafeKey], classes[ClassUnsafe], classes[ClassNoMeta], classes[ClassIdemNoKey],
			len(res.Record.Reports), res.Storms, res.Record.MinLeaseAgeMS)}, err
}

func checkChaos(r harness.ChaosRecord) checker.Report {
	rec, err := ReadRecord(bytes.NewReader(r.Files[RecordFile]))
	if err != nil {
		var unknown []checker.ModelCheck
		for _, m := range []string{ModelExecutions, ModelRequeues, ModelAttempts, ModelTaskIDs, ModelEffects} {
			unknown = append(unknown, checker.ModelCheck{Model: m, Result: checker.LinUnknown})
		}
		return checker.Report{Ops: len(r.History.Ops), Effects: len(r.Ledger.Effects), Counts: map[checker.AnomalyKind]int{}, Models: unknown}
	}
	return Check(r.History, r.Ledger, rec, CheckOptions{})
}

// serveChild is the bundled queue as chaos starts it: its API key drawn
// for the run, and its scheduler turned on with Covenant's defaults (the
// serve command divides the durations by the time scale).
func serveChild(secret func() string, _ any) harness.ServeChild {
	key := secret()
	return harness.ServeChild{Env: []string{APIKeyEnv + "=" + key, "COVENANT_A2A_AUTO_RETRY_SCHEDULER=1"},
		Target: features.Target{APIKey: key}, Secrets: []string{key}}
}
