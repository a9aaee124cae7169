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
