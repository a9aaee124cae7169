package features

import (
	"testing"

	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/spec/ids"
)

func idsDecision(id string) (spec.Decision, bool) {
	for _, d := range ids.Decisions() {
		if d.ID == id {
			return d, true
		}
	}
	return spec.Decision{}, false
}

// TestIDSFeatureCoversTheCatalog fails when an assertion names no rule of
// the IDS catalog, or a testable IDS rule is judged by no assertion.
func TestIDSFeatureCoversTheCatalog(t *testing.T) {
	src, err := embedded.ReadFile("ids.feature")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range coverageProblems(pickles(t, src), spec.RulesFor(spec.ProfileIDS), "IDS-", idsDecision) {
		t.Error(msg)
	}
}

// TestIDSAssertionsNameTheirRule fails when a Then step checks without
// naming its rule, or an action is written as an assertion.
func TestIDSAssertionsNameTheirRule(t *testing.T) {
	src, err := embedded.ReadFile("ids.feature")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range assertionProblems(pickles(t, src), (&idsWorld{}).steps()) {
		t.Error(msg)
	}
}

// TestIDSStepsAreDefined: every step of ids.feature has exactly one
// definition.
func TestIDSStepsAreDefined(t *testing.T) {
	src, err := embedded.ReadFile("ids.feature")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, s := range (&idsWorld{}).steps() {
		patterns = append(patterns, StepPattern(s.Pattern))
	}
	ps := pickles(t, src)
	if len(ps) < 25 {
		t.Fatalf("only %d scenarios", len(ps))
	}
	for _, msg := range undefinedSteps(ps, patterns) {
		t.Error(msg)
	}
}
