package main

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/verdict"
)

// TestInvokedAs: a printed command starts idscheck the way this process
// was started.
func TestInvokedAs(t *testing.T) {
	for arg0, want := range map[string]string{
		"/tmp/go-build2915/b001/exe/idscheck": "go run ./cmd/idscheck",
		"bin/idscheck":                        "bin/idscheck",
		"./idscheck":                          "./idscheck",
		"idscheck":                            "idscheck",
		"/usr/local/bin/idscheck":             "/usr/local/bin/idscheck",
		"/opt/my tools/idscheck":              "'/opt/my tools/idscheck'",
		"/tmp/x/idscheck.test":                "idscheck",
	} {
		if got := invokedAs(arg0); got != want {
			t.Errorf("invokedAs(%q) = %q, want %q", arg0, got, want)
		}
	}
}

// TestReproduceLineRuns: the reproduce line starts with how idscheck was
// started; a credential given by flag is its variable, with a note naming
// the variable to set; the secrets of --target-cmd are variables too
// (NAME="$NAME", --flag="$FLAG"), never their value nor REDACTED.
func TestReproduceLineRuns(t *testing.T) {
	saved := selfCommand
	t.Cleanup(func() { selfCommand = saved })
	selfCommand = "bin/idscheck"
	const key, busSecret, flagSecret = "k3y-from-flag-99", "bus-s3cret-value", "adm1n-tok-value"
	c, code, stop := parseRunFlags([]string{"--target", "http://127.0.0.1:9", "--api-key", key, "--seed", "7",
		"--target-cmd", "BUS_SECRET=" + busSecret + " ./server --admin-token=" + flagSecret + " --port 9"}, envOf(nil), os.Stderr, os.Stderr)
	if stop {
		t.Fatalf("parse stopped: %d", code)
	}
	line := redactAll(c.reproduce(), c.tgt.Secrets())
	for _, want := range []string{"bin/idscheck run --seed=7 --out=idscheck-report-repro ", `--api-key="$IDSCHECK_API_KEY"`, `BUS_SECRET="$BUS_SECRET"`, `--admin-token="$ADMIN_TOKEN"`, "--port 9"} {
		if !strings.Contains(line, want) {
			t.Errorf("reproduce line lacks %q:\n%s", want, line)
		}
	}
	for _, bad := range []string{key, busSecret, flagSecret, "REDACTED"} {
		if strings.Contains(line, bad) {
			t.Errorf("reproduce line holds %q:\n%s", bad, line)
		}
	}
	note := c.reproduceNeeds().note()
	for _, want := range []string{"export IDSCHECK_API_KEY=… (the key you gave --api-key)", "export BUS_SECRET=… (the value you gave it in --target-cmd)", "export ADMIN_TOKEN=… (the value you gave --admin-token in --target-cmd)"} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q: %s", want, note)
		}
	}
	// The line runs: a shell parses it into the words meant.
	if _, err := exec.LookPath("sh"); err == nil {
		out, err := exec.Command("sh", "-c", `BUS_SECRET=b ADMIN_TOKEN=a IDSCHECK_API_KEY=k; set -- `+strings.TrimPrefix(line, "bin/idscheck ")+`; for a; do echo "$a"; done`).Output()
		if err != nil || !strings.Contains(string(out), "--target-cmd=BUS_SECRET=\"$BUS_SECRET\" ./server --admin-token=\"$ADMIN_TOKEN\" --port 9\n") {
			t.Errorf("the shell reads the line as:\n%s (%v)", out, err)
		}
	}
}

// TestCurlLines: a failed exchange is a curl command whose credentials are
// variables, of any length, never their values.
func TestCurlLines(t *testing.T) {
	target := features.Target{BaseURL: "http://127.0.0.1:8080/", APIKey: "abc",
		Credentials: map[string]string{"admin-token": "admin-secret-1", "dashboard-password": "dash-pw-22"}}
	basic := base64.StdEncoding.EncodeToString([]byte("admin:dash-pw-22"))
	ex := verdict.Exchange{Method: "POST", Path: "/intent?x=1", ReqBody: `{"it's": "admin-secret-1"}`,
		ReqHeaders: map[string][]string{"X-Api-Key": {"abc"}, "X-Admin-Token": {"admin-secret-1"}, "Authorization": {"Basic " + basic},
			"Content-Length": {"12"}, "Idempotency-Key": {"k-1"}}}
	res := &features.RunResult{Rules: []verdict.RuleResult{
		{RuleID: "R-1", Verdict: verdict.Fail, Evidence: []verdict.Evidence{{Exchanges: []verdict.Exchange{ex, ex, ex}}}},
		{RuleID: "R-2", Verdict: verdict.Pass, Evidence: []verdict.Evidence{{Exchanges: []verdict.Exchange{ex}}}},
	}}
	curls := failedCurls(res, target.BaseURL, targetShellVars(target))
	if len(curls["R-1"]) != 1 || len(curls["R-2"]) != 0 {
		t.Fatalf("curls: %q", curls)
	}
	l := curls["R-1"][0]
	for _, want := range []string{"curl -sS -i -X POST 'http://127.0.0.1:8080/intent?x=1'", `-H 'X-Api-Key: '"${IDSCHECK_API_KEY}"`,
		`-H 'X-Admin-Token: '"${IDSCHECK_ADMIN_TOKEN}"`, `"$(printf 'admin:%s' "${IDSCHECK_DASHBOARD_PASSWORD}" | base64 | tr -d '\n')"`,
		`--data-raw '{"it'\''s": "'"${IDSCHECK_ADMIN_TOKEN}"'"}'`, "# sent 3 times"} {
		if !strings.Contains(l, want) {
			t.Errorf("curl line lacks %q:\n%s", want, l)
		}
	}
	for _, bad := range []string{"abc", "admin-secret-1", "dash-pw-22", basic, "Content-Length"} {
		if strings.Contains(l, bad) {
			t.Errorf("curl line holds %q:\n%s", bad, l)
		}
	}
	if _, err := exec.LookPath("sh"); err == nil {
		cmd := strings.TrimSuffix(l, "  # sent 3 times")
		out, err := exec.Command("sh", "-c", `curl() { for a; do echo "$a"; done; }; IDSCHECK_API_KEY=abc IDSCHECK_ADMIN_TOKEN=admin-secret-1 IDSCHECK_DASHBOARD_PASSWORD=dash-pw-22; `+cmd).Output()
		for _, want := range []string{"X-Api-Key: abc\n", "Authorization: Basic " + basic + "\n", `{"it's": "admin-secret-1"}` + "\n"} {
			if err != nil || !strings.Contains(string(out), want) {
				t.Errorf("the shell sends %q, not %q (%v)", out, want, err)
			}
		}
	}
}

// TestRunPrintsCurlOfFailedExchanges: a run that fails prints the failed
// exchanges as curl lines with the credentials as variables, and the
// reproduce line.
func TestRunPrintsCurlOfFailedExchanges(t *testing.T) {
	code, stdout, stderr := runCLI(t, "--mutant", "idem-conflict-accepted", "--rules", "INTENT-7.2-idem-conflict", "--seed", "1", "--out", filepath.Join(t.TempDir(), "r"))
	if code != exitFailed {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	i := strings.Index(stdout, "the failed exchanges, as curl")
	if i < 0 || !strings.Contains(stdout[i:], "INTENT-7.2-idem-conflict\n    curl -sS -i -X POST 'http://127.0.0.1:") ||
		!strings.Contains(stdout[i:], `"${IDSCHECK_API_KEY}"`) || strings.Contains(stdout, "REDACTED") {
		t.Errorf("no curl line of the failed exchange, or a secret in it:\n%s", stdout)
	}
	if !strings.Contains(stdout, "reproduce: idscheck run --seed=1") {
		t.Errorf("no reproduce line:\n%s", stdout)
	}
}
