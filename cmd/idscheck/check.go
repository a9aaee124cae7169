package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/rundir"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/reports"
)

const checkSynopsis = `check [--target-file FILE] [target flags] DIR

Re-checks a chaos run directory offline (no target needed): reads chaos.json,
history.jsonl and ledger.jsonl, runs every check again, rewrites check.json and
the linearization view of the failing partitions, and prints the anomalies.

The target is never contacted. Give check the same target description as the
chaos run (--target-file FILE, or the same flags; flags may come before or
after DIR): it is validated as chaos and run validate it, and every secret it
holds is redacted from everything check writes and prints. A variable the
file names that is not set is no error here: check needs no secret (the
chaos run redacted its files when it wrote them).

Exit codes: 0 no anomaly, 1 anomalies found, 2 usage (no such run directory,
a target description that does not load), 4 the checker could not decide.`

func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	tf := targetFlags{offline: true} // the target is never contacted: no secret is demanded
	fs := newFlagSet("check", checkSynopsis, stderr)
	prof, err := lookupProfile(runDirProfile(args))
	if err != nil {
		fmt.Fprintf(stderr, "idscheck check: %v\n", err)
		return exitUsage
	}
	tf.register(fs, prof)
	// Flags may come before or after DIR: parse again after each argument.
	var dirs []string
	for rest := args; ; {
		if code, stop := parseFlags(fs, rest, true, stdout); stop {
			return code
		}
		if fs.NArg() == 0 {
			break
		}
		dirs = append(dirs, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(dirs) != 1 {
		fs.Usage()
		return exitUsage
	}
	if err := tf.load(fs, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "idscheck check: %v\n", err)
		return exitUsage
	}
	if err := tf.validate(prof.Name, false); err != nil {
		fmt.Fprintf(stderr, "idscheck check: %v\n", err)
		return exitUsage
	}
	if len(tf.Unset) > 0 {
		slices.Sort(tf.Unset)
		fmt.Fprintf(stderr, "idscheck check: note: $%s not set: check needs no secret (the run redacted its files when it wrote them), and redacts the others it was given\n",
			strings.Join(tf.Unset, ", $"))
	}
	return checkChaosDirWith(dirs[0], checkOptions{Secrets: tf.Secrets(), URL: tf.URL}, stdout, stderr)
}

// checkOptions are what a target description adds to re-checking a chaos
// run directory.
type checkOptions struct {
	// Secrets are redacted from everything written and printed
	// (targetFlags.Secrets).
	Secrets []string
	// URL is the target URL the description names: a run recorded against
	// another target is pointed out (never an error). "" checks nothing.
	URL string
}

func readChaosDir(dir string) (chaosRun, checker.History, checker.Ledger, error) {
	var run chaosRun
	b, err := os.ReadFile(filepath.Join(dir, rundir.Chaos))
	if errors.Is(err, fs.ErrNotExist) {
		return run, checker.History{}, checker.Ledger{}, fmt.Errorf("no chaos.json in %s: run 'idscheck chaos --out %s' first", dir, dir)
	}
	if err != nil {
		return run, checker.History{}, checker.Ledger{}, err
	}
	if err := json.Unmarshal(b, &run); err != nil {
		return run, checker.History{}, checker.Ledger{}, fmt.Errorf("chaos.json: %w", err)
	}
	hf, err := os.Open(filepath.Join(dir, rundir.History))
	if err != nil {
		return run, checker.History{}, checker.Ledger{}, err
	}
	defer hf.Close()
	h, err := checker.ReadHistory(hf)
	if err != nil {
		return run, h, checker.Ledger{}, err
	}
	lf, err := os.Open(filepath.Join(dir, rundir.Ledger))
	if err != nil {
		return run, h, checker.Ledger{}, err
	}
	defer lf.Close()
	l, err := checker.ReadLedger(lf)
	return run, h, l, err
}

// readChaosFiles reads the records a workload's check needs besides the
// history and the ledger (chaosRun.Files). A name that is not a plain file
// of the directory is refused.
func readChaosFiles(dir string, run chaosRun) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, name := range run.Files {
		if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return nil, fmt.Errorf("chaos.json names the file %q: want a plain file name", name)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// checkChaosDir checks a chaos run directory, writes check.json and the
// failing partitions' view, prints the anomalies and returns the exit code.
func checkChaosDir(dir string, stdout, stderr io.Writer) int {
	return checkChaosDirWith(dir, checkOptions{}, stdout, stderr)
}

// checkChaosDirWith is checkChaosDir with every secret of o redacted from
// check.json, linearization.html, the reports and the printed lines.
func checkChaosDirWith(dir string, o checkOptions, stdout, stderr io.Writer) int {
	redact := newSecretList(o.Secrets)
	stdout, stderr = redactingWriter(stdout, redact), redactingWriter(stderr, redact)
	run, h, l, err := readChaosDir(dir)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck check: %v\n", err)
		return exitUsage
	}
	files, err := readChaosFiles(dir, run)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck check: %v\n", err)
		return exitUsage
	}
	if recorded := strings.TrimPrefix(run.Target, "bundled reference server at "); o.URL != "" && recorded != "" &&
		strings.TrimRight(recorded, "/") != strings.TrimRight(o.URL, "/") {
		fmt.Fprintf(stderr, "idscheck check: note: %s was recorded against %s, not the target described (%s)\n", dir, run.Target, redactURL(o.URL))
	}
	rep := checkChaosRun(run, h, l, files)
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, rundir.Check), []byte(redactAll(string(b), o.Secrets)+"\n"), 0o644); err != nil {
		fmt.Fprintf(stderr, "idscheck check: %v\n", err)
		return exitUsage
	}
	viz := filepath.Join(dir, rundir.Linearization)
	os.Remove(viz)
	if len(rep.FailingPartitions) > 0 {
		var buf bytes.Buffer
		err := rep.Visualize(&buf)
		if err == nil {
			err = os.WriteFile(viz, []byte(redactAll(buf.String(), o.Secrets)), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "idscheck check: %s: %v\n", viz, err)
		}
	}
	printChaosOutcome(stdout, run, rep, dir)
	doc := chaosRunResult(run, rep, chaosViews(dir)) // index.html with the chaos section (see report.go)
	doc.Redact = o.Secrets
	if err := reports.WriteAll(dir, doc); err != nil {
		fmt.Fprintf(stderr, "idscheck check: %v\n", err)
	} else {
		fmt.Fprintf(stdout, "report: %s\n", filepath.Join(dir, rundir.HTML))
	}
	// The same exit as the run's: a requested fault never injected is
	// UNKNOWN however clean the histories.
	return doc.ExitCode
}

func printChaosReport(w io.Writer, run chaosRun, rep checker.Report, dir string) {
	q := rep.Queue
	fmt.Fprintf(w, "chaos: %d operations, %d effects, %d fault injections over %s\n", rep.Ops, rep.Effects,
		len(run.Timeline), run.End.Sub(run.Start).Round(1e6))
	if run.Summary != "" {
		fmt.Fprintf(w, "workload: %s\n", run.Summary)
	}
	if p, ok := profiles.Lookup(chaosRunProfile(run)); ok && p.Chaos != nil && p.Chaos.Tally != nil {
		fmt.Fprintln(w, p.Chaos.Tally(q))
	} else {
		fmt.Fprintf(w, "keys: %d delivered, %d answered terminally, %d executed, %d with an effect; duplicated %d, executed without effect %d, unexpected %d, pending %d, recovered %d\n",
			q.Attempted, q.Acknowledged, q.Fulfilled, q.Effected, q.Duplicated, q.Lost, q.Unexpected, q.Pending, q.Recovered)
	}
	for _, m := range rep.Models {
		fmt.Fprintf(w, "model %-12s %-8s %d ops in %d partitions\n", m.Model, m.Result, m.Ops, m.Partitions)
	}
	// A profile's detail may say what its checks found that is no anomaly
	// of theirs (a SHOULD chaos does not gate on, say).
	if n, ok := rep.Detail.(interface{ Notes() []string }); ok {
		for _, line := range n.Notes() {
			fmt.Fprintf(w, "note: %s\n", line)
		}
	}
	kinds := chaosSortedKeys(rep.Counts)
	violations := 0
	for _, k := range kinds {
		if n := rep.Counts[checker.AnomalyKind(k)]; n > 0 && checker.AnomalyKind(k).Violation() {
			violations += n
		}
	}
	if violations == 0 {
		fmt.Fprintf(w, "no anomaly: %s\n", rep.Verdict())
	} else {
		fmt.Fprintf(w, "ANOMALIES: %d\n", violations)
		for _, k := range kinds {
			if n := rep.Counts[checker.AnomalyKind(k)]; n > 0 {
				fmt.Fprintf(w, "  %-22s %d\n", k, n)
			}
		}
		for i, a := range rep.Anomalies {
			if i == 10 {
				fmt.Fprintf(w, "  … %s\n", moreAnomalies(rep, 10, filepath.Join(dir, rundir.Check)))
				break
			}
			fmt.Fprintf(w, "- %s %s: %s\n", a.Kind, a.Key, strings.TrimSpace(a.Explanation))
		}
	}
	fmt.Fprintf(w, "run directory: %s (re-check offline: %s check %s)\n", dir, selfCommand, shellQuote(dir))
	// Every run, passing or not, says how to run it again.
	fmt.Fprintf(w, "replay: %s\n", run.Command)
	if run.RunID != "" {
		fmt.Fprintf(w, "        (%s)\n", replayRepeats(run.RunID))
	}
	if run.ReplayNeeds != "" {
		fmt.Fprintf(w, "        first: %s\n", run.ReplayNeeds)
	}
}

// runDirProfile is the profile of the first run directory among args (its
// chaos.json says), for the target flags of that profile; the default
// profile when none says.
func runDirProfile(args []string) string {
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		b, err := readLimited(filepath.Join(a, rundir.Chaos), 64<<20)
		if err != nil {
			continue
		}
		var head struct {
			Profile string `json:"profile"`
		}
		if json.Unmarshal(b, &head) == nil && head.Profile != "" {
			return head.Profile
		}
	}
	return defaultProfile()
}

// moreAnomalies says what check.json holds beyond the shown anomalies: the
// examples the checker kept (a few of each kind), of how many found.
func moreAnomalies(rep checker.Report, shown int, file string) string {
	found := 0
	for _, n := range rep.Counts {
		found += n
	}
	kept := len(rep.Anomalies)
	if found <= kept {
		return fmt.Sprintf("%d more in %s (every anomaly found)", kept-shown, file)
	}
	return fmt.Sprintf("%d more examples in %s, which keeps %d of the %d anomalies found (a few of each kind; the counts above are of all)", kept-shown, file, kept, found)
}
