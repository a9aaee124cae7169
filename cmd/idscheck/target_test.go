package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"github.com/idscheck/idscheck/redact"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/reports"
	"github.com/idscheck/idscheck/verdict"
)

// envOf is a getenv over a fixed map.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// parseTarget does what every subcommand does with the shared target
// description: register on its FlagSet, parse, load, validate.
func parseTarget(t *testing.T, args []string, env map[string]string, online bool) (*targetFlags, error) {
	t.Helper()
	var tf targetFlags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tf.register(fs, intentProfile(t))
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	if err := tf.load(fs, envOf(env)); err != nil {
		return &tf, err
	}
	return &tf, tf.validate(intent.Name, online)
}

// TestTargetFileParse is the shared parser as chaos uses it: every field of
// the file, a credential from a named variable, the rest literal.
func TestTargetFileParse(t *testing.T) {
	file := writeFile(t, "target.json", `{
  "url": "http://127.0.0.1:8080/bus",
  "api_key_env": "MY_BUS_KEY",
  "admin_token": "adm-literal-token",
  "metrics_token_env": "MY_METRICS",
  "dashboard_password": "dash-pass-1",
  "intent": {"require_signatures": true},
  "time_scale": 30,
  "readings": {"lease-expiry": "immediate", "extend": "added"},
  "target_cmd": "BUS_SECRET=$MY_BUS_KEY ./bus serve --addr 127.0.0.1:8080",
  "effect_sink": {"listen": "127.0.0.1:9090", "url": "http://127.0.0.1:9090/effects"}
}`)
	tf, err := parseTarget(t, []string{"--target-file", file},
		map[string]string{"MY_BUS_KEY": "key-from-env-1", "MY_METRICS": "metrics-from-env", "IDSCHECK_API_KEY": "not-this-one"}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := targetFlags{URL: "http://127.0.0.1:8080/bus", APIKey: "key-from-env-1", Creds: map[string]string{"admin-token": "adm-literal-token",
		"metrics-token": "metrics-from-env", "dashboard-password": "dash-pass-1"}, Described: intent.Declared{RequireSignatures: true}, TimeScale: 30,
		TargetCmd:  "BUS_SECRET=$MY_BUS_KEY ./bus serve --addr 127.0.0.1:8080",
		EffectSink: effectSink{Listen: "127.0.0.1:9090", URL: "http://127.0.0.1:9090/effects"}}
	if tf.URL != want.URL || tf.APIKey != want.APIKey || !maps.Equal(tf.Creds, want.Creds) ||
		tf.Described != want.Described || tf.TimeScale != 30 || tf.TargetCmd != want.TargetCmd ||
		tf.EffectSink != want.EffectSink {
		t.Errorf("got %+v", *tf)
	}
	if tf.Readings["lease-expiry"] != "immediate" || tf.Readings["extend"] != "added" || len(tf.Readings) != 2 {
		t.Errorf("readings %v", tf.Readings)
	}
	ft := tf.Target()
	if ft.BaseURL != want.URL || ft.APIKey != want.APIKey || ft.TimeScale != 30 || ft.Described != (intent.Declared{RequireSignatures: true}) || ft.Readings["extend"] != "added" ||
		!maps.Equal(ft.Credentials, want.Creds) {
		t.Errorf("Target() = %+v", ft)
	}
	if len(tf.fromEnv) != 0 {
		t.Errorf("credentials from IDSCHECK_*: %v, want none (the file gave them)", tf.fromEnv)
	}
	// No time scale anywhere: the command's default applies.
	tf2, err := parseTarget(t, []string{"--target", "http://h:1", "--api-key", "kkkk"}, nil, true)
	if err != nil || tf2.TimeScale != 0 || tf2.withDefaultTimeScale(60) != 60 || tf2.Target().TimeScale != 1 {
		t.Errorf("default time scale: %v %v", tf2.TimeScale, err)
	}
}

// TestTargetFlagOverridesFile: a flag given on the command line wins over
// the file's field; a --reading overrides only its own decision.
func TestTargetFlagOverridesFile(t *testing.T) {
	file := writeFile(t, "target.json", `{"url": "http://127.0.0.1:1", "api_key": "file-key-1", "admin_token": "file-admin",
		"time_scale": 60, "intent": {"require_signatures": true}, "readings": {"lease-expiry": "backoff", "extend": "added"}}`)
	tf, err := parseTarget(t, []string{"--target-file", file, "--api-key", "flag-key-1", "--time-scale", "2",
		"--require-signatures=false", "--reading", "lease-expiry=immediate", "--target", "http://127.0.0.1:2"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if tf.APIKey != "flag-key-1" || tf.TimeScale != 2 || tf.Described.(intent.Declared).RequireSignatures || tf.URL != "http://127.0.0.1:2" {
		t.Errorf("flags did not override: %+v", *tf)
	}
	if tf.Creds["admin-token"] != "file-admin" {
		t.Errorf("admin token %q, want the file's", tf.Creds["admin-token"])
	}
	if tf.Readings["lease-expiry"] != "immediate" || tf.Readings["extend"] != "added" {
		t.Errorf("readings %v: want the flag's lease-expiry and the file's extend", tf.Readings)
	}
	// The same through run: the flag's key is the one the reproduce line names.
	c, code, stop := parseRunFlags([]string{"--target-file", file, "--admin-token", "flag-admin"}, envOf(nil), io.Discard, io.Discard)
	if stop {
		t.Fatalf("run refused the file: exit %d", code)
	}
	if c.tgt.Creds["admin-token"] != "flag-admin" || c.tgt.APIKey != "file-key-1" {
		t.Errorf("run: admin %q api %q", c.tgt.Creds["admin-token"], c.tgt.APIKey)
	}
}

// TestTargetEnvCredential: a credential from the variable the file names,
// and the IDSCHECK_* fallbacks below the file and the flags.
func TestTargetEnvCredential(t *testing.T) {
	file := writeFile(t, "target.json", `{"url": "http://127.0.0.1:1", "api_key_env": "VENDOR_KEY"}`)
	env := map[string]string{"VENDOR_KEY": "vendor-key-value", "IDSCHECK_API_KEY": "fallback-key", "IDSCHECK_ADMIN_TOKEN": "fallback-admin"}
	tf, err := parseTarget(t, []string{"--target-file", file}, env, true)
	if err != nil {
		t.Fatal(err)
	}
	if tf.APIKey != "vendor-key-value" || tf.Creds["admin-token"] != "fallback-admin" {
		t.Errorf("api %q admin %q: want the file's variable, then IDSCHECK_ADMIN_TOKEN", tf.APIKey, tf.Creds["admin-token"])
	}
	if !slices.Equal(tf.fromEnv, []string{"admin-token"}) {
		t.Errorf("fromEnv %v", tf.fromEnv)
	}
	// No file: IDSCHECK_API_KEY with --target, and never for the bundled server.
	tf, err = parseTarget(t, []string{"--target", "http://127.0.0.1:1"}, env, true)
	if err != nil || tf.APIKey != "fallback-key" {
		t.Errorf("IDSCHECK_API_KEY fallback: %q %v", tf.APIKey, err)
	}
	tf, err = parseTarget(t, nil, env, true)
	if err != nil || tf.APIKey != "" {
		t.Errorf("bundled server took %q from the environment (%v)", tf.APIKey, err)
	}
}

// TestTargetFileErrors: every mistake in a target description is exit 2
// with a message that names the field and says what to do, through run and
// through check alike, and never shows a secret.
func TestTargetFileErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) string {
		f, err := os.CreateTemp(dir, "target-*.json")
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(content)
		f.Close()
		return f.Name()
	}
	unreadable := filepath.Join(dir, "missing.json")
	cases := []struct {
		name, path string
		says       []string
	}{
		{"unknown field", file(`{"url": "http://127.0.0.1:1", "api_key": "kkkk", "apikey": "x"}`),
			[]string{`unknown field "apikey"`, `did you mean "api_key"?`, "the fields are: url, api_key"}},
		{"unknown field in effect_sink", file(`{"effect_sink": {"listen": "127.0.0.1:1", "port": 3}}`),
			[]string{`unknown field "effect_sink.port"`}},
		{"field in another case", file(`{"URL": "http://127.0.0.1:1"}`), []string{`unknown field "URL"`, `did you mean "url"?`}},
		{"unreadable file", unreadable, []string{"--target-file", "missing.json", "no such file"}},
		{"empty file", file(""), []string{"empty: want a JSON object"}},
		{"not JSON", file("{\n  \"url\": http://x\n}"), []string{"not valid JSON at line 2"}},
		{"wrong type", file(`{"time_scale": "60"}`), []string{`"time_scale": want a number, got a JSON string`}},
		{"bad URL", file(`{"url": "127.0.0.1:8080", "api_key": "kkkk"}`), []string{`"url" in`, "want an http:// or https:// URL with a host"}},
		{"both value and variable", file(`{"url": "http://h:1", "api_key": "kkkk", "api_key_env": "K"}`), []string{`give "api_key" or "api_key_env", not both`}},
		{"variable not set", file(`{"url": "http://h:1", "api_key_env": "IDSCHECK_TEST_UNSET_VAR"}`), []string{`"api_key_env" names $IDSCHECK_TEST_UNSET_VAR, which is not set`}},
		{"a value where a name belongs", file(`{"url": "http://h:1", "api_key_env": "sk-live-12345"}`), []string{`want the NAME of an environment variable`}},
		{"zero time scale", file(`{"time_scale": 0}`), []string{`"time_scale" must be > 0`}},
		{"unknown reading", file(`{"readings": {"lease-expiry": "soon"}}`), []string{`"readings" in`, `has no reading "soon"`, "lease-expiry=backoff|immediate"}},
		{"bad effect sink", file(`{"effect_sink": {"listen": "9090"}}`), []string{`"effect_sink.listen"`, "want host:port"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"run", "check"} {
				if cmd == "check" && tc.name == "variable not set" {
					continue // check needs no secret: TestCheckNeedsNoLiveSecret
				}
				args := []string{cmd, "--target-file", tc.path}
				if cmd == "check" {
					args = append(args, t.TempDir())
				} else {
					args = append(args, "--out", t.TempDir())
				}
				var stdout, stderr bytes.Buffer
				code := cli(t.Context(), args, &stdout, &stderr)
				if code != exitUsage {
					t.Errorf("%s: exit %d, want %d; stderr:\n%s", cmd, code, exitUsage, stderr.String())
				}
				for _, s := range tc.says {
					if !strings.Contains(stderr.String(), s) {
						t.Errorf("%s: stderr does not say %q:\n%s", cmd, s, stderr.String())
					}
				}
				if strings.Contains(stderr.String(), "sk-live-12345") {
					t.Errorf("%s: stderr shows what may be a secret:\n%s", cmd, stderr.String())
				}
			}
		})
	}
	// Without a URL, run refuses credentials (the bundled server draws its
	// own); check, offline, accepts them.
	creds := file(`{"api_key": "kkkk"}`)
	if code, _, stderr := runCLI(t, "--target-file", creds, "--out", t.TempDir()); code != exitUsage ||
		!strings.Contains(stderr, `"api_key" in `+creds+` needs --target`) {
		t.Errorf("run, credentials without url: exit %d\n%s", code, stderr)
	}
	if _, err := parseTarget(t, []string{"--target-file", creds}, nil, false); err != nil {
		t.Errorf("offline validation refused credentials without url: %v", err)
	}
	if _, err := parseTarget(t, []string{"--target-cmd", "./bus"}, nil, true); err == nil || !strings.Contains(err.Error(), "--target-cmd needs --target") {
		t.Errorf("--target-cmd without a target URL: %v", err)
	}
}

// TestTargetSecrets: one list covers every credential, the HTTP Basic form
// of each, a URL's password, and the secret-looking values of the start
// command; nothing that is not a secret.
func TestTargetSecrets(t *testing.T) {
	tf := targetFlags{
		URL: "http://user:url-pass-9@127.0.0.1:1", APIKey: "api-key-value", Creds: map[string]string{"admin-token": "admin-token-value",
			"metrics-token": "metrics-token-value", "dashboard-password": "dashboard-pw"},
		TargetCmd: `BUS_SECRET=cmd-secret-1 export BUS_ADMIN_SECRET='quoted secret 2' PORT=8080 DB_PASSWORD_FILE=/run/pw ` +
			`BUS_METRICS_TOKEN=$MY_TOKEN ./bus serve --db /tmp/bus.db --api-key=flag-secret-3 --signing-key flag-secret-4 -v ` +
			`--password "dq secret 5" --addr 127.0.0.1:8080 --time-scale 60 api-key-value`,
	}
	got := tf.Secrets()
	for _, want := range []string{"api-key-value", "admin-token-value", "metrics-token-value", "dashboard-pw",
		base64.StdEncoding.EncodeToString([]byte("admin:dashboard-pw")), "url-pass-9",
		"cmd-secret-1", "quoted secret 2", "flag-secret-3", "flag-secret-4", "dq secret 5"} {
		if !slices.Contains(got, want) {
			t.Errorf("Secrets() lacks %q: %q", want, got)
		}
	}
	for _, not := range []string{"8080", "/run/pw", "$MY_TOKEN", "/tmp/bus.db", "127.0.0.1:8080", "60", "./bus", "serve"} {
		if slices.Contains(got, not) {
			t.Errorf("Secrets() holds %q, not a secret: %q", not, got)
		}
	}
	for i := 1; i < len(got); i++ {
		if len(got[i]) > len(got[i-1]) {
			t.Errorf("not longest first: %q", got)
		}
	}
	// The command with every secret replaced: its literal credential too.
	red := redactAll(tf.TargetCmd, got)
	for _, s := range []string{"cmd-secret-1", "quoted secret 2", "flag-secret-3", "flag-secret-4", "dq secret 5", "api-key-value"} {
		if strings.Contains(red, s) {
			t.Errorf("redacted command still holds %q: %s", s, red)
		}
	}
	if !strings.Contains(red, "PORT=8080") || !strings.Contains(red, "--db /tmp/bus.db") {
		t.Errorf("redaction took more than the secrets: %s", red)
	}
}

// TestTargetHelpDocumentsTheFile: -h of run and check shows the schema.
func TestTargetHelpDocumentsTheFile(t *testing.T) {
	for _, cmd := range []string{"run", "check"} {
		var stdout, stderr bytes.Buffer
		if code := cli(t.Context(), []string{cmd, "-h"}, &stdout, &stderr); code != exitOK {
			t.Fatalf("%s -h: exit %d", cmd, code)
		}
		for _, s := range []string{"Target file (--target-file FILE)", "api_key_env", "target_cmd", "readings", "effect_sink", "-target-file"} {
			if !strings.Contains(stdout.String(), s) {
				t.Errorf("%s -h lacks %q", cmd, s)
			}
		}
	}
	// The example of the help is a target file that loads.
	help := targetFileHelp(intentProfile(t))
	i, j := strings.Index(help, "\n  {\n"), strings.Index(help, "\n  }\n")
	if i < 0 || j < i {
		t.Fatal("the help shows no example file")
	}
	example := writeFile(t, "example.json", help[i:j+4])
	tf, err := parseTarget(t, []string{"--target-file", example}, map[string]string{"MY_KEY": "bus-key-1"}, true)
	if err != nil || tf.APIKey != "bus-key-1" || tf.TimeScale != 60 {
		t.Errorf("the help's example: %v (%+v)", err, tf)
	}
}

// deadAddr is a loopback port nobody listens on.
// closedAddr is a loopback address no one listens on now, which the test
// may listen on later (an ephemeral port, picked and closed).
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// deadAddr is a loopback address that refuses connections for the whole
// test.
func deadAddr(t *testing.T) string {
	t.Helper()
	// A port below the ephemeral range, where nothing listens: a port
	// picked with :0 and closed can be handed to another test's server
	// meanwhile (seen: a replay line met a bundled server there).
	for _, p := range []string{"9", "1", "7", "13", "19", "37", "79", "119"} {
		addr := "127.0.0.1:" + p
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return addr
		}
	}
	t.Skip("no port below the ephemeral range refuses connections here")
	return ""
}

// readUnreachableReport checks the three files of an unreachable run and
// returns them.
func readUnreachableReport(t *testing.T, out, cause string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, f := range []string{reports.ResultFile, reports.JUnitFile, reports.HTMLFile} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatalf("an unreachable target still gets its report: %v", err)
		}
		files[f] = string(b)
	}
	doc, err := reports.ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	if doc.ExitCode != exitUnreachable || !strings.Contains(doc.Unreachable, cause) || len(doc.Rules) != 0 {
		t.Errorf("result.json: exit_code %d, unreachable %q, %d rules; want 3, naming %q, none", doc.ExitCode, doc.Unreachable, len(doc.Rules), cause)
	}
	if len(doc.Notes) == 0 || !strings.Contains(doc.Notes[0], "exit 3: target unreachable") || !strings.Contains(doc.Notes[0], cause) {
		t.Errorf("result.json notes %q do not name the cause", doc.Notes)
	}
	if v := doc.Summary().Verdict; v != verdict.Unknown {
		t.Errorf("verdict %s, want UNKNOWN: nothing was checked", v)
	}
	var suites struct {
		Tests  int `xml:"tests,attr"`
		Errors int `xml:"errors,attr"`
		Suites []struct {
			Cases []struct {
				Name  string `xml:"name,attr"`
				Error *struct {
					Message string `xml:"message,attr"`
					Type    string `xml:"type,attr"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(files[reports.JUnitFile]), &suites); err != nil {
		t.Fatalf("junit.xml: %v", err)
	}
	if suites.Tests != 1 || suites.Errors != 1 || len(suites.Suites) != 1 || len(suites.Suites[0].Cases) != 1 {
		t.Fatalf("junit.xml: want one testcase, one error:\n%s", files[reports.JUnitFile])
	}
	c := suites.Suites[0].Cases[0]
	if c.Error == nil || c.Error.Type != "unreachable" || !strings.Contains(c.Error.Message, cause) || !strings.Contains(c.Name, "target unreachable") {
		t.Errorf("junit.xml testcase %+v does not name the cause %q", c, cause)
	}
	if !strings.Contains(files[reports.HTMLFile], "Target unreachable") || !strings.Contains(files[reports.HTMLFile], cause) {
		t.Errorf("index.html does not say the target is unreachable, and why (%q)", cause)
	}
	return files
}

// TestRunUnreachableWritesTheReport: nothing listens on the port; run
// still writes result.json, junit.xml and index.html naming the cause, and
// exits 3.
func TestRunUnreachableWritesTheReport(t *testing.T) {
	out := t.TempDir()
	start := time.Now()
	code, stdout, stderr := runCLI(t, "--target", "http://"+deadAddr(t), "--api-key", "secret-key-1", "--health-wait", "1s", "--out", out)
	if code != exitUnreachable {
		t.Fatalf("exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s with --health-wait 1s", took)
	}
	files := readUnreachableReport(t, out, "connection refused")
	for _, s := range []string{"target unreachable", "report:", "reproduce: idscheck run", "exit 3"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
	for name, b := range files {
		if strings.Contains(b, "secret-key-1") {
			t.Errorf("%s holds the API key", name)
		}
	}
	if strings.Contains(stdout+stderr, "secret-key-1") {
		t.Error("the output shows the API key")
	}
}

// TestRunHealthHangs: a /health that never answers is bounded by
// --health-wait (each probe by 2 s at most) and ends in exit 3 with the
// report.
func TestRunHealthHangs(t *testing.T) {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	out := t.TempDir()
	start := time.Now()
	code, stdout, stderr := runCLI(t, "--target", srv.URL, "--api-key", "kkkk", "--health-wait", "2500ms", "--request-timeout", "1m", "--out", out)
	took := time.Since(start)
	if code != exitUnreachable {
		t.Fatalf("exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if took > 6*time.Second {
		t.Errorf("took %s with --health-wait 2.5s", took)
	}
	readUnreachableReport(t, out, "no answer within 2s")
	if !strings.Contains(stdout, "2 probes") {
		t.Errorf("a hanging probe was not cut at 2s and retried:\n%s", stdout)
	}
}

// TestWaitHealthyProbeBound: the first probe hangs; the second, 2 s later,
// is answered: a slow request timeout does not stretch one probe.
func TestWaitHealthyProbeBound(t *testing.T) {
	var n atomic.Int32
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			select {
			case <-done:
			case <-r.Context().Done():
			}
			return
		}
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) })
	start := time.Now()
	if err := waitHealthy(context.Background(), srv.URL, 8*time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < maxHealthProbe || took > maxHealthProbe+2*time.Second {
		t.Errorf("healthy after %s, want about %s (one probe cut, then one answered)", took, maxHealthProbe)
	}
}

// TestRunSlowStartingTarget: a target that answers /health only 1.5 s after
// the run starts (nothing listens before) passes with the default
// --health-wait. It is the bundled reference server behind a listener that
// opens late.
func TestRunSlowStartingTarget(t *testing.T) {
	if defaultHealthWait < 3*time.Second {
		t.Fatalf("--health-wait defaults to %s: a target taking 3 s to start would be unreachable", defaultHealthWait)
	}
	bt, stop, err := startBundled(t.Context(), intentProfile(t), bundledOptions{Dir: t.TempDir(), TimeScale: bundledTimeScale, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	u, _ := url.Parse(bt.BaseURL)
	addr := closedAddr(t)
	proxy := &http.Server{Handler: httputil.NewSingleHostReverseProxy(u)}
	opened := make(chan struct{})
	go func() {
		defer close(opened)
		time.Sleep(1500 * time.Millisecond)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("late listener: %v", err)
			return
		}
		proxy.Serve(l)
	}()
	t.Cleanup(func() { proxy.Close(); <-opened })
	out := t.TempDir()
	start := time.Now()
	code, stdout, stderr := runCLI(t, "--target", "http://"+addr, "--api-key", bt.APIKey, "--rules", "INTENT-7.1-*", "--seed", "1", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if took := time.Since(start); took < 1500*time.Millisecond {
		t.Errorf("passed after %s: the target was not yet listening", took)
	}
	doc, err := reports.ReadResult(out)
	if err != nil || doc.Unreachable != "" || len(doc.Rules) == 0 {
		t.Fatalf("result: %v, unreachable %q, %d rules", err, doc.Unreachable, len(doc.Rules))
	}
}

// writeSecretChaosDir is a chaos run directory whose recorded bodies and
// command carry secret: a chaos of an older build that did not redact.
func writeSecretChaosDir(t *testing.T, secret string) string {
	t.Helper()
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	dir := t.TempDir()
	run := chaosRun{Seed: 9, Command: "idscheck chaos --seed 9 --api-key " + secret, Target: "http://127.0.0.1:9", Workers: 2,
		Faults: "partition", Namespace: "chaos-9", Start: t0, End: t0.Add(3 * time.Second), Options: chaosCheckOptions()}
	pub := func(client int, id string, call int64) checker.Operation {
		return checker.Operation{ClientID: client, Kind: checker.OpPublish, Key: "k-" + secret, Input: checker.Input{Body: "d"},
			Output: checker.Output{Status: 201, ID: id, Body: "r-" + id}, Call: call, Return: call + 1e6, Outcome: verdict.OutcomeOK}
	}
	h := checker.History{Ops: []checker.Operation{pub(1, "in-1", 1e6), pub(2, "in-2", 5e6)}}
	l := checker.Ledger{Effects: []checker.Effect{{Key: "k-" + secret, Intent: "in-1", At: 3e6}, {Key: "k-" + secret, Intent: "in-2", At: 7e6}}}
	if err := writeChaosRun(dir, run, h, l); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunAndCheckShareTheTargetFile: one target file, with a credential
// from a variable, literal ones and a start command holding a secret, is
// accepted by run (the target never comes up: exit 3 with the report) and
// by check; no secret appears in any file either writes, nor in their
// output; run's reproduce line names --target-file.
func TestRunAndCheckShareTheTargetFile(t *testing.T) {
	const (
		envKey    = "from-env-api-key-7"
		admin     = "literal-admin-token-7"
		cmdSecret = "cmd-secret-value-7"
		urlPass   = "url-password-7"
	)
	t.Setenv("IDSCHECK_TEST_VENDOR_KEY", envKey)
	target := "http://bus:" + urlPass + "@" + deadAddr(t)
	file := writeFile(t, "target.json", `{
  "url": "`+target+`",
  "api_key_env": "IDSCHECK_TEST_VENDOR_KEY",
  "admin_token": "`+admin+`",
  "time_scale": 60,
  "readings": {"lease-expiry": "backoff"},
  "target_cmd": "BUS_SECRET=`+cmdSecret+` sh -c 'echo starting with `+admin+`; exec sleep 30'"
}`)
	secrets := []string{envKey, admin, cmdSecret, urlPass}
	noSecret := func(where, s string) {
		t.Helper()
		for _, x := range secrets {
			if strings.Contains(s, x) {
				t.Errorf("%s holds the secret %q", where, x)
			}
		}
	}

	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := cli(t.Context(), []string{"run", "--target-file", file, "--health-wait", "1s", "--seed", "5", "--out", out}, &stdout, &stderr)
	if code != exitUnreachable {
		t.Fatalf("run: exit %d, want 3\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	files := readUnreachableReport(t, out, "did not answer 200")
	for name, b := range files {
		noSecret("run's "+name, b)
	}
	noSecret("run's stdout", stdout.String())
	noSecret("run's stderr", stderr.String())
	if !strings.Contains(stdout.String(), "starting with "+redact.Redacted) {
		t.Errorf("the target command's output is not shown (redacted) on stdout:\n%s", stdout.String())
	}
	doc, _ := reports.ReadResult(out)
	if want := "idscheck run --seed=5 --out=" + out + "-repro --health-wait=1s --target-file=" + file; doc.Command != want {
		t.Errorf("reproduce line\n got %s\nwant %s", doc.Command, want)
	}
	if !strings.Contains(doc.Target.Command, "sleep 30") {
		t.Errorf("the report does not show the target command: %q", doc.Target.Command)
	}

	dir := writeSecretChaosDir(t, envKey)
	stdout.Reset()
	stderr.Reset()
	code = cli(t.Context(), []string{"check", dir, "--target-file", file}, &stdout, &stderr)
	if code != exitFailed { // the directory holds a duplicate
		t.Fatalf("check: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "duplicated") {
		t.Errorf("check did not report the anomaly:\n%s", stdout.String())
	}
	noSecret("check's stdout", stdout.String())
	noSecret("check's stderr", stderr.String())
	for _, f := range []string{"check.json", "linearization.html", reports.ResultFile, reports.JUnitFile, reports.HTMLFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			if f == "linearization.html" && os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		noSecret("check's "+f, string(b))
	}
	var rep struct{ Anomalies []struct{ Key string } }
	b, _ := os.ReadFile(filepath.Join(dir, "check.json"))
	if json.Unmarshal(b, &rep); len(rep.Anomalies) == 0 || !strings.Contains(rep.Anomalies[0].Key, "REDACTED") {
		t.Errorf("check.json anomalies %+v: want the key with the secret redacted", rep.Anomalies)
	}
}

// TestTargetReproduceArgs: the target's part of a reproduce line, as chaos
// builds it: --target-file and the flags given, credentials by variable.
func TestTargetReproduceArgs(t *testing.T) {
	file := writeFile(t, "target.json", `{"url": "http://127.0.0.1:1", "api_key": "file-key-value"}`)
	var tf targetFlags
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	tf.register(fs, intentProfile(t))
	other := fs.Int("workers", 40, "")
	if err := fs.Parse([]string{"--target-file", file, "--admin-token", "tok-value", "--workers", "3", "--reading", "extend=added"}); err != nil {
		t.Fatal(err)
	}
	if err := tf.load(fs, envOf(map[string]string{"IDSCHECK_METRICS_TOKEN": "met-value"})); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(tf.reproduceArgs(fs), " ")
	want := `--admin-token="$IDSCHECK_ADMIN_TOKEN" --reading=extend=added --target-file=` + file + ` --metrics-token="$IDSCHECK_METRICS_TOKEN"`
	if got != want || *other != 3 {
		t.Errorf("reproduceArgs\n got %s\nwant %s", got, want)
	}
}

func intentProfile(t *testing.T) profiles.Profile {
	t.Helper()
	p, ok := profiles.Lookup(intent.Name)
	if !ok {
		t.Fatal("no intent profile in the registry")
	}
	return p
}

// TestCheckNeedsNoLiveSecret: check re-judges a run offline; a target file
// naming a variable that is not set is no error there (the secrets it holds
// that are set are still redacted), where run refuses it.
func TestCheckNeedsNoLiveSecret(t *testing.T) {
	dir := writeChaosDir(t)
	t.Setenv("IDSCHECK_TEST_SET_KEY", "admin-token-value-7")
	file := writeFile(t, "t.json", `{"url": "http://127.0.0.1:9", "api_key_env": "IDSCHECK_TEST_UNSET_VAR", "admin_token_env": "IDSCHECK_TEST_SET_KEY"}`)
	var stdout, stderr bytes.Buffer
	code := cli(t.Context(), []string{"check", "--target-file", file, dir}, &stdout, &stderr)
	if code == exitUsage {
		t.Fatalf("check demanded the live secret: exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "note: $IDSCHECK_TEST_UNSET_VAR not set: check needs no secret") {
		t.Errorf("check does not say the variable is not set:\n%s", stderr.String())
	}
	var tf targetFlags
	tf.offline = true
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	tf.register(fs, intentProfile(t))
	fs.Parse([]string{"--target-file", file})
	if err := tf.load(fs, os.Getenv); err != nil {
		t.Fatal(err)
	}
	if s := tf.Secrets(); !slices.Contains(s, "admin-token-value-7") || slices.ContainsFunc(s, func(x string) bool { return strings.Contains(x, "IDSCHECK_TEST_UNSET_VAR") }) {
		t.Errorf("offline secrets %q: want the set one, nothing for the unset one", s)
	}
	code, _, errs := runCLI(t, "--target-file", file, "--out", t.TempDir())
	if code != exitUsage || !strings.Contains(errs, "IDSCHECK_TEST_UNSET_VAR, which is not set") {
		t.Errorf("run with the variable unset: exit %d, %s", code, errs)
	}
}
