package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/reports"
	"github.com/idscheck/idscheck/spec"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	// godog sets process environment variables: one suite at a time, also
	// among the tests that run in parallel.
	suiteMu.Lock()
	defer suiteMu.Unlock()
	var stdout, stderr bytes.Buffer
	code := cli(t.Context(), append([]string{"run"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// suiteMu makes runCLI run one suite at a time.
var suiteMu sync.Mutex

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunUsageErrors(t *testing.T) {
	unknownID := writeFile(t, "exp", "# comment\nINTENT-NOPE-x\n")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bad flag", []string{"--no-such-flag"}, "unknown flag --no-such-flag"},
		{"stray argument", []string{"extra"}, "unexpected argument"},
		{"unknown profile", []string{"--profile", "nope"}, `unknown profile "nope"`},
		{"target without key", []string{"--target", "http://127.0.0.1:1"}, "an API key is required with --target"},
		{"secret without target", []string{"--api-key", "k"}, "--api-key needs --target"},
		{"zero time scale", []string{"--target", "http://127.0.0.1:1", "--api-key", "k", "--time-scale", "0"}, "--time-scale must be > 0"},
		{"negative budget", []string{"--target", "http://127.0.0.1:1", "--api-key", "k", "--budget", "-1s"}, "must be > 0"},
		{"missing expected-failures file", []string{"--target", "http://127.0.0.1:1", "--api-key", "k", "--expected-failures", "/nonexistent/x"}, "expected failures"},
		{"unknown rule in expected-failures", []string{"--target", "http://127.0.0.1:1", "--api-key", "k", "--expected-failures", unknownID}, `"INTENT-NOPE-x" is not a rule`},
		{"not a URL", []string{"--target", "127.0.0.1:1", "--api-key", "k"}, `--target is "127.0.0.1:1": want an http:// or https:// URL`},
		{"rules match nothing", []string{"--rules", "NOPE-*"}, `"NOPE-*" matches no rule of the intent profile`},
		{"bad rule glob", []string{"--rules", "INTENT-["}, "bad rule glob"},
		{"mutant with target", []string{"--target", "http://127.0.0.1:1", "--api-key", "k", "--mutant", "x"}, "--mutant applies to the bundled server only"},
		{"unknown mutant", []string{"--mutant", "no-such-mutant"}, "no-such-mutant"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append(tc.args, "--out", t.TempDir(), "--health-wait", "200ms")...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, stderr)
			}
		})
	}
}

func TestRunUnreachableTarget(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()
	unhealthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer unhealthy.Close()
	done := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	defer hanging.Close()
	defer close(done) // before hanging.Close
	cases := []struct {
		name, url, want string
	}{
		{"connection refused", refused, "connection refused"},
		{"health answers 503", unhealthy.URL, "answered 503, want 200"},
		{"health hangs", hanging.URL, "/health did not answer 200 within --health-wait 300ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			code, stdout, stderr := runCLI(t, "--target", tc.url, "--api-key", "secret-key", "--health-wait", "300ms", "--request-timeout", "200ms", "--out", out)
			if code != exitUnreachable {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitUnreachable, stderr)
			}
			for _, s := range []string{"target unreachable", tc.want, "check that the target is running"} {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout does not say %q:\n%s", s, stdout)
				}
			}
			if strings.Contains(stdout+stderr, "secret-key") {
				t.Error("the output shows the API key")
			}
		})
	}
}

func TestGate(t *testing.T) {
	rules := []spec.Rule{{ID: "M", Level: spec.Must}, {ID: "S", Level: spec.Should}, {ID: "Y", Level: spec.May}, {ID: "M2", Level: spec.Must}}
	rr := func(pairs ...string) []verdict.RuleResult {
		var out []verdict.RuleResult
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, verdict.RuleResult{RuleID: pairs[i], Verdict: verdict.Verdict(pairs[i+1])})
		}
		return out
	}
	cases := []struct {
		name     string
		results  []verdict.RuleResult
		expected []string
		strict   bool
		code     int
	}{
		{"all pass", rr("M", "PASS", "S", "PASS"), nil, false, exitOK},
		{"n/a does not fail", rr("M", "N/A", "S", "PASS"), nil, false, exitOK},
		{"must fails", rr("M", "FAIL", "S", "PASS"), nil, false, exitFailed},
		{"should broken, lenient", rr("M", "PASS", "S", "NON-STRICT"), nil, false, exitOK},
		{"should broken, strict", rr("M", "PASS", "S", "NON-STRICT"), nil, true, exitFailed},
		{"may broken, strict", rr("M", "PASS", "Y", "NON-STRICT"), nil, true, exitOK},
		{"unknown", rr("M", "PASS", "S", "UNKNOWN"), nil, false, exitUndecided},
		{"fail beats unknown", rr("M", "FAIL", "S", "UNKNOWN"), nil, false, exitFailed},
		{"expected failure", rr("M", "FAIL", "M2", "PASS"), []string{"M"}, false, exitOK},
		{"expected failure, another fails", rr("M", "FAIL", "M2", "FAIL"), []string{"M"}, false, exitFailed},
		{"expected failure now passes", rr("M", "PASS"), []string{"M"}, false, exitFailed},
		{"expected failure still unknown", rr("M", "UNKNOWN"), []string{"M"}, false, exitUndecided},
		{"expected should, strict", rr("S", "NON-STRICT"), []string{"S"}, true, exitOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exp := map[string]bool{}
			for _, id := range tc.expected {
				exp[id] = true
			}
			g := gate(tc.results, rules, exp, tc.strict)
			if g.code != tc.code {
				t.Errorf("exit %d (%s), want %d", g.code, g.message, tc.code)
			}
			if tc.name == "expected failure now passes" && (!slices.Equal(g.nowPasses, []string{"M"}) || !strings.Contains(g.message, "remove them")) {
				t.Errorf("now-passing rule not flagged: %+v", g)
			}
		})
	}
}

func TestReadExpectedFailures(t *testing.T) {
	rules := spec.RulesFor(intent.Name)
	if len(rules) < 2 {
		t.Skip("intent catalog has fewer than 2 rules")
	}
	p := writeFile(t, "exp", fmt.Sprintf("# known bugs\n\n  %s   # ticket 12\n%s\n", rules[0].ID, rules[1].ID))
	got, err := readExpectedFailures(p, intent.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[rules[0].ID] || !got[rules[1].ID] {
		t.Errorf("got %v", got)
	}
	bad := writeFile(t, "bad", rules[0].ID+"\nNOT-A-RULE\n")
	if _, err := readExpectedFailures(bad, intent.Name); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Errorf("err %v, want one naming line 2", err)
	}
}

func TestReproduceRedactsSecrets(t *testing.T) {
	env := func(k string) string {
		if k == "IDSCHECK_METRICS_TOKEN" {
			return "m3trics"
		}
		return ""
	}
	c, code, stop := parseRunFlags([]string{"--target", "http://127.0.0.1:9", "--api-key", "s3cret", "--admin-token", "adm1n",
		"--rules", "INTENT-7.*", "--seed", "42", "--strict"}, env, io.Discard, io.Discard)
	if stop {
		t.Fatalf("parse stopped with %d", code)
	}
	got := c.reproduce()
	want := `idscheck run --seed=42 --out=idscheck-report-repro --admin-token="$IDSCHECK_ADMIN_TOKEN" --api-key="$IDSCHECK_API_KEY" --rules='INTENT-7.*' --strict=true --target=http://127.0.0.1:9 --metrics-token="$IDSCHECK_METRICS_TOKEN"`
	if got != want {
		t.Errorf("reproduce:\n got %s\nwant %s", got, want)
	}
	if c.tgt.Creds["metrics-token"] != "m3trics" || c.tgt.APIKey != "s3cret" {
		t.Errorf("credentials: metrics %q api %q", c.tgt.Creds["metrics-token"], c.tgt.APIKey)
	}
}

// Hostile targets for the whole command over the real profile scenarios.
const script = `<script>alert(1)</script>`

func hostile(kind string, done <-chan struct{}) http.HandlerFunc {
	var flips atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && kind != "script" && kind != "invalid-json" {
			io.WriteString(w, `{"ok":true,"ts":1,"version":"hostile"}`)
			return
		}
		switch kind {
		case "drip": // headers at once, then the body a byte at a time, forever
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			rc := http.NewResponseController(w)
			for {
				if _, err := io.WriteString(w, " "); err != nil || rc.Flush() != nil {
					return
				}
				select {
				case <-done:
					return
				case <-r.Context().Done():
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		case "huge": // a body of 8 MiB, eight times what the client reads
			w.Header().Set("Content-Type", "application/json")
			chunk := bytes.Repeat([]byte("a"), 1<<16)
			for range 128 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "garbage": // not HTTP at all
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Write([]byte("\x00\xffgarbage\r\n\r\nmore garbage"))
				conn.Close()
			}
		case "flip": // every other request hangs, the others answer
			if flips.Add(1)%2 == 0 {
				select {
				case <-done:
				case <-r.Context().Done():
				}
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"ok":true}`)
		case "redirect":
			http.Redirect(w, r, "http://127.0.0.1:9/elsewhere", http.StatusFound)
		case "hang":
			select {
			case <-done:
			case <-r.Context().Done():
			}
		case "reset":
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
		case "invalid-json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id": "abc", "status": `)
		case "script":
			for _, h := range []string{"Content-Type", "X-Intent-Version", "X-Frame-Options", "Retry-After", "X-Evil"} {
				w.Header().Set(h, script)
			}
			fmt.Fprintf(w, `{"ok":true,"id":%q,"status":%q,"claim_token":%q,"namespace":%q,"goal":%q,"error":{"code":%q,"message":%q}}`,
				script, script, script, script, script, script, script)
		}
	}
}

// TestRunAgainstHostileTargets: whatever the target does, the run ends in
// bounded time with rules FAIL or UNKNOWN (never exit 0), writes its report,
// never leaks the secrets, and the HTML report never carries a raw <script>.
func TestRunAgainstHostileTargets(t *testing.T) {
	t.Parallel() // after the sequential tests; runCLI runs one suite at a time
	for _, kind := range []string{"hang", "drip", "huge", "garbage", "reset", "flip", "redirect", "invalid-json", "script"} {
		t.Run(kind, func(t *testing.T) {
			done := make(chan struct{})
			srv := httptest.NewServer(hostile(kind, done))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(done) }) // before srv.Close
			out := t.TempDir()
			start := time.Now()
			code, stdout, stderr := runCLI(t, "--target", srv.URL, "--api-key", "secret-key", "--admin-token", "secret-admin",
				"--seed", "1", "--request-timeout", "300ms", "--budget", "1s", "--out", out)
			t.Logf("%s: exit %d after %s", kind, code, time.Since(start).Round(time.Millisecond))
			if code != exitFailed && code != exitUndecided && code != exitUnreachable {
				t.Errorf("exit %d, want %d or %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, exitUndecided, stdout, stderr)
			}
			doc, err := reports.ReadResult(out)
			if err != nil {
				t.Fatal(err)
			}
			files := []string{"result.json", "junit.xml", "index.html"}
			switch {
			case doc.Preflight || doc.Unreachable != "":
				// the preflight (or the health wait) stopped it: no rule verdict
				if len(doc.Rules) != 0 || code != exitUnreachable {
					t.Errorf("a run stopped before any scenario: exit %d, %d rule verdicts", code, len(doc.Rules))
				}
			case doc.Summary().Counts[verdict.Pass] == len(doc.Rules):
				t.Errorf("every rule passed against a %s target", kind)
			default:
				files = append(files, "history.jsonl", "scenarios.json")
			}
			for _, f := range files {
				b, err := os.ReadFile(filepath.Join(out, f))
				if err != nil {
					t.Error(err)
					continue
				}
				for _, secret := range []string{"secret-key", "secret-admin"} {
					basic := base64.StdEncoding.EncodeToString([]byte("admin:" + secret))
					if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte(basic)) {
						t.Errorf("%s carries %s", f, secret)
					}
				}
				if f == "index.html" && bytes.Contains(b, []byte(script)) {
					t.Errorf("index.html carries the target's raw %s", script)
				}
			}
			if strings.Contains(stdout+stderr, "secret-key") {
				t.Error("output shows the API key")
			}
		})
	}
}

// TestRunBundledServer is the end-to-end promise of `make run`, run twice
// with the same seed and run ID against two fresh bundled reference servers: every rule
// with a verdict is PASS (or N/A with its reason) and the run exits 0; and
// the second run issues the same requests in the same order as the first
// (once the ids the servers drew, concurrent groups and polling are
// normalised: features.RequestSequence).
func TestRunBundledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("the whole profile, twice, against the bundled server; skipped in -short")
	}
	t.Parallel() // after the sequential tests; runCLI runs one suite at a time
	var seqs [2][]string
	for i := range seqs {
		out := t.TempDir()
		// The same seed and run ID: the same requests (a run ID of its
		// own would give each run fresh keys and names).
		code, stdout, stderr := runCLI(t, "--seed", "1", "--run-id", "bundled1", "--out", out)
		doc, err := reports.ReadResult(out)
		if err != nil {
			t.Fatalf("run %d: exit %d, no result: %v\nstdout:\n%s\nstderr:\n%s", i+1, code, err, stdout, stderr)
		}
		if i == 0 {
			for _, e := range doc.Rules {
				switch e.Result.Verdict {
				case verdict.Pass:
				case verdict.Reading:
					// The bundled server follows the first reading of every decision.
					d, ok := intent.DecisionByID(e.Result.Reading.Decision)
					if !ok || e.Result.Reading.Follows != d.Readings[0].Name {
						t.Errorf("%s follows %+v, want the first reading", e.Rule.ID, e.Result.Reading)
					}
				case verdict.NA:
					if e.Result.Reason == "" {
						t.Errorf("%s is N/A without a reason", e.Rule.ID)
					}
				default:
					t.Errorf("%s %s: %s", e.Result.Verdict, e.Rule.ID, e.Result.Reason)
					for _, ev := range e.Result.Evidence {
						t.Logf("  expected %s, observed %s", ev.Expected, ev.Observed)
					}
				}
			}
			if len(doc.Rules) == 0 {
				t.Error("no rule got a verdict")
			}
			t.Logf("%d rules, %d not covered, %s", len(doc.Rules), len(doc.NotCovered), doc.Finished.Sub(doc.Started))
		}
		if code != exitOK {
			t.Errorf("run %d: exit %d, want 0\nstdout:\n%s", i+1, code, stdout)
		}
		seqs[i] = features.RequestSequence(readHistory(t, filepath.Join(out, "history.jsonl")))
	}
	a, b := seqs[0], seqs[1]
	if len(a) == 0 {
		t.Fatal("no request recorded")
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			from := max(0, i-15)
			t.Fatalf("same seed, request %d differs:\n first: %s\nsecond: %s\nthe first run before it:\n%s\nthe second:\n%s",
				i, a[i], b[i], strings.Join(a[from:i], "\n"), strings.Join(b[from:i], "\n"))
		}
	}
	if len(a) != len(b) {
		t.Fatalf("same seed, %d requests, then %d", len(a), len(b))
	}
}

func readHistory(t *testing.T, name string) []verdict.Exchange {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var exs []verdict.Exchange
	dec := json.NewDecoder(f)
	for dec.More() {
		var ex verdict.Exchange
		if err := dec.Decode(&ex); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		exs = append(exs, ex)
	}
	return exs
}

// TestRunExpectedFailures gates on "no new failures" against a mutant of
// the bundled server: its failures listed → exit 0 and shown as expected;
// not listed → exit 1; a listed rule that passes → exit 1, flagged.
func TestRunExpectedFailures(t *testing.T) {
	run := func(expected ...string) (int, string, *reports.Result) {
		t.Helper()
		out := t.TempDir()
		args := []string{"--mutant", "missing-security-headers", "--rules", "INTENT-10-*,INTENT-7.1-*", "--seed", "3", "--out", out}
		if expected != nil {
			args = append(args, "--expected-failures", writeFile(t, "expected", "# known\n"+strings.Join(expected, "\n")+"\n"))
		}
		code, stdout, stderr := runCLI(t, args...)
		doc, err := reports.ReadResult(out)
		if err != nil {
			t.Fatalf("exit %d: %v\n%s", code, err, stderr)
		}
		return code, stdout, doc
	}
	code, stdout, doc := run()
	var failing []string
	for _, e := range doc.Rules {
		if e.Result.Verdict == verdict.Fail {
			failing = append(failing, e.Rule.ID)
		}
	}
	if code != exitFailed || len(failing) == 0 {
		t.Fatalf("the mutant: exit %d with %d failing rules, want 1 with some\n%s", code, len(failing), stdout)
	}
	if code, stdout, _ := run(failing...); code != exitOK || !strings.Contains(stdout, "(expected)") {
		t.Errorf("every failure expected: exit %d, want 0, with failures shown as expected\n%s", code, stdout)
	}
	if code, stdout, _ := run(failing[1:]...); code != exitFailed || !strings.Contains(stdout, failing[0]) {
		t.Errorf("one failure not listed: exit %d, want 1 naming %s\n%s", code, failing[0], stdout)
	}
	code, stdout, doc = run(append(failing, "INTENT-7.1-health")...)
	if code != exitFailed || !strings.Contains(stdout, "INTENT-7.1-health (now passes: remove it from the expected-failures file)") {
		t.Errorf("a listed rule passes: exit %d, want 1, flagged\n%s", code, stdout)
	}
	if doc.Target.Mutant != "missing-security-headers" {
		t.Errorf("the report does not name the mutant: %+v", doc.Target)
	}
}

func TestRunReadingFlag(t *testing.T) {
	var stderr strings.Builder
	c, code, stop := parseRunFlags([]string{"--reading", "lease-expiry=immediate", "--reading", "extend=added"}, func(string) string { return "" }, io.Discard, &stderr)
	if stop || code != 0 {
		t.Fatalf("valid readings refused: %d %s", code, stderr.String())
	}
	if c.tgt.Readings["lease-expiry"] != "immediate" || c.tgt.Readings["extend"] != "added" {
		t.Fatalf("readings %v", c.tgt.Readings)
	}
	if r := c.reproduce(); !strings.Contains(r, "--reading=extend=added --reading=lease-expiry=immediate") {
		t.Errorf("reproduce line %q does not repeat each reading", r)
	}
	for _, bad := range []struct{ arg, says string }{
		{"lease-expiry=soon", "has no reading \"soon\"; it has: lease-expiry=backoff|immediate"},
		{"no-such=x", "has no decision \"no-such\""},
		{"signature-status=403", "has no decision \"signature-status\" with readings"},
		{"lease-expiry", "want DECISION=READING"},
	} {
		stderr.Reset()
		_, code, stop := parseRunFlags([]string{"--reading", bad.arg}, func(string) string { return "" }, io.Discard, &stderr)
		if !stop || code != exitUsage || !strings.Contains(stderr.String(), bad.says) {
			t.Errorf("--reading %s: exit %d, stderr %q, want 2 saying %q", bad.arg, code, stderr.String(), bad.says)
		}
	}
}

// TestGateBlockedAndReading: BLOCKED is undecided like UNKNOWN (exit 4 when
// nothing fails, counted apart in the message); READING never fails the run;
// a FAIL against a declared reading is a plain FAIL.
func TestGateBlockedAndReading(t *testing.T) {
	rules := []spec.Rule{{ID: "M", Level: spec.Must}, {ID: "M2", Level: spec.Must}, {ID: "M3", Level: spec.Must}, {ID: "S", Level: spec.Should}}
	blocked := verdict.RuleResult{RuleID: "M2", Verdict: verdict.Blocked, BlockedBy: "M", Reason: "publish failed"}
	reading := verdict.RuleResult{RuleID: "M3", Verdict: verdict.Reading,
		Reading: &verdict.ReadingChoice{Decision: intent.DecisionLeaseExpiry, Follows: "immediate"}}
	declaredFail := verdict.RuleResult{RuleID: "M3", Verdict: verdict.Fail,
		Reading: &verdict.ReadingChoice{Decision: intent.DecisionLeaseExpiry, Follows: "immediate", Declared: "backoff"}}
	rr := func(v ...verdict.RuleResult) []verdict.RuleResult { return v }
	for _, tc := range []struct {
		name     string
		results  []verdict.RuleResult
		expected []string
		strict   bool
		code     int
		msg      []string // the message contains each
	}{
		{"blocked only", rr(blocked), nil, false, exitUndecided, []string{"1 rule(s) undecided", "0 UNKNOWN", "1 BLOCKED"}},
		{"blocked and pass", rr(verdict.RuleResult{RuleID: "M", Verdict: verdict.Pass}, blocked), nil, false, exitUndecided, []string{"1 BLOCKED"}},
		{"reading only", rr(reading), nil, false, exitOK, []string{"every MUST passed"}},
		{"reading only, strict", rr(reading), nil, true, exitOK, nil},
		{"reading of an expected failure", rr(reading), []string{"M3"}, false, exitOK, nil},
		{"fail and blocked", rr(verdict.RuleResult{RuleID: "M", Verdict: verdict.Fail}, blocked), nil, false, exitFailed, []string{"1 rule(s) failed"}},
		{"unknown and blocked counted apart", rr(verdict.RuleResult{RuleID: "M", Verdict: verdict.Unknown}, blocked,
			verdict.RuleResult{RuleID: "S", Verdict: verdict.Blocked, BlockedBy: "M"}), nil, false, exitUndecided,
			[]string{"3 rule(s) undecided", "1 UNKNOWN", "2 BLOCKED"}},
		{"reading and blocked", rr(reading, blocked), nil, false, exitUndecided, []string{"1 BLOCKED"}},
		{"fail against a declared reading", rr(declaredFail), nil, false, exitFailed, []string{"1 rule(s) failed"}},
		{"unrecognised verdict is undecided", rr(verdict.RuleResult{RuleID: "M", Verdict: "MAYBE"}), nil, false, exitUndecided,
			[]string{"1 with a verdict this build does not know"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := map[string]bool{}
			for _, id := range tc.expected {
				exp[id] = true
			}
			g := gate(tc.results, rules, exp, tc.strict)
			if g.code != tc.code {
				t.Errorf("exit %d (%s), want %d", g.code, g.message, tc.code)
			}
			for _, want := range tc.msg {
				if !strings.Contains(g.message, want) {
					t.Errorf("message %q lacks %q", g.message, want)
				}
			}
		})
	}
}

// TestRunBothReadingsOfTheBundledServer: the bundled server passes under
// either reading; a target held to a reading it does not follow fails.
func TestRunBothReadingsOfTheBundledServer(t *testing.T) {
	rules := "INTENT-3.3-expiry-backoff,INTENT-7.7-result-access,INTENT-7.2-required-fields,INTENT-5.2-query-canonical"
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"default", nil, exitOK, "follows backoff (lease-expiry)"},
		{"alternate", []string{"--readings", "alternate"}, exitOK, "follows immediate (lease-expiry)"},
		{"alternate, declared", []string{"--readings", "alternate", "--reading", "lease-expiry=immediate"}, exitOK, "READING    3"},
		// A reading declared without --target is the bundled server's too.
		{"declared, followed", []string{"--reading", "lease-expiry=immediate"}, exitOK, "PASS       1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--rules", rules, "--seed", "3", "--out", t.TempDir()}, tc.args...)
			code, stdout, stderr := runCLI(t, args...)
			if code != tc.code || !strings.Contains(stdout, tc.says) {
				t.Fatalf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", code, tc.code, tc.says, stdout, stderr)
			}
		})
	}
	// A target that does not follow the reading it declares fails its check:
	// the bundled server, started apart with its default readings, its
	// GET /health silent on them. One that publishes them contradicts the
	// declaration: exit 2, naming both, before any scenario.
	t.Run("declared, not followed", func(t *testing.T) {
		prof, _ := profiles.Lookup("intent")
		b, err := prof.Bundled(t.Context(), harness.BundledConfig{Dir: t.TempDir(), TimeScale: 60, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		for _, silent := range []bool{true, false} {
			h := b.Handler
			if silent {
				h = silentHealth(h)
			}
			hs := httptest.NewServer(h)
			args := []string{"--target", hs.URL, "--api-key", b.Target.APIKey, "--time-scale", "60", "--rules", rules, "--seed", "3", "--out", t.TempDir(),
				"--reading", "lease-expiry=immediate"}
			for name, v := range b.Target.Credentials {
				args = append(args, "--"+name, v)
			}
			code, stdout, stderr := runCLI(t, args...)
			hs.Close()
			switch {
			case silent && (code != exitFailed || !strings.Contains(stdout, "FAIL       INTENT-3.3-expiry-backoff")):
				t.Fatalf("exit %d, want %d and INTENT-3.3-expiry-backoff FAIL\nstdout:\n%s\nstderr:\n%s", code, exitFailed, stdout, stderr)
			case !silent && (code != exitUsage || !strings.Contains(stderr, "the reading of lease-expiry is immediate by --reading, but the target publishes the reading of lease-expiry backoff")):
				t.Fatalf("a target publishing another reading: exit %d, want 2 naming both\nstderr:\n%s", code, stderr)
			}
		}
	})
	code, _, stderr := runCLI(t, "--target", "http://127.0.0.1:1", "--api-key", "k", "--readings", "alternate")
	if code != exitUsage || !strings.Contains(stderr, "declare the target's readings with --reading") {
		t.Errorf("--readings with --target: exit %d, %q", code, stderr)
	}
}

// TestRunIDSTargetNeedsNoAPIKey: the IDS binding makes X-API-Key optional,
// and a target that declares no effect sink is told which rules go N/A.
func TestRunIDSTargetNeedsNoAPIKey(t *testing.T) {
	code, _, stderr := runCLI(t, "--profile", "ids", "--target", "http://127.0.0.1:1", "--out", t.TempDir(), "--health-wait", "200ms")
	if code != exitUnreachable {
		t.Errorf("exit %d, want %d (unreachable, not a usage error); stderr:\n%s", code, exitUnreachable, stderr)
	}
	if !strings.Contains(stderr, "no effect sink declared") {
		t.Errorf("stderr does not say the effect rules go N/A:\n%s", stderr)
	}
}

// TestRunThatJudgedNothingIsNoPass (issue 18, case 1): a plain web server
// that answers /health and nothing of the protocol gets every rule N/A; the
// run says it judged none and exits 4 (--strict or not), its report is not
// a pass and its JUnit holds a coverage error.
func TestRunThatJudgedNothingIsNoPass(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			io.WriteString(w, "ok\n")
			return
		}
		http.NotFound(w, r)
	}))
	defer srv.Close()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := cli(t.Context(), []string{"run", "--profile", "http-idempotency", "--strict", "--target", srv.URL, "--out", out}, &stdout, &stderr)
	if code != exitUndecided {
		t.Fatalf("exit %d, want %d (undecided)\n%s\n%s", code, exitUndecided, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "judged 0 of ") || !strings.Contains(stdout.String(), "not a pass") {
		t.Errorf("the run does not say it judged nothing:\n%s", stdout.String())
	}
	doc, err := reports.ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	if v := doc.Summary().Verdict; v != verdict.Unknown {
		t.Errorf("report verdict %s, want UNKNOWN", v)
	}
	if len(doc.Notes) == 0 || !strings.HasPrefix(doc.Notes[0], "exit 4: judged none") || doc.ExitCode != exitUndecided {
		t.Errorf("the report says %q (exit %d): want the exit 4 of a run that judged none", doc.Notes, doc.ExitCode)
	}
	junit, _ := os.ReadFile(filepath.Join(out, reports.JUnitFile))
	if !strings.Contains(string(junit), `type="coverage"`) {
		t.Errorf("junit.xml has no coverage error:\n%s", junit)
	}
}

// TestShortSecretNeverWritten (issue 18, case 8): an API key of 3
// characters, echoed back by the target, appears in no file of the run
// directory nor in the output.
func TestShortSecretNeverWritten(t *testing.T) {
	const key = "k3y"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ok":true,"you":%q,"path":%q}`, r.Header.Get("X-Api-Key"), r.URL.Path)
	}))
	defer srv.Close()
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	cli(t.Context(), []string{"run", "--profile", "ids", "--target", srv.URL, "--api-key", key, "--out", out,
		"--request-timeout", "2s", "--max-duration", "2m"}, &stdout, &stderr)
	token := regexp.MustCompile(`(^|[^\w-])` + key + `($|[^\w-])`)
	if token.MatchString(stdout.String() + stderr.String()) {
		t.Errorf("the output holds the key:\n%s\n%s", stdout.String(), stderr.String())
	}
	files := 0
	filepath.Walk(out, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return err
		}
		files++
		b, _ := os.ReadFile(p)
		if loc := token.FindIndex(b); loc != nil {
			t.Errorf("%s holds the key: …%s…", filepath.Base(p), b[max(0, loc[0]-60):min(len(b), loc[1]+60)])
		}
		return nil
	})
	if files < 3 {
		t.Fatalf("the run wrote %d files: %s", files, stderr.String())
	}
}

// TestRunWrongCredentialIsConfiguration (issue 18, case 2): a correct bus
// given a wrong API key, or a wrong admin token, gets no rule verdict: exit
// 2 naming the credential refused, and reports that say so.
func TestRunWrongCredentialIsConfiguration(t *testing.T) {
	p := intentProfile(t)
	b, err := p.Bundled(t.Context(), harness.BundledConfig{Dir: t.TempDir(), TimeScale: 60})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv := httptest.NewServer(b.Handler)
	defer srv.Close()
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"API key", []string{"--api-key", "not-the-key"}, "the target refuses the API key"},
		{"admin token", []string{"--api-key", b.Target.APIKey, "--admin-token", "not-the-token"}, "the target refuses the admin token (admin-token)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			var stdout, stderr bytes.Buffer
			args := append([]string{"run", "--profile", "intent", "--target", srv.URL, "--time-scale", "60", "--out", out}, tc.args...)
			code := cli(t.Context(), args, &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stdout.String(), tc.says) {
				t.Fatalf("exit %d (want %d); stdout does not say %q:\n%s\n%s", code, exitUsage, tc.says, stdout.String(), stderr.String())
			}
			doc, err := reports.ReadResult(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(doc.Rules) != 0 || !doc.Preflight {
				t.Errorf("the report holds %d rule verdicts (preflight %v): a refused credential judges no rule", len(doc.Rules), doc.Preflight)
			}
		})
	}
}

// TestPromiseOfATextWithoutKeywordsGates (issue 18, case 5): ATP and
// Stripe's page use no RFC 2119 keyword; their guarantees gate by default.
// An ATP site that charges twice on a retry, and a stripe endpoint that
// pays again on a replay, fail the run without --strict.
func TestPromiseOfATextWithoutKeywordsGates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two profiles' scenarios against mutants")
	}
	for _, tc := range []struct {
		profile, mutant, rule string
		extra                 []string
	}{
		{"atp", "double-charge-on-retry", "ATP-2-no-second-effect", nil},
		{"http-idempotency", "effect-on-replay", "STRIPE-", []string{"--variant", "stripe"}},
	} {
		t.Run(tc.profile+"/"+tc.mutant, func(t *testing.T) {
			out := t.TempDir()
			args := append([]string{"run", "--profile", tc.profile, "--mutant", tc.mutant, "--seed", "1", "--out", out}, tc.extra...)
			var stdout, stderr bytes.Buffer
			if code := cli(t.Context(), args, &stdout, &stderr); code != exitFailed {
				t.Fatalf("exit %d without --strict, want %d: a broken guarantee gates\n%s\n%s", code, exitFailed, stdout.String(), stderr.String())
			}
			doc, err := reports.ReadResult(out)
			if err != nil {
				t.Fatal(err)
			}
			failed := false
			for _, e := range doc.Rules {
				if e.Result.Verdict == verdict.Fail && strings.HasPrefix(e.Rule.ID, tc.rule) && e.Rule.Guarantee != "" {
					failed = true
				}
			}
			if !failed {
				t.Errorf("no guarantee of %s FAILed", tc.rule)
			}
		})
	}
}
