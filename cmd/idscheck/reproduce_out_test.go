package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/reports"
)

// TestReproOut: a reproduce line writes beside the run it reproduces,
// never into it; a reproduction's own line to the next folder.
func TestReproOut(t *testing.T) {
	for out, want := range map[string]string{
		"idscheck-report":          "idscheck-report-repro",
		"idscheck-report/":         "idscheck-report-repro",
		"/tmp/x/run":               "/tmp/x/run-repro",
		"/tmp/x/run-repro":         "/tmp/x/run-repro-2",
		"/tmp/x/run-repro-2":       "/tmp/x/run-repro-3",
		"/tmp/x/run-repro-x":       "/tmp/x/run-repro-x-repro",
		"/tmp/x/-repro":            "/tmp/x/-repro-repro",
		"idscheck-chaos":           "idscheck-chaos-repro",
		"/tmp/x-repro/idscheck-rs": "/tmp/x-repro/idscheck-rs-repro",
	} {
		if got := reproOut(out); got != want {
			t.Errorf("reproOut(%q) = %q, want %q", out, got, want)
		}
	}
}

// shellWords is how sh reads line (after its first word, idscheck), with
// env set first.
func shellWords(t *testing.T, env, line string) []string {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	rest := line[strings.Index(line, " ")+1:]
	out, err := exec.Command("sh", "-c", env+"; set -- "+rest+`; for a; do printf '%s\0' "$a"; done`).Output()
	if err != nil {
		t.Fatalf("sh reads %q: %v", line, err)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}

// TestReproduceLineWritesToANewFolder (issue 28, case 5): the reproduce
// line of run, and the replay line of chaos, run as printed, write a new
// folder and leave the report they reproduce as it was (on main they
// carried --out=<the same folder>, or none, and replaced it); the note says
// to export the variables the line reads.
func TestReproduceLineWritesToANewFolder(t *testing.T) {
	for _, cmd := range []string{"run", "chaos"} {
		t.Run(cmd, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report")
			args := []string{cmd, "--target", "http://" + deadAddr(t), "--api-key", "k3y-value", "--health-wait", "200ms", "--out", out}
			var stdout, stderr bytes.Buffer
			suiteMu.Lock()
			code := cli(t.Context(), args, &stdout, &stderr)
			suiteMu.Unlock()
			if code != exitUnreachable {
				t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			first, err := reports.ReadResult(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stdout.String(), "first: export IDSCHECK_API_KEY=… (the key you gave --api-key)") {
				t.Errorf("the note does not say to export the key:\n%s", stdout.String())
			}
			words := shellWords(t, "IDSCHECK_API_KEY=k3y-value", first.Command)
			if !strings.Contains(strings.Join(words, " "), out+"-repro") {
				t.Errorf("the line does not write to %s-repro: %q", out, words)
			}
			stdout.Reset()
			stderr.Reset()
			suiteMu.Lock()
			code = cli(t.Context(), words, &stdout, &stderr)
			suiteMu.Unlock()
			if code != exitUnreachable {
				t.Fatalf("the line as printed: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
			}
			again, err := reports.ReadResult(out)
			if err != nil || !again.Started.Equal(first.Started) {
				t.Errorf("the line replaced the report it reproduces (%v): started %s, then %s", err, first.Started, again.Started)
			}
			if _, err := reports.ReadResult(out + "-repro"); err != nil {
				t.Errorf("the reproduction wrote no report beside it: %v", err)
			}
		})
	}
}
