package intent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/verdict"
)

// TestChaosWorkloadRunsAndRecordsItsOptions: the workload behind
// harness.ChaosWorkload runs against the bundled server, records the
// options its check runs under, and its check passes the clean run.
func TestChaosWorkloadRunsAndRecordsItsOptions(t *testing.T) {
	url, key := bundled(t, "")
	w := Chaos()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := w.Run(ctx, harness.ChaosConfig{BaseURL: url, APIKey: key, Seed: 7, Duration: 2 * time.Second,
		Workers: 4, StormMax: 10, TimeScale: timeScale, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(res.History.Ops) == 0 || len(res.Ledger.Effects) == 0 || res.Summary == "" || len(res.Series) == 0 {
		t.Fatalf("run recorded %d ops, %d effects, summary %q, %d buckets", len(res.History.Ops), len(res.Ledger.Effects), res.Summary, len(res.Series))
	}
	var opts Options
	if err := json.Unmarshal(res.Files[ChaosOptionsFile], &opts); err != nil {
		t.Fatalf("%s: %v", ChaosOptionsFile, err)
	}
	want := ChaosCheckOptions()
	want.Undrained = !res.Drained
	if opts != want {
		t.Errorf("recorded options %+v, want %+v", opts, want)
	}
	rep := w.Check(harness.ChaosRecord{History: res.History, Ledger: res.Ledger, Files: res.Files, Undrained: !res.Drained})
	if v := rep.Verdict(); v != verdict.Pass && !(v == verdict.Unknown && !res.Drained) {
		t.Errorf("clean run: verdict %s: %+v", v, rep.Anomalies)
	}
}

// TestChaosWorkloadCheckJudgesUnderTheRecordedOptions: a run re-checked
// offline is judged under the options it recorded, else under
// ChaosCheckOptions, and an undrained run's open work is pending.
func TestChaosWorkloadCheckJudgesUnderTheRecordedOptions(t *testing.T) {
	dir := filepath.Join(savedDir, "dead-counts-as-lost-when-promised")
	h, l, err := checker.Load(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	check := Chaos().Check
	promised, _ := json.Marshal(Options{DeadIsLost: true})
	if rep := check(harness.ChaosRecord{History: h, Ledger: l, Files: map[string][]byte{ChaosOptionsFile: promised}}); rep.Verdict() != verdict.Fail || rep.Counts[checker.Lost] != 1 {
		t.Errorf("with dead_is_lost recorded: verdict %s, counts %v; want FAIL with one lost", rep.Verdict(), rep.Counts)
	}
	if rep := check(harness.ChaosRecord{History: h, Ledger: l}); rep.Counts[checker.Lost] != 0 {
		t.Errorf("under the workload's options (dead is not lost): counts %v, want none lost", rep.Counts)
	}
	rep := check(harness.ChaosRecord{History: h, Ledger: l, Undrained: true})
	if o, ok := rep.Options.(Options); !ok || !o.Undrained {
		t.Errorf("undrained record: options %+v, want Undrained", rep.Options)
	}
}

// TestFailpointTriggersNameFailpoints: every trigger drives the server to
// one of its failpoints.
func TestFailpointTriggersNameFailpoints(t *testing.T) {
	fps := Failpoints()
	trig := FailpointTriggers("http://127.0.0.1:1", "k", "a")
	if len(trig) == 0 {
		t.Fatal("no triggers")
	}
	for name := range trig {
		if _, ok := fps[name]; !ok {
			t.Errorf("trigger %s: no such failpoint (%v)", name, fps)
		}
	}
	if w := Chaos(); len(w.Failpoints) != len(fps) || w.Sink {
		t.Errorf("workload failpoints %v, sink %v", w.Failpoints, w.Sink)
	}
}
