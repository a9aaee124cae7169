package main

import (
	"bytes"
	"context"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/reports"
	"github.com/idscheck/idscheck/spec"
)

func runReportCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli(context.Background(), append([]string{"report"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// writeRun writes a finished run's reports into a fresh directory, as
// `idscheck run --out` would.
func writeRun(t *testing.T, chaos bool) string {
	t.Helper()
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	rule := spec.Rule{ID: "INTENT-7.2-idem-replay", Profile: intent.Name, Section: "7.2", Level: spec.Must, Quote: "replay"}
	r := &reports.Result{
		Tool: reports.Tool{Name: "idscheck", Version: "test"}, Profile: intent.Name, Seed: 7,
		Target: reports.Target{URL: "http://127.0.0.1:9"}, Command: "idscheck run --seed 7",
		Started: t0, Finished: t0.Add(time.Second), ExitCode: 1,
		Rules: []reports.RuleEntry{{Rule: rule, Result: verdict.RuleResult{RuleID: rule.ID, Verdict: verdict.Fail, Reason: "replayed a different body"}}},
	}
	dir := filepath.Join(t.TempDir(), "run")
	if chaos {
		r.Chaos = &reports.Chaos{Start: t0, End: t0.Add(time.Second), Verdict: verdict.Fail, Visualizations: []string{"linearization.html"}}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "linearization.html"), []byte("<html>porcupine</html>"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := reports.WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReportCommand(t *testing.T) {
	t.Run("re-renders in place from result.json alone", func(t *testing.T) {
		dir := writeRun(t, false)
		want, err := os.ReadFile(filepath.Join(dir, reports.HTMLFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{reports.HTMLFile, reports.JUnitFile} {
			if err := os.Remove(filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
		code, out, errs := runReportCmd(t, dir)
		if code != exitOK {
			t.Fatalf("exit %d, stderr %s", code, errs)
		}
		got, err := os.ReadFile(filepath.Join(dir, reports.HTMLFile))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("re-rendered index.html differs from the first (err %v)", err)
		}
		if _, err := os.Stat(filepath.Join(dir, reports.JUnitFile)); err != nil {
			t.Errorf("junit.xml not re-rendered: %v", err)
		}
		if !strings.Contains(out, "FAIL: 1 rules, 1 FAIL") || !strings.Contains(out, filepath.Join(dir, reports.HTMLFile)) {
			t.Errorf("stdout = %q", out)
		}
	})
	for _, order := range []string{"flag after DIR", "flag before DIR"} {
		t.Run("--out "+order, func(t *testing.T) {
			dir := writeRun(t, true)
			out2 := filepath.Join(t.TempDir(), "elsewhere")
			args := []string{dir, "--out", out2}
			if order == "flag before DIR" {
				args = []string{"--out", out2, dir}
			}
			before, _ := os.ReadFile(filepath.Join(dir, reports.ResultFile))
			if code, _, errs := runReportCmd(t, args...); code != exitOK {
				t.Fatalf("exit %d, stderr %s", code, errs)
			}
			for _, f := range []string{reports.ResultFile, reports.JUnitFile, reports.HTMLFile, "linearization.html"} {
				if _, err := os.Stat(filepath.Join(out2, f)); err != nil {
					t.Errorf("%s not written to --out: %v", f, err)
				}
			}
			after, _ := os.ReadFile(filepath.Join(dir, reports.ResultFile))
			if !bytes.Equal(before, after) {
				t.Errorf("the source run directory changed")
			}
		})
	}
	for _, tc := range []struct {
		name string
		args func(dir string) []string
		code int
		msg  string
	}{
		{"missing result.json", func(dir string) []string { return []string{t.TempDir()} }, exitUsage, "no result.json in "},
		{"no DIR", func(string) []string { return nil }, exitUsage, "which run directory"},
		{"two DIRs without --out", func(dir string) []string { return []string{dir, dir} }, exitUsage, "needs --out"},
		{"bad flag", func(dir string) []string { return []string{dir, "--nope"} }, exitUsage, "nope"},
		{"help", func(string) []string { return []string{"-h"} }, exitOK, "Usage: idscheck report"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runReportCmd(t, tc.args(writeRun(t, false))...)
			if code != tc.code || !strings.Contains(errs+out, tc.msg) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errs, tc.code, tc.msg)
			}
		})
	}
	t.Run("missing result.json says what to run", func(t *testing.T) {
		dir := t.TempDir()
		_, _, errs := runReportCmd(t, dir)
		if want := "run 'idscheck run --out " + dir + "' first"; !strings.Contains(errs, want) {
			t.Errorf("stderr %q lacks %q", errs, want)
		}
	})
	t.Run("corrupt result.json", func(t *testing.T) {
		dir := writeRun(t, false)
		if err := os.WriteFile(filepath.Join(dir, reports.ResultFile), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, _, errs := runReportCmd(t, dir); code != exitUsage || !strings.Contains(errs, "read result") {
			t.Errorf("exit %d, stderr %q", code, errs)
		}
	})
}

// writeChaosDir writes a chaos run directory as 'idscheck chaos' does: one
// unit of work executed by two intents (a duplicate) under one partition.
func writeChaosDir(t *testing.T) string {
	t.Helper()
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	run := chaosRun{Seed: 9, Command: "idscheck chaos --seed 9", Target: "http://127.0.0.1:9", Workers: 2, Faults: "partition",
		Namespace: "chaos-9", Start: t0, End: t0.Add(3 * time.Second), Options: chaosCheckOptions(),
		Timeline: []faults.Injection{{Fault: "partition", Kind: faults.Kind("network"), Start: t0.Add(time.Second), End: t0.Add(2 * time.Second)}},
		Series:   []chaos.Bucket{{At: 0, Ops: 3, P50: time.Millisecond, P99: 2 * time.Millisecond}, {At: time.Second, Ops: 1, Unknown: 1}}}
	pub := func(client int, id string, call int64) checker.Operation {
		return checker.Operation{ClientID: client, Kind: checker.OpPublish, Key: "k-1", Input: checker.Input{Body: "d"},
			Output: checker.Output{Status: 201, ID: id, Body: "r-" + id}, Call: call, Return: call + 1e6, Outcome: verdict.OutcomeOK}
	}
	h := checker.History{Ops: []checker.Operation{pub(1, "in-1", 1e6), pub(2, "in-2", 5e6)}}
	l := checker.Ledger{Effects: []checker.Effect{{Key: "k-1", Intent: "in-1", At: 3e6}, {Key: "k-1", Intent: "in-2", At: 7e6}}}
	if err := writeChaosRun(dir, run, h, l); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReportCommandChaosDir(t *testing.T) {
	for _, withCheck := range []bool{false, true} {
		t.Run(map[bool]string{false: "histories checked again", true: "from check.json"}[withCheck], func(t *testing.T) {
			dir := writeChaosDir(t)
			if withCheck {
				checkChaosDir(dir, io.Discard, io.Discard)
				for _, f := range []string{"check.json", reports.HTMLFile, reports.ResultFile} {
					if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
						t.Fatalf("idscheck check did not write %s: %v", f, err)
					}
				}
				// Render again from chaos.json and check.json alone.
				for _, f := range []string{reports.HTMLFile, reports.ResultFile, reports.JUnitFile} {
					if err := os.Remove(filepath.Join(dir, f)); err != nil {
						t.Fatal(err)
					}
				}
			}
			code, out, errs := runReportCmd(t, dir)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %s", code, errs)
			}
			r, err := reports.ReadResult(dir)
			if err != nil {
				t.Fatalf("no result.json written for the chaos run: %v", err)
			}
			if r.Chaos == nil || r.Chaos.Verdict != verdict.Fail || r.Chaos.Counts[checker.Duplicated] == 0 || len(r.Chaos.Timeline) != 1 || len(r.Chaos.Series) != 2 {
				t.Fatalf("chaos section = %+v", r.Chaos)
			}
			if r.Seed != 9 || r.Command != "idscheck chaos --seed 9" || r.ExitCode != exitFailed {
				t.Errorf("seed %d, command %q, exit code %d", r.Seed, r.Command, r.ExitCode)
			}
			html, err := os.ReadFile(filepath.Join(dir, reports.HTMLFile))
			if err != nil || !bytes.Contains(html, []byte("<svg")) || !bytes.Contains(html, []byte("duplicated")) {
				t.Errorf("index.html lacks the chaos section (err %v)", err)
			}
			// Two intents for one key (duplicated, idempotency violation), and,
			// since chaos drives every unit to an end (MustFinish), the key's
			// work never finished: lost.
			if !strings.HasPrefix(out, "chaos FAIL: 2 operations, 2 effects, 3 violations") || r.Chaos.Counts[checker.Lost] != 1 {
				t.Errorf("stdout = %q", out)
			}
		})
	}
}

func TestReportCommandMatrix(t *testing.T) {
	a, b := writeRun(t, false), writeRun(t, false)
	out := filepath.Join(t.TempDir(), "cmp")
	code, stdout, errs := runReportCmd(t, a, b, "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	page, err := os.ReadFile(filepath.Join(out, matrixFile))
	if err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(out, a)
	if want := `href="` + filepath.ToSlash(rel) + `/index.html#rule-INTENT-7.2-idem-replay-0"`; !bytes.Contains(page, []byte(want)) {
		t.Errorf("matrix.html lacks the link %s", want)
	}
	if !strings.Contains(stdout, "2 runs compared") {
		t.Errorf("stdout = %q", stdout)
	}
	if code, _, errs := runReportCmd(t, a, t.TempDir(), "--out", out); code != exitUsage || !strings.Contains(errs, "no result.json") {
		t.Errorf("a directory without result.json: exit %d, stderr %q", code, errs)
	}
}

// TestReportSummaryBlockedAndReading: the summary run prints lists a
// BLOCKED rule with its blocker and a READING rule as "follows NAME
// (DECISION)", one line each, and counts both; `idscheck report` counts
// them too.
func TestReportSummaryBlockedAndReading(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	rule := func(id string) spec.Rule {
		return spec.Rule{ID: id, Profile: intent.Name, Section: "3.3", Level: spec.Must}
	}
	results := []verdict.RuleResult{
		{RuleID: "R-PASS", Verdict: verdict.Pass},
		{RuleID: "R-BLOCKED", Verdict: verdict.Blocked, BlockedBy: "R-FAIL", Reason: "no intent to claim"},
		{RuleID: "R-READING", Verdict: verdict.Reading, Reason: "claimed at once",
			Reading: &verdict.ReadingChoice{Decision: intent.DecisionLeaseExpiry, Follows: "immediate"}},
		{RuleID: "R-FAIL", Verdict: verdict.Fail, Reason: "requeued at once",
			Reading: &verdict.ReadingChoice{Decision: intent.DecisionLeaseExpiry, Follows: "immediate", Declared: "backoff"}},
	}
	var rules []spec.Rule
	for _, rr := range results {
		rules = append(rules, rule(rr.RuleID))
	}
	g := gate(results, rules, nil, false)
	doc := &reports.Result{Profile: intent.Name, Started: t0, Finished: t0.Add(time.Second), Command: "idscheck run",
		ExitCode: g.code, Rules: reports.Entries(rules, results, nil)}
	var b bytes.Buffer
	printSummary(&b, doc, &features.RunResult{}, g, "", nil)
	out := b.String()
	for _, want := range []string{
		"  BLOCKED    1\n",
		"  READING    1\n",
		"  BLOCKED    R-BLOCKED  blocked by R-FAIL: no intent to claim\n",
		"  READING    R-READING  follows immediate (lease-expiry)\n",
		"  FAIL       R-FAIL  requeued at once (held to the declared reading backoff of lease-expiry)\n",
		"exit 1: 1 rule(s) failed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if i, j, k := strings.Index(out, "  FAIL       R-"), strings.Index(out, "  BLOCKED    R-"), strings.Index(out, "  READING    R-"); !(i < j && j < k) {
		t.Errorf("rules not listed FAIL, BLOCKED, READING:\n%s", out)
	}
	if strings.Contains(out, "R-PASS") {
		t.Errorf("a passing rule is listed:\n%s", out)
	}

	// idscheck report DIR counts them in its one line.
	doc.Rules = doc.Rules[:3] // no failure left: UNKNOWN (a BLOCKED rule remains)
	doc.Tool = reports.Tool{Name: "idscheck", Version: "test"}
	dir := filepath.Join(t.TempDir(), "run")
	if err := reports.WriteAll(dir, doc); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runReportCmd(t, dir)
	if code != exitOK || !strings.Contains(stdout, "UNKNOWN: 3 rules, 1 BLOCKED, 1 READING, 1 PASS\n") {
		t.Errorf("report: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
