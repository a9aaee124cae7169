package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

// TestSummaryCountsOnlyTheDeclaredVariant (issue 28, case 11): the rules of
// another variant of the text, or of another reading than the one the
// target declares, are not testable rules of the run: a perfect endpoint
// of its variant judged every testable rule.
func TestSummaryCountsOnlyTheDeclaredVariant(t *testing.T) {
	entry := func(id string, rr verdict.RuleResult) RuleEntry {
		rr.RuleID = id
		return RuleEntry{Rule: fixtureRule(id, "1", spec.Must), Result: rr}
	}
	r := &Result{Profile: "http-idempotency", Target: Target{Variant: "ietf"}, Rules: []RuleEntry{
		entry("I-1", verdict.RuleResult{Verdict: verdict.Pass}),
		entry("I-2", verdict.RuleResult{Verdict: verdict.Pass}),
		entry("T-1", verdict.RuleResult{Verdict: verdict.NA, Variant: "t0", Reason: "the target declares the ietf variant"}),
		entry("S-1", verdict.RuleResult{Verdict: verdict.NA, Variant: "stripe", Reason: "the target declares the ietf variant"}),
		entry("R-1", verdict.RuleResult{Verdict: verdict.NA, Reason: "this check does not apply to the declared reading d=x",
			Reading: &verdict.ReadingChoice{Decision: "d", Declared: "x"}}),
		entry("N-1", verdict.RuleResult{Verdict: verdict.NA, Reason: "no count read declared"}),
	}}
	s := r.Summary()
	if s.Judged != 2 || s.Testable != 3 || s.OutOfScope != 3 {
		t.Errorf("judged %d of %d testable (%d out of scope), want 2 of 3 (3 out of scope)", s.Judged, s.Testable, s.OutOfScope)
	}
	if len(s.NotJudged) != 1 || s.NotJudged[0].Reason != "N/A: no count read declared" {
		t.Errorf("not judged %+v: want only the rule of this variant left unjudged", s.NotJudged)
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "Judged 2 of 3 testable rules") {
		t.Error("the report does not say Judged 2 of 3 testable rules")
	}
}

// TestHTMLSaysWhatEvidenceLeftOut (issue 28, case 4): a check's evidence
// bounded to its latest exchanges says how many earlier ones it left out.
func TestHTMLSaysWhatEvidenceLeftOut(t *testing.T) {
	r := &Result{Profile: "intent", Rules: []RuleEntry{{Rule: fixtureRule("I-1", "1", spec.Must), Result: verdict.RuleResult{
		RuleID: "I-1", Verdict: verdict.Fail, Reason: "storm",
		Evidence: []verdict.Evidence{{Scenario: "a storm", Step: "[I-1] every one got the same id", Observed: "two ids",
			Exchanges: []verdict.Exchange{{Method: "POST", Path: "/intent", Status: 201}}, Omitted: 12}},
	}}}}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "12 earlier exchanges of the scenario left out here: history.jsonl has every one.") {
		t.Error("the report does not say what the evidence left out")
	}
}
