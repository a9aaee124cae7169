package httpidem

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/failpoint"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/sink"
	suthttpidem "github.com/idscheck/idscheck/sut/httpidem"
	"github.com/idscheck/idscheck/verdict"

	"net/http/httptest"
)

// hiEnv is the bundled payments endpoint in-process behind a proxy, paying
// at a sink of its own.
type hiEnv struct {
	sink *sink.Sink
	net  *faults.Network
	ep   *Endpoint
	url  string
}

// hiTimeScale: a key lives 24 h / 20,000 = 4.3 s, as in the profile's runs.
const hiTimeScale = 20000

func startHI(t *testing.T, variant, mutant string, timeScale float64) *hiEnv {
	t.Helper()
	faults.SilenceToxiproxy()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	callers := []string{"tok_chaos_one", "tok_chaos_two"}
	srv, err := suthttpidem.Open(context.Background(), suthttpidem.Config{DBPath: filepath.Join(t.TempDir(), "payments.db"),
		SinkURL: s.URL(), Variant: variant, Callers: callers, TimeScale: timeScale, Mutant: mutant})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	network, err := faults.NewNetwork(strings.TrimPrefix(hs.URL, "http://"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { network.Close() })
	return &hiEnv{sink: s, net: network, ep: BundledEndpoint(variant, callers), url: network.URL()}
}

func runHI(t *testing.T, e *hiEnv, seed uint64, d time.Duration, timeScale float64, fs []faults.Fault) (*WorkloadResult, checker.Report) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := RunWorkload(ctx, WorkloadConfig{BaseURL: e.url, Endpoint: *e.ep, Sink: e.sink, Seed: seed, Duration: d,
		Workers: 8, TimeScale: timeScale, Faults: fs, StormMin: 200, StormMax: 220, RequestTimeout: 500 * time.Millisecond,
		DrainTimeout:    10 * time.Second,
		ScheduleOptions: faults.ScheduleOptions{MinHold: 100 * time.Millisecond, MaxHold: 300 * time.Millisecond, MinGap: 50 * time.Millisecond, MaxGap: 150 * time.Millisecond}})
	if err != nil {
		t.Fatalf("RunWorkload: %v", err)
	}
	return res, Check(res.History, res.Ledger, res.Record, CheckOptions{Undrained: !res.Drained})
}

func hiMustPass(t *testing.T, res *WorkloadResult, rep checker.Report) {
	t.Helper()
	if rep.Verdict() != verdict.Pass {
		for _, a := range rep.Anomalies {
			t.Errorf("%s %s: %s", a.Kind, a.Key, a.Explanation)
		}
		t.Fatalf("verdict %s (drained %t), models %+v", rep.Verdict(), res.Drained, rep.Models)
	}
}

// TestHTTPIdemBundledUnderFaultsHasNoAnomaly: the bundled endpoint under
// each variant through lost responses, resets, partitions and storms of
// 200 identical requests: one creation and one effect per request answered
// 2xx, one result per caller and key. Every delivery is recorded, every
// effect attributed to the request that caused it (the same key from two
// callers included), and each injected fault shows in the timeline.
func TestHTTPIdemBundledUnderFaultsHasNoAnomaly(t *testing.T) {
	for _, variant := range Variants() {
		t.Run(variant, func(t *testing.T) {
			e := startHI(t, variant, "", hiTimeScale)
			fs := []faults.Fault{&faults.LostResponse{Network: e.net}, &faults.ResetPeer{Network: e.net}, &faults.Partition{Network: e.net},
				&faults.DuplicateStorm{Min: 2, Max: 3, Do: func(context.Context, int) {}}}
			res, rep := runHI(t, e, 3, 2*time.Second, hiTimeScale, fs)
			hiMustPass(t, res, rep)
			if res.Storms == 0 || res.Answered == 0 || len(res.History.Ops) < res.Requests+200 {
				t.Fatalf("%d storms, %d of %d requests answered 2xx, %d deliveries", res.Storms, res.Answered, res.Requests, len(res.History.Ops))
			}
			if rep.Queue.Attempted != res.Requests || rep.Queue.Fulfilled != res.Answered || rep.Queue.Effected < res.Answered {
				t.Errorf("queue %+v, result %d/%d", rep.Queue, res.Answered, res.Requests)
			}
			shared, names := 0, map[string]bool{}
			byKey := map[string]int{}
			for _, r := range res.Record.Requests {
				names[r.Key] = true
				byKey[r.IdempotencyKey]++
			}
			for _, n := range byKey {
				if n > 1 {
					shared++
				}
			}
			if shared == 0 {
				t.Error("no key was sent by both callers")
			}
			for _, eff := range res.Ledger.Effects {
				if !names[eff.Key] {
					t.Errorf("effect %s not attributed: key %q", eff.Intent, eff.Key)
				}
			}
			if len(res.Ledger.Effects) != rep.Queue.Effected {
				t.Errorf("%d effects for %d requests that took effect", len(res.Ledger.Effects), rep.Queue.Effected)
			}
			injected := map[string]bool{}
			for _, in := range res.Timeline {
				if in.Err == "" {
					injected[in.Fault] = true
				}
			}
			for _, f := range fs {
				if !injected[f.Name()] {
					t.Errorf("%s never injected: %+v", f.Name(), res.Timeline)
				}
			}
		})
	}
}

// TestHTTPIdemKeyWindowIsKept: keys that live 0.43 s (24 h at 200,000×):
// the workload delivers a request only in the first half of its key's
// life (a retry past its expiry MAY pay again, and judges nothing), and a
// correct endpoint shows no anomaly.
func TestHTTPIdemKeyWindowIsKept(t *testing.T) {
	const scale = 200000
	e := startHI(t, VariantIETF, "", scale)
	res, rep := runHI(t, e, 11, 2*time.Second, scale, nil)
	hiMustPass(t, res, rep)
	life := time.Duration(res.Record.KeyLifeNs)
	if res.Answered == 0 || life != 432*time.Millisecond {
		t.Fatalf("%d of %d requests answered 2xx, key life %v", res.Answered, res.Requests, life)
	}
	first, last := map[string]int64{}, map[string]int64{}
	for _, op := range res.History.Ops {
		if f, ok := first[op.Key]; !ok || op.Call < f {
			first[op.Key] = op.Call
		}
		last[op.Key] = max(last[op.Key], op.Call)
	}
	for k, f := range first {
		if d := time.Duration(last[k] - f); d >= life/2 {
			t.Errorf("%s delivered %v after its first delivery: past half its key's life", k, d)
		}
	}
}

// TestHTTPIdemExpiresEarlyIsCaught: keys forgotten after a tenth of their
// published life (stripe): a retry well within the life pays again.
func TestHTTPIdemExpiresEarlyIsCaught(t *testing.T) {
	e := startHI(t, VariantStripe, suthttpidem.MutantExpiresEarly, hiTimeScale)
	_, rep := runHI(t, e, 9, 2*time.Second, hiTimeScale, nil)
	hiMustFail(t, rep, RuleRetryStripe, ModelEffects, "created 2 things")
}

// hiMustFail asserts model fails, its anomalies naming rule.
func hiMustFail(t *testing.T, rep checker.Report, rule, model string, wants ...string) {
	t.Helper()
	if rep.Verdict() != verdict.Fail {
		t.Fatalf("verdict %s, want FAIL: %+v", rep.Verdict(), rep.Models)
	}
	for _, m := range rep.Models {
		if m.Model == model && m.Result != checker.LinIllegal {
			t.Errorf("model %s: %s, want %s", model, m.Result, checker.LinIllegal)
		}
	}
	var text []string
	for _, a := range rep.Anomalies {
		if string(a.Kind) != rule {
			t.Errorf("anomaly of %s: %s", a.Kind, a.Explanation)
		}
		if strings.Contains(a.Explanation, ": "+model+": ") {
			text = append(text, a.Explanation)
		}
	}
	if len(text) == 0 {
		t.Fatalf("no anomaly of %s among %d", model, len(rep.Anomalies))
	}
	all := strings.Join(text, "\n")
	for _, w := range wants {
		if !strings.Contains(all, w) {
			t.Errorf("the anomalies of %s lack %q:\n%s", model, w, all)
		}
	}
}

// TestHTTPIdemNoReservationIsCaught: without an atomic reservation, the
// storm's identical requests each pay (the racy window widened by its
// failpoint): a second creation at the count read and at the sink, and
// 2xx answers of one key with different ids.
func TestHTTPIdemNoReservationIsCaught(t *testing.T) {
	enableFailpoint(t, suthttpidem.FailpointNoReservationRacyWindow, `return("barrier")`)
	e := startHI(t, VariantIETF, suthttpidem.MutantNoReservation, hiTimeScale)
	_, rep := runHI(t, e, 5, 1500*time.Millisecond, hiTimeScale, []faults.Fault{&faults.DuplicateStorm{Min: 2, Max: 3, Do: func(context.Context, int) {}}})
	hiMustFail(t, rep, RuleRetryIETF, ModelEffects, "things (pay_", "times at the sink")
	hiMustFail(t, rep, RuleRetryIETF, ModelReplay, "two 2xx answers carry different results")
}

// TestHTTPIdemEffectOnReplayIsCaught: a replay that calls the processor
// again (one payment, a second effect) under t0: the sink shows it.
func TestHTTPIdemEffectOnReplayIsCaught(t *testing.T) {
	e := startHI(t, VariantT0, suthttpidem.MutantEffectOnReplay, hiTimeScale)
	_, rep := runHI(t, e, 6, time.Second, hiTimeScale, nil)
	hiMustFail(t, rep, RuleRetryT0, ModelEffects, "times at the sink")
	for _, m := range rep.Models {
		if m.Model == ModelReplay && m.Result != checker.LinOk {
			t.Errorf("replay %s: the answers carry the one payment", m.Result)
		}
	}
}

// TestHTTPIdemFreshReplayIDIsCaught: a replay that renders the payment
// with a freshly drawn id: one payment, one effect, two results.
func TestHTTPIdemFreshReplayIDIsCaught(t *testing.T) {
	e := startHI(t, VariantIETF, suthttpidem.MutantReplayFreshID, hiTimeScale)
	_, rep := runHI(t, e, 7, time.Second, hiTimeScale, nil)
	hiMustFail(t, rep, RuleRetryIETF, ModelReplay, "two 2xx answers carry different results")
	for _, m := range rep.Models {
		if m.Model == ModelEffects && m.Result != checker.LinOk {
			t.Errorf("effects %s: one payment each", m.Result)
		}
	}
}

// TestHTTPIdemWithoutSink: a target that calls no sink of the harness is
// judged by its count read alone.
func TestHTTPIdemWithoutSink(t *testing.T) {
	e := startHI(t, VariantStripe, "", hiTimeScale)
	e.sink = nil
	res, rep := runHI(t, e, 8, time.Second, hiTimeScale, nil)
	hiMustPass(t, res, rep)
	if res.Record.Sink || len(res.Ledger.Effects) != 0 || !res.Record.Count {
		t.Fatalf("record %+v, %d effects", res.Record.Sink, len(res.Ledger.Effects))
	}
}

// enableFailpoint arms a failpoint of the bundled server for the test.
func enableFailpoint(t *testing.T, path, term string) {
	t.Helper()
	if err := failpoint.Enable(path, term); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Disable(path) })
}

// TestWorkloadKeysAreTheRunsOwn: two runs of one seed against one live
// endpoint draw their keys in the published format (key_spec) and their
// unique values with the run's own nonce mixed in: they share no key, and
// the second is judged clean (it meets none of the first's state). They
// used to share hundreds (the key_spec keys carried no run randomness).
func TestWorkloadKeysAreTheRunsOwn(t *testing.T) {
	if testing.Short() {
		t.Skip("two chaos runs")
	}
	e := startHI(t, VariantIETF, "", hiTimeScale)
	keys := func(runID string) (map[string]bool, checker.Report, *WorkloadResult) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := RunWorkload(ctx, WorkloadConfig{BaseURL: e.url, Endpoint: *e.ep, Sink: e.sink, Seed: 31, RunID: runID, Duration: 1500 * time.Millisecond,
			Workers: 8, TimeScale: hiTimeScale, StormMin: 200, StormMax: 210, RequestTimeout: 500 * time.Millisecond, DrainTimeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("RunWorkload: %v", err)
		}
		out := map[string]bool{}
		for _, r := range res.Record.Requests {
			out[r.IdempotencyKey] = true
		}
		return out, Check(res.History, res.Ledger, res.Record, CheckOptions{Undrained: !res.Drained}), res
	}
	a, _, _ := keys("runone")
	b, rep, res := keys("runtwo")
	shared := 0
	for k := range b {
		if a[k] {
			shared++
		}
	}
	if len(a) == 0 || len(b) == 0 || shared > 0 {
		t.Fatalf("two runs of one seed: %d and %d keys, %d shared", len(a), len(b), shared)
	}
	hiMustPass(t, res, rep)
}
