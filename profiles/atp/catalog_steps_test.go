package atp

import (
	"testing"

	messages "github.com/cucumber/messages/go/v21"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/spec"
)

// pickles parses atp.feature's scenarios.
func pickles(t *testing.T, src []byte) []*messages.Pickle {
	t.Helper()
	ps, err := features.ParseFeature(src, "atp.feature")
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func atpDecision(id string) (spec.Decision, bool) {
	for _, d := range Decisions() {
		if d.ID == id {
			return d, true
		}
	}
	return spec.Decision{}, false
}

// TestATPFeatureCoversTheCatalog fails when an assertion names no rule of
// the ATP catalog, or a testable ATP rule is judged by no assertion.
func TestATPFeatureCoversTheCatalog(t *testing.T) {
	src, err := feature.ReadFile("atp.feature")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range features.CoverageProblems(pickles(t, src), Rules(), "ATP-", atpDecision) {
		t.Error(msg)
	}
}

// TestATPAssertionsNameTheirRule fails when a Then step checks without
// naming its rule, or an action is written as an assertion.
func TestATPAssertionsNameTheirRule(t *testing.T) {
	src, err := feature.ReadFile("atp.feature")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range features.AssertionProblems(pickles(t, src), (&atpWorld{}).steps()) {
		t.Error(msg)
	}
}

// TestATPStepsAreDefined: every step of atp.feature has exactly one
// definition.
func TestATPStepsAreDefined(t *testing.T) {
	src, err := feature.ReadFile("atp.feature")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, s := range (&atpWorld{}).steps() {
		patterns = append(patterns, features.StepPattern(s.Pattern))
	}
	ps := pickles(t, src)
	if len(ps) < 20 {
		t.Fatalf("only %d scenarios", len(ps))
	}
	for _, msg := range features.UndefinedSteps(ps, patterns) {
		t.Error(msg)
	}
}
