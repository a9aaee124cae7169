package features

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	gherkin "github.com/cucumber/gherkin/go/v26"
	messages "github.com/cucumber/messages/go/v21"

	"github.com/idscheck/idscheck/spec"
)

// The checks below keep a profile's feature file honest against its catalog
// and its step table; each profile's tests run them over its own file
// (strict mode without a target).

// ParseFeature parses a feature file into its scenarios, outlines expanded;
// uri names the file in the pickles.
func ParseFeature(src []byte, uri string) ([]*messages.Pickle, error) {
	n := 0
	ids := func() string { n++; return strconv.Itoa(n) }
	doc, err := gherkin.ParseGherkinDocument(bytes.NewReader(src), ids)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", uri, err)
	}
	return gherkin.Pickles(*doc, uri, ids), nil
}

// StepPatterns returns the patterns of a step table as godog matches them
// (StepPattern), for UndefinedSteps.
func StepPatterns(defs []StepDef) []string {
	var out []string
	for _, s := range defs {
		out = append(out, StepPattern(s.Pattern))
	}
	return out
}

// CoverageProblems returns what is wrong with the rules a feature's
// assertions name: a rule not in the catalog, an untestable rule judged, a
// testable rule no assertion judges, a reading naming no decision or reading
// of the rule, a set of reading-qualified assertions that leaves a reading of
// its decision out.
func CoverageProblems(ps []*messages.Pickle, rules []spec.Rule, prefix string, decision func(string) (spec.Decision, bool)) []string {
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
			if _, ok := byID[sr.RestsOn]; sr.RestsOn != "" && !ok {
				bad = append(bad, fmt.Sprintf("scenario %q: %s rests on %s, which is not a rule of the catalog", p.Name, sr.Rule, sr.RestsOn))
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

// AssertionProblems returns the steps whose kind and rule prefix disagree:
// an assertion (a Then naming a rule) must be a check or a probe, and every
// check or probe written as a Then must name the rule it judges.
func AssertionProblems(ps []*messages.Pickle, defs []StepDef) []string {
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

// UndefinedSteps returns the steps that match no pattern or several.
func UndefinedSteps(ps []*messages.Pickle, patterns []string) []string {
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
