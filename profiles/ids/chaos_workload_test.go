package ids_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/profiles/ids"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/verdict"
)

type idsEnv struct {
	sink    *sink.Sink
	sinkNet *chaos.SinkProxy
	net     *faults.Network
	fake    *fakeIDS
	url     string
}

// startIDS starts a sink behind a proxy, the fake target calling the
// proxy, and a proxy in front of the target.
func startIDS(t *testing.T, mutant string) *idsEnv {
	t.Helper()
	faults.SilenceToxiproxy()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sinkNet, err := chaos.NewSinkProxy("", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sinkNet.Close() })
	fake, hs := newFakeIDS(sinkNet.URL(), mutant)
	t.Cleanup(func() { hs.Close(); fake.close() })
	network, err := faults.NewNetwork(strings.TrimPrefix(hs.URL, "http://"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { network.Close() })
	return &idsEnv{sink: s, sinkNet: sinkNet, net: network, fake: fake, url: network.URL()}
}

func runIDS(t *testing.T, e *idsEnv, seed uint64, d time.Duration, fs []faults.Fault) (*ids.IDSResult, checker.Report) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := ids.RunIDS(ctx, ids.IDSConfig{BaseURL: e.url, Sink: e.sink, Seed: seed, Duration: d, Workers: 8,
		TimeScale: 60, Faults: fs, StormMin: 200, StormMax: 220, RequestTimeout: 500 * time.Millisecond, DrainTimeout: 10 * time.Second,
		ScheduleOptions: faults.ScheduleOptions{MinHold: 100 * time.Millisecond, MaxHold: 300 * time.Millisecond, MinGap: 50 * time.Millisecond, MaxGap: 150 * time.Millisecond}})
	if err != nil {
		t.Fatalf("RunIDS: %v", err)
	}
	return res, ids.CheckIDS(res.History, res.Ledger, res.Keys, ids.IDSOptions{Undrained: !res.Drained})
}

// TestIDSCleanTargetUnderFaultsHasNoAnomaly: a correct target under lost
// responses, resets, partitions, sink partitions, lost sink replies and
// storms of 200 identical envelopes: every key one outcome, one effect at
// most, evidence that agrees.
func TestIDSCleanTargetUnderFaultsHasNoAnomaly(t *testing.T) {
	e := startIDS(t, "")
	fs := append([]faults.Fault{
		&faults.LostResponse{Network: e.net}, &faults.ResetPeer{Network: e.net}, &faults.Partition{Network: e.net},
		&faults.DuplicateStorm{Min: 2, Max: 3, Do: func(context.Context, int) {}},
	}, chaos.SinkFaults(e.sinkNet, e.sink)...)
	res, rep := runIDS(t, e, 3, 3*time.Second, fs)
	if rep.Verdict() != verdict.Pass {
		for _, a := range rep.Anomalies {
			t.Errorf("%s %s: %s", a.Kind, a.Key, a.Explanation)
		}
		t.Fatalf("verdict %s (drained %t), models %+v", rep.Verdict(), res.Drained, rep.Models)
	}
	injected := map[string]bool{}
	for _, in := range res.Timeline {
		if in.Err == "" && in.Params[faults.ParamFired] != "false" {
			injected[in.Fault] = true
		}
	}
	for _, f := range fs {
		if !injected[f.Name()] {
			t.Errorf("%s never injected: timeline %v", f.Name(), res.Timeline)
		}
	}
	storm := 0
	for _, in := range res.Timeline {
		if in.Fault == "storm" && in.Params["n"] >= "200" {
			storm++
		}
	}
	if storm == 0 {
		t.Error("no storm of 200 or more")
	}
	q := rep.Queue
	if q.Attempted < 20 || q.Effected < 5 || len(res.Keys) != q.Attempted {
		t.Errorf("too little work: %+v, %d keys", q, len(res.Keys))
	}
	kinds := map[checker.OpKind]int{}
	for _, op := range res.History.Ops {
		kinds[op.Kind]++
		if op.Kind == checker.OpPublish && (!strings.Contains(op.Key, "/") || op.KeyID == "") {
			t.Fatalf("publish without tenant/key and tenant: %+v", op)
		}
	}
	t.Logf("%d ops (%v), %d effects, %d keys, queue %+v, drained %t", len(res.History.Ops), kinds, len(res.Ledger.Effects), len(res.Keys), q, res.Drained)
}

// TestIDSMutantsAreCaught: a target that does not reserve the key, and one
// whose outbox dispatches twice, duplicate effects: IDS-V names them.
func TestIDSMutantsAreCaught(t *testing.T) {
	for _, m := range []string{"no-reservation", "outbox-double-dispatch"} {
		t.Run(m, func(t *testing.T) {
			e := startIDS(t, m)
			fs := []faults.Fault{&faults.DuplicateStorm{Min: 2, Max: 3, Do: func(context.Context, int) {}}}
			_, rep := runIDS(t, e, 5, 1500*time.Millisecond, fs)
			if rep.Verdict() != verdict.Fail || rep.Counts[ids.IDSEffects] == 0 {
				t.Fatalf("verdict %s, counts %v: want IDS-V duplicated effects", rep.Verdict(), rep.Counts)
			}
			for _, a := range rep.Anomalies {
				if a.Kind == ids.IDSEffects && (!strings.Contains(a.Explanation, "eff_") || len(a.Effects) < 2 || len(a.Ops) == 0) {
					t.Fatalf("the anomaly must name the effects and the operations: %+v", a)
				}
			}
		})
	}
}

// TestIDSReplayFormReadings: chaos honours the readings of replay-form
// (IDS §IX.A) as run does. A target that replays by reference passes with
// the reading declared and with none (the report says it followed the
// reference reading), and fails when it declared the outcome reading; one
// whose references name a new outcome_ref, or that follows neither reading
// throughout, fails whatever is declared.
func TestIDSReplayFormReadings(t *testing.T) {
	fs := []faults.Fault{&faults.DuplicateStorm{Min: 2, Max: 3, Do: func(context.Context, int) {}}}
	cases := []struct {
		mutant   string
		declared []string // readings to judge the same run under
		pass     []bool
		followed string // detail's reading with none declared
	}{
		{"", []string{"", "outcome", "reference"}, []bool{true, true, true}, "outcome"},
		{"replay-reference", []string{"", "reference", "outcome"}, []bool{true, true, false}, "reference"},
		{"replay-reference-fresh-ref", []string{"", "reference", "outcome"}, []bool{false, false, false}, ""},
		{"replay-mixed", []string{"", "reference", "outcome"}, []bool{false, false, false}, ""},
	}
	for _, c := range cases {
		t.Run("target "+c.mutant, func(t *testing.T) {
			e := startIDS(t, c.mutant)
			res, _ := runIDS(t, e, 7, 1500*time.Millisecond, fs)
			for i, form := range c.declared {
				rep := ids.CheckIDS(res.History, res.Ledger, res.Keys, ids.IDSOptions{Undrained: !res.Drained, ReplayForm: form})
				d := rep.Detail.(*ids.IDSDetail)
				pass := rep.Counts[ids.IDSOutcome] == 0
				if pass != c.pass[i] {
					for j, a := range rep.Anomalies {
						if j < 3 {
							t.Logf("%s %s: %s", a.Kind, a.Key, a.Explanation)
						}
					}
					t.Errorf("declared %q: IX.A anomalies %d, want pass=%t (detail %+v)", form, rep.Counts[ids.IDSOutcome], c.pass[i], d)
				}
				if form == "" && d.ReplayForm != c.followed {
					t.Errorf("none declared: followed %q, want %q (%s)", d.ReplayForm, c.followed, d.ReplayFormWhy)
				}
				if form != "" && (!d.ReplayFormDeclared || d.ReplayForm != form) {
					t.Errorf("declared %q: detail %+v", form, d)
				}
				for _, a := range rep.Anomalies {
					if a.Kind != ids.IDSOutcome {
						t.Errorf("declared %q: an anomaly of another rule: %s %s", form, a.Kind, a.Explanation)
					}
				}
			}
		})
	}
}
