package httpidem

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
)

// mutantScenarios show, for every mutant, the behaviour that breaks its
// rule, over real HTTP with the fake sink, under the mutant's variant:
// each returns true when it observed the break. The correct server must
// not break any of them, the mutant must break its own.
var mutantScenarios = map[string]func(t *testing.T, e *testEnv) bool{
	MutantNoReservation: func(t *testing.T, e *testEnv) bool {
		if err := failpoint.Enable(FailpointNoReservationRacyWindow, `return("barrier")`); err != nil {
			t.Fatal(err)
		}
		defer failpoint.Disable(FailpointNoReservationRacyWindow)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); e.pay(tokA, "race", body("r")) }()
		}
		wg.Wait()
		return e.sink.effectsOf(sinkKey(tokA, "race")) != 1 || len(e.list(tokA, "r")) != 1
	},
	MutantBodyDedup: func(t *testing.T, e *testEnv) bool {
		e.pay(tokA, "k1", body("r"))
		r := e.pay(tokA, "k2", body("r"))
		return r.status != 201 || r.replayed() || len(e.list(tokA, "r")) != 2
	},
	MutantKeyNotScoped: func(t *testing.T, e *testEnv) bool {
		e.pay(tokA, "shared", body("r"))
		r := e.pay(tokB, "shared", body("r"))
		return r.replayed() || len(e.list(tokB, "r")) != 1 || e.sink.effectsOf(sinkKey(tokB, "shared")) != 1
	},
	MutantFingerprintIgnored: func(t *testing.T, e *testEnv) bool {
		e.pay(tokA, "k", body("r"))
		return e.pay(tokA, "k", body("r", "amount", 9999)).status != 422
	},
	MutantRejectionConsumesKey: func(t *testing.T, e *testEnv) bool {
		e.pay(tokA, "ref", body("r", "currency", "XXX"))
		r := e.pay(tokA, "ref", body("r"))
		return r.status != 201 || r.replayed()
	},
	MutantInFlightExecuted: func(t *testing.T, e *testEnv) bool {
		release := e.sink.hold(sinkKey(tokA, "ref"))
		defer release()
		orig := e.payAsync(tokA, "ref", body("r"))
		e.sink.waitArrival(t)
		dup := e.payAsync(tokA, "ref", body("r"))
		select { // the correct server waits; the mutant calls the sink again
		case <-e.waits:
		case <-e.sink.arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the duplicate neither waited nor paid")
		}
		release()
		receive(t, orig)
		receive(t, dup)
		return e.sink.effectsOf(sinkKey(tokA, "ref")) != 1
	},
	MutantConflict409InT0: func(t *testing.T, e *testEnv) bool {
		release := e.sink.hold(sinkKey(tokA, "ref"))
		defer release()
		orig := e.payAsync(tokA, "ref", body("r"))
		e.sink.waitArrival(t)
		dup := e.payAsync(tokA, "ref", body("r"))
		var r resp
		select { // the correct server waits; the mutant answers at once
		case <-e.waits:
			release()
			r = receive(t, dup)
		case r = <-dup:
			release()
		case <-time.After(10 * time.Second):
			t.Fatal("the duplicate neither waited nor answered")
		}
		first := receive(t, orig)
		return r.status != 201 || !bytes.Equal(r.body, first.body)
	},
	MutantReplayFreshID: func(t *testing.T, e *testEnv) bool {
		first := e.pay(tokA, "k", body("r"))
		return !bytes.Equal(e.pay(tokA, "k", body("r")).body, first.body)
	},
	MutantExpiresEarly: func(t *testing.T, e *testEnv) bool {
		first := e.pay(tokA, "k", body("r"))
		e.clock.advance(3 * time.Hour)
		r := e.pay(tokA, "k", body("r"))
		return !bytes.Equal(r.body, first.body) || e.sink.effectsOf(sinkKey(tokA, "k")) != 1
	},
	MutantStripe500NotSaved: func(t *testing.T, e *testEnv) bool {
		e.sink.set(func(k *fakeSink) { k.failNext = 1 })
		first := e.pay(tokA, "k", body("r"))
		r := e.pay(tokA, "k", body("r"))
		return r.status != first.status || !bytes.Equal(r.body, first.body)
	},
	MutantShortStripeKeys: func(t *testing.T, e *testEnv) bool {
		return e.pay(tokA, strings.Repeat("k", 100), body("r")).status != 201
	},
	MutantMissingKeyExecutes: func(t *testing.T, e *testEnv) bool {
		return e.pay(tokA, "", body("r")).status != 400 || e.sink.totalEffects() != 0
	},
	MutantStripeValidationSaved: func(t *testing.T, e *testEnv) bool {
		e.pay(tokA, "k", body("r", "amount", -1))
		return e.pay(tokA, "k", body("r")).status != 201
	},
	MutantEffectOnReplay: func(t *testing.T, e *testEnv) bool {
		e.pay(tokA, "ref", body("r"))
		e.pay(tokA, "ref", body("r"))
		return e.sink.effectsOf(sinkKey(tokA, "ref")) != 1
	},
}

// httpidemRules are the rule IDs of the http-idempotency catalog
// (spec/httpidem, copied: the server does not import the harness), by
// variant.
var httpidemRules = map[string]string{}

func init() {
	for v, ids := range map[string][]string{
		VariantIETF: {"IETF-2.1-string-key", "IETF-2.1-one-header", "IETF-2.2-unique", "IETF-2.3-expiry-published",
			"IETF-2.3-expiry-kept", "IETF-2.5-publish", "IETF-2.5-identify-key", "IETF-2.6-first-request", "IETF-2.6-retry-result",
			"IETF-2.6-concurrent-conflict", "IETF-2.7-missing-400", "IETF-2.7-mismatch-422", "IETF-2.7-concurrent-409",
			"IETF-2.7-fail-uncorrected", "IETF-5-composite-key"},
		VariantT0: {"T0-0-no-further-effect", "T0-KEYS-caller-scope", "T0-CAT-same-outcome", "T0-R1-original-response",
			"T0-R2-wait-in-flight", "T0-R3-no-duplicate-error", "T0-REPLAY-rejection-keeps-key", "T0-REPLAY-accepted-only"},
		VariantStripe: {"STRIPE-IDEM-same-result", "STRIPE-IDEM-key-255", "STRIPE-IDEM-params-compared", "STRIPE-IDEM-kept-24h",
			"STRIPE-IDEM-not-saved", "STRIPE-IDEM-post-accepts-keys"},
	} {
		for _, id := range ids {
			httpidemRules[id] = v
		}
	}
}

func TestMutants(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Mutants() {
		if seen[m.Name] || httpidemRules[m.Breaks] != m.Variant || m.Description == "" {
			t.Errorf("mutant %+v: duplicate name, unknown rule, a rule of another variant, or no description", m)
		}
		seen[m.Name] = true
		scenario := mutantScenarios[m.Name]
		if scenario == nil {
			t.Errorf("mutant %s has no scenario", m.Name)
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			if scenario(t, newEnv(t, m.Variant, "")) {
				t.Errorf("the correct server breaks %s in the scenario of %s", m.Breaks, m.Name)
			}
			if !scenario(t, newEnv(t, m.Variant, m.Name)) {
				t.Errorf("mutant %s does not break %s", m.Name, m.Breaks)
			}
		})
	}
	if len(mutantScenarios) != len(Mutants()) {
		t.Errorf("%d scenarios for %d mutants", len(mutantScenarios), len(Mutants()))
	}
	if len(Mutants()) < 8 {
		t.Errorf("%d mutants", len(Mutants()))
	}
}
