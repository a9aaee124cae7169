package main

import (
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/spec"
)

// selection is what --rules (and --exclude) select of a profile's rules:
// the globs as given, and the rules they leave.
type selection struct {
	include, exclude []string    // globs; a --rules glob starting with '!' excludes
	rules            []spec.Rule // selected, in catalog order (every rule when nothing is selected)
}

// runnerSelect is what the scenario runner selects by: the include globs
// as given, or, when something is excluded, the selected rule IDs
// themselves. nil selects every rule.
func (s selection) runnerSelect() []string {
	if len(s.exclude) == 0 {
		return s.include
	}
	ids := make([]string, len(s.rules))
	for i, r := range s.rules {
		ids[i] = r.ID
	}
	return ids
}

// selectRules resolves --rules and --exclude against a profile's rules.
// Every glob must be valid and match at least one rule (a typo is an
// error, never a rule silently left out), and something must be left.
func selectRules(p harness.Profile, rulesFlag, excludeFlag string) (selection, error) {
	var s selection
	for _, g := range splitList(rulesFlag) {
		if x, ok := strings.CutPrefix(g, "!"); ok {
			s.exclude = append(s.exclude, strings.TrimSpace(x))
		} else {
			s.include = append(s.include, g)
		}
	}
	s.exclude = append(s.exclude, splitList(excludeFlag)...)
	all := p.Rules()
	check := func(flagName string, globs []string) error {
		for _, g := range globs {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				return fmt.Errorf("%s: bad rule glob %q: want an ID or a glob such as 'INTENT-7.*'", flagName, g)
			}
			if !matchesAny(all, g) {
				return fmt.Errorf("%s: %q matches no rule of the %s profile (idscheck rules --profile %s lists them)", flagName, g, p.Name, p.Name)
			}
		}
		return nil
	}
	if err := check("--rules", s.include); err != nil {
		return s, err
	}
	excludeName := "--exclude"
	if excludeFlag == "" {
		excludeName = "--rules"
	}
	if err := check(excludeName, s.exclude); err != nil {
		return s, err
	}
	for _, r := range all {
		if (len(s.include) == 0 || features.MatchRule(r.ID, s.include)) && !features.MatchRule(r.ID, s.exclude) {
			s.rules = append(s.rules, r)
		}
	}
	if len(s.rules) == 0 {
		return s, fmt.Errorf("--rules %s: nothing is left once %s is excluded", strings.Join(s.include, ","), strings.Join(s.exclude, ","))
	}
	return s, nil
}

func matchesAny(rules []spec.Rule, glob string) bool {
	for _, r := range rules {
		if ok, _ := path.Match(glob, r.ID); ok {
			return true
		}
	}
	return false
}

// dryRun prints the scenarios and the rules a selection would run, and
// runs nothing: no target is started or contacted.
func dryRun(w io.Writer, p harness.Profile, sel selection) error {
	pickles, err := features.ListScenarios(*p.Suite)
	if err != nil {
		return fmt.Errorf("reading the feature files: %w", err)
	}
	want := map[string]bool{}
	for _, r := range sel.rules {
		want[r.ID] = true
	}
	covered := map[string]bool{}
	var b strings.Builder
	var lines []string
	for _, sc := range pickles {
		var judged []string
		for _, id := range features.RulesOf(sc.Steps) {
			if want[id] {
				judged = append(judged, id)
				covered[id] = true
			}
		}
		if len(judged) > 0 {
			lines = append(lines, fmt.Sprintf("  %s: %s\n      judges %s\n", sc.Uri, sc.Name, strings.Join(judged, ", ")))
		}
	}
	var notCovered []string
	for _, r := range sel.rules {
		if !covered[r.ID] {
			notCovered = append(notCovered, r.ID)
		}
	}
	fmt.Fprintf(&b, "idscheck run --dry-run: the %s profile, %s selected, %s would run (nothing was run)\n",
		p.Name, plural(len(sel.rules), "rule"), plural(len(lines), "scenario"))
	b.WriteString("\nscenarios:\n")
	for _, l := range lines {
		b.WriteString(l)
	}
	b.WriteString("\nrules:\n")
	for _, r := range sel.rules {
		note := ""
		switch {
		case r.Untestable != "":
			note = "  (untestable)"
		case !covered[r.ID]:
			note = "  (no scenario: NOT RUN)"
		}
		fmt.Fprintf(&b, "  %-8s %s%s\n", r.Level, r.ID, note)
	}
	if len(notCovered) > 0 {
		fmt.Fprintf(&b, "\n%d selected rule(s) have no scenario: %s\n", len(notCovered), strings.Join(notCovered, ", "))
	}
	_, err = io.WriteString(w, b.String())
	return err
}
