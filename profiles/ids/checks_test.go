package ids

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

const idsKey = "acme/9e0c"

// deliver is one POST /commands of idsKey answered with status, state and
// body, from call to ret (ms).
func deliver(client int, call, ret int64, status int, state, body string) checker.Operation {
	op := checker.Operation{ClientID: client, Kind: checker.OpPublish, Key: idsKey, KeyID: "acme", Input: checker.Input{Body: "env"},
		Call: call * 1e6, Return: ret * 1e6, Outcome: verdict.OutcomeOK}
	op.Output = checker.Output{Status: status, State: state, Body: body, ID: "cmd-1"}
	return op
}

func lost(client int, call, ret int64) checker.Operation {
	op := deliver(client, call, ret, 0, "", "")
	op.Outcome = verdict.OutcomeUnknown
	op.Output = checker.Output{}
	return op
}

func effect(key, id string) checker.Effect {
	return checker.Effect{Key: key, Intent: id, Worker: "cmd-1", At: 1}
}

func ev(decision string, executed bool, cmd string) IDSEvidenceItem {
	return IDSEvidenceItem{Decision: decision, Executed: executed, CommandID: cmd, OriginalCommandID: "cmd-1"}
}

// cleanRun is a key delivered four times under faults: a lost answer, a
// processing, the executed outcome and its replay; one effect; evidence of
// one execution and two replays.
func cleanRun() (checker.History, checker.Ledger, []IDSKey) {
	h := checker.History{Ops: []checker.Operation{
		lost(1, 0, 10),
		deliver(2, 5, 6, 202, StatusProcessing, "p"),
		deliver(1, 20, 21, 201, StatusExecuted, "out"),
		deliver(3, 30, 31, 201, StatusExecuted, "out"),
	}}
	l := checker.Ledger{Effects: []checker.Effect{effect(idsKey, "eff_1")}}
	keys := []IDSKey{{Key: idsKey, Command: "payment.capture", External: true, EvidenceStatus: 200, Evidence: []IDSEvidenceItem{
		ev(DecisionFirstSeen, true, "cmd-1"), ev(DecisionReplayed, false, "cmd-2"), ev(DecisionReplayed, false, "cmd-3"),
	}}}
	return h, l, keys
}

func TestIDSCleanRunPasses(t *testing.T) {
	h, l, keys := cleanRun()
	rep := CheckIDS(h, l, keys, IDSOptions{})
	if v := rep.Verdict(); v != verdict.Pass {
		t.Fatalf("verdict %s, want PASS: %+v", v, rep.Anomalies)
	}
	if rep.Queue.Attempted != 1 || rep.Queue.Effected != 1 || rep.Queue.Fulfilled != 1 {
		t.Fatalf("queue %+v", rep.Queue)
	}
}

func onlyKind(t *testing.T, rep checker.Report, kind checker.AnomalyKind) checker.Anomaly {
	t.Helper()
	if rep.Verdict() != verdict.Fail {
		t.Fatalf("verdict %s, want FAIL", rep.Verdict())
	}
	if len(rep.Anomalies) == 0 {
		t.Fatal("no anomaly")
	}
	for _, a := range rep.Anomalies {
		if a.Kind != kind {
			t.Fatalf("anomaly %s: %s; want only %s", a.Kind, a.Explanation, kind)
		}
		if !strings.HasPrefix(a.Explanation, string(kind)+":") || a.Key == "" {
			t.Fatalf("anomaly %q does not name its rule and key", a.Explanation)
		}
	}
	return rep.Anomalies[0]
}

// TestIDSExactlyOnceEffectsFails: two effects for one key (a duplicate
// re-executed), an executed I3 command with no effect, and an effect for a
// key no delivery named: each breaks IDS-V, by name, with the effect ids.
func TestIDSExactlyOnceEffectsFails(t *testing.T) {
	t.Run("duplicated", func(t *testing.T) {
		h, l, keys := cleanRun()
		l.Effects = append(l.Effects, effect(idsKey, "eff_2"))
		keys[0].Evidence[1].Executed, keys[0].Evidence[1].Decision = true, DecisionFirstSeen // the evidence says so too...
		rep := CheckIDS(h, l, keys[:0], IDSOptions{})                                        // ...but judge V alone
		a := onlyKind(t, rep, IDSEffects)
		if !strings.Contains(a.Explanation, "eff_1") || !strings.Contains(a.Explanation, "eff_2") || !strings.Contains(a.Explanation, idsKey) || len(a.Ops) == 0 {
			t.Fatalf("the anomaly must name the key, both effects and the operations: %+v", a)
		}
		if rep.Queue.Duplicated != 1 {
			t.Fatalf("queue %+v", rep.Queue)
		}
	})
	t.Run("missing", func(t *testing.T) {
		h, _, keys := cleanRun()
		keys[0].Evidence[0].Executed = false
		keys[0].Evidence = keys[0].Evidence[1:]
		rep := CheckIDS(h, checker.Ledger{}, keys, IDSOptions{})
		a := onlyKind(t, rep, IDSEffects)
		if !strings.Contains(a.Explanation, "never reached the sink") {
			t.Fatalf("explanation %q", a.Explanation)
		}
		// The same run with the drain cut short: pending, UNKNOWN.
		rep = CheckIDS(h, checker.Ledger{}, keys, IDSOptions{Undrained: true})
		if rep.Verdict() != verdict.Unknown || rep.Queue.Pending != 1 {
			t.Fatalf("undrained: verdict %s, queue %+v, anomalies %+v", rep.Verdict(), rep.Queue, rep.Anomalies)
		}
	})
	t.Run("unexpected", func(t *testing.T) {
		h, l, keys := cleanRun()
		l.Effects = append(l.Effects, effect("acme/other", "eff_9"))
		a := onlyKind(t, CheckIDS(h, l, keys, IDSOptions{}), IDSEffects)
		if a.Key != "acme/other" || !strings.Contains(a.Explanation, "eff_9") {
			t.Fatalf("%+v", a)
		}
	})
	t.Run("not I3: no effect is fine", func(t *testing.T) {
		h, _, keys := cleanRun()
		keys[0].External = false
		if rep := CheckIDS(h, checker.Ledger{}, keys, IDSOptions{}); rep.Verdict() != verdict.Pass {
			t.Fatalf("%s: %+v", rep.Verdict(), rep.Anomalies)
		}
	})
}

// TestIDSSameOutcomeFails: a duplicate answered another terminal outcome,
// or "processing" after the outcome had been answered, breaks IX.A.
func TestIDSSameOutcomeFails(t *testing.T) {
	for name, extra := range map[string]checker.Operation{
		"another body":                 deliver(4, 40, 41, 201, StatusExecuted, "other"),
		"another status":               deliver(4, 40, 41, 422, StatusRejected, "out"),
		"processing after the outcome": deliver(4, 40, 41, 202, StatusProcessing, "p"),
	} {
		t.Run(name, func(t *testing.T) {
			h, l, keys := cleanRun()
			h.Ops = append(h.Ops, extra)
			rep := CheckIDS(h, l, keys, IDSOptions{})
			a := onlyKind(t, rep, IDSOutcome)
			if len(a.Ops) != 2 {
				t.Fatalf("want the two operations that disagree, got %d", len(a.Ops))
			}
		})
	}
	// Refusals before any decision and overlapping processing answers are fine.
	h, l, keys := cleanRun()
	h.Ops = append(h.Ops, deliver(5, 40, 41, 429, "", "rate"), deliver(6, 19, 25, 202, StatusProcessing, "p"), lost(7, 50, 60))
	if rep := CheckIDS(h, l, keys, IDSOptions{}); rep.Verdict() != verdict.Pass {
		t.Fatalf("%s: %+v", rep.Verdict(), rep.Anomalies)
	}
}

// TestIDSExecutedOrReplayedFails: evidence that disagrees with the effects
// or with itself breaks XII.
func TestIDSExecutedOrReplayedFails(t *testing.T) {
	cases := map[string]func(k *IDSKey, l *checker.Ledger){
		"two executed":               func(k *IDSKey, l *checker.Ledger) { k.Evidence[1] = ev(DecisionFirstSeen, true, "cmd-2") },
		"replayed says executed":     func(k *IDSKey, l *checker.Ledger) { k.Evidence[2].Executed = true },
		"effect but nothing says so": func(k *IDSKey, l *checker.Ledger) { k.Evidence[0].Executed = false },
		"executed, no effect":        func(k *IDSKey, l *checker.Ledger) { l.Effects = nil },
		"unknown decision":           func(k *IDSKey, l *checker.Ledger) { k.Evidence[1].Decision = "replayed" },
		"two first_seen":             func(k *IDSKey, l *checker.Ledger) { k.Evidence[1].Decision = DecisionFirstSeen },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			h, l, keys := cleanRun()
			mutate(&keys[0], &l)
			rep := CheckIDS(h, l, keys, IDSOptions{})
			found := false
			for _, a := range rep.Anomalies {
				found = found || a.Kind == IDSEvidence
			}
			if !found || rep.Verdict() != verdict.Fail {
				t.Fatalf("want an %s anomaly, got %s %+v", IDSEvidence, rep.Verdict(), rep.Anomalies)
			}
		})
	}
	// A first delivery the command refused (422 rejected) may say executed:
	// it was performed, not replayed, and has no effect.
	h, _, keys := cleanRun()
	for i := range h.Ops {
		if h.Ops[i].Output.State == StatusExecuted {
			h.Ops[i].Output.Status, h.Ops[i].Output.State = 422, StatusRejected
		}
	}
	if rep := CheckIDS(h, checker.Ledger{}, keys, IDSOptions{}); rep.Verdict() != verdict.Pass {
		t.Fatalf("rejected: %s %+v", rep.Verdict(), rep.Anomalies)
	}
	// Evidence that was never read is undecided, not a pass.
	h, l, keys := cleanRun()
	keys[0].EvidenceStatus, keys[0].Evidence = 0, nil
	if rep := CheckIDS(h, l, keys, IDSOptions{}); rep.Verdict() != verdict.Unknown {
		t.Fatalf("unread evidence: %s", rep.Verdict())
	}
}

// TestIDSOutcomeDecideAgreesWithPorcupine holds the linear decision equal to
// porcupine's search under IDSOutcomeModel on small random partitions.
func TestIDSOutcomeDecideAgreesWithPorcupine(t *testing.T) {
	rnd := rand.New(rand.NewPCG(7, 7))
	m := IDSOutcomeModel{}.Porcupine()
	illegal := 0
	for n := range 2000 {
		k := 1 + rnd.IntN(5)
		ops := make([]checker.Operation, k)
		for i := range ops {
			call := int64(rnd.IntN(20))
			ret := call + int64(rnd.IntN(6))
			switch rnd.IntN(6) {
			case 0:
				ops[i] = lost(i, call, ret)
			case 1:
				ops[i] = deliver(i, call, ret, 202, StatusProcessing, "p")
			case 2:
				ops[i] = deliver(i, call, ret, 429, "", "x")
			case 3:
				ops[i] = deliver(i, call, ret, 201, StatusExecuted, "b")
			default:
				ops[i] = deliver(i, call, ret, 201, StatusExecuted, "a")
			}
		}
		pops := checker.PorcupineOps(nil, ops, seq(len(ops)), false)
		want := porcupine.CheckOperations(m, pops)
		got, why, _ := IDSOutcomeDecide(ops, "")
		if got != want {
			t.Fatalf("case %d: decide %t (%s), porcupine %t: %+v", n, got, why, want, ops)
		}
		if !got {
			illegal++
		}
	}
	if illegal < 100 {
		t.Fatalf("only %d illegal cases of 2000: the generator is too tame", illegal)
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func TestIDSKeysRoundTrip(t *testing.T) {
	_, _, keys := cleanRun()
	var b bytes.Buffer
	if err := WriteIDSKeys(&b, keys); err != nil {
		t.Fatal(err)
	}
	got, err := ReadIDSKeys(&b)
	if err != nil || len(got) != 1 || len(got[0].Evidence) != 3 || !got[0].External {
		t.Fatalf("%v %+v", err, got)
	}
	// The model is usable through CheckModels too.
	h, _, _ := cleanRun()
	res := checker.CheckModels(h, []checker.Model{IDSOutcomeModel{}}, time.Second)
	if res[0].Result != checker.LinOk || len(res[0].Failed) != 0 {
		t.Fatalf("%+v", res)
	}
}

// TestIDSRulesAreInTheCatalog: each IDS check names a rule of the profile's catalog.
func TestIDSRulesAreInTheCatalog(t *testing.T) {
	ids := map[string]bool{}
	for _, r := range Rules() {
		ids[r.ID] = true
	}
	for _, r := range []string{RuleIDSExactlyOnceEffects, RuleIDSSameOutcome, RuleIDSExecutedOrReplayed} {
		if !ids[r] {
			t.Errorf("%s is not a rule of the profile's catalog", r)
		}
	}
}
