package httpidem

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

const (
	hiKey1 = "caller1 k-shared"
	hiKey2 = "caller2 k-shared"
	hiKey3 = "caller1 k-invalid"
	hiKey4 = "caller1 k-lost"
)

// post is one delivery of key answered status (0: no answer) with id, from
// call to ret (ms).
func post(key string, client int, call, ret int64, status int, id string) checker.Operation {
	caller, _, _ := strings.Cut(key, " ")
	op := checker.Operation{ClientID: client, Kind: checker.OpPublish, Key: key, KeyID: caller, Input: checker.Input{Body: "u-" + key},
		Call: call * 1e6, Return: ret * 1e6, Outcome: verdict.OutcomeOK}
	op.Output = checker.Output{Status: status, ID: id, Body: "digest-" + id}
	switch {
	case status == 0:
		op.Outcome, op.Output = verdict.OutcomeUnknown, checker.Output{}
	case status >= 500:
		op.Outcome, op.Output.ID = verdict.OutcomeUnknown, ""
	case status >= 300:
		op.Output.ID = ""
	}
	return op
}

func hiReq(key string, created ...string) LogicalRequest {
	caller, k, _ := strings.Cut(key, " ")
	return LogicalRequest{Key: key, Caller: caller, IdempotencyKey: k, Unique: "u-" + key, CountStatus: 200, Created: created}
}

func hiEffect(key, id, cmd string) checker.Effect {
	return checker.Effect{Key: key, Intent: id, Worker: cmd, At: 1}
}

// hiClean is a run of four logical requests under ietf: one delivered
// through a lost answer, a 409 while in flight, its 201 and a replay; the
// same key from the second caller (its own payment); a body the endpoint
// rejects, refused twice; one whose every answer was lost and that
// happened all the same. One creation and one effect each for the three
// that happened.
func hiClean() (checker.History, checker.Ledger, Record) {
	h := checker.History{Ops: []checker.Operation{
		post(hiKey1, 1, 0, 10, 0, ""),
		post(hiKey1, 2, 2, 3, 409, ""),
		post(hiKey1, 1, 20, 21, 201, "pay_1"),
		post(hiKey1, 3, 30, 31, 201, "pay_1"),
		post(hiKey2, 4, 5, 6, 201, "pay_2"),
		post(hiKey2, 4, 7, 8, 502, ""),
		post(hiKey3, 5, 5, 6, 400, ""),
		post(hiKey3, 5, 9, 10, 400, ""),
		post(hiKey4, 6, 40, 50, 0, ""),
	}}
	l := checker.Ledger{Effects: []checker.Effect{hiEffect(hiKey1, "eff_1", "pay_1"), hiEffect(hiKey2, "eff_2", "pay_2"), hiEffect(hiKey4, "eff_4", "pay_4")}}
	inv := hiReq(hiKey3)
	inv.Invalid = true
	rec := Record{Variant: "ietf", Sink: true, Count: true, Requests: []LogicalRequest{
		hiReq(hiKey1, "pay_1"), hiReq(hiKey2, "pay_2"), inv, hiReq(hiKey4, "pay_4"),
	}}
	return h, l, rec
}

func TestHTTPIdemCleanRunPasses(t *testing.T) {
	h, l, rec := hiClean()
	rep := Check(h, l, rec, CheckOptions{})
	if v := rep.Verdict(); v != verdict.Pass {
		t.Fatalf("verdict %s, want PASS: %+v %+v", v, rep.Anomalies, rep.Models)
	}
	if len(rep.Models) != 2 || rep.Models[0].Model != ModelEffects || rep.Models[1].Model != ModelReplay {
		t.Fatalf("models %+v", rep.Models)
	}
	q := rep.Queue
	if q.Attempted != 4 || q.Acknowledged != 3 || q.Fulfilled != 2 || q.Effected != 3 || q.Recovered != 1 || q.Duplicated != 0 {
		t.Fatalf("queue %+v", q)
	}
}

// hiOnly asserts the run fails on model alone, every anomaly naming the
// variant's rule and the check, and returns the anomalies' text.
func hiOnly(t *testing.T, rep checker.Report, rule, model string) string {
	t.Helper()
	if rep.Verdict() != verdict.Fail {
		t.Fatalf("verdict %s, want FAIL: %+v", rep.Verdict(), rep.Models)
	}
	for _, m := range rep.Models {
		if want := m.Model == model; want != (m.Result == checker.LinIllegal) {
			t.Errorf("model %s: %s", m.Model, m.Result)
		}
	}
	var all []string
	for _, a := range rep.Anomalies {
		if string(a.Kind) != rule || !strings.HasPrefix(a.Explanation, rule+": "+model+": ") || a.Key == "" {
			t.Errorf("anomaly %s %q: want kind %s and the explanation to name %s", a.Kind, a.Explanation, rule, model)
		}
		all = append(all, a.Explanation)
	}
	if len(all) == 0 {
		t.Fatal("no anomaly")
	}
	return strings.Join(all, "\n")
}

func wantIn(t *testing.T, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%q lacks %q", text, w)
		}
	}
}

// A request the count read shows created twice (two payments under one
// key, its answers all the first): http-idem-effects fails alone, naming
// the request, its caller, its key and both ids.
func TestHTTPIdemEffectsFailsOnASecondCreation(t *testing.T) {
	h, l, rec := hiClean()
	rec.Requests[0].Created = []string{"pay_1", "pay_1b"}
	l.Effects = append(l.Effects, hiEffect(hiKey1, "eff_1b", "pay_1b"))
	rep := Check(h, l, rec, CheckOptions{})
	text := hiOnly(t, rep, RuleRetryIETF, ModelEffects)
	wantIn(t, text, `caller1 under key "k-shared"`, "created 2 things (pay_1, pay_1b)", "took effect 2 times at the sink (eff_1 (command_id pay_1), eff_1b (command_id pay_1b))")
	if rep.Queue.Duplicated != 1 {
		t.Errorf("queue %+v", rep.Queue)
	}
}

// A replay that calls the processor again (one payment, two effects):
// the sink alone shows it.
func TestHTTPIdemEffectsFailsOnAnEffectOfAReplay(t *testing.T) {
	h, l, rec := hiClean()
	l.Effects = append(l.Effects, hiEffect(hiKey1, "eff_1b", "pay_1"))
	rec.Variant = "t0"
	for i := range h.Ops {
		if h.Ops[i].Output.Status == 409 {
			h.Ops[i] = post(hiKey1, 2, 2, 3, 503, "")
		}
	}
	text := hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryT0, ModelEffects)
	wantIn(t, text, "took effect 2 times at the sink")
}

// A request answered 201 of which the count read lists nothing and the
// sink saw no effect: lost, unless the drain was cut short (then UNKNOWN).
func TestHTTPIdemEffectsFailsOnA2xxThatCreatedNothing(t *testing.T) {
	h, l, rec := hiClean()
	rec.Requests[1].Created = nil
	l.Effects = l.Effects[:1:1]
	l.Effects = append(l.Effects, hiEffect(hiKey4, "eff_4", "pay_4"))
	text := hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryIETF, ModelEffects)
	wantIn(t, text, "count read lists nothing it created", "its effect never reached the sink", "caller2")
	rep := Check(h, l, rec, CheckOptions{Undrained: true})
	if rep.Verdict() != verdict.Unknown || rep.Queue.Pending != 1 {
		t.Fatalf("undrained: verdict %s, queue %+v", rep.Verdict(), rep.Queue)
	}
}

// A request refused (a final 4xx, never a 2xx) that created something and
// took effect; an effect no request names.
func TestHTTPIdemEffectsFailsOnARefusedRequestThatHappenedAndAStrayEffect(t *testing.T) {
	h, l, rec := hiClean()
	rec.Requests[2].Created = []string{"pay_3"}
	l.Effects = append(l.Effects, hiEffect(hiKey3, "eff_3", "pay_3"), hiEffect("caller_x:nobody", "eff_9", "pay_9"))
	text := hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryIETF, ModelEffects)
	wantIn(t, text, "was refused (POST by client 5", "yet the count read lists pay_3", "yet took effect at the sink (eff_3",
		`under "caller_x:nobody" (eff_9 (command_id pay_9)), which no request of the run names`)
}

// Two 2xx answers of one (caller, key) with different ids: http-idem-replay
// fails alone (the count read saw one payment: the second answer is no
// replay of it).
func TestHTTPIdemReplayFailsOnAnotherID(t *testing.T) {
	h, l, rec := hiClean()
	h.Ops[3] = post(hiKey1, 3, 30, 31, 201, "pay_fresh")
	text := hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryIETF, ModelReplay)
	wantIn(t, text, `caller1 under key "k-shared"`, "two 2xx answers carry different results", "id pay_1", "id pay_fresh")
}

// A 409 (or any refusal) sent after the 201 had been answered: a retry
// after completion gets the result. Concurrent with it, it is fine.
func TestHTTPIdemReplayFailsOnAConflictAfterTheResult(t *testing.T) {
	h, l, rec := hiClean()
	h.Ops = append(h.Ops, post(hiKey1, 7, 25, 26, 409, ""))
	text := hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryIETF, ModelReplay)
	wantIn(t, text, "sent 4.0 ms after the result", "got 409 instead of that result")

	h, l, rec = hiClean()
	h.Ops = append(h.Ops, post(hiKey1, 7, 20, 26, 409, ""), post(hiKey1, 8, 21, 40, 0, ""), post(hiKey1, 9, 50, 51, 429, ""))
	if rep := Check(h, l, rec, CheckOptions{}); rep.Verdict() != verdict.Pass {
		t.Fatalf("a 409 concurrent with the 201, a lost answer and a 429 after it: %s %+v", rep.Verdict(), rep.Anomalies)
	}
}

// With stripe the same second id names stripe's rule.
func TestHTTPIdemNamesTheVariantsRule(t *testing.T) {
	h, l, rec := hiClean()
	rec.Variant = "stripe"
	h.Ops[3] = post(hiKey1, 3, 30, 31, 201, "pay_fresh")
	hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryStripe, ModelReplay)
	for variant, id := range map[string]string{"ietf": RuleRetryIETF, "t0": RuleRetryT0, "stripe": RuleRetryStripe, "": RuleRetryIETF} {
		if RetryRule(variant) != id {
			t.Errorf("variant %q: rule %s", variant, RetryRule(variant))
		}
		r, ok := spec.Lookup(id)
		want := variant
		if want == "" {
			want = VariantIETF
		}
		if !ok || r.Profile != Name || Variant(r) != want {
			t.Errorf("rule %s: not a rule of the %q variant (%+v)", id, variant, r)
		}
	}
}

// A run in which nothing was answered 2xx, or without a count read and a
// sink, or whose count reads went unanswered, judged nothing: UNKNOWN.
func TestHTTPIdemUndecided(t *testing.T) {
	h, l, rec := hiClean()
	var only []checker.Operation
	for _, op := range h.Ops {
		if !httpIdem2xx(&op) {
			only = append(only, op)
		}
	}
	if v := Check(checker.History{Ops: only}, l, rec, CheckOptions{}).Verdict(); v != verdict.Unknown {
		t.Errorf("no 2xx: %s", v)
	}
	rec.Sink, rec.Count = false, false
	if v := Check(h, l, rec, CheckOptions{}).Verdict(); v != verdict.Unknown {
		t.Errorf("neither count read nor sink: %s", v)
	}
	h, l, rec = hiClean()
	rec.Requests[0].CountStatus, rec.Requests[0].CountErr = 0, "connection refused"
	if v := Check(h, l, rec, CheckOptions{}).Verdict(); v != verdict.Unknown {
		t.Errorf("a count read unanswered: %s", v)
	}
}

// The record survives its file.
func TestHTTPIdemRecordRoundTrip(t *testing.T) {
	_, _, rec := hiClean()
	_, _, diff := hiDifference(9)
	diff.Total.AfterErr = "still changed"
	diff.Requests[0].Counted = 3
	for _, rec := range []Record{rec, diff} {
		var b bytes.Buffer
		if err := WriteRecord(&b, rec); err != nil {
			t.Fatal(err)
		}
		got, err := ReadRecord(&b)
		if err != nil || !reflect.DeepEqual(got, rec) {
			t.Fatalf("%v\n%+v\n%+v", err, got, rec)
		}
	}
	if _, err := ReadRecord(strings.NewReader(`{"requests":[{"caller":"x"}]}`)); err == nil {
		t.Error("a request without a key was read")
	}
}

// A storm of 300 concurrent deliveries of one key (one 201, its replays,
// 409s, lost answers) is decided at once, and one second id among them is
// found.
func TestHTTPIdemReplayStormIsFast(t *testing.T) {
	storm := func(bad bool) checker.History {
		var h checker.History
		for i := range 300 {
			status, id := []int{201, 409, 0, 201}[i%4], "pay_1"
			if bad && i == 156 {
				id = "pay_2"
			}
			h.Ops = append(h.Ops, post(hiKey1, i, int64(i%7), 200+int64(i%13), status, id))
		}
		return h
	}
	rec := Record{Variant: "ietf", Count: true, Requests: []LogicalRequest{hiReq(hiKey1, "pay_1")}}
	start := time.Now()
	if rep := Check(storm(false), checker.Ledger{}, rec, CheckOptions{}); rep.Verdict() != verdict.Pass {
		t.Fatalf("clean storm: %s %+v", rep.Verdict(), rep.Anomalies)
	}
	hiOnly(t, Check(storm(true), checker.Ledger{}, rec, CheckOptions{}), RuleRetryIETF, ModelReplay)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("two storms took %v", d)
	}
}

// The exact decision and the reduction agree with porcupine over every
// answer, on random small histories of one key.
func TestHTTPIdemReplayDecisionAgreesWithPorcupine(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	pm := ReplayModel{}.Porcupine()
	for n := range 3000 {
		var ops []checker.Operation
		for i := range 2 + rnd.IntN(6) {
			call := int64(rnd.IntN(20))
			status := []int{201, 201, 201, 409, 400, 0, 503, 429}[rnd.IntN(8)]
			ops = append(ops, post(hiKey1, i, call, call+1+int64(rnd.IntN(8)), status, []string{"pay_1", "pay_2"}[rnd.IntN(2)*rnd.IntN(2)]))
		}
		idx := make([]int, len(ops))
		for i := range idx {
			idx[i] = i
		}
		full := porcupine.CheckOperations(pm, checker.PorcupineOps(nil, ops, idx, false))
		reduced := porcupine.CheckOperations(pm, checker.PorcupineOps(nil, ops, httpIdemReduce(ops, idx), false))
		ok, why, _ := ReplayDecide(ops)
		if full != ok || reduced != ok {
			t.Fatalf("history %d: porcupine %t, reduced %t, decision %t (%s)\n%+v", n, full, reduced, ok, why, ops)
		}
	}
}

// A key lives 100 ms: a second payment 150 ms after the first, while a
// delivery whose answer was lost may still have been on its way, is that
// delivery executed after the key expired (allowed: counted as Expired),
// and an answer that came back past the key's life is no replay to judge.
// The same second payment 50 ms after the first, or with every delivery
// answered long before it, is a second effect.
func TestHTTPIdemKeyLife(t *testing.T) {
	late := func(at int64, lostAnswer bool) (checker.History, checker.Ledger, Record) {
		h, l, rec := hiClean()
		rec.KeyLifeNs = 100e6
		rec.Requests[0].Created = []string{"pay_1", "pay_1b"}
		l.Effects = append(l.Effects, checker.Effect{Key: hiKey1, Intent: "eff_1b", Worker: "pay_1b", At: at * 1e6})
		if !lostAnswer {
			h.Ops[0] = post(hiKey1, 1, 0, 10, 201, "pay_1")
		}
		h.Ops = append(h.Ops, post(hiKey1, 9, 90, 160, 201, "pay_1b"))
		return h, l, rec
	}
	h, l, rec := late(150, true)
	rep := Check(h, l, rec, CheckOptions{})
	if rep.Verdict() != verdict.Pass || rep.Queue.Expired != 1 {
		t.Fatalf("late delivery: verdict %s, queue %+v, %+v", rep.Verdict(), rep.Queue, rep.Anomalies)
	}
	h, l, rec = late(50, true)
	text := hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryIETF, ModelEffects)
	wantIn(t, text, "created 2 things", "took effect 2 times")
	h, l, rec = late(150, false)
	h.Ops = h.Ops[:len(h.Ops)-1] // every delivery answered by 31 ms
	hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryIETF, ModelEffects)
	h, l, rec = late(150, true)
	rec.KeyLifeNs = 0 // no life published: keys outlive the run
	rep = Check(h, l, rec, CheckOptions{})
	if rep.Verdict() != verdict.Fail || rep.Models[0].Result != checker.LinIllegal || rep.Models[1].Result != checker.LinIllegal {
		t.Fatalf("no key life: %s %+v", rep.Verdict(), rep.Models)
	}
}

// Each check keeps its own examples: a run with many duplicate creations
// still shows the replay check's.
func TestHTTPIdemEachCheckKeepsItsExamples(t *testing.T) {
	var h checker.History
	var rec Record
	rec.Variant, rec.Count = "ietf", true
	for i := range 30 {
		key := fmt.Sprintf("caller1 k%02d", i)
		h.Ops = append(h.Ops, post(key, i, 0, 1, 201, "pay_a"), post(key, i, 2, 3, 201, "pay_b"))
		rec.Requests = append(rec.Requests, hiReq(key, "pay_a", "pay_b"))
	}
	rep := Check(h, checker.Ledger{}, rec, CheckOptions{MaxExamples: 5})
	per := map[string]int{}
	for _, a := range rep.Anomalies {
		for _, m := range []string{ModelEffects, ModelReplay} {
			if strings.Contains(a.Explanation, ": "+m+": ") {
				per[m]++
			}
		}
	}
	if per[ModelEffects] != 5 || per[ModelReplay] != 5 || rep.Counts[RuleRetryIETF] != 60 {
		t.Fatalf("examples %v, counts %v", per, rep.Counts)
	}
}

// hiDifference is hiClean judged by a difference count read alone (no
// sink): two requests answered 2xx, one refused, one of unknown outcome,
// so the requests created 2 or 3 things; the endpoint held 7 before.
func hiDifference(after int) (checker.History, checker.Ledger, Record) {
	h, _, rec := hiClean()
	rec.Sink = false
	for i := range rec.Requests {
		rec.Requests[i].CountStatus, rec.Requests[i].Created = 0, nil
	}
	rec.Total = &TotalCount{Path: "/count", Before: 7, After: after}
	return h, checker.Ledger{}, rec
}

// A difference count read within [answered 2xx, answered 2xx + unknown]
// passes; over it is a second creation, under it a 2xx that created
// nothing (UNKNOWN, pending, when the drain was cut short); a read not
// taken judges nothing.
func TestHTTPIdemDifferenceCount(t *testing.T) {
	for _, after := range []int{9, 10} {
		h, l, rec := hiDifference(after)
		if rep := Check(h, l, rec, CheckOptions{}); rep.Verdict() != verdict.Pass {
			t.Fatalf("created %d of 2..3: %s %+v %+v", after-7, rep.Verdict(), rep.Models, rep.Anomalies)
		}
	}
	h, l, rec := hiDifference(11)
	rep := Check(h, l, rec, CheckOptions{})
	text := hiOnly(t, rep, RuleRetryIETF, ModelEffects)
	wantIn(t, text, "GET /count counted 7 before the run and 11 after the drain: the requests created 4", "over the upper bound of 3",
		"2 answered 2xx, 1 of unknown outcome", ": 1 more than one logical request creates")
	if rep.Queue.Duplicated != 1 || rep.Anomalies[0].Key != "GET /count" {
		t.Errorf("queue %+v, key %q", rep.Queue, rep.Anomalies[0].Key)
	}

	h, l, rec = hiDifference(8)
	rep = Check(h, l, rec, CheckOptions{})
	text = hiOnly(t, rep, RuleRetryIETF, ModelEffects)
	wantIn(t, text, "the requests created 1", "under the lower bound of 2", "1 answered 2xx created nothing")
	if rep.Queue.Lost != 1 {
		t.Errorf("queue %+v", rep.Queue)
	}
	if rep := Check(h, l, rec, CheckOptions{Undrained: true}); rep.Verdict() != verdict.Unknown || rep.Queue.Pending != 1 {
		t.Errorf("undrained: %s, queue %+v", rep.Verdict(), rep.Queue)
	}

	for _, broke := range []func(*TotalCount){
		func(t *TotalCount) { t.BeforeErr = "GET /count answered 404" },
		func(t *TotalCount) { t.AfterErr = "still changed" },
	} {
		h, l, rec := hiDifference(9)
		broke(rec.Total)
		if rep := Check(h, l, rec, CheckOptions{}); rep.Verdict() != verdict.Unknown {
			t.Errorf("a read not taken: %s", rep.Verdict())
		}
	}
}

// hiTwoCalls is hiClean against an endpoint that calls the sink twice per
// execution (a charge and a receipt), with a fifth request delivered once
// and answered 201: the run learns from it that one execution makes two
// effects.
func hiTwoCalls() (checker.History, checker.Ledger, Record) {
	const hiKey5 = "caller1 k-once"
	h, l, rec := hiClean()
	h.Ops = append(h.Ops, post(hiKey5, 7, 60, 61, 201, "pay_5"))
	rec.Requests = append(rec.Requests, hiReq(hiKey5, "pay_5"))
	l.Effects = append(l.Effects, hiEffect(hiKey5, "eff_5", "pay_5"))
	var two []checker.Effect
	for _, e := range l.Effects {
		receipt := e
		receipt.Intent += "r"
		two = append(two, e, receipt)
	}
	l.Effects = two
	return h, l, rec
}

// The sink effects of one request are judged against one execution's,
// learnt from the run: two per request is no anomaly when a request
// delivered once had two; four for a request delivered four times is a
// second execution; with no request delivered once, the fewest a request
// answered 2xx had stands for one execution.
func TestHTTPIdemEffectsPerExecution(t *testing.T) {
	h, l, rec := hiTwoCalls()
	rep := Check(h, l, rec, CheckOptions{})
	if rep.Verdict() != verdict.Pass {
		t.Fatalf("two effects per request: %s %+v", rep.Verdict(), rep.Anomalies)
	}
	if d := rep.Detail.(*CheckDetail); d.EffectsPerExecution != 2 || d.LearntFrom != 1 {
		t.Errorf("detail %+v", d)
	}

	h, l, rec = hiTwoCalls()
	l.Effects = append(l.Effects, hiEffect(hiKey1, "eff_1b", "pay_1"), hiEffect(hiKey1, "eff_1br", "pay_1"))
	text := hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryIETF, ModelEffects)
	wantIn(t, text, `caller1 under key "k-shared"`, "took effect 4 times at the sink",
		"the effects of one execution (2, the most any of the 1 requests delivered once and answered 2xx had)")

	h, l, rec = hiTwoCalls()
	h.Ops = append(h.Ops, post("caller1 k-once", 8, 62, 63, 201, "pay_5")) // no request is delivered once now
	rep = Check(h, l, rec, CheckOptions{})
	if d := rep.Detail.(*CheckDetail); rep.Verdict() != verdict.Pass || d.EffectsPerExecution != 2 || d.LearntFrom != 0 {
		t.Fatalf("none delivered once: %s %+v %+v", rep.Verdict(), d, rep.Anomalies)
	}
	l.Effects = append(l.Effects, hiEffect(hiKey1, "eff_1b", "pay_1"))
	text = hiOnly(t, Check(h, l, rec, CheckOptions{}), RuleRetryIETF, ModelEffects)
	wantIn(t, text, "took effect 3 times at the sink", "(2, the fewest a request answered 2xx had: none was delivered once)")
}

// An UNKNOWN says why in the report's detail.
func TestHTTPIdemUndecidedSaysWhy(t *testing.T) {
	h, l, rec := hiClean()
	rec.Sink, rec.Count = false, false
	rep := Check(h, l, rec, CheckOptions{})
	if d := rep.Detail.(*CheckDetail); rep.Verdict() != verdict.Unknown || len(d.Undecided) != 1 || !strings.Contains(d.Undecided[0], "no count read and calls no effect sink") {
		t.Fatalf("%s %+v", rep.Verdict(), d)
	}
	h, l, rec = hiDifference(9)
	rec.Total.AfterErr = "GET /count answered 503"
	rep = Check(h, l, rec, CheckOptions{})
	if d := rep.Detail.(*CheckDetail); rep.Verdict() != verdict.Unknown || len(d.Undecided) != 1 || !strings.Contains(d.Undecided[0], "after the drain: GET /count answered 503") {
		t.Fatalf("%s %+v", rep.Verdict(), d)
	}
}

// A caller answered with another caller's result under a shared key, its
// own request never executed: the key is not scoped to the caller. That
// is t-0's scope rule (a MUST: an anomaly under it, not under the retry
// rule); under ietf the draft's composite key is a SHOULD, which chaos
// counts and idscheck run judges; Stripe's text scopes no key.
func TestHTTPIdemSharedKeyNamesTheScopeRule(t *testing.T) {
	shared := func(variant string) checker.Report {
		h, l, rec := hiClean()
		rec.Variant = variant
		h.Ops[4] = post(hiKey2, 4, 5, 6, 201, "pay_1") // caller2 gets caller1's payment
		rec.Requests[1].Created = nil
		rec.Sink = false
		l.Effects = nil
		return Check(h, l, rec, CheckOptions{})
	}
	text := hiOnly(t, shared(VariantT0), RuleScopeT0, ModelEffects)
	wantIn(t, text, "another caller's result under the same key", "caller2")
	for _, v := range []string{VariantIETF, VariantStripe} {
		rep := shared(v)
		if rep.Verdict() == verdict.Fail {
			t.Errorf("%s: a shared key failed the chaos run: %+v", v, rep.Anomalies)
		}
		if d, _ := rep.Detail.(*CheckDetail); d == nil || d.SharedKeyAnswers != 1 {
			t.Errorf("%s: detail %+v, want one shared-key answer counted", v, rep.Detail)
		}
	}
}

// TestDescribesProblem: the 409's "body containing problem description"
// is any body that says what went wrong, in any format; an empty one, or
// a JSON document that says nothing, is not.
func TestDescribesProblem(t *testing.T) {
	for body, want := range map[string]bool{
		`{"type":"https://example.com/probs/in-flight","title":"A request with this key is in progress"}`: true,
		`{"error":"request in progress"}`:                  true,
		`{"error":{"message":"conflict","code":"busy"}}`:   true,
		`{"message":"Idempotency key is in use"}`:          true,
		`Request with this Idempotency-Key is in progress`: true,
		`"in progress"`:                       true,
		``:                                    false,
		`   `:                                 false,
		`{}`:                                  false,
		`null`:                                false,
		`[]`:                                  false,
		`{"id":"pay_1","status":"succeeded"}`: false,
		`{"error":""}`:                        false,
	} {
		if got := describesProblem([]byte(body)); got != want {
			t.Errorf("describesProblem(%q) = %v, want %v", body, got, want)
		}
	}
}

// TestProvenKeyLife: with the endpoint's time scale unknown, a key lives
// what its replays prove: a second execution after that is taken for an
// expiry (not judged); one within it is a broken retry still.
func TestProvenKeyLife(t *testing.T) {
	const k = "caller1 k-life"
	h := checker.History{Ops: []checker.Operation{
		post(hiKey1, 1, 0, 10, 201, "pay_1"),
		post(hiKey1, 1, 500, 501, 201, "pay_1"), // a replay 490 ms after the first answer
		post(k, 2, 0, 10, 201, "pay_a"),
		post(k, 2, 900, 902, 201, "pay_b"), // a new execution 890 ms after: past what is proven
	}}
	if got := ProvenKeyLife(h, int64(time.Hour)); got != 490e6 {
		t.Fatalf("proven life %v, want 490ms", time.Duration(got))
	}
	if got := ProvenKeyLife(h, int64(100*time.Millisecond)); got != 100e6 {
		t.Fatalf("proven life %v, want the bound 100ms", time.Duration(got))
	}
	effect := func(key, id string, atMs int64) checker.Effect {
		return checker.Effect{Key: key, Intent: "eff_" + id, Worker: id, At: atMs * 1e6}
	}
	l := checker.Ledger{Effects: []checker.Effect{effect(hiKey1, "pay_1", 5), effect(k, "pay_a", 5), effect(k, "pay_b", 901)}}
	rec := Record{Variant: "ietf", Sink: true, KeyLifeNs: int64(24 * time.Hour), KeyLifeUnscaled: true,
		Requests: []LogicalRequest{hiReq(hiKey1), hiReq(k)}}
	if rep := Check(h, l, rec, CheckOptions{}); rep.Verdict() != verdict.Pass {
		t.Fatalf("an execution past the proven life: verdict %s, want PASS (an expiry): %+v", rep.Verdict(), rep.Anomalies)
	}
	// The same execution 300 ms after: within the life a replay proved.
	h.Ops[3] = post(k, 2, 300, 302, 201, "pay_b")
	l.Effects[2] = effect(k, "pay_b", 301)
	if rep := Check(h, l, rec, CheckOptions{}); rep.Verdict() != verdict.Fail {
		t.Fatalf("an execution within the proven life: verdict %s, want FAIL", rep.Verdict())
	}
	// Told the time scale, the declared life (a day) holds: both fail.
	rec.KeyLifeUnscaled = false
	h.Ops[3] = post(k, 2, 900, 902, 201, "pay_b")
	l.Effects[2] = effect(k, "pay_b", 901)
	if rep := Check(h, l, rec, CheckOptions{}); rep.Verdict() != verdict.Fail {
		t.Fatalf("an execution within the declared life: verdict %s, want FAIL", rep.Verdict())
	}
}
