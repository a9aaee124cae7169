package ids

import (
	"testing"

	messages "github.com/cucumber/messages/go/v21"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/spec"
)

// pickles parses the profile's feature file into its scenarios.
func pickles(t *testing.T) []*messages.Pickle {
	t.Helper()
	src, err := feature.ReadFile("ids.feature")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := features.ParseFeature(src, "ids.feature")
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func idsDecision(id string) (spec.Decision, bool) {
	for _, d := range Decisions() {
		if d.ID == id {
			return d, true
		}
	}
	return spec.Decision{}, false
}

// TestIDSFeatureCoversTheCatalog fails when an assertion names no rule of
// the IDS catalog, or a testable IDS rule is judged by no assertion.
func TestIDSFeatureCoversTheCatalog(t *testing.T) {
	for _, msg := range features.CoverageProblems(pickles(t), spec.RulesFor(Name), "IDS-", idsDecision) {
		t.Error(msg)
	}
}

// TestIDSAssertionsNameTheirRule fails when a Then step checks without
// naming its rule, or an action is written as an assertion.
func TestIDSAssertionsNameTheirRule(t *testing.T) {
	for _, msg := range features.AssertionProblems(pickles(t), (&idsWorld{}).steps()) {
		t.Error(msg)
	}
}

// TestIDSStepsAreDefined: every step of ids.feature has exactly one
// definition.
func TestIDSStepsAreDefined(t *testing.T) {
	var patterns []string
	for _, s := range (&idsWorld{}).steps() {
		patterns = append(patterns, features.StepPattern(s.Pattern))
	}
	ps := pickles(t)
	if len(ps) < 25 {
		t.Fatalf("only %d scenarios", len(ps))
	}
	for _, msg := range features.UndefinedSteps(ps, patterns) {
		t.Error(msg)
	}
}
