package features

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	gherkin "github.com/cucumber/gherkin/go/v26"
	messages "github.com/cucumber/messages/go/v21"

	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/spec/intent"
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

// coverageProblems returns what is wrong with the rules a feature's
// assertions name: a rule not in the catalog, an untestable rule judged, a
// testable rule no assertion judges, a reading naming no decision or reading
// of the rule, a set of reading-qualified assertions that leaves a reading of
// its decision out.
func coverageProblems(ps []*messages.Pickle, rules []spec.Rule, prefix string, decision func(string) (spec.Decision, bool)) []string {
	byID := map[string]spec.Rule{}
	for _, r := range rules {
		byID[r.ID] = r
	}
	judged := map[string]bool{}
	var bad []string
	for _, p := range ps {
		var set *readingRun
		flush := func() {
			if set != nil {
				bad = append(bad, set.problems(p.Name, decision)...)
			}
			set = nil
		}
		for _, st := range p.Steps {
			if !isAssertion(st) {
				flush()
				continue
			}
			sr, _ := ParseStepRule(st.Text)
			if !strings.HasPrefix(sr.Rule, prefix) {
				flush()
				continue
			}
			r, ok := byID[sr.Rule]
			switch {
			case !ok:
				bad = append(bad, fmt.Sprintf("scenario %q: %s is not a rule of the catalog", p.Name, sr.Rule))
			case r.Untestable != "":
				bad = append(bad, fmt.Sprintf("scenario %q: %s names a rule marked untestable", p.Name, sr.Rule))
			case sr.Decision != "" && !slices.Contains(r.Readings, sr.Decision):
				bad = append(bad, fmt.Sprintf("scenario %q: %s is judged under reading %s=%s but the catalog lists no such decision for it", p.Name, sr.Rule, sr.Decision, sr.Reading))
			}
			judged[sr.Rule] = true
			if set != nil && (set.rule != sr.Rule || set.decision != sr.Decision) {
				flush()
			}
			if sr.Decision == "" {
				continue
			}
			if set == nil {
				set = &readingRun{rule: sr.Rule, decision: sr.Decision}
			}
			set.readings = append(set.readings, sr.Reading)
		}
		flush()
	}
	for _, r := range rules {
		if r.Untestable == "" && !judged[r.ID] {
			bad = append(bad, fmt.Sprintf("rule %s is neither judged by an assertion nor marked untestable", r.ID))
		}
	}
	sort.Strings(bad)
	return bad
}

// readingRun is a run of assertions judging one rule under the readings of
// one decision.
type readingRun struct {
	rule, decision string
	readings       []string
}

func (s *readingRun) problems(scenario string, decision func(string) (spec.Decision, bool)) []string {
	d, ok := decision(s.decision)
	if !ok || len(d.Readings) < 2 {
		return []string{fmt.Sprintf("scenario %q: %s is judged under %s, which is not a decision with readings", scenario, s.rule, s.decision)}
	}
	var bad []string
	for _, r := range d.Readings {
		if !slices.Contains(s.readings, r.Name) {
			bad = append(bad, fmt.Sprintf("scenario %q: %s is judged under %s without its reading %s", scenario, s.rule, s.decision, r.Name))
		}
	}
	for _, name := range s.readings {
		if _, ok := d.ReadingByName(name); !ok {
			bad = append(bad, fmt.Sprintf("scenario %q: %s names reading %s=%s, which the decision does not have", scenario, s.rule, s.decision, name))
		}
	}
	return bad
}

// assertionProblems returns the steps whose kind and rule prefix disagree:
// an assertion (a Then naming a rule) must be a check or a probe, and every
// check or probe written as a Then must name the rule it judges.
func assertionProblems(ps []*messages.Pickle, defs []StepDef) []string {
	d := &stepDefs{defs: defs}
	for _, s := range defs {
		d.res = append(d.res, regexp.MustCompile(s.Pattern))
	}
	var bad []string
	seen := map[string]bool{}
	for _, p := range ps {
		for _, st := range p.Steps {
			def, ok := d.lookup(st.Text)
			if !ok || seen[st.Text] {
				continue
			}
			seen[st.Text] = true
			sr, _ := ParseStepRule(st.Text)
			switch {
			case isAssertion(st) && def.Kind == Action:
				bad = append(bad, fmt.Sprintf("%q: an action written as an assertion (move it out of Then or make it a check)", st.Text))
			case st.Type == messages.PickleStepType_OUTCOME && def.Kind != Action && sr.Rule == "":
				bad = append(bad, fmt.Sprintf("%q: a check that names no rule", st.Text))
			}
		}
	}
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
