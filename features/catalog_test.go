package features

import (
	"testing"

	messages "github.com/cucumber/messages/go/v21"
)

// pickles parses a feature file into its scenarios, outlines expanded.
func pickles(t *testing.T, src []byte) []*messages.Pickle {
	t.Helper()
	ps, err := ParseFeature(src, "test.feature")
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// coverageProblems is CoverageProblems, assertionProblems AssertionProblems
// and undefinedSteps UndefinedSteps, for the catalog tests of this package.
var (
	coverageProblems  = CoverageProblems
	assertionProblems = AssertionProblems
	undefinedSteps    = UndefinedSteps
)
