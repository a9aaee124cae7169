package httpidem

import (
	"testing"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/spec"
)

// httpDecision: the profile's decisions (its variants are declared).
func httpDecision(id string) (spec.Decision, bool) { return DecisionByID(id) }

// scenarios are the scenarios of the profile's feature file, outlines
// expanded.
func scenarios(t *testing.T) []*godog.Scenario {
	t.Helper()
	ps, err := features.ListScenarios(*Profile().Suite)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestHTTPIdemFeatureCoversTheCatalog fails when an assertion names no rule of
// the http-idempotency catalog, or a testable http-idempotency rule is judged by no assertion.
func TestHTTPIdemFeatureCoversTheCatalog(t *testing.T) {
	for _, msg := range features.CoverageProblems(scenarios(t), spec.RulesFor(Name), "", httpDecision) {
		t.Error(msg)
	}
}

// TestHTTPIdemAssertionsNameTheirRule fails when a Then step checks without
// naming its rule, or an action is written as an assertion.
func TestHTTPIdemAssertionsNameTheirRule(t *testing.T) {
	for _, msg := range features.AssertionProblems(scenarios(t), (&httpWorld{}).steps()) {
		t.Error(msg)
	}
}

// TestHTTPIdemStepsAreDefined: every step of http_idempotency.feature has exactly one
// definition.
func TestHTTPIdemStepsAreDefined(t *testing.T) {
	var patterns []string
	for _, s := range (&httpWorld{}).steps() {
		patterns = append(patterns, features.StepPattern(s.Pattern))
	}
	ps := scenarios(t)
	if len(ps) < 15 {
		t.Fatalf("only %d scenarios", len(ps))
	}
	for _, msg := range features.UndefinedSteps(ps, patterns) {
		t.Error(msg)
	}
}
