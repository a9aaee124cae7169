package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/rundir"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/reports"
	"github.com/idscheck/idscheck/spec"
)

// reportConfig is what `idscheck report` was asked for.
type reportConfig struct {
	dir string // run directory holding result.json
	out string // where to write; empty: dir itself
}

// cmdReport re-renders junit.xml and index.html of a run directory from its
// result.json alone: no target, no network. With --out DIR2 it writes a
// complete report there (result.json too, and the linearization views the
// chaos section links to) and leaves DIR untouched. A chaos run directory
// with no result.json (chaos.json, history.jsonl, ledger.jsonl, check.json)
// gets one built from those files, with the chaos section. With several
// run directories it writes --out/matrix.html instead: rules × runs.

func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg reportConfig
	fs := newFlagSet("report", "report DIR [--out DIR2]\n       idscheck report DIR1 DIR2 [DIR…] --out DIR  (matrix.html: rules × runs)", stderr)
	fs.StringVar(&cfg.out, "out", "", "write the report to this directory instead of DIR")
	// Flags may come before or after DIR: parse, take DIR, parse the rest.
	var pos []string
	for rest := args; ; {
		if code, done := parseFlags(fs, rest, true, stdout); done {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	switch len(pos) {
	case 0:
		fmt.Fprintln(stderr, "idscheck report: which run directory? usage: idscheck report DIR [--out DIR2]")
		return exitUsage
	case 1:
		cfg.dir = pos[0]
		return runReport(cfg, stdout, stderr)
	}
	if cfg.out == "" {
		fmt.Fprintf(stderr, "idscheck report: comparing %d runs needs --out DIR, where matrix.html is written\n", len(pos))
		return exitUsage
	}
	return runMatrix(pos, cfg.out, stdout, stderr)
}

// matrixFile is the comparison page `idscheck report DIR1 DIR2 … --out DIR`
// writes.
const matrixFile = rundir.Matrix

// runMatrix writes out/matrix.html: a row per rule, a column per run
// directory, each cell linking to the rule in that run's index.html.
func runMatrix(dirs []string, out string, stdout, stderr io.Writer) int {
	absOut, err := filepath.Abs(out)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck report: --out: %v\n", err)
		return exitUsage
	}
	var cols []reports.MatrixColumn
	for _, dir := range dirs {
		r, err := reports.ReadResult(dir)
		if err != nil {
			fmt.Fprintf(stderr, "idscheck report: %s: %v\n", dir, err)
			return exitUsage
		}
		col := reports.MatrixColumn{Name: filepath.Base(filepath.Clean(dir)), Result: r}
		if abs, err := filepath.Abs(dir); err == nil {
			if rel, err := filepath.Rel(absOut, abs); err == nil {
				col.Link = filepath.ToSlash(rel)
			}
		}
		cols = append(cols, col)
	}
	var b bytes.Buffer
	if err := reports.WriteMatrix(&b, cols); err != nil {
		fmt.Fprintf(stderr, "idscheck report: %v\n", err)
		return exitUsage
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		fmt.Fprintf(stderr, "idscheck report: %v\n", err)
		return exitUsage
	}
	if err := os.WriteFile(filepath.Join(out, matrixFile), b.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "idscheck report: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "%d runs compared", len(cols))
	if rules, differ, partial, err := reports.MatrixCounts(cols); err == nil {
		fmt.Fprintf(stdout, ": %d of %d rules differ between the runs that ran them", differ, rules)
		if partial > 0 {
			fmt.Fprintf(stdout, "; %d not run in every run (not a difference)", partial)
		}
	}
	fmt.Fprintf(stdout, "\n%s\n", filepath.Join(out, matrixFile))
	return exitOK
}

func runReport(cfg reportConfig, stdout, stderr io.Writer) int {
	r, err := reports.ReadResult(cfg.dir)
	fromChaos := false
	if errors.Is(err, reports.ErrNoResult) {
		if _, serr := os.Stat(filepath.Join(cfg.dir, rundir.Chaos)); serr != nil {
			fmt.Fprintf(stderr, "idscheck report: no %s in %s: run 'idscheck run --out %s' first\n", reports.ResultFile, cfg.dir, cfg.dir)
			return exitUsage
		}
		// A chaos run directory: build the result from chaos.json and the
		// check (check.json, or the histories checked again).
		r, err = chaosDirResult(cfg.dir)
		fromChaos = true
	}
	if err != nil {
		fmt.Fprintf(stderr, "idscheck report: %s: %v\n", cfg.dir, err)
		return exitUsage
	}
	out := cfg.out
	elsewhere := out != "" && !sameDir(out, cfg.dir)
	if !elsewhere {
		out = cfg.dir
	}
	if err := reports.RenderAll(out, r, elsewhere || fromChaos); err != nil {
		fmt.Fprintf(stderr, "idscheck report: %v\n", err)
		return exitUsage
	}
	if elsewhere && r.Chaos != nil {
		for _, name := range r.Chaos.Visualizations {
			if err := copyLocal(cfg.dir, out, name); err != nil {
				fmt.Fprintf(stderr, "idscheck report: warning: %s: %v (its link in index.html is broken)\n", name, err)
			}
		}
	}
	sum := r.Summary()
	if sum.Total > 0 || r.Chaos == nil {
		fmt.Fprintf(stdout, "%s: %d rules", sum.Verdict, sum.Total)
		for _, v := range reports.Verdicts {
			if n := sum.Counts[v]; n > 0 {
				fmt.Fprintf(stdout, ", %d %s", n, v)
			}
		}
		fmt.Fprintln(stdout)
	}
	if c := r.Chaos; c != nil {
		violations := 0
		for k, n := range c.Counts {
			if k.Violation() {
				violations += n
			}
		}
		fmt.Fprintf(stdout, "chaos %s: %d operations, %d effects, %d violations\n", c.Verdict, c.Ops, c.Effects, violations)
	}
	for _, f := range []string{reports.HTMLFile, reports.JUnitFile} {
		fmt.Fprintln(stdout, filepath.Join(out, f))
	}
	return exitOK
}

// sameDir reports whether a and b name the same directory (b exists).
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// maxCopiedView bounds a copied linearization view (porcupine's pages of
// failing partitions are tens of KB).
const maxCopiedView = 64 << 20

// copyLocal copies the file name (a plain relative path) from dir src to dir
// dst.
func copyLocal(src, dst, name string) error {
	if !filepath.IsLocal(name) {
		return fmt.Errorf("not a file of the run directory")
	}
	in, err := os.Open(filepath.Join(src, name))
	if err != nil {
		return err
	}
	defer in.Close()
	target := filepath.Join(dst, name)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	o, err := os.Create(target)
	if err != nil {
		return err
	}
	_, err = io.Copy(o, io.LimitReader(in, maxCopiedView))
	if cerr := o.Close(); err == nil {
		err = cerr
	}
	return err
}

// chaosDirResult builds the Result of a chaos run directory that has no
// result.json: chaos.json says what ran, check.json what the checker found
// (when it is missing the histories are checked again, as 'idscheck check'
// does).
func chaosDirResult(dir string) (*reports.Result, error) {
	run, h, l, err := readChaosDir(dir)
	if err != nil {
		return nil, err
	}
	var rep checker.Report
	b, err := os.ReadFile(filepath.Join(dir, rundir.Check))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		files, ferr := readChaosFiles(dir, run)
		if ferr != nil {
			return nil, ferr
		}
		rep = checkChaosRun(run, h, l, files)
	}
	return chaosResult(run, rep, chaosViews(dir)), nil
}

// chaosRunProfile is the profile whose workload a chaos run ran (a run
// recorded before chaos.json named it: the default profile's).
func chaosRunProfile(run chaosRun) spec.Profile {
	if run.Profile != "" {
		return spec.Profile(run.Profile)
	}
	return spec.Profile(defaultProfile())
}

// chaosViews lists the linearization views present in a chaos run directory.
func chaosViews(dir string) []string {
	var viz []string
	if _, err := os.Stat(filepath.Join(dir, rundir.Linearization)); err == nil {
		viz = append(viz, rundir.Linearization)
	}
	return viz
}

// writeChaosReport writes result.json, junit.xml and index.html (with the
// chaos section) of a checked chaos run into its directory.
func writeChaosReport(dir string, run chaosRun, rep checker.Report) error {
	return reports.WriteAll(dir, chaosResult(run, rep, chaosViews(dir)))
}

// chaosResult maps a chaos run and its check into a reports.Result with the
// chaos section and no rules; viz names the linearization views in the run
// directory. The chaos command can call it to write index.html beside
// chaos.json (reports.WriteAll(dir, chaosResult(run, rep, viz))).
func chaosResult(run chaosRun, rep checker.Report, viz []string) *reports.Result {
	c := &reports.Chaos{Start: run.Start, End: run.End, Duration: run.Duration, Workers: run.Workers,
		Faults: run.Faults, Namespace: run.Namespace, Unavailable: run.Unavailable, Visualizations: viz}
	c.SetCheck(rep)
	for _, in := range run.Timeline {
		c.Timeline = append(c.Timeline, reports.FaultSpan{Name: in.Fault, Kind: string(in.Kind), Params: in.Params,
			Start: in.Start, End: in.End, Err: in.Err})
	}
	for _, b := range run.Series {
		c.Series = append(c.Series, reports.Bucket{At: b.At, Ops: b.Ops, Unknown: b.Unknown, Failed: b.Failed, P50: b.P50, P99: b.P99})
	}
	code := exitOK
	switch rep.Verdict() {
	case verdict.Fail:
		code = exitFailed
	case verdict.Unknown:
		code = exitUndecided
	}
	code = applyChaosCoverage(c, run, code) // a requested fault never injected: UNKNOWN, never PASS (chaos.go)
	return &reports.Result{
		Tool:     reports.CurrentTool(),
		Profile:  chaosRunProfile(run),
		Target:   reports.Target{URL: strings.TrimPrefix(run.Target, "bundled reference server at "), Bundled: run.Bundled, Mutant: run.Mutant, TimeScale: run.TimeScale},
		Seed:     run.Seed,
		Command:  run.Command,
		Started:  run.Start,
		Finished: run.End,
		ExitCode: code,
		Chaos:    c,
	}
}
