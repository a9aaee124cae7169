package main

import (
	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/verdict"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/spec"
)

func TestKillMatrixExitCode(t *testing.T) {
	clean := mutantRow{Counts: map[verdict.Verdict]int{verdict.Pass: 10}}
	dirty := mutantRow{FailedRules: []string{"R-1"}}
	own := spec.RulesFor(intent.Name)[0].ID
	killed := mutantRow{Mutant: "m1", Breaks: "004 §7.2 same key", Killed: true, FailedRules: []string{"R-2"}}
	killedElsewhere := mutantRow{Mutant: "m2", Breaks: own, Killed: true, FailedRules: []string{"R-4"}}
	many := mutantRow{Mutant: "m5", Killed: true, FailedRules: []string{"R-1", "R-2", "R-3", "R-4", "R-5", "R-6", "R-7", "R-8"}}
	survived := mutantRow{Mutant: "m3", Breaks: "R-5", Undecided: []string{"R-5"}}
	broken := mutantRow{Mutant: "m4", Err: "starting the server: boom"}
	cases := []struct {
		name string
		rows []mutantRow
		code int
		says []string
	}{
		{"all killed", []mutantRow{clean, killed, killedElsewhere, many}, exitOK, []string{"CLEAN", "KILLED", "its own rule " + own + " did not fail", "3 of 3 mutants killed", "R-1 R-2 R-3 R-4 R-5 R-6 (+2 more)"}},
		{"one survives", []mutantRow{clean, killed, survived}, exitFailed, []string{"SURVIVED", "undecided: R-5", "1 of 2"}},
		{"clean server fails", []mutantRow{dirty, killed}, exitFailed, []string{"DIRTY", "failing: R-1"}},
		{"a mutant cannot run", []mutantRow{clean, broken}, exitFailed, []string{"ERROR", "boom"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if code := printKillMatrix(&b, tc.rows, "x/mutants.json", time.Minute); code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, b.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(b.String(), s) {
					t.Errorf("matrix does not say %q:\n%s", s, b.String())
				}
			}
		})
	}
}

func TestMutantsUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"bad flag", []string{"--nope"}},
		{"stray argument", []string{"x"}},
		{"zero time scale", []string{"--time-scale", "0"}},
		{"parallel 0", []string{"--parallel", "0"}},
		{"unknown mutant", []string{"--mutants", "no-such-mutant"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := cli(t.Context(), append([]string{"mutants", "--out", t.TempDir()}, tc.args...), &stdout, &stderr); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr.String())
			}
		})
	}
}

// TestMutantsAgainstTheBundledServer runs the command for real on one
// mutant and a few rules: caught by the rules that look at what it breaks,
// a survivor for rules that look elsewhere.
func TestMutantsAgainstTheBundledServer(t *testing.T) {
	t.Setenv(testBinaryIsCLI, "1") // children of --parallel 2 are this test binary
	cases := []struct {
		name     string
		rules    string
		parallel string
		code     int
		says     string
	}{
		{"caught, in child processes", "INTENT-10-*", "2", exitOK, "1 of 1 mutants killed"},
		{"survives rules that look elsewhere, in process", "INTENT-7.1-*", "1", exitFailed, "SURVIVED"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			out := t.TempDir()
			code := cli(t.Context(), []string{"mutants", "--mutants", "missing-security-headers", "--rules", tc.rules,
				"--parallel", tc.parallel, "--out", out}, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String(), tc.says) {
				t.Errorf("exit %d (want %d), output does not say %q:\n%s\n%s", code, tc.code, tc.says, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), "CLEAN") {
				t.Errorf("the clean server did not pass:\n%s", stdout.String())
			}
			if tc.parallel != "1" {
				for _, d := range []string{"clean", "missing-security-headers"} {
					if _, err := os.Stat(filepath.Join(out, d, "index.html")); err != nil {
						t.Errorf("no report of %s: %v", d, err)
					}
				}
			}
		})
	}
}

// TestEveryMutantNamesTheRuleItBreaks: breaks_caught needs a rule ID that
// scenarios judge.
func TestEveryMutantNamesTheRuleItBreaks(t *testing.T) {
	p, _ := profiles.Lookup(intent.Name)
	for _, m := range p.Mutants {
		r, ok := spec.Lookup(m.Breaks)
		if !ok || r.Untestable != "" {
			t.Errorf("mutant %s breaks %q: not a testable rule of the catalog", m.Name, m.Breaks)
		}
	}
}
