package probe

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Disagreement is one expectation of a table a run contradicts.
type Disagreement struct {
	Behaviour, Rule, Want, Got, Why string
}

// Agree compares a table with a run's verdicts (rule ID → verdict string
// from result.json, and rule ID → blocked_by) under variant; it returns
// every expectation the run contradicts.
//
// A rule is judged by its worst scenario: where some behaviour of the
// table shows a deviation from a rule, the run's verdict must be one that
// deviation implies, and the behaviours on which the same rule holds do
// not ask for a PASS; where none does, every behaviour naming the rule
// asks for a PASS. A BLOCKED verdict agrees only when the expectation
// allows it and, where it names the blocking rule, the run names the
// same one. An intermittent deviation (a race the probe met in some of
// its tries) agrees with PASS, its deviation and BLOCKED alike.
func Agree(t *Table, variant string, verdicts map[string]string, blockedBy map[string]string) []Disagreement {
	type exp struct {
		behaviour string
		e         Expectation
	}
	byRule := map[string][]exp{}
	var order []string
	for _, b := range t.Behaviours {
		for _, e := range b.Expect {
			if e.Variant != variant || e.Rule == "" {
				continue
			}
			if _, ok := byRule[e.Rule]; !ok {
				order = append(order, e.Rule)
			}
			byRule[e.Rule] = append(byRule[e.Rule], exp{b.ID, e})
		}
	}
	var out []Disagreement
	for _, rule := range order {
		es := byRule[rule]
		var devs []exp
		for _, x := range es {
			if !slices.Contains(x.e.Verdicts, "PASS") {
				devs = append(devs, x)
			}
		}
		if len(devs) > 0 {
			es = devs
		}
		got, ran := verdicts[rule]
		ok := false
		var want []string
		var names, whys []string
		for _, x := range es {
			names = append(names, x.behaviour)
			whys = append(whys, x.e.Why)
			for _, v := range x.e.Verdicts {
				if !slices.Contains(want, v) {
					want = append(want, v)
				}
			}
			if !ran || !slices.Contains(x.e.Verdicts, got) {
				continue
			}
			if got == "BLOCKED" && x.e.BlockedBy != "" && blockedBy[rule] != x.e.BlockedBy {
				continue
			}
			ok = true
		}
		if ok {
			continue
		}
		g := got
		switch {
		case !ran:
			g = "(not in the run)"
		case got == "BLOCKED" && blockedBy[rule] != "":
			g = "BLOCKED by " + blockedBy[rule]
		}
		out = append(out, Disagreement{Behaviour: strings.Join(uniq(names), ", "), Rule: rule, Want: strings.Join(want, " or "), Got: g, Why: strings.Join(uniq(whys), "; ")})
	}
	return out
}

func uniq(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// WriteText writes the table for a terminal: per behaviour, what was
// observed and, per variant, the rules and verdicts it implies.
func (t *Table) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BEHAVIOUR\tOBSERVED\tIETF\tT0\tSTRIPE")
	for _, b := range t.Behaviours {
		cells := []string{b.ID, b.Observed}
		for _, v := range Variants() {
			cells = append(cells, cell(b, v))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, b := range t.Behaviours {
		fmt.Fprintf(w, "\n%s: %s\n  observed: %s\n", b.ID, b.Situation, b.Observed)
		for _, l := range b.Evidence {
			fmt.Fprintf(w, "  | %s\n", l)
		}
		for _, e := range b.Expect {
			rule := e.Rule
			if rule == "" {
				rule = "(no rule)"
			}
			v := strings.Join(e.Verdicts, "/")
			if e.BlockedBy != "" {
				v += " (BLOCKED by " + e.BlockedBy + ")"
			}
			if v == "" {
				fmt.Fprintf(w, "  %-6s %-32s %s\n", e.Variant, rule, e.Why)
				continue
			}
			fmt.Fprintf(w, "  %-6s %-32s %s: %s\n", e.Variant, rule, v, e.Why)
		}
	}
	return nil
}

// cell is a behaviour's expectations under variant for a table cell:
// "PASS IETF-2.6-retry-result", "a documented choice", "".
func cell(b Behaviour, variant string) string {
	var parts []string
	for _, e := range b.Expect {
		if e.Variant != variant {
			continue
		}
		if e.Rule == "" {
			parts = append(parts, "a documented choice")
			continue
		}
		parts = append(parts, strings.Join(e.Verdicts, "/")+" "+e.Rule)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
