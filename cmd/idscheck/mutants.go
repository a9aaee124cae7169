package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pingcap/failpoint"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/reports"
	"github.com/idscheck/idscheck/spec"
)

const mutantsSynopsis = `mutants [--mutants NAME[,NAME]] [--rules GLOB[,GLOB]] [--seed N] [--time-scale F] [--parallel N] [--out DIR]

Self-validation: runs a profile (--profile) against its bundled reference server
once clean and once with each deliberate mutant (a known bug), and prints the
kill matrix: for each mutant, the rules that caught it. A mutant is killed when
at least one rule ends FAIL or NON-STRICT; UNKNOWN alone does not kill. With
--parallel above 1 each server is certified by a child 'idscheck run' whose
full report is kept under --out/<mutant>/; mutants.json has the matrix.

Exit codes: 0 the clean server passes every rule and every mutant is killed;
1 a mutant survives or the clean server fails (or leaves undecided) a rule;
2 usage or configuration error.`

// mutantsConfig is what `idscheck mutants` parsed from its flags.
type mutantsConfig struct {
	profile         string
	prof            profiles.Profile
	mutants         string
	rules           string
	seed            uint64
	timeScale       float64
	out             string
	budget          time.Duration
	requestTimeout  time.Duration
	scenarioTimeout time.Duration
	parallel        int
}

// printMutantList writes the mutants of the profile named (its bundled
// server's deliberate bugs), each with the rule it breaks and what it does:
// the end of idscheck mutants -h.
func printMutantList(w io.Writer, name string) {
	p, err := lookupProfile(name)
	if err != nil {
		fmt.Fprintf(w, "\n%v\n", err)
		return
	}
	if len(p.Mutants) == 0 || p.Bundled == nil {
		fmt.Fprintf(w, "\nProfile %s has no bundled server with mutants.\n", p.Name)
		return
	}
	var b strings.Builder
	list := func(replicas bool) {
		for _, m := range p.Mutants {
			if m.Replicas != replicas {
				continue
			}
			variant := ""
			if m.Variant != "" {
				variant = " (variant " + m.Variant + ")"
			}
			fmt.Fprintf(&b, "  %s%s: breaks %s\n      %s\n", m.Name, variant, m.Breaks, m.Description)
		}
	}
	fmt.Fprintf(&b, "\nThe mutants of profile %s (--mutants NAME,… picks some; idscheck mutants --profile P -h lists another profile's):\n", p.Name)
	list(false)
	if slices.ContainsFunc(p.Mutants, func(m harness.Mutant) bool { return m.Replicas }) {
		fmt.Fprintf(&b, "\nCaught over several replicas alone, not in this matrix (idscheck chaos --profile %s --replicas 3 --store local --mutant NAME):\n", p.Name)
		list(true)
	}
	io.WriteString(w, b.String())
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
	Counts       map[verdict.Verdict]int `json:"counts,omitempty"`
}

func cmdMutants(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c mutantsConfig
	fs := newFlagSet("mutants", mutantsSynopsis, stderr)
	profileFlag(fs, &c.profile, defaultProfile(), "profile whose bundled server's mutants are certified")
	fs.StringVar(&c.mutants, "mutants", "", "comma-separated mutant names; empty: every mutant")
	fs.StringVar(&c.rules, "rules", "", "comma-separated rule-ID globs ('!GLOB' excludes); empty: every rule. Every glob must match a rule")
	fs.Uint64Var(&c.seed, "seed", 1, "seed of every run")
	fs.Float64Var(&c.timeScale, "time-scale", 0, "time scale of the bundled server (default: the profile's, 60 for most)")
	fs.StringVar(&c.out, "out", "idscheck-report/mutants", "directory mutants.json is written to")
	fs.DurationVar(&c.budget, "budget", features.DefaultBudget, "longest protocol wait one scenario may do")
	fs.DurationVar(&c.requestTimeout, "request-timeout", features.DefaultRequestTimeout, "bound of one HTTP exchange")
	fs.DurationVar(&c.scenarioTimeout, "scenario-timeout", 0, "bound of one scenario (default: budget + 3 request timeouts)")
	fs.IntVar(&c.parallel, "parallel", 3, "mutants certified at once, each by a child idscheck run (1: one after another, in this process)")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		printMutantList(fs.Output(), argProfile(args, defaultProfile()))
	}
	if code, stop := parseFlags(fs, args, false, stdout); stop {
		return code
	}
	if c.parallel < 1 || c.parallel > 32 {
		fmt.Fprintln(stderr, "idscheck mutants: --parallel must be 1–32")
		return exitUsage
	}
	scaleGiven := false
	fs.Visit(func(f *flag.Flag) { scaleGiven = scaleGiven || f.Name == "time-scale" })
	if !scaleGiven {
		c.timeScale = 1 // checked below; the profile's default is taken once it is known
	}
	if c.timeScale <= 0 || c.budget <= 0 || c.requestTimeout <= 0 || c.out == "" {
		fmt.Fprintln(stderr, "idscheck mutants: --time-scale, --budget and --request-timeout must be > 0, --out non-empty")
		return exitUsage
	}
	prof, ok := profiles.Lookup(spec.Profile(c.profile))
	if !ok {
		fmt.Fprintf(stderr, "idscheck mutants: %v\n", errUnknownProfile(c.profile))
		return exitUsage
	}
	c.prof = prof
	if !scaleGiven {
		c.timeScale = prof.DefaultTimeScale()
	}
	var all []harness.Mutant
	for _, m := range prof.Mutants {
		if !m.Replicas { // caught over several replicas alone (idscheck chaos --replicas N)
			all = append(all, m)
		}
	}
	if len(all) == 0 || prof.Bundled == nil {
		fmt.Fprintf(stderr, "idscheck mutants: profile %s has no bundled server with mutants\n", prof.Name)
		return exitUsage
	}
	chosen := all
	if c.mutants != "" {
		chosen = nil
		for _, name := range splitList(c.mutants) {
			i := slices.IndexFunc(all, func(m harness.Mutant) bool { return m.Name == name })
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
	rules := prof.Rules()
	sel, err := selectRules(prof, c.rules, "")
	if err != nil {
		fmt.Fprintf(stderr, "idscheck mutants: %v\n", err)
		return exitUsage
	}
	globs := sel.runnerSelect()
	// A racy mutant's race window is widened for the run (its failpoint
	// acts in that mutant's branch alone), so whether it is killed never
	// depends on how the scheduler happened to interleave two requests.
	for _, m := range chosen {
		for name, term := range m.Failpoints {
			if err := failpoint.Enable(name, term); err != nil {
				fmt.Fprintf(stderr, "idscheck mutants: enabling %s for %s: %v\n", name, m.Name, err)
				return exitUsage
			}
			defer failpoint.Disable(name)
		}
	}

	began := time.Now()
	jobs := append([]harness.Mutant{{}}, chosen...)
	rows := make([]mutantRow, len(jobs))
	var (
		mu   sync.Mutex // guards stderr and done
		done int
		wg   sync.WaitGroup
		next = make(chan int)
	)
	for range min(c.parallel, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				rows[i] = runMutant(ctx, c, jobs[i], rules, globs, logger)
				mu.Lock()
				done++
				fmt.Fprintf(stderr, "[%d/%d] %s\n", done, len(jobs), rowLine(rows[i]))
				mu.Unlock()
			}
		}()
	}
	for i := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
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
	return printKillMatrix(stdout, rows, filepath.Join(c.out, "mutants.json"), time.Since(began))
}

// runMutant certifies the bundled server started with mutant m (the clean
// server when m.Name is empty) and sums up what failed. With c.parallel 1 the
// suite runs in this process; otherwise in a child `idscheck run` (godog
// allows one suite per process), which also leaves a full report of each
// mutant under c.out.
func runMutant(ctx context.Context, c mutantsConfig, m harness.Mutant, rules []spec.Rule, globs []string, logger *slog.Logger) (row mutantRow) {
	row = mutantRow{Mutant: m.Name, Description: m.Description, Breaks: m.Breaks}
	start := time.Now()
	defer func() { row.Duration = time.Since(start) }()
	dir, err := os.MkdirTemp("", "idscheck-mutant-")
	if err != nil {
		row.Err = err.Error()
		return row
	}
	defer os.RemoveAll(dir)
	// A profile with effects gets a sink address: the server sends there,
	// and the harness (this process, or the child) listens there.
	sinkAddr, sinkURL := "", ""
	if c.prof.EffectSink {
		if sinkAddr, err = faults.FreeAddr(); err != nil {
			row.Err = "choosing the effect sink's address: " + err.Error()
			return row
		}
		sinkURL = "http://" + sinkAddr
	}
	target, stop, err := startBundled(ctx, c.prof, bundledOptions{Dir: dir, TimeScale: c.timeScale, Mutant: m.Name, Seed: c.seed, Logger: logger, SinkURL: sinkURL, Variant: m.Variant})
	if err != nil {
		row.Err = "starting the server: " + err.Error()
		return row
	}
	defer stop()
	var results []verdict.RuleResult
	if c.parallel > 1 {
		results, err = certifyInChild(ctx, c, target, sinkAddr, filepath.Join(c.out, mutantDir(m.Name)))
	} else {
		results, err = certifyInProcess(ctx, c, target, sinkAddr, rules, globs, logger)
	}
	if err != nil {
		row.Err = err.Error()
		return row
	}
	row.Counts = map[verdict.Verdict]int{}
	for _, rr := range results {
		row.Counts[rr.Verdict]++
		switch rr.Verdict {
		case verdict.Fail, verdict.NonStrict:
			row.FailedRules = append(row.FailedRules, rr.RuleID)
		case verdict.Unknown:
			row.Undecided = append(row.Undecided, rr.RuleID)
		}
	}
	row.Killed = len(row.FailedRules) > 0
	if isRuleOf(c.prof, m.Breaks) {
		row.BreaksCaught = slices.Contains(row.FailedRules, m.Breaks)
	}
	return row
}

func mutantDir(name string) string {
	if name == "" {
		return "clean"
	}
	return name
}

func certifyInProcess(ctx context.Context, c mutantsConfig, target features.Target, sinkAddr string, rules []spec.Rule, globs []string, logger *slog.Logger) ([]verdict.RuleResult, error) {
	if err := waitHealthy(ctx, target.BaseURL, 5*time.Second, c.requestTimeout); err != nil {
		return nil, fmt.Errorf("target unreachable: %w", err)
	}
	effects, err := startEffectSink(c.prof, effectSink{Listen: sinkAddr}, false)
	if err != nil {
		return nil, err
	}
	if effects != nil {
		defer effects.Close()
	}
	res, err := c.prof.Run(ctx, features.RunConfig{
		Target: target, Seed: c.seed, Select: globs, Sink: effects,
		Budget: c.budget, RequestTimeout: c.requestTimeout, ScenarioTimeout: c.scenarioTimeout, Logger: logger,
	})
	if err != nil {
		return nil, err
	}
	return res.Rules, nil
}

// certifyInChild runs `idscheck run` against target in a child process (the
// credentials in its environment, never on its command line), writing the
// report into dir, and returns the verdicts of its result.json.
func certifyInChild(ctx context.Context, c mutantsConfig, target features.Target, sinkAddr, dir string) ([]verdict.RuleResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding idscheck: %w", err)
	}
	args := []string{"run", "--profile", string(c.prof.Name), "--target", target.BaseURL, "--seed", strconv.FormatUint(c.seed, 10),
		"--time-scale", strconv.FormatFloat(c.timeScale, 'g', -1, 64), "--budget", c.budget.String(),
		"--request-timeout", c.requestTimeout.String(), "--out", dir}
	if c.rules != "" {
		args = append(args, "--rules", c.rules)
	}
	if c.scenarioTimeout > 0 {
		args = append(args, "--scenario-timeout", c.scenarioTimeout.String())
	}
	if sinkAddr != "" {
		args = append(args, "--effect-sink", sinkAddr)
	}
	// The credentials go in the environment, never on the command line.
	env := []string{credentialEnvName("api-key") + "=" + target.APIKey}
	for _, cr := range c.prof.Credentials {
		env = append(env, credentialEnvName(cr.Name)+"="+target.Credentials[cr.Name])
	}
	if s := c.prof.Section; s != nil && s.Encode != nil && target.Described != nil {
		// The profile's section goes in a target file, its secrets in the
		// environment, named by the file.
		file, vars, err := sectionTargetFile(s.Key, s.Encode, target.Described)
		if err != nil {
			return nil, err
		}
		defer os.Remove(file)
		args = append(args, "--target-file", file)
		env = append(env, vars...)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), env...)
	var errOut tailBuffer
	cmd.Stdout, cmd.Stderr = io.Discard, &errOut
	cmd.WaitDelay = 5 * time.Second
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && (exit.ExitCode() == exitFailed || exit.ExitCode() == exitUndecided):
	default:
		return nil, fmt.Errorf("idscheck run: %v: %s", err, oneLine(errOut.String(), 300))
	}
	doc, err := reports.ReadResult(dir)
	if err != nil {
		return nil, err
	}
	out := make([]verdict.RuleResult, 0, len(doc.Rules))
	for _, e := range doc.Rules {
		out = append(out, e.Result)
	}
	return out, nil
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = append([]byte(nil), t.b[len(t.b)-4096:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// rowLine is the progress line of one finished mutant.
func rowLine(r mutantRow) string {
	name := r.Mutant
	if name == "" {
		name = "(clean server)"
	}
	switch {
	case r.Err != "":
		return name + ": ERROR " + oneLine(r.Err, 120)
	case r.Killed:
		return fmt.Sprintf("%s: killed by %d rules (%s)", name, len(r.FailedRules), r.Duration.Round(time.Second))
	case r.Mutant == "":
		return fmt.Sprintf("%s: %d PASS, %d N/A, %d UNKNOWN (%s)", name, r.Counts[verdict.Pass], r.Counts[verdict.NA], r.Counts[verdict.Unknown], r.Duration.Round(time.Second))
	}
	return fmt.Sprintf("%s: SURVIVED (%s)", name, r.Duration.Round(time.Second))
}

// printKillMatrix prints one line per mutant and returns the exit code: 1
// when the clean server is not all PASS/N/A or a mutant survives.
func printKillMatrix(w io.Writer, rows []mutantRow, where string, wall time.Duration) int {
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
			if r.Breaks != "" && !r.BreaksCaught {
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
	fmt.Fprintf(&b, "\n%d of %d mutants killed in %s; every failing rule in %s\n", killed, len(rows)-1, wall.Round(time.Second), where)
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
	return fmt.Sprintf("%d PASS, %d N/A", r.Counts[verdict.Pass], r.Counts[verdict.NA])
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

// sectionTargetFile writes a target file holding the profile's section
// (encode writes it, its secrets moved into variables it names), and
// returns its name and the variables' assignments.
func sectionTargetFile(key string, encode func(any) (json.RawMessage, []string, error), value any) (string, []string, error) {
	raw, vars, err := encode(value)
	if err != nil {
		return "", nil, err
	}
	doc, err := json.Marshal(map[string]json.RawMessage{key: raw})
	if err != nil {
		return "", nil, err
	}
	f, err := os.CreateTemp("", "idscheck-target-*.json")
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	if _, err := f.Write(doc); err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	return f.Name(), vars, nil
}

// isRuleOf says whether id names a rule of profile p.
func isRuleOf(p harness.Profile, id string) bool {
	return slices.ContainsFunc(p.Rules(), func(r spec.Rule) bool { return r.ID == id })
}
