package probe

import (
	"reflect"
	"testing"
)

// handTable is a table as Measure writes one: a rule judged PASS by one
// behaviour and FAIL by another, a rule that may be BLOCKED, a
// documented choice.
func handTable() *Table {
	return &Table{Behaviours: []Behaviour{
		{ID: "retry-after-complete", Expect: []Expectation{
			pass("stripe", "STRIPE-IDEM-same-result", "same"),
			pass("stripe", "STRIPE-IDEM-not-saved", "retry answered"),
			choice("t0", "x"),
		}},
		{ID: "rejection-then-corrected", Expect: []Expectation{
			fail("stripe", "STRIPE-IDEM-not-saved", "stored 400"),
			fail("t0", "T0-REPLAY-accepted-only", "stored 400"),
		}},
		{ID: "key-255", Expect: []Expectation{erred("stripe", "STRIPE-IDEM-key-255", "255")}},
		{ID: "server-errors", Expect: []Expectation{fail("stripe", ServerError, "500")}},
		{ID: "same-key-other-payload", Expect: []Expectation{fail("stripe", "STRIPE-IDEM-params-compared", "replayed")}},
	}}
}

func TestAgree(t *testing.T) {
	tab := handTable()
	agreeing := map[string]string{
		"STRIPE-IDEM-same-result":     "PASS",
		"STRIPE-IDEM-not-saved":       "FAIL", // the worst scenario decides: the PASS of the retry asks nothing more
		"STRIPE-IDEM-key-255":         "BLOCKED",
		ServerError:                   "NON-STRICT",
		"STRIPE-IDEM-params-compared": "FAIL",
		"STRIPE-IDEM-kept-24h":        "N/A", // no behaviour names it
	}
	if ds := Agree(tab, "stripe", agreeing, map[string]string{"STRIPE-IDEM-key-255": ServerError}); len(ds) != 0 {
		t.Errorf("an agreeing run: %+v", ds)
	}
	// The key-255 rule may also be NON-STRICT itself.
	agreeing["STRIPE-IDEM-key-255"] = "NON-STRICT"
	if ds := Agree(tab, "stripe", agreeing, nil); len(ds) != 0 {
		t.Errorf("an agreeing run (key-255 NON-STRICT): %+v", ds)
	}

	contradicting := map[string]string{
		"STRIPE-IDEM-same-result": "FAIL",    // a correct behaviour failed
		"STRIPE-IDEM-not-saved":   "PASS",    // a deviation missed
		"STRIPE-IDEM-key-255":     "BLOCKED", // by the wrong rule
		ServerError:               "NON-STRICT",
		// STRIPE-IDEM-params-compared: not in the run
	}
	got := Agree(tab, "stripe", contradicting, map[string]string{"STRIPE-IDEM-key-255": "STRIPE-IDEM-post-accepts-keys"})
	want := []Disagreement{
		{Behaviour: "retry-after-complete", Rule: "STRIPE-IDEM-same-result", Want: "PASS", Got: "FAIL", Why: "same"},
		{Behaviour: "rejection-then-corrected", Rule: "STRIPE-IDEM-not-saved", Want: "FAIL", Got: "PASS", Why: "stored 400"},
		{Behaviour: "key-255", Rule: "STRIPE-IDEM-key-255", Want: "NON-STRICT or BLOCKED", Got: "BLOCKED by STRIPE-IDEM-post-accepts-keys",
			Why: "255 (a 5xx never passes the rule its request was testing)"},
		{Behaviour: "same-key-other-payload", Rule: "STRIPE-IDEM-params-compared", Want: "FAIL", Got: "(not in the run)", Why: "replayed"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("a contradicting run:\n got %+v\nwant %+v", got, want)
	}

	// Another variant's expectations are not this run's.
	if ds := Agree(tab, "t0", map[string]string{"T0-REPLAY-accepted-only": "PASS"}, nil); len(ds) != 1 || ds[0].Rule != "T0-REPLAY-accepted-only" {
		t.Errorf("t0: %+v, want the one contradiction on T0-REPLAY-accepted-only", ds)
	}
}

func TestParseResult(t *testing.T) {
	b := []byte(`{"schema": 1, "target": {"url": "http://127.0.0.1:1", "variant": "stripe"}, "rules": [
	  {"rule": {"id": "STRIPE-IDEM-key-255", "level": "SHOULD"}, "result": {"rule_id": "STRIPE-IDEM-key-255", "verdict": "BLOCKED", "blocked_by": "RFC9110-15.6-server-error"}},
	  {"rule": {"id": "STRIPE-IDEM-same-result"}, "result": {"verdict": "PASS"}}]}`)
	v, verdicts, blocked, err := ParseResult(b)
	if err != nil {
		t.Fatal(err)
	}
	if v != "stripe" || verdicts["STRIPE-IDEM-key-255"] != "BLOCKED" || verdicts["STRIPE-IDEM-same-result"] != "PASS" ||
		blocked["STRIPE-IDEM-key-255"] != ServerError || len(blocked) != 1 {
		t.Errorf("ParseResult: %q %v %v", v, verdicts, blocked)
	}
}
