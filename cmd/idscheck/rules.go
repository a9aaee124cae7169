package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/spec"
)

// rulesConfig is what `idscheck rules` was asked for.
type rulesConfig struct {
	profile  string // empty: every profile
	level    string // empty: every level
	json     bool
	width    int  // characters of the quote shown in the table
	readings bool // list the decisions and their readings, not the rules
}

// cmdRules lists the rule catalog: a table by default, the full rules with --json.
func cmdRules(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg rulesConfig
	fs := newFlagSet("rules", "rules [--profile NAME] [--level MUST] [--json]\n       idscheck rules --readings [--profile NAME] [--json]  (the decisions: what run --reading DECISION=READING declares)", stderr)
	profileFlag(fs, &cfg.profile, "", "list only the rules of this profile (empty: every profile)")
	fs.StringVar(&cfg.level, "level", "", "list only the rules of this level (MUST, SHOULD or MAY); empty: all")
	fs.BoolVar(&cfg.json, "json", false, "print the full rules (quote, binding, explanation, untestable reason, readings with their quotes) as a JSON array")
	fs.IntVar(&cfg.width, "width", 72, "characters of the quote shown in the table (0: the whole quote)")
	fs.BoolVar(&cfg.readings, "readings", false, "list each profile's decisions (where the text is open or contradicts itself) and their readings: what idscheck run --reading DECISION=READING declares")
	if code, done := parseFlags(fs, args, false, stdout); done {
		return code
	}
	if cfg.readings {
		return listReadings(cfg, stdout, stderr)
	}
	rules, err := selectCatalog(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck rules: %v\n", err)
		return exitUsage
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		out := make([]ruleJSON, 0, len(rules))
		for _, r := range rules {
			out = append(out, ruleJSON{Rule: r, Decisions: ruleDecisions(r)})
		}
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "idscheck rules: write: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	writeRulesTable(stdout, rules, cfg.width)
	return exitOK
}

// ruleJSON is one rule of `idscheck rules --json`: the rule's own fields, and
// for a rule whose check rests on decisions (Rule.Readings), those decisions
// with the names and quotes of their readings.
type ruleJSON struct {
	spec.Rule
	Decisions []ruleDecision `json:"decisions,omitempty"`
}

// ruleDecision is a decision as `idscheck rules` shows it: the question and
// the readings a target may follow, each with the words of the text.
type ruleDecision struct {
	ID       string         `json:"id"`
	Question string         `json:"question"`
	Readings []spec.Reading `json:"readings"`
}

// decisionOf returns the decision id of profile p; false when there is none.
func decisionOf(p spec.Profile, id string) (spec.Decision, bool) {
	if pr, ok := profiles.Lookup(p); ok {
		return pr.Decision(id)
	}
	return spec.Decision{}, false
}

// ruleDecisions returns the decisions r.Readings names, in that order; an ID
// naming no decision of the profile is shown with its ID alone.
func ruleDecisions(r spec.Rule) []ruleDecision {
	var out []ruleDecision
	for _, id := range r.Readings {
		d, _ := decisionOf(r.Profile, id)
		out = append(out, ruleDecision{ID: id, Question: d.Question, Readings: d.Readings})
	}
	return out
}

// selectCatalog returns the rules matching cfg, in catalog order.
func selectCatalog(cfg rulesConfig) ([]spec.Rule, error) {
	level := spec.Level(strings.ToUpper(cfg.level))
	switch level {
	case "", spec.Must, spec.Should, spec.May:
	default:
		return nil, fmt.Errorf("--level %q: want MUST, SHOULD or MAY", cfg.level)
	}
	var all []spec.Rule
	if cfg.profile != "" {
		p, err := lookupProfile(cfg.profile)
		if err != nil {
			return nil, err
		}
		all = p.Rules()
	} else {
		for _, n := range profiles.Names() {
			p, _ := profiles.Lookup(n)
			all = append(all, p.Rules()...)
		}
	}
	var out []spec.Rule
	for _, r := range all {
		if level == "" || r.Level == level {
			out = append(out, r)
		}
	}
	return out, nil
}

// writeRulesTable writes one line per rule: ID, level, section, quote (cut to
// width runes), "[untestable]" when the rule is untestable and "[readings:
// ID]" when its check rests on a decision with readings; then a count; then
// each such decision with the rules resting on it and its readings' names
// and quotes.
func writeRulesTable(w io.Writer, rules []spec.Rule, width int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLEVEL\tSECTION\tQUOTE")
	untestable, withReadings, guarantees := 0, 0, 0
	type decisionRules struct {
		profile spec.Profile
		id      string
		rules   []string
	}
	var decisions []*decisionRules
	byKey := map[string]*decisionRules{}
	for _, r := range rules {
		q := cut(spec.NormalizeSpace(r.Quote), width)
		if r.Untestable != "" {
			untestable++
			q += "  [untestable]"
		}
		if r.Guarantee != "" {
			guarantees++
			q += "  [guarantee: " + r.Guarantee + "]"
		}
		if len(r.Readings) > 0 {
			withReadings++
			q += "  [readings: " + strings.Join(r.Readings, ", ") + "]"
		}
		for _, id := range r.Readings {
			key := string(r.Profile) + "/" + id
			if byKey[key] == nil {
				byKey[key] = &decisionRules{profile: r.Profile, id: id}
				decisions = append(decisions, byKey[key])
			}
			byKey[key].rules = append(byKey[key].rules, r.ID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, r.Level, r.Section, q)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d rules (%d untestable, %d judged under readings; `idscheck rules --json` shows why)\n", len(rules), untestable, withReadings)
	if guarantees > 0 {
		fmt.Fprintf(w, "%d MUSTs are [guarantee]s: their text uses no RFC 2119 keyword and states them in the indicative\n"+
			"(the words in brackets), so they bind the server and gate as a MUST; what it only recommends is a SHOULD.\n", guarantees)
	}
	if len(decisions) == 0 {
		return
	}
	fmt.Fprintf(w, "\nReadings: where the text contradicts itself or leaves a choice open, a check\n"+
		"resting on the choice is judged under each reading, and a target that follows\n"+
		"any of them is not failed for it.\n")
	for _, dr := range decisions {
		d, ok := decisionOf(dr.profile, dr.id)
		fmt.Fprintf(w, "\n%s", dr.id)
		if ok {
			fmt.Fprintf(w, " (%s): %s", d.Section, d.Question)
		}
		fmt.Fprintf(w, "\n  rules: %s\n", strings.Join(dr.rules, ", "))
		rw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, rd := range d.Readings {
			fmt.Fprintf(rw, "  %s\t§%s\t\"%s\"\n", rd.Name, rd.Section, cut(spec.NormalizeSpace(rd.Quote), width))
		}
		rw.Flush()
	}
}

// cut returns s cut to width runes, the last one an ellipsis; s itself when
// width is 0 or s is short enough.
func cut(s string, width int) string {
	if width > 0 && utf8.RuneCountInString(s) > width {
		return string([]rune(s)[:width-1]) + "…"
	}
	return s
}

// listReadings is `idscheck rules --readings`: every decision of each
// profile (or of --profile), its question, its readings with the words of
// the text, what the bundled server follows, and the rules judged under it.
func listReadings(cfg rulesConfig, stdout, stderr io.Writer) int {
	names := profiles.Names()
	if cfg.profile != "" {
		p, err := lookupProfile(cfg.profile)
		if err != nil {
			fmt.Fprintf(stderr, "idscheck rules: %v\n", err)
			return exitUsage
		}
		names = []spec.Profile{p.Name}
	}
	if cfg.level != "" {
		fmt.Fprintln(stderr, "idscheck rules: --level selects rules; --readings lists decisions: give one or the other")
		return exitUsage
	}
	type profileDecisions struct {
		Profile   spec.Profile    `json:"profile"`
		Decisions []spec.Decision `json:"decisions"`
	}
	var all []profileDecisions
	for _, n := range names {
		all = append(all, profileDecisions{n, decisionsOf(n)})
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(all); err != nil {
			fmt.Fprintf(stderr, "idscheck rules: write: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	var b strings.Builder
	b.WriteString("Where the text contradicts itself or leaves a choice open, a check resting on the\n" +
		"choice is judged under each reading (a target that follows one gets READING, never\n" +
		"FAIL). Declare the reading a target follows with idscheck run --reading DECISION=READING\n" +
		"(or \"readings\" in the target file): its checks are then PASS or FAIL by it alone.\n")
	for _, pd := range all {
		p, _ := profiles.Lookup(pd.Profile)
		var rules = map[string][]string{}
		for _, r := range p.Rules() {
			for _, id := range r.Readings {
				rules[id] = append(rules[id], r.ID)
			}
		}
		fmt.Fprintf(&b, "\n%s: %s\n", pd.Profile, plural(len(pd.Decisions), "decision"))
		for _, d := range pd.Decisions {
			fmt.Fprintf(&b, "\n  %s (§%s): %s\n", d.ID, d.Section, spec.NormalizeSpace(d.Question))
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			for i, rd := range d.Readings {
				mark := ""
				if i == 0 {
					mark = "  [the bundled server's default]"
				}
				fmt.Fprintf(tw, "    --reading %s=%s\t§%s\t%s%s\n", d.ID, rd.Name, rd.Section, cut(spec.NormalizeSpace(rd.Means), cfg.width), mark)
			}
			tw.Flush()
			if len(rules[d.ID]) > 0 {
				fmt.Fprintf(&b, "    rules: %s\n", strings.Join(rules[d.ID], ", "))
			}
			if d.Choice != "" {
				fmt.Fprintf(&b, "    bundled server: %s\n", cut(spec.NormalizeSpace(d.Choice), 2*cfg.width))
			}
		}
	}
	io.WriteString(stdout, b.String())
	return exitOK
}
