package main

import (
	"strings"
	"testing"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/spec"
)

func TestKillMatrixExitCode(t *testing.T) {
	clean := mutantRow{Counts: map[checker.Verdict]int{checker.Pass: 10}}
	dirty := mutantRow{FailedRules: []string{"R-1"}}
	own := spec.RulesFor(spec.ProfileIntent)[0].ID
	killed := mutantRow{Mutant: "m1", Breaks: "004 §7.2 same key", Killed: true, FailedRules: []string{"R-2"}}
	killedElsewhere := mutantRow{Mutant: "m2", Breaks: own, Killed: true, FailedRules: []string{"R-4"}}
	survived := mutantRow{Mutant: "m3", Breaks: "R-5", Undecided: []string{"R-5"}}
	broken := mutantRow{Mutant: "m4", Err: "starting the server: boom"}
	cases := []struct {
		name string
		rows []mutantRow
		code int
		says []string
	}{
		{"all killed", []mutantRow{clean, killed, killedElsewhere}, exitOK, []string{"CLEAN", "KILLED", "its own rule " + own + " did not fail", "2 of 2 mutants killed"}},
		{"one survives", []mutantRow{clean, killed, survived}, exitFailed, []string{"SURVIVED", "undecided: R-5", "1 of 2"}},
		{"clean server fails", []mutantRow{dirty, killed}, exitFailed, []string{"DIRTY", "failing: R-1"}},
		{"a mutant cannot run", []mutantRow{clean, broken}, exitFailed, []string{"ERROR", "boom"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if code := printKillMatrix(&b, tc.rows, "x/mutants.json"); code != tc.code {
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
