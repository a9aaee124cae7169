package intent

import (
	"testing"

	messages "github.com/cucumber/messages/go/v21"

	"github.com/idscheck/idscheck/features"
)

// scenarios parses the profile's feature file.
func scenarios(t *testing.T) []*messages.Pickle {
	t.Helper()
	src, err := feature.ReadFile("intent.feature")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := features.ParseFeature(src, "intent.feature")
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestIntentFeatureCoversTheCatalog fails when a tag names no rule, or a
// testable rule of profile intent is exercised by no scenario.
func TestIntentFeatureCoversTheCatalog(t *testing.T) {
	for _, msg := range features.CoverageProblems(scenarios(t), Rules(), "INTENT-", DecisionByID) {
		t.Error(msg)
	}
}

// TestIntentAssertionsNameTheirRule fails when a Then step checks without
// naming the rule it judges, or an action is written as an assertion.
func TestIntentAssertionsNameTheirRule(t *testing.T) {
	for _, msg := range features.AssertionProblems(scenarios(t), (&intentWorld{}).steps()) {
		t.Error(msg)
	}
}

// TestIntentStepsAreDefined is strict mode without a target: every step of
// the feature file has exactly one definition.
func TestIntentStepsAreDefined(t *testing.T) {
	ps := scenarios(t)
	if len(ps) < 50 {
		t.Fatalf("only %d scenarios", len(ps))
	}
	for _, msg := range features.UndefinedSteps(ps, features.StepPatterns((&intentWorld{}).steps())) {
		t.Error(msg)
	}
}
