package features

import (
	"strings"
	"testing"

	messages "github.com/cucumber/messages/go/v21"

	"github.com/idscheck/idscheck/spec"
)

// parse parses a feature file of a test.
func parse(t *testing.T, src string) []*messages.Pickle {
	t.Helper()
	ps, err := ParseFeature([]byte(src), "test.feature")
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestCoverageChecksFail proves the checks complain when they must.
func TestCoverageChecksFail(t *testing.T) {
	rules := []spec.Rule{
		{ID: "TOY-1-a"}, {ID: "TOY-1-b", Readings: []string{"d"}}, {ID: "TOY-1-c", Untestable: "reason"},
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
		{"all covered", head + "    Then [TOY-1-a] p\n    And [TOY-1-b] q\n", nil},
		{"both readings", head + "    Then [TOY-1-a] p\n    And [TOY-1-b, reading d=x] q\n    And [TOY-1-b, reading d=y] q\n", nil},
		{"unknown rule", head + "    Then [TOY-1-a] p\n    And [TOY-1-b] q\n    And [TOY-9-zzz] r\n", []string{"TOY-9-zzz is not a rule"}},
		{"uncovered", head + "    Then [TOY-1-a] p\n", []string{"TOY-1-b is neither"}},
		{"a Given names no judgment", head + "    Given [TOY-1-b] p\n    Then [TOY-1-a] p\n", []string{"TOY-1-b is neither"}},
		{"untestable judged", head + "    Then [TOY-1-a] p\n    And [TOY-1-b] q\n    And [TOY-1-c] r\n", []string{"TOY-1-c names a rule marked untestable"}},
		{"a reading left out", head + "    Then [TOY-1-a] p\n    And [TOY-1-b, reading d=x] q\n", []string{"without its reading y"}},
		{"a reading unknown", head + "    Then [TOY-1-a] p\n    And [TOY-1-b, reading d=x] q\n    And [TOY-1-b, reading d=y] q\n    And [TOY-1-b, reading d=z] q\n", []string{"names reading d=z"}},
		{"rests on a rule of the catalog", head + "    Then [TOY-1-a] p\n    And [TOY-1-b, rests on TOY-1-a] q\n", nil},
		{"rests on no rule", head + "    Then [TOY-1-a] p\n    And [TOY-1-b, rests on TOY-9-zzz] q\n", []string{"rests on TOY-9-zzz, which is not a rule"}},
		{"a decision the rule lacks", head + "    Then [TOY-1-b] q\n    And [TOY-1-a, reading d=x] p\n    And [TOY-1-a, reading d=y] p\n", []string{"no such decision", "no such decision"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CoverageProblems(parse(t, c.feature), rules, "TOY-", decision)
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
	ps := parse(t, "Feature: f\n  Scenario: s\n    Given the response status is 200\n    And nobody defined this\n    And I claim\n")
	got := UndefinedSteps(ps, append(StepPatterns([]StepDef{{Pattern: `^the response status is (\d+)$`}, {Pattern: `^(I|[a-z]+) claims?$`}}), `^I claim$`))
	if len(got) != 2 || !strings.HasPrefix(got[0], "undefined: nobody") || !strings.HasPrefix(got[1], "ambiguous: I claim") {
		t.Fatalf("undefinedSteps = %q", got)
	}
	defs := []StepDef{{Pattern: `^I claim$`, Kind: Action}, {Pattern: `^it holds$`, Kind: Check}}
	ps = parse(t, "Feature: f\n  Scenario: s\n    When I claim\n    Then [TOY-1-a] it holds\n    And [TOY-1-a] I claim\n    And it holds\n")
	got = AssertionProblems(ps, defs)
	if len(got) != 2 || !strings.Contains(got[0], "an action written as an assertion") || !strings.Contains(got[1], "names no rule") {
		t.Fatalf("assertionProblems = %q", got)
	}
}
