package features

import (
	"strings"
	"testing"

	messages "github.com/cucumber/messages/go/v21"

	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/spec/intent"
)

// pickles parses a feature file into its scenarios, outlines expanded.
func pickles(t *testing.T, src []byte) []*messages.Pickle {
	t.Helper()
	ps, err := ParseFeature("intent.feature", src)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

var (
	coverageProblems  = CoverageProblems
	assertionProblems = AssertionProblems
	undefinedSteps    = UndefinedSteps
)

func intentPatterns() []string {
	w := &intentWorld{}
	var out []string
	for _, s := range w.steps() {
		out = append(out, StepPattern(s.Pattern))
	}
	return out
}

// TestIntentFeatureCoversTheCatalog fails when a tag names no rule, or a
// testable rule of profile intent is exercised by no scenario.
func TestIntentFeatureCoversTheCatalog(t *testing.T) {
	src, err := embedded.ReadFile("intent.feature")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range coverageProblems(pickles(t, src), spec.RulesFor(spec.ProfileIntent), "INTENT-", intent.DecisionByID) {
		t.Error(msg)
	}
}

// TestIntentAssertionsNameTheirRule fails when a Then step checks without
// naming the rule it judges, or an action is written as an assertion.
func TestIntentAssertionsNameTheirRule(t *testing.T) {
	src, err := embedded.ReadFile("intent.feature")
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range assertionProblems(pickles(t, src), (&intentWorld{}).steps()) {
		t.Error(msg)
	}
}

// TestIntentStepsAreDefined is strict mode without a target: every step of
// the feature file has exactly one definition.
func TestIntentStepsAreDefined(t *testing.T) {
	src, err := embedded.ReadFile("intent.feature")
	if err != nil {
		t.Fatal(err)
	}
	ps := pickles(t, src)
	if len(ps) < 50 {
		t.Fatalf("only %d scenarios", len(ps))
	}
	for _, msg := range undefinedSteps(ps, intentPatterns()) {
		t.Error(msg)
	}
}

// TestCoverageChecksFail proves the checks complain when they must.
func TestCoverageChecksFail(t *testing.T) {
	rules := []spec.Rule{
		{ID: "INTENT-1-a"}, {ID: "INTENT-1-b", Readings: []string{"d"}}, {ID: "INTENT-1-c", Untestable: "reason"},
	}
	decision := func(id string) (spec.Decision, bool) {
		if id != "d" {
			return spec.Decision{}, false
		}
		return spec.Decision{ID: "d", Readings: []spec.Reading{{Name: "x"}, {Name: "y"}}}, true
	}
	const head = "Feature: f\n  Scenario: s\n    When I claim\n"
	cases := []struct {
		name, feature string
		want          []string
	}{
		{"all covered", head + "    Then [INTENT-1-a] p\n    And [INTENT-1-b] q\n", nil},
		{"both readings", head + "    Then [INTENT-1-a] p\n    And [INTENT-1-b, reading d=x] q\n    And [INTENT-1-b, reading d=y] q\n", nil},
		{"unknown rule", head + "    Then [INTENT-1-a] p\n    And [INTENT-1-b] q\n    And [INTENT-9-zzz] r\n", []string{"INTENT-9-zzz is not a rule"}},
		{"uncovered", head + "    Then [INTENT-1-a] p\n", []string{"INTENT-1-b is neither"}},
		{"a Given names no judgment", head + "    Given [INTENT-1-b] p\n    Then [INTENT-1-a] p\n", []string{"INTENT-1-b is neither"}},
		{"untestable judged", head + "    Then [INTENT-1-a] p\n    And [INTENT-1-b] q\n    And [INTENT-1-c] r\n", []string{"INTENT-1-c names a rule marked untestable"}},
		{"a reading left out", head + "    Then [INTENT-1-a] p\n    And [INTENT-1-b, reading d=x] q\n", []string{"without its reading y"}},
		{"a reading unknown", head + "    Then [INTENT-1-a] p\n    And [INTENT-1-b, reading d=x] q\n    And [INTENT-1-b, reading d=y] q\n    And [INTENT-1-b, reading d=z] q\n", []string{"names reading d=z"}},
		{"a decision the rule lacks", head + "    Then [INTENT-1-b] q\n    And [INTENT-1-a, reading d=x] p\n    And [INTENT-1-a, reading d=y] p\n", []string{"no such decision", "no such decision"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := coverageProblems(pickles(t, []byte(c.feature)), rules, "INTENT-", decision)
			if len(got) != len(c.want) {
				t.Fatalf("got %q, want %d problems", got, len(c.want))
			}
			for i := range c.want {
				if !strings.Contains(got[i], c.want[i]) {
					t.Errorf("problem %q lacks %q", got[i], c.want[i])
				}
			}
		})
	}
	ps := pickles(t, []byte("Feature: f\n  Scenario: s\n    Given the response status is 200\n    And nobody defined this\n    And I claim\n"))
	got := undefinedSteps(ps, append(intentPatterns(), `^I claim$`))
	if len(got) != 2 || !strings.HasPrefix(got[0], "undefined: nobody") || !strings.HasPrefix(got[1], "ambiguous: I claim") {
		t.Fatalf("undefinedSteps = %q", got)
	}
	defs := []StepDef{{Pattern: `^I claim$`, Kind: Action}, {Pattern: `^it holds$`, Kind: Check}}
	ps = pickles(t, []byte("Feature: f\n  Scenario: s\n    When I claim\n    Then [INTENT-1-a] it holds\n    And [INTENT-1-a] I claim\n    And it holds\n"))
	got = assertionProblems(ps, defs)
	if len(got) != 2 || !strings.Contains(got[0], "an action written as an assertion") || !strings.Contains(got[1], "names no rule") {
		t.Fatalf("assertionProblems = %q", got)
	}
}
