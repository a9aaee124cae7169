package reports

import (
	"github.com/idscheck/idscheck/verdict"
	"runtime"
	"runtime/debug"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/spec"
)

// CurrentTool describes the running build: the module version when built
// from a tagged module, else the VCS revision (with "+dirty" when the tree
// was modified), else "devel"; and runtime.Version().
func CurrentTool() Tool {
	t := Tool{Name: "idscheck", Version: "devel", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return t
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		t.Version = v
		return t
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		t.Version = "devel-" + rev + dirty
	}
	return t
}

// Entries pairs rules with their results by rule ID, in the order of rules.
// A rule with no result is left out (the caller lists it in
// Result.NotCovered); a result whose rule is not in rules is kept, after the
// others, with its rule from the catalog (or its ID alone). expected holds the
// rule IDs of the expected-failures file (nil: none).
func Entries(rules []spec.Rule, results []verdict.RuleResult, expected map[string]bool) []RuleEntry {
	byID := make(map[string]int, len(results))
	for i, rr := range results {
		if _, dup := byID[rr.RuleID]; !dup {
			byID[rr.RuleID] = i
		}
	}
	used := make([]bool, len(results))
	out := make([]RuleEntry, 0, len(results))
	for _, rule := range rules {
		i, ok := byID[rule.ID]
		if !ok || used[i] {
			continue
		}
		used[i] = true
		out = append(out, RuleEntry{Rule: rule, Result: results[i], Expected: expected[rule.ID]})
	}
	for i, rr := range results {
		if used[i] {
			continue
		}
		rule, ok := spec.Lookup(rr.RuleID)
		if !ok {
			rule = spec.Rule{ID: rr.RuleID}
		}
		out = append(out, RuleEntry{Rule: rule, Result: rr, Expected: expected[rr.RuleID]})
	}
	return out
}

// SetCheck fills the checker's findings of c from rep: verdict, counts,
// queue statistics, model results and the anomalies with their evidence (the
// failing partitions' operations stay out: porcupine's view of them is a
// separate file, listed in Visualizations).
func (c *Chaos) SetCheck(rep checker.Report) {
	c.Verdict = rep.Verdict()
	c.Ops, c.Effects = rep.Ops, rep.Effects
	c.Queue = rep.Queue
	c.Models = rep.Models
	c.Counts = rep.Counts
	c.Anomalies = rep.Anomalies
}
