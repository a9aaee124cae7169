package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/spec"
)

const mutantsSynopsis = `mutants [--mutants NAME[,NAME]] [--rules GLOB[,GLOB]] [--seed N] [--time-scale F] [--out DIR]

Self-validation: runs the intent profile against the bundled reference server
once clean and once with each deliberate mutant (a known bug), and prints the
kill matrix: for each mutant, the rules that caught it. A mutant is killed when
at least one rule ends FAIL or NON-STRICT; UNKNOWN alone does not kill.

Exit codes: 0 the clean server passes every rule and every mutant is killed;
1 a mutant survives or the clean server fails (or leaves undecided) a rule;
2 usage or configuration error.`

// mutantsConfig is what `idscheck mutants` parsed from its flags.
type mutantsConfig struct {
	mutants         string
	rules           string
	seed            uint64
	timeScale       float64
	out             string
	budget          time.Duration
	requestTimeout  time.Duration
	scenarioTimeout time.Duration
}

// mutantRow is one line of the kill matrix.
type mutantRow struct {
	Mutant       string                  `json:"mutant"` // "" for the clean server
	Description  string                  `json:"description,omitempty"`
	Breaks       string                  `json:"breaks,omitempty"` // the rule the mutant is meant to break
	Killed       bool                    `json:"killed"`
	FailedRules  []string                `json:"failed_rules,omitempty"`  // FAIL or NON-STRICT
	Undecided    []string                `json:"undecided,omitempty"`     // UNKNOWN
	BreaksCaught bool                    `json:"breaks_caught,omitempty"` // Breaks is among FailedRules
	Err          string                  `json:"err,omitempty"`           // the run could not happen
	Duration     time.Duration           `json:"duration_ns"`
	Counts       map[checker.Verdict]int `json:"counts,omitempty"`
}

func cmdMutants(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c mutantsConfig
	fs := newFlagSet("mutants", mutantsSynopsis, stderr)
	fs.StringVar(&c.mutants, "mutants", "", "comma-separated mutant names; empty: every mutant")
	fs.StringVar(&c.rules, "rules", "", "comma-separated rule-ID globs; empty: every rule")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of every run")
	fs.Float64Var(&c.timeScale, "time-scale", bundledTimeScale, "time scale of the bundled server")
	fs.StringVar(&c.out, "out", "idscheck-report/mutants", "directory mutants.json is written to")
	fs.DurationVar(&c.budget, "budget", features.DefaultBudget, "longest protocol wait one scenario may do")
	fs.DurationVar(&c.requestTimeout, "request-timeout", features.DefaultRequestTimeout, "bound of one HTTP exchange")
	fs.DurationVar(&c.scenarioTimeout, "scenario-timeout", 0, "bound of one scenario (default: budget + 3 request timeouts)")
	if code, stop := parseFlags(fs, args, false); stop {
		return code
	}
	if c.timeScale <= 0 || c.budget <= 0 || c.requestTimeout <= 0 || c.out == "" {
		fmt.Fprintln(stderr, "idscheck mutants: --time-scale, --budget and --request-timeout must be > 0, --out non-empty")
		return exitUsage
	}
	all := bundledMutants()
	if len(all) == 0 {
		fmt.Fprintln(stderr, "idscheck mutants: the bundled reference server has no mutants in this build")
		return exitUsage
	}
	chosen := all
	if c.mutants != "" {
		chosen = nil
		for _, name := range splitList(c.mutants) {
			i := slices.IndexFunc(all, func(m mutantInfo) bool { return m.Name == name })
			if i < 0 {
				var names []string
				for _, m := range all {
					names = append(names, m.Name)
				}
				fmt.Fprintf(stderr, "idscheck mutants: unknown mutant %q (known: %s)\n", name, strings.Join(names, ", "))
				return exitUsage
			}
			chosen = append(chosen, all[i])
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	rules := spec.RulesFor(spec.ProfileIntent)
	globs := splitList(c.rules)

	rows := make([]mutantRow, 0, len(chosen)+1)
	for i, m := range append([]mutantInfo{{}}, chosen...) {
		if ctx.Err() != nil {
			break
		}
		label := m.Name
		if label == "" {
			label = "(clean)"
		}
		fmt.Fprintf(stderr, "[%d/%d] %s\n", i+1, len(chosen)+1, label)
		rows = append(rows, runMutant(ctx, c, m, rules, globs, logger))
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "idscheck mutants: interrupted")
		return exitFailed
	}
	if err := os.MkdirAll(c.out, 0o755); err == nil {
		b, _ := json.MarshalIndent(rows, "", "  ")
		err = os.WriteFile(filepath.Join(c.out, "mutants.json"), append(b, '\n'), 0o644)
		if err != nil {
			fmt.Fprintf(stderr, "idscheck mutants: %v\n", err)
		}
	}
	return printKillMatrix(stdout, rows, filepath.Join(c.out, "mutants.json"))
}

// runMutant certifies the bundled server started with mutant m (the clean
// server when m.Name is empty) and sums up what failed.
func runMutant(ctx context.Context, c mutantsConfig, m mutantInfo, rules []spec.Rule, globs []string, logger *slog.Logger) (row mutantRow) {
	row = mutantRow{Mutant: m.Name, Description: m.Description, Breaks: m.Breaks}
	start := time.Now()
	defer func() { row.Duration = time.Since(start) }()
	dir, err := os.MkdirTemp("", "idscheck-mutant-")
	if err != nil {
		row.Err = err.Error()
		return row
	}
	defer os.RemoveAll(dir)
	target, stop, err := startBundled(ctx, bundledOptions{Dir: dir, TimeScale: c.timeScale, Mutant: m.Name, Logger: logger})
	if err != nil {
		row.Err = "starting the server: " + err.Error()
		return row
	}
	defer stop()
	if err := waitHealthy(ctx, target.BaseURL, 5*time.Second, c.requestTimeout); err != nil {
		row.Err = "target unreachable: " + err.Error()
		return row
	}
	res, err := features.Run(ctx, features.RunConfig{
		Profile: spec.ProfileIntent, Target: target, Seed: c.seed, Rules: rules, Select: globs,
		Budget: c.budget, RequestTimeout: c.requestTimeout, ScenarioTimeout: c.scenarioTimeout, Logger: logger,
	})
	if err != nil {
		row.Err = err.Error()
		return row
	}
	row.Counts = map[checker.Verdict]int{}
	for _, rr := range res.Rules {
		row.Counts[rr.Verdict]++
		switch rr.Verdict {
		case checker.Fail, checker.NonStrict:
			row.FailedRules = append(row.FailedRules, rr.RuleID)
		case checker.Unknown:
			row.Undecided = append(row.Undecided, rr.RuleID)
		}
	}
	row.Killed = len(row.FailedRules) > 0
	if _, isRule := spec.Lookup(m.Breaks); isRule {
		row.BreaksCaught = slices.Contains(row.FailedRules, m.Breaks)
	}
	return row
}

// printKillMatrix prints one line per mutant and returns the exit code: 1
// when the clean server is not all PASS/N/A or a mutant survives.
func printKillMatrix(w io.Writer, rows []mutantRow, where string) int {
	var b strings.Builder
	code := exitOK
	killed := 0
	b.WriteString("\nkill matrix (mutant × rules that caught it):\n")
	for _, r := range rows {
		switch {
		case r.Mutant == "":
			status := "CLEAN"
			if r.Err != "" || len(r.FailedRules) > 0 || len(r.Undecided) > 0 {
				status, code = "DIRTY", exitFailed
			}
			fmt.Fprintf(&b, "  %-28s %-8s %s\n", "(clean server)", status, cleanDetail(r))
		case r.Err != "":
			code = exitFailed
			fmt.Fprintf(&b, "  %-28s %-8s %s\n", r.Mutant, "ERROR", oneLine(r.Err, 120))
		case r.Killed:
			killed++
			note := ""
			if _, isRule := spec.Lookup(r.Breaks); isRule && !r.BreaksCaught {
				note = fmt.Sprintf(" (its own rule %s did not fail)", r.Breaks)
			}
			fmt.Fprintf(&b, "  %-28s %-8s %s%s\n", r.Mutant, "KILLED", firstFew(r.FailedRules, 6), note)
		default:
			code = exitFailed
			detail := "no rule failed"
			if len(r.Undecided) > 0 {
				detail += "; undecided: " + strings.Join(r.Undecided, " ")
			}
			fmt.Fprintf(&b, "  %-28s %-8s %s — breaks %s\n", r.Mutant, "SURVIVED", detail, r.Breaks)
		}
	}
	var total time.Duration
	for _, r := range rows {
		total += r.Duration
	}
	fmt.Fprintf(&b, "\n%d of %d mutants killed in %s; every failing rule in %s\n", killed, len(rows)-1, total.Round(time.Second), where)
	io.WriteString(w, b.String())
	return code
}

// firstFew joins the first n ids and says how many more there are.
func firstFew(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, " ")
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(ids[:n], " "), len(ids)-n)
}

func cleanDetail(r mutantRow) string {
	switch {
	case r.Err != "":
		return oneLine(r.Err, 120)
	case len(r.FailedRules) > 0 || len(r.Undecided) > 0:
		return "failing: " + firstFew(r.FailedRules, 10) + "  undecided: " + firstFew(r.Undecided, 10)
	}
	return fmt.Sprintf("%d PASS, %d N/A", r.Counts[checker.Pass], r.Counts[checker.NA])
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
