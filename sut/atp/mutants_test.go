package atp

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
)

// mutantScenarios show, for every mutant, the behaviour that breaks its
// rule, over real HTTP with the fake rail: each returns true when it
// observed the break. The correct server must not break any of them, the
// mutant must break its own.
var mutantScenarios = map[string]func(t *testing.T, e *testEnv) bool{
	MutantDoubleChargeOnRetry: func(t *testing.T, e *testEnv) bool {
		k := key("double")
		e.authorize(k, e.intent("int_m"))
		e.execute(k, "int_m")
		e.execute(k, "int_m")
		return e.rail.Charges("int_m") != 1
	},
	MutantNoReservation: func(t *testing.T, e *testEnv) bool {
		if err := failpoint.Enable(FailpointNoReservationRacyWindow, `return("barrier")`); err != nil {
			t.Fatal(err)
		}
		defer failpoint.Disable(FailpointNoReservationRacyWindow)
		k := key("race")
		e.authorize(k, e.intent("int_m"))
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); e.execute(k, "int_m") }()
		}
		wg.Wait()
		return e.rail.Charges("int_m") != 1
	},
	MutantFreshRowOnRetry: func(t *testing.T, e *testEnv) bool {
		k := key("fresh")
		in := e.intent("int_m")
		a := e.authorize(k, in)
		e.clock.advance(time.Second)
		return !bytes.Equal(e.authorize(k, in).body, a.body)
	},
	MutantReceiptBeforeSettlement: func(t *testing.T, e *testEnv) bool {
		k := key("speculative")
		e.authorize(k, e.intent("int_m"))
		e.rail.FailConfirms(1)
		r := e.execute(k, "int_m")
		return r.tx(t).State == stateExecuting && r.tx(t).hasReceipt()
	},
	MutantNonCanonicalSignature: func(t *testing.T, e *testEnv) bool {
		k := key("jcs")
		e.authorize(k, e.intent("int_m"))
		x := e.execute(k, "int_m").tx(t)
		return e.do("POST", pathVerify, x.Receipt).json(t)["valid"] != true
	},
	MutantStateRegression: func(t *testing.T, e *testEnv) bool {
		k := key("regress")
		e.authorize(k, e.intent("int_m"))
		e.rail.FailConfirms(1)
		e.execute(k, "int_m")
		e.srv.ReconcileNow(context.Background())
		h := states(t, storeOf(e.cfg), "int_m", k)
		return e.poll(k, "int_m").tx(t).State == stateAuthorized || strings.Contains(strings.Join(h, ","), "executing,authorized")
	},
	MutantNonceReusable: func(t *testing.T, e *testEnv) bool {
		in := e.intent("int_m")
		e.authorize(key("one"), in)
		return e.authorize(key("two"), in).status == 200
	},
	MutantNoReconciliation: func(t *testing.T, e *testEnv) bool {
		k := key("sweep")
		e.authorize(k, e.intent("int_m"))
		e.rail.LoseConfirms(1)
		e.execute(k, "int_m")
		e.srv.ReconcileNow(context.Background())
		return e.poll(k, "int_m").tx(t).State == stateExecuting
	},
	MutantExpiredExecutable: func(t *testing.T, e *testEnv) bool {
		k := key("expired")
		e.authorize(k, e.intent("int_m"))
		e.clock.advance(11 * time.Minute)
		r := e.execute(k, "int_m")
		return r.status != 410 || e.rail.Charges("int_m") != 0
	},
	MutantKeyNotBound: func(t *testing.T, e *testEnv) bool {
		k := key("bound")
		e.authorize(k, e.intent("int_m"))
		e.execute(k, "int_m")
		r := e.authorize(k, e.intent("int_m2"))
		e.execute(k, "int_m2")
		return r.status != 200 || r.tx(t).IntentID != "int_m2" || e.rail.Charges("int_m2") != 1
	},
	MutantPreconditionIgnored: func(t *testing.T, e *testEnv) bool {
		return e.authorize(key("pre"), e.intent("int_m", "precondition", map[string]any{"intent_settled": "int_none"})).status == 200
	},
	MutantActionDedupIgnored: func(t *testing.T, e *testEnv) bool {
		e.authorize(key("dedup1"), e.intent("int_m", "action_dedup_key", "cart:9"))
		return e.authorize(key("dedup2"), e.intent("int_m2", "action_dedup_key", "cart:9")).status == 200
	},
	MutantVerifyAcceptsAnything: func(t *testing.T, e *testEnv) bool {
		k := key("verify")
		e.authorize(k, e.intent("int_m"))
		x := e.execute(k, "int_m").tx(t)
		forged := bytes.Replace(x.Receipt, []byte(`"amount":1250`), []byte(`"amount":9999`), 1)
		return e.do("POST", pathVerify, forged).json(t)["valid"] == true
	},
	MutantCompensationUnsigned: func(t *testing.T, e *testEnv) bool {
		k := key("declined")
		e.rail.Decline("int_m")
		e.authorize(k, e.intent("int_m"))
		x := e.execute(k, "int_m").tx(t)
		return x.State != stateCompensated || !x.hasReceipt()
	},
	MutantShortKeysOnly: func(t *testing.T, e *testEnv) bool {
		return e.authorize(strings.Repeat("k", 100), e.intent("int_m")).status != 200
	},
	MutantGuessOnRailLoss: func(t *testing.T, e *testEnv) bool {
		k := key("guess")
		e.authorize(k, e.intent("int_m"))
		e.rail.LoseConfirms(1)
		x := e.execute(k, "int_m").tx(t)
		return x.State != stateExecuting && e.rail.Charges("int_m") == 1 && x.State != stateSettled
	},
	MutantNonceFirstConsumedNow: func(t *testing.T, e *testEnv) bool {
		in := e.intent("int_m")
		created := e.authorize(key("first"), in).tx(t).CreatedAt
		e.clock.advance(time.Minute)
		return e.authorize(key("second"), in).json(t)["first_consumed_at"] != created
	},
	MutantCallbackTrusted: func(t *testing.T, e *testEnv) bool {
		k := key("forged")
		e.authorize(k, e.intent("int_m"))
		e.rail.FailConfirms(1)
		e.execute(k, "int_m")
		pis := e.rail.PaymentIntents("int_m")
		if len(pis) != 1 {
			t.Fatalf("%d payment intents", len(pis))
		}
		e.rail.SetDown(true) // the site cannot ask the rail
		defer e.rail.SetDown(false)
		e.do("POST", pathRailEvents, mustJSON(map[string]any{"type": "payment_intent.succeeded", "payment_intent": map[string]any{
			"id": pis[0].ID, "intent_id": "int_m", "status": "succeeded", "amount": 1250, "currency": "EUR", "charge_id": "ch_forged"}}))
		return e.poll(k, "int_m").tx(t).State != stateExecuting && e.rail.Charges("int_m") == 0
	},
	MutantNoncePerIntent: func(t *testing.T, e *testEnv) bool {
		e.authorize(key("first"), e.intent("int_m"))
		return e.authorize(key("second"), e.intent("int_m2", "nonce", "n_int_m")).status < 400
	},
	MutantVerifyByLookup: func(t *testing.T, e *testEnv) bool {
		k := key("lookup")
		e.authorize(k, e.intent("int_m"))
		x := e.execute(k, "int_m").tx(t)
		var doc map[string]any
		if err := json.Unmarshal(x.Receipt, &doc); err != nil {
			t.Fatal(err)
		}
		again, _ := json.MarshalIndent(doc, "", "  ") // members sorted, indented: the same receipt
		return e.do("POST", pathVerify, again).json(t)["valid"] != true
	},
	MutantExpiryMargin: func(t *testing.T, e *testEnv) bool {
		in := e.intent("int_m", "expires_at", e.clock.now().Add(30*time.Second).Format(time.RFC3339))
		return e.authorize(key("margin"), in).status == 410
	},
}

// atpRules are the rule IDs of seed 000 (profiles/atp's catalog, copied: the
// server does not import the harness).
var atpRules = map[string]bool{}

func init() {
	for _, id := range []string{"ATP-0-unique-row", "ATP-0-receipt-after-settled", "ATP-0-signed-by-site-key", "ATP-0-no-maybe-paid",
		"ATP-1-monotonic", "ATP-1-no-executing-to-authorized", "ATP-1-recovery-same-or-later", "ATP-2-retry-any-step",
		"ATP-2-retry-verbatim", "ATP-2-no-second-effect", "ATP-3-key-required", "ATP-3-key-any-16-128", "ATP-3-key-bound-to-intent",
		"ATP-3-key-stable", "ATP-4-never-speculative", "ATP-4-settlement-signed", "ATP-4-compensation-receipt",
		"ATP-4-expired-no-receipt", "ATP-4-verify-no-secret", "ATP-5-retry-policy", "ATP-5-expired-410", "ATP-6-reissue-after-loss",
		"ATP-6-executing-until-resolved", "ATP-6-reconciliation", "ATP-6-single-writer", "ATP-7-action-dedup",
		"ATP-7-nonce-single-use", "ATP-8-independent", "ATP-8-precondition-at-authorize", "ATP-9-retry-example",
		"ATP-9-nonce-first-consumed-at"} {
		atpRules[id] = true
	}
}

func TestMutants(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Mutants() {
		if seen[m.Name] || !atpRules[m.Breaks] || m.Description == "" {
			t.Errorf("mutant %+v: duplicate name, unknown rule or no description", m)
		}
		seen[m.Name] = true
		scenario := mutantScenarios[m.Name]
		if scenario == nil {
			t.Errorf("mutant %s has no scenario", m.Name)
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			if scenario(t, newEnv(t, "")) {
				t.Errorf("the correct server breaks %s in the scenario of %s", m.Breaks, m.Name)
			}
			if !scenario(t, newEnv(t, m.Name)) {
				t.Errorf("mutant %s does not break %s", m.Name, m.Breaks)
			}
		})
	}
	if len(mutantScenarios) != len(Mutants()) {
		t.Errorf("%d scenarios for %d mutants", len(mutantScenarios), len(Mutants()))
	}
	if len(Mutants()) < 14 {
		t.Errorf("%d mutants", len(Mutants()))
	}
}
