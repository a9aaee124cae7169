package features

import (
	"testing"

	"github.com/idscheck/idscheck/spec"
	_ "github.com/idscheck/idscheck/spec/httpidem" // registers the catalog
)

// httpDecision: the profile has no decision; its variants are declared.
func httpDecision(string) (spec.Decision, bool) { return spec.Decision{}, false }

// TestHTTPIdemFeatureCoversTheCatalog fails when an assertion names no rule of
// the http-idempotency catalog, or a testable http-idempotency rule is judged by no assertion.
func TestHTTPIdemFeatureCoversTheCatalog(t *testing.T) {
	src, err := embedded.ReadFile("http_idempotency.feature")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range coverageProblems(pickles(t, src), spec.RulesFor(spec.ProfileHTTPIdem), "", httpDecision) {
		t.Error(msg)
	}
}

// TestHTTPIdemAssertionsNameTheirRule fails when a Then step checks without
// naming its rule, or an action is written as an assertion.
func TestHTTPIdemAssertionsNameTheirRule(t *testing.T) {
	src, err := embedded.ReadFile("http_idempotency.feature")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range assertionProblems(pickles(t, src), (&httpWorld{}).steps()) {
		t.Error(msg)
	}
}

// TestHTTPIdemStepsAreDefined: every step of http_idempotency.feature has exactly one
// definition.
func TestHTTPIdemStepsAreDefined(t *testing.T) {
	src, err := embedded.ReadFile("http_idempotency.feature")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, s := range (&httpWorld{}).steps() {
		patterns = append(patterns, StepPattern(s.Pattern))
	}
	ps := pickles(t, src)
	if len(ps) < 15 {
		t.Fatalf("only %d scenarios", len(ps))
	}
	for _, msg := range undefinedSteps(ps, patterns) {
		t.Error(msg)
	}
}
