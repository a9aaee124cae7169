package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/idscheck/idscheck/spec"
)

// rulesConfig is what `idscheck rules` was asked for.
type rulesConfig struct {
	profile string // empty: every profile
	level   string // empty: every level
	json    bool
	width   int // characters of the quote shown in the table
}

// cmdRules lists the rule catalog: a table by default, the full rules with --json.
func cmdRules(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg rulesConfig
	fs := newFlagSet("rules", "rules [--profile intent] [--level MUST] [--json]", stderr)
	fs.StringVar(&cfg.profile, "profile", "", "list only the rules of this profile (intent, ids, atp, t0, a2a); empty: all")
	fs.StringVar(&cfg.level, "level", "", "list only the rules of this level (MUST, SHOULD or MAY); empty: all")
	fs.BoolVar(&cfg.json, "json", false, "print the full rules (quote, explanation, untestable reason) as a JSON array")
	fs.IntVar(&cfg.width, "width", 72, "characters of the quote shown in the table (0: the whole quote)")
	if code, done := parseFlags(fs, args, false); done {
		return code
	}
	rules, err := selectCatalog(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck rules: %v\n", err)
		return exitUsage
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if rules == nil {
			rules = []spec.Rule{}
		}
		if err := enc.Encode(rules); err != nil {
			fmt.Fprintf(stderr, "idscheck rules: write: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	writeRulesTable(stdout, rules, cfg.width)
	return exitOK
}

// selectCatalog returns the rules matching cfg, in catalog order.
func selectCatalog(cfg rulesConfig) ([]spec.Rule, error) {
	level := spec.Level(strings.ToUpper(cfg.level))
	switch level {
	case "", spec.Must, spec.Should, spec.May:
	default:
		return nil, fmt.Errorf("--level %q: want MUST, SHOULD or MAY", cfg.level)
	}
	all := spec.Rules()
	if cfg.profile != "" {
		known := false
		for _, p := range []spec.Profile{spec.ProfileIntent, spec.ProfileIDS, spec.ProfileATP, spec.ProfileT0, spec.ProfileA2A} {
			if string(p) == strings.ToLower(cfg.profile) {
				known = true
			}
		}
		if !known {
			return nil, fmt.Errorf("--profile %q: want intent, ids, atp, t0 or a2a", cfg.profile)
		}
		all = spec.RulesFor(spec.Profile(strings.ToLower(cfg.profile)))
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
// width runes), and "N/A" when the rule is untestable; then a count.
func writeRulesTable(w io.Writer, rules []spec.Rule, width int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLEVEL\tSECTION\tQUOTE")
	untestable := 0
	for _, r := range rules {
		q := spec.NormalizeSpace(r.Quote)
		if width > 0 && utf8.RuneCountInString(q) > width {
			q = string([]rune(q)[:width-1]) + "…"
		}
		if r.Untestable != "" {
			untestable++
			q += "  [untestable]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, r.Level, r.Section, q)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%d rules (%d untestable; `idscheck rules --json` shows why)\n", len(rules), untestable)
}
