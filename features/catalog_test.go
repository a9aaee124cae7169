package features

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	gherkin "github.com/cucumber/gherkin/go/v26"
	messages "github.com/cucumber/messages/go/v21"

	"github.com/idscheck/idscheck/spec"
)

// pickles parses a feature file into its scenarios, outlines expanded.
func pickles(t *testing.T, src []byte) []*messages.Pickle {
	t.Helper()
	n := 0
	ids := func() string { n++; return strconv.Itoa(n) }
	doc, err := gherkin.ParseGherkinDocument(bytes.NewReader(src), ids)
	if err != nil {
		t.Fatalf("parsing feature: %v", err)
	}
	return gherkin.Pickles(*doc, "intent.feature", ids)
}

// coverageProblems returns what is wrong with the rule tags of a feature:
// a tag naming no rule of the profile, a testable rule no scenario names,
// an untestable rule a scenario claims to exercise.
func coverageProblems(ps []*messages.Pickle, rules []spec.Rule, prefix string) []string {
	byID := map[string]spec.Rule{}
	for _, r := range rules {
		byID[r.ID] = r
	}
	tagged := map[string]bool{}
	var bad []string
	for _, p := range ps {
		for _, tag := range p.Tags {
			id := strings.TrimPrefix(tag.Name, "@")
			if !strings.HasPrefix(id, prefix) {
				continue
			}
			r, ok := byID[id]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("scenario %q: tag %s is not a rule of the catalog", p.Name, id))
			case r.Untestable != "":
				bad = append(bad, fmt.Sprintf("scenario %q: tag %s names a rule marked untestable", p.Name, id))
			}
			tagged[id] = true
		}
	}
	for _, r := range rules {
		if r.Untestable == "" && !tagged[r.ID] {
			bad = append(bad, fmt.Sprintf("rule %s is neither exercised by a scenario nor marked untestable", r.ID))
		}
	}
	sort.Strings(bad)
	return bad
}

// undefinedSteps returns the steps that match no pattern or several.
func undefinedSteps(ps []*messages.Pickle, patterns []string) []string {
	var res []*regexp.Regexp
	for _, p := range patterns {
		res = append(res, regexp.MustCompile(p))
	}
	var bad []string
	seen := map[string]bool{}
	for _, p := range ps {
		for _, s := range p.Steps {
			if seen[s.Text] {
				continue
			}
			seen[s.Text] = true
			var hits []string
			for i, re := range res {
				if re.MatchString(s.Text) {
					hits = append(hits, patterns[i])
				}
			}
			switch len(hits) {
			case 0:
				bad = append(bad, "undefined: "+s.Text)
			case 1:
			default:
				bad = append(bad, fmt.Sprintf("ambiguous: %s matches %q", s.Text, hits))
			}
		}
	}
	return bad
}

func intentPatterns() []string {
	w := &intentWorld{}
	var out []string
	for _, s := range w.steps() {
		out = append(out, s.pattern)
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
	for _, msg := range coverageProblems(pickles(t, src), spec.RulesFor(spec.ProfileIntent), "INTENT-") {
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

// TestCoverageChecksFail proves both checks complain when they must.
func TestCoverageChecksFail(t *testing.T) {
	rules := []spec.Rule{
		{ID: "INTENT-1-a"}, {ID: "INTENT-1-b"}, {ID: "INTENT-1-c", Untestable: "reason"},
	}
	cases := []struct {
		name, feature string
		want          []string
	}{
		{"all covered", "Feature: f\n  @INTENT-1-a @INTENT-1-b\n  Scenario: s\n    Given x\n", nil},
		{"unknown tag", "Feature: f\n  @INTENT-1-a @INTENT-1-b @INTENT-9-zzz\n  Scenario: s\n    Given x\n", []string{"INTENT-9-zzz is not a rule"}},
		{"uncovered", "Feature: f\n  @INTENT-1-a\n  Scenario: s\n    Given x\n", []string{"INTENT-1-b is neither"}},
		{"untestable tagged", "Feature: f\n  @INTENT-1-a @INTENT-1-b @INTENT-1-c\n  Scenario: s\n    Given x\n", []string{"INTENT-1-c names a rule marked untestable"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := coverageProblems(pickles(t, []byte(c.feature)), rules, "INTENT-")
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
}
