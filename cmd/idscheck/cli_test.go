package main

import (
	"github.com/idscheck/idscheck/pgtest"

	"bytes"
	"context"
	"fmt"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/profiles/toy"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testBinaryIsCLI, set in the environment, makes this test binary behave as
// idscheck itself: a command under test that starts idscheck as a child
// (mutants --parallel) starts os.Executable(), which is this binary.
const testBinaryIsCLI = "IDSCHECK_TEST_BINARY_IS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(testRegistersToy) == "1" { // a child of the toy's test: the toy is registered there too
		if err := profiles.Register(toy.Profile()); err != nil {
			panic(err)
		}
	}
	if os.Getenv(testBinaryIsCLI) == "1" {
		os.Exit(cli(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	// Every child this binary starts is idscheck: tests that run in
	// parallel (t.Parallel forbids t.Setenv) start them too.
	os.Setenv(testBinaryIsCLI, "1")
	os.Exit(pgtest.Main(m))
}

// TestEveryCommandHasHelp walks every command's -h: exit 0, its usage on
// stdout (so that `idscheck run -h | less` shows it), nothing on stderr.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			for _, h := range []string{"-h", "--help"} {
				var stdout, stderr bytes.Buffer
				code := cli(t.Context(), []string{c.name, h}, &stdout, &stderr)
				if code != exitOK {
					t.Errorf("%s: exit %d, want %d; stderr:\n%s", h, code, exitOK, stderr.String())
				}
				if !strings.Contains(stdout.String(), "Usage: idscheck "+c.name) {
					t.Errorf("%s printed no usage line on stdout for %s:\n%s", h, c.name, stdout.String())
				}
				if stderr.Len() != 0 {
					t.Errorf("%s wrote to stderr: %q", h, stderr.String())
				}
			}
		})
	}
}

// mistypedFlags is a typo of a real flag of each command, and the flag it
// should suggest.
var mistypedFlags = map[string][2]string{
	"run":     {"--seeed", "--seed"},
	"chaos":   {"--duraton", "--duration"},
	"check":   {"--target-fil", "--target-file"},
	"report":  {"--outt", "--out"},
	"rules":   {"--levle", "--level"},
	"serve":   {"--adr", "--addr"},
	"mutants": {"--paralel", "--parallel"},
	"version": {"--jsn", "--json"},
}

// TestMistypedFlagIsOneLine: a mistyped flag of any command is one line on
// stderr naming the flag meant and how to list every flag, exit 2, nothing
// on stdout; never the whole usage, which would scroll the error away.
func TestMistypedFlagIsOneLine(t *testing.T) {
	for _, c := range commands() {
		t.Run(c.name, func(t *testing.T) {
			typo, ok := mistypedFlags[c.name]
			if !ok {
				t.Fatalf("no mistyped flag for %s: add one to mistypedFlags", c.name)
			}
			var stdout, stderr bytes.Buffer
			code := cli(t.Context(), []string{c.name, typo[0], "x"}, &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			want := fmt.Sprintf("idscheck %s: unknown flag %s; did you mean %s? (idscheck %s -h lists every flag)\n", c.name, typo[0], typo[1], c.name)
			if stderr.String() != want {
				t.Errorf("stderr:\n%q\nwant one line:\n%q", stderr.String(), want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %q", stdout.String())
			}
		})
	}
	// A flag near none is named alone; a bad value is one line too.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rules", "--zzzzzz"}, "idscheck rules: unknown flag --zzzzzz (idscheck rules -h lists every flag)\n"},
		{[]string{"rules", "--width", "wide"}, "idscheck rules: invalid value \"wide\" for flag --width: parse error (idscheck rules -h lists every flag)\n"},
		{[]string{"rules", "--width"}, "idscheck rules: flag needs an argument: --width (idscheck rules -h lists every flag)\n"},
	} {
		var stdout, stderr bytes.Buffer
		if code := cli(t.Context(), tc.args, &stdout, &stderr); code != exitUsage || stderr.String() != tc.want {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), exitUsage, tc.want)
		}
	}
}

func TestTopLevelUsage(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string // where the usage goes: "stdout" or "stderr"
	}{
		{nil, exitUsage, "stdout"},
		{[]string{"help"}, exitOK, "stdout"},
		{[]string{"-h"}, exitOK, "stdout"},
		{[]string{"no-such-command"}, exitUsage, "stderr"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli(t.Context(), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			got := stdout.String()
			if tc.out == "stderr" {
				got = stderr.String()
			}
			if got == "" {
				t.Errorf("nothing on %s", tc.out)
			}
			if tc.out == "stdout" {
				for _, c := range commands() {
					if !strings.Contains(got, c.name) {
						t.Errorf("usage does not list %s", c.name)
					}
				}
			}
		})
	}
}

// TestEverySubcommandTakesAProfile: rules, run, chaos, mutants and serve
// take --profile from the registry and refuse an unknown one clearly.
func TestEverySubcommandTakesAProfile(t *testing.T) {
	for _, cmd := range []string{"rules", "run", "chaos", "mutants", "serve"} {
		var out, errb bytes.Buffer
		code := cli(t.Context(), []string{cmd, "--profile", "no-such-profile"}, &out, &errb)
		if code != exitUsage || !strings.Contains(out.String()+errb.String(), "no-such-profile") {
			t.Errorf("%s --profile no-such-profile: exit %d, %q", cmd, code, out.String()+errb.String())
		}
	}
}

// doubledPrefix returns the first "x: x:" of s ("--faults: faults:",
// "idscheck run: run:"), or "".
func doubledPrefix(s string) string {
	for _, line := range strings.Split(s, "\n") {
		parts := strings.Split(line, ": ")
		for i := 0; i+1 < len(parts); i++ {
			f := strings.Fields(parts[i])
			if len(f) == 0 {
				continue
			}
			a, b := strings.TrimLeft(f[len(f)-1], "-"), strings.TrimLeft(parts[i+1], "-")
			if a != "" && a == b {
				return line
			}
		}
	}
	return ""
}

// TestErrorsSayEachPrefixOnce: no error repeats its prefix ("--faults:
// faults:", "run: run:"), and an unknown profile lists the profiles as
// words, not a Go slice.
func TestErrorsSayEachPrefixOnce(t *testing.T) {
	if got := doubledPrefix("idscheck run: run: no rule"); got == "" {
		t.Fatal("doubledPrefix misses a double")
	}
	out := t.TempDir()
	for _, args := range [][]string{
		{"chaos", "--faults", "quake", "--out", out},
		{"chaos", "--faults", "net,quake", "--out", out},
		{"chaos", "--profile", "ids", "--faults", "quake", "--out", out},
		{"run", "--rules", "NOPE-*", "--out", out},
		{"run", "--rules", "INTENT-[", "--out", out},
		{"run", "--reading", "a=b", "--out", out},
		{"rules", "--level", "REQUIRED"},
		{"serve", "--profile", "ids", "--addr", "127.0.0.1:0"},
		{"report", filepath.Join(out, "none")},
		{"check", filepath.Join(out, "none")},
	} {
		var stdout, stderr bytes.Buffer
		code := cli(t.Context(), args, &stdout, &stderr)
		if code == exitOK {
			t.Errorf("%v: exit 0", args)
		}
		if d := doubledPrefix(stderr.String()); d != "" {
			t.Errorf("%v: a prefix said twice: %q", args, d)
		}
	}
	want := `unknown profile "nope"; profiles: ` + strings.Join(profileNamesOf(), ", ")
	for _, cmd := range []string{"rules", "run", "chaos", "mutants", "serve"} {
		var stdout, stderr bytes.Buffer
		cli(t.Context(), []string{cmd, "--profile", "nope"}, &stdout, &stderr)
		if got, w := stderr.String(), "idscheck "+cmd+": "+want+"\n"; got != w {
			t.Errorf("%s --profile nope:\n%q\nwant\n%q", cmd, got, w)
		}
	}
}

func profileNamesOf() []string {
	var out []string
	for _, n := range profiles.Names() {
		out = append(out, string(n))
	}
	return out
}

// TestREADMEOpeningNamesEveryProfile: the README's opening paragraph names
// every registered profile by the name --profile takes.
func TestREADMEOpeningNamesEveryProfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(string(b), "\n\n", 3)
	if len(parts) < 2 {
		t.Fatal("README has no opening paragraph")
	}
	for _, n := range profiles.Names() {
		if !strings.Contains(parts[1], "`"+string(n)+"`") {
			t.Errorf("the README's opening does not name the profile `%s`:\n%s", n, parts[1])
		}
	}
}
