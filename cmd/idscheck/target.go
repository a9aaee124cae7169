package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/idscheck/idscheck/redact"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/profiles/httpidem"
	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/spec"
)

// targetFlags is the target description that every subcommand talking to a
// target shares (run, chaos, check): the base URL, the credentials, the
// readings the target follows, its time scale, its start command and the
// effect sink. It comes from --target-file (JSON, targetFileHelp), the same
// fields as flags, and the IDSCHECK_* environment variables, in this order
// of precedence:
//
//	a flag given on the command line  >  the target file  >  $IDSCHECK_API_KEY etc.
//
// Use: register on the command's FlagSet, parse, load, validate; then read
// the exported fields, Target() and Secrets().
type targetFlags struct {
	// File is --target-file: "" when none was given.
	File string

	// The resolved description.
	URL               string // base URL; "" for the bundled reference server
	APIKey            string
	AdminToken        string
	MetricsToken      string
	DashboardPassword string
	RequireSignatures bool
	// TimeScale is the factor the target divides protocol durations by; 0
	// when neither the file nor a flag gave it (the command's default then
	// applies: see withDefaultTimeScale).
	TimeScale  float64
	Readings   declaredReadings // decision ID -> reading name; nil when none
	TargetCmd  string           // shell command that starts the target
	EffectSink effectSink
	// HTTPIdem is the endpoint of an http-idempotency target (the file's
	// "http_idempotency"), its variant overridden by --variant; nil: none.
	HTTPIdem *httpidem.Endpoint

	// cli holds what the command line gave, before merging.
	cli struct {
		url, apiKey, adminToken, metricsToken, dashboardPassword string
		requireSignatures                                        bool
		timeScale                                                float64
		readings                                                 declaredReadings
		targetCmd                                                string
		effectSink                                               string
		variant                                                  string
	}
	// origin names where each field's value came from ("--api-key",
	// `"api_key" in t.json`, "$IDSCHECK_API_KEY"), for error messages.
	origin map[string]string
	// fromEnv lists the credential flags filled from IDSCHECK_* variables
	// (sorted), for the reproduce line.
	fromEnv []string
	// readingFromFile marks the readings the file declared (not a flag).
	readingFromFile map[string]bool
}

// effectSink is where the harness counts external side effects: the
// implementation calls URL once per effect; the harness listens on Listen.
// The intent profile does not use it yet (its workers are the effect); the
// IDS, ATP and HTTP-idempotency profiles will.
type effectSink struct {
	Listen string `json:"listen,omitempty"` // host:port the harness listens on, e.g. 127.0.0.1:9090
	URL    string `json:"url,omitempty"`    // URL the implementation calls, e.g. http://10.0.0.5:9090/effects
}

// credentialEnv maps each credential flag to the environment variable read
// when neither the flag nor the target file gives it (so secrets stay out of
// process listings); the reproduce line names the variable, never the value.
var credentialEnv = map[string]string{
	"api-key":            "IDSCHECK_API_KEY",
	"admin-token":        "IDSCHECK_ADMIN_TOKEN",
	"metrics-token":      "IDSCHECK_METRICS_TOKEN",
	"dashboard-password": "IDSCHECK_DASHBOARD_PASSWORD",
}

// targetFlagNames are the flags register adds, in the order shown.
var targetFlagNames = []string{"target-file", "target", "api-key", "admin-token", "metrics-token",
	"dashboard-password", "require-signatures", "time-scale", "reading", "target-cmd", "effect-sink"}

// targetFileHelp documents the --target-file schema; register appends it to
// the command's -h.
const targetFileHelp = `
Target file (--target-file FILE): one JSON object describing the target, the
same for run, chaos and check. Every field is optional. A flag given on the
command line overrides the file's field; the file overrides the IDSCHECK_*
environment variables. An unknown field is an error.

  field                              flag                  value
  url                                --target              base URL: http(s)://host[:port][/prefix]
  api_key or api_key_env             --api-key             the key, or the NAME of a variable holding it
  admin_token or admin_token_env     --admin-token         X-Admin-Token (likewise)
  metrics_token or metrics_token_env --metrics-token       Bearer token of /metrics (likewise)
  dashboard_password or ..._env      --dashboard-password  HTTP Basic password of user admin (likewise)
  require_signatures                 --require-signatures  true or false
  time_scale                         --time-scale          a number > 0
  readings                           --reading             {"DECISION": "READING", ...}; a --reading
                                                           overrides the file for its decision only
  target_cmd                         --target-cmd          shell command that starts the target
  effect_sink                        --effect-sink         {"listen": "host:port", "url": "http://..."}:
                                                           where the harness's effect sink listens
                                                           (the flag sets listen); the target sends
                                                           each external effect there (ids), or
                                                           charges there (atp's payment rail; the
                                                           intent profile has none)
  http_idempotency                   --variant             the endpoint of an http-idempotency target:
                                                           variant, method, path, body, vary, invalid,
                                                           key, key_format, requires_key, id, count,
                                                           callers (docs/http-idempotency.md)

For example, with the secrets in the environment, not in the file:

  {
    "url": "http://127.0.0.1:8080",
    "api_key_env": "MY_BUS_KEY",
    "admin_token_env": "MY_ADMIN_TOKEN",
    "time_scale": 60,
    "readings": {"lease-expiry": "immediate"},
    "target_cmd": "BUS_SECRET=\"$MY_BUS_KEY\" ./bus serve --addr 127.0.0.1:8080"
  }

A credential is given as its value or by the name of its variable, never
both; a named variable must be set. Every credential, and the value of any
VAR=value or --flag=value of target_cmd whose name looks secret (KEY, TOKEN,
SECRET, PASSWORD, ...), is redacted from every file written and every line
printed; the reproduce line names --target-file, never a credential.
`

// targetFileKeys are the fields of the target file, in the order the help
// shows them; effectSinkKeys those of its "effect_sink" object.
var (
	targetFileKeys = []string{"url", "api_key", "api_key_env", "admin_token", "admin_token_env",
		"metrics_token", "metrics_token_env", "dashboard_password", "dashboard_password_env",
		"require_signatures", "time_scale", "readings", "target_cmd", "effect_sink", "http_idempotency"}
	effectSinkKeys = []string{"listen", "url"}
)

// targetFile is the JSON of --target-file.
type targetFile struct {
	URL                  string             `json:"url"`
	APIKey               string             `json:"api_key"`
	APIKeyEnv            string             `json:"api_key_env"`
	AdminToken           string             `json:"admin_token"`
	AdminTokenEnv        string             `json:"admin_token_env"`
	MetricsToken         string             `json:"metrics_token"`
	MetricsTokenEnv      string             `json:"metrics_token_env"`
	DashboardPassword    string             `json:"dashboard_password"`
	DashboardPasswordEnv string             `json:"dashboard_password_env"`
	RequireSignatures    *bool              `json:"require_signatures"`
	TimeScale            *float64           `json:"time_scale"`
	Readings             map[string]string  `json:"readings"`
	TargetCmd            string             `json:"target_cmd"`
	EffectSink           *effectSink        `json:"effect_sink"`
	HTTPIdem             *httpidem.Endpoint `json:"http_idempotency"`
}

// register adds --target-file and the target flags to fs, and appends the
// target-file schema to fs's -h.
func (t *targetFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.File, "target-file", "", "JSON file describing the target (URL, credentials or the names of variables holding them, readings, time scale, start command: see below); flags override its fields")
	fs.StringVar(&t.cli.url, "target", "", "base URL of the target (http://host:port[/prefix]); empty: the bundled reference server")
	fs.StringVar(&t.cli.apiKey, "api-key", "", "the target's API key (X-API-KEY); required with --target (default $IDSCHECK_API_KEY)")
	fs.StringVar(&t.cli.adminToken, "admin-token", "", "X-Admin-Token of the target; empty: admin rules are N/A (default $IDSCHECK_ADMIN_TOKEN)")
	fs.StringVar(&t.cli.metricsToken, "metrics-token", "", "Bearer token of /metrics; empty: admin credentials are used (default $IDSCHECK_METRICS_TOKEN)")
	fs.StringVar(&t.cli.dashboardPassword, "dashboard-password", "", "HTTP Basic password of user admin; empty: Basic-auth rules are N/A (default $IDSCHECK_DASHBOARD_PASSWORD)")
	fs.BoolVar(&t.cli.requireSignatures, "require-signatures", false, "the target requires HMAC-signed requests (BUS_REQUIRE_SIGNATURES=true)")
	fs.Float64Var(&t.cli.timeScale, "time-scale", 0, "the target divides every protocol duration by this factor (1: real time; default 1 for a target, 60 for the bundled server)")
	fs.Var(&t.cli.readings, "reading", "DECISION=READING the target follows where the text is open (repeatable; see idscheck rules --readings); a declared reading is judged strictly")
	fs.StringVar(&t.cli.effectSink, "effect-sink", "", "host:port the harness's effect sink listens on, for profiles whose targets send their external effects to it (ids; atp's payment rail): give the target http://host:port as its sink (its rail) (effect_sink.listen in the target file)")
	fs.StringVar(&t.cli.variant, "variant", "", "http-idempotency: the text the endpoint follows, ietf (default), t0 or stripe (http_idempotency.variant in the target file)")
	fs.StringVar(&t.cli.targetCmd, "target-cmd", "", "shell command that starts the target on --target (idscheck owns the process: it waits for /health and stops it at the end)")
	prev := fs.Usage
	fs.Usage = func() {
		if prev != nil {
			prev()
		}
		fmt.Fprint(fs.Output(), targetFileHelp)
	}
}

// load resolves the description once fs is parsed: the target file's
// fields, overridden by every target flag given on the command line, then
// the IDSCHECK_* variables for credentials still empty when there is a
// target URL. getenv reads the environment (os.Getenv; tests pass their
// own). The error says what to change.
func (t *targetFlags) load(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	t.origin = map[string]string{}
	t.readingFromFile = map[string]bool{}
	if t.File != "" {
		if err := t.loadFile(getenv); err != nil {
			return err
		}
	}
	set := func(field, flagName string, dst *string, v string) {
		if given[flagName] {
			*dst = v
			t.origin[field] = "--" + flagName
		}
	}
	set("url", "target", &t.URL, t.cli.url)
	set("api_key", "api-key", &t.APIKey, t.cli.apiKey)
	set("admin_token", "admin-token", &t.AdminToken, t.cli.adminToken)
	set("metrics_token", "metrics-token", &t.MetricsToken, t.cli.metricsToken)
	set("dashboard_password", "dashboard-password", &t.DashboardPassword, t.cli.dashboardPassword)
	set("target_cmd", "target-cmd", &t.TargetCmd, t.cli.targetCmd)
	set("effect_sink", "effect-sink", &t.EffectSink.Listen, t.cli.effectSink)
	if given["variant"] {
		if t.HTTPIdem == nil {
			t.HTTPIdem = &httpidem.Endpoint{}
		}
		t.HTTPIdem.Variant = t.cli.variant
		t.origin["http_idempotency.variant"] = "--variant"
	}
	if given["require-signatures"] {
		t.RequireSignatures = t.cli.requireSignatures
		t.origin["require_signatures"] = "--require-signatures"
	}
	if given["time-scale"] {
		t.TimeScale = t.cli.timeScale
		t.origin["time_scale"] = "--time-scale"
	}
	if given["reading"] {
		if t.Readings == nil {
			t.Readings = declaredReadings{}
		}
		for d, name := range t.cli.readings {
			t.Readings[d] = name // a flag overrides the file's reading of the same decision
			delete(t.readingFromFile, d)
		}
	}
	t.fromEnv = nil
	if t.URL != "" {
		for _, c := range t.credentials() {
			if *c.value != "" || given[c.flag] || t.origin[c.field] != "" {
				continue
			}
			if v := getenv(credentialEnv[c.flag]); v != "" {
				*c.value = v
				t.origin[c.field] = "$" + credentialEnv[c.flag]
				t.fromEnv = append(t.fromEnv, c.flag)
			}
		}
	}
	sort.Strings(t.fromEnv)
	return nil
}

type credential struct {
	field, flag string
	value       *string
}

func (t *targetFlags) credentials() []credential {
	return []credential{
		{"api_key", "api-key", &t.APIKey},
		{"admin_token", "admin-token", &t.AdminToken},
		{"metrics_token", "metrics-token", &t.MetricsToken},
		{"dashboard_password", "dashboard-password", &t.DashboardPassword},
	}
}

// maxTargetFile bounds what loadFile reads: a target description is small.
const maxTargetFile = 1 << 20

// loadFile reads t.File into the description.
func (t *targetFlags) loadFile(getenv func(string) string) error {
	name := t.File
	b, err := readLimited(name, maxTargetFile+1)
	if err != nil {
		return fmt.Errorf("--target-file: %v (it names a JSON file describing the target: see -h)", err)
	}
	if len(b) > maxTargetFile {
		return fmt.Errorf("--target-file %s: more than %d bytes: not a target description", name, maxTargetFile)
	}
	ferr := func(format string, a ...any) error {
		return fmt.Errorf("target file %s: "+format, append([]any{name}, a...)...)
	}
	// Unknown fields first, by their exact names (encoding/json would match
	// "API_KEY" to api_key; the file is held to the documented names).
	if len(bytes.TrimSpace(b)) == 0 {
		return ferr(`empty: want a JSON object such as {"url": "http://127.0.0.1:8080", "api_key_env": "MY_KEY"}`)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return ferr("%s", jsonErrorText(b, err))
	}
	if top == nil {
		return ferr("want a JSON object, got null")
	}
	if err := unknownKeys(top, targetFileKeys, ""); err != nil {
		return ferr("%v", err)
	}
	if raw, ok := top["effect_sink"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		var sink map[string]json.RawMessage
		if err := json.Unmarshal(raw, &sink); err != nil {
			return ferr(`"effect_sink": want an object {"listen": "host:port", "url": "http://..."}`)
		}
		if err := unknownKeys(sink, effectSinkKeys, "effect_sink."); err != nil {
			return ferr("%v", err)
		}
	}
	var f targetFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return ferr("%s", jsonErrorText(b, err))
	}
	in := func(field string) string { return strconv.Quote(field) + " in " + name }
	str := func(field string, dst *string, v string) {
		if v != "" {
			*dst = v
			t.origin[field] = in(field)
		}
	}
	str("url", &t.URL, strings.TrimSpace(f.URL))
	str("target_cmd", &t.TargetCmd, f.TargetCmd)
	for _, c := range []struct {
		field      string
		value, env string
		dst        *string
	}{
		{"api_key", f.APIKey, f.APIKeyEnv, &t.APIKey},
		{"admin_token", f.AdminToken, f.AdminTokenEnv, &t.AdminToken},
		{"metrics_token", f.MetricsToken, f.MetricsTokenEnv, &t.MetricsToken},
		{"dashboard_password", f.DashboardPassword, f.DashboardPasswordEnv, &t.DashboardPassword},
	} {
		envField := c.field + "_env"
		switch {
		case c.value != "" && c.env != "":
			return ferr("give %q or %q, not both", c.field, envField)
		case c.value != "":
			*c.dst = c.value
			t.origin[c.field] = in(c.field)
		case c.env != "":
			if !envName.MatchString(c.env) {
				return ferr("%q is %q: want the NAME of an environment variable (letters, digits, _), e.g. \"MY_KEY\", not its value", envField, redactEnvValue(c.env))
			}
			v := getenv(c.env)
			if v == "" {
				return ferr("%q names $%s, which is not set (or empty): export it, or give the credential another way", envField, c.env)
			}
			*c.dst = v
			t.origin[c.field] = in(envField) + " ($" + c.env + ")"
		}
	}
	if f.RequireSignatures != nil {
		t.RequireSignatures = *f.RequireSignatures
		t.origin["require_signatures"] = in("require_signatures")
	}
	if f.TimeScale != nil {
		t.TimeScale = *f.TimeScale
		t.origin["time_scale"] = in("time_scale")
		if t.TimeScale <= 0 {
			return ferr(`"time_scale" must be > 0, got %v`, t.TimeScale)
		}
	}
	if len(f.Readings) > 0 {
		t.Readings = declaredReadings{}
		for d, r := range f.Readings {
			d, r = strings.TrimSpace(d), strings.TrimSpace(r)
			if d == "" || r == "" {
				return ferr(`"readings": want {"DECISION": "READING", ...} (e.g. {"lease-expiry": "immediate"}), got %q: %q`, d, r)
			}
			t.Readings[d] = r
			t.readingFromFile[d] = true
		}
	}
	if f.EffectSink != nil {
		t.EffectSink = *f.EffectSink
		if t.EffectSink.Listen != "" || t.EffectSink.URL != "" {
			t.origin["effect_sink"] = in("effect_sink")
		}
	}
	if f.HTTPIdem != nil {
		e := *f.HTTPIdem
		// Callers' headers named by variables: secrets stay out of files.
		for i, c := range e.Callers {
			for h, env := range c.HeadersEnv {
				if !envName.MatchString(env) {
					return ferr("%q of caller %d is %q: want the NAME of an environment variable", "headers_env."+h, i+1, redactEnvValue(env))
				}
				v := getenv(env)
				if v == "" {
					return ferr("%q of caller %d names $%s, which is not set (or empty)", "headers_env."+h, i+1, env)
				}
				if e.Callers[i].Headers == nil {
					e.Callers[i].Headers = map[string]string{}
				}
				e.Callers[i].Headers[h] = v
			}
		}
		t.HTTPIdem = &e
		t.origin["http_idempotency"] = in("http_idempotency")
	}
	return nil
}

// readLimited reads at most n bytes of the file name.
func readLimited(name string, n int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// redactEnvValue shows at most a few characters of what was given where an
// environment variable's name belongs: it may be the secret itself.
func redactEnvValue(s string) string {
	if len(s) <= 4 {
		return s
	}
	return s[:2] + "…"
}

// unknownKeys names the first key of m (sorted) that known does not list,
// with the nearest known name when one is close.
func unknownKeys(m map[string]json.RawMessage, known []string, prefix string) error {
	var bad []string
	for k := range m {
		if !containsString(known, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	k := bad[0]
	msg := fmt.Sprintf("unknown field %q", prefix+k)
	if near := nearest(k, known); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", prefix+near)
	}
	if len(bad) > 1 {
		msg += fmt.Sprintf(", and %d more unknown", len(bad)-1)
	}
	return fmt.Errorf("%s; the fields are: %s", msg, strings.Join(known, ", "))
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// nearest returns the known name closest to k (case, '-' for '_', or an
// edit distance of at most 2), or "".
func nearest(k string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	best, bestD := "", 3
	for _, n := range known {
		if norm(n) == norm(k) {
			return n
		}
		if d := editDistance(norm(k), n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// jsonErrorText turns a decoding error into "line L, column C: ..." and a
// type mismatch into the field and the type wanted.
func jsonErrorText(b []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(b, se.Offset)
		return fmt.Sprintf("not valid JSON at line %d, column %d: %v", line, col, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("want a JSON object, got a JSON %s", te.Value)
		}
		return fmt.Sprintf("%q: want a %s, got a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	return err.Error()
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "bool":
		return "boolean (true or false)"
	case "float64":
		return "number"
	case "map", "struct", "ptr":
		return "JSON object"
	}
	return k
}

func lineCol(b []byte, off int64) (int, int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// name is how an error message names a field: the flag or the file field
// its value came from, or the flag when it is unset.
func (t *targetFlags) name(field, flagName string) string {
	if o := t.origin[field]; o != "" && !strings.HasPrefix(o, "$") {
		return o
	}
	return "--" + flagName
}

// validate checks the resolved description against profile p. online is
// set for commands that talk to the target (run, chaos): a target URL then
// needs an API key, and credentials, signatures and a start command need a
// target URL (without one the bundled reference server is started, with its
// own secrets). check, offline, passes online=false: nothing is required.
func (t *targetFlags) validate(p spec.Profile, online bool) error {
	if t.URL != "" {
		if err := checkBaseURL(t.URL); err != nil {
			return fmt.Errorf("%s is %q: %v", t.name("url", "target"), redactURL(t.URL), err)
		}
	}
	if (t.origin["time_scale"] != "" && t.TimeScale <= 0) || t.TimeScale < 0 {
		return fmt.Errorf("%s must be > 0, got %v", t.name("time_scale", "time-scale"), t.TimeScale)
	}
	for d, r := range t.Readings {
		if err := checkReadings(p, map[string]string{d: r}); err != nil {
			if t.readingFromFile[d] {
				return fmt.Errorf("%q in %s: %s", "readings", t.File, strings.TrimPrefix(err.Error(), "--reading "))
			}
			return err
		}
	}
	if e := t.HTTPIdem; e != nil {
		d := *e
		d.Defaults()
		if p == spec.ProfileHTTPIdem && (d.Path != "" || t.URL != "") {
			if err := d.Validate(); err != nil {
				return fmt.Errorf("%s: %v (docs/http-idempotency.md)", t.name("http_idempotency", "variant"), err)
			}
		} else if !slices.Contains(httpidem.Variants(), d.Variant) {
			return fmt.Errorf("%s is %q: want %s", t.name("http_idempotency.variant", "variant"), d.Variant, strings.Join(httpidem.Variants(), ", "))
		}
	}
	if s := t.EffectSink; s.Listen != "" {
		if _, _, err := net.SplitHostPort(s.Listen); err != nil {
			return fmt.Errorf(`"effect_sink.listen" in %s is %q: want host:port, e.g. 127.0.0.1:9090`, t.File, s.Listen)
		}
	}
	if s := t.EffectSink; s.URL != "" {
		if err := checkBaseURL(s.URL); err != nil {
			return fmt.Errorf(`"effect_sink.url" in %s is %q: %v`, t.File, redactURL(s.URL), err)
		}
	}
	if !online {
		return nil
	}
	if t.URL == "" {
		for _, c := range t.credentials() {
			if o := t.origin[c.field]; o != "" && !strings.HasPrefix(o, "$") {
				return fmt.Errorf("%s needs --target (or \"url\" in the target file): the bundled server draws its own secrets", o)
			}
		}
		if o := t.origin["require_signatures"]; o != "" {
			return fmt.Errorf("%s needs --target (or \"url\" in the target file): the bundled server draws its own secrets", o)
		}
		if o := t.origin["target_cmd"]; o != "" {
			return fmt.Errorf("%s needs --target (or \"url\" in the target file): the URL the started process serves", o)
		}
		return nil
	}
	// The Intent Protocol authenticates every call with X-API-KEY; IDS's
	// binding makes the key optional.
	if t.APIKey == "" && p == spec.ProfileIntent {
		return fmt.Errorf("an API key is required with %s: give --api-key, \"api_key\" or \"api_key_env\" in the target file, or set IDSCHECK_API_KEY", t.name("url", "target"))
	}
	return nil
}

// checkBaseURL accepts an http or https URL with a host (and an optional
// path prefix).
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http:// or https:// URL with a host, such as http://127.0.0.1:8080")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("want a base URL without a query or fragment, such as http://127.0.0.1:8080/prefix")
	}
	if _, err := strconv.Atoi(u.Port()); u.Port() != "" && err != nil {
		return fmt.Errorf("port %q is not a number", u.Port())
	}
	return nil
}

// redactURL hides the password of a URL's user info, for error messages
// written before the secrets are known.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	return u.String()
}

// withDefaultTimeScale returns the time scale, or def when none was given.
func (t *targetFlags) withDefaultTimeScale(def float64) float64 {
	if t.TimeScale > 0 {
		return t.TimeScale
	}
	return def
}

// Target is the description as the scenario runner takes it. TimeScale is
// 1 when none was given.
func (t *targetFlags) Target() features.Target {
	ft := features.Target{
		BaseURL: t.URL, APIKey: t.APIKey,
		TimeScale: t.withDefaultTimeScale(1),
	}
	for name, v := range map[string]string{intent.CredentialAdminToken: t.AdminToken,
		intent.CredentialMetricsToken: t.MetricsToken, intent.CredentialDashboardPassword: t.DashboardPassword} {
		if v != "" {
			if ft.Credentials == nil {
				ft.Credentials = map[string]string{}
			}
			ft.Credentials[name] = v
		}
	}
	if t.RequireSignatures {
		ft.Described = intent.Declared{RequireSignatures: true}
	}
	if len(t.Readings) > 0 {
		ft.Readings = map[string]string(t.Readings)
	}
	if t.HTTPIdem != nil {
		e := *t.HTTPIdem
		ft.Described = &e
	}
	return ft
}

// Secrets lists every secret value of the description, longest first, for
// redaction: the four credentials (and the HTTP Basic header value of
// each), the password of a URL's user info, the values of target_cmd's
// VAR=value assignments and --flag=value options whose name looks secret
// (KEY, TOKEN, SECRET, PASSWORD, ...). A literal occurrence of a credential
// inside target_cmd is covered by the credential itself. A value of any
// length counts (redact.Redactor replaces a short one as a token of its own).
func (t *targetFlags) Secrets() []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, c := range t.credentials() {
		if v := *c.value; v != "" {
			add(v)
			add(base64.StdEncoding.EncodeToString([]byte("admin:" + v)))
		}
	}
	for _, u := range []string{t.URL, t.EffectSink.URL} {
		if pu, err := url.Parse(u); err == nil && pu.User != nil {
			if pw, ok := pu.User.Password(); ok {
				add(pw)
				add(url.QueryEscape(pw))
			}
		}
	}
	for _, v := range redact.CommandSecrets(t.TargetCmd, nil) {
		add(v)
	}
	if t.HTTPIdem != nil {
		for _, c := range t.HTTPIdem.Callers {
			for _, v := range c.Headers {
				add(v)
				if _, tok, ok := strings.Cut(v, " "); ok {
					add(tok) // the token of "Bearer <token>"
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unquoteShell(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return s[1 : len(s)-1]
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`, "\\`", "`").Replace(s[1 : len(s)-1])
	}
	return s
}

// reproduceFlag renders a target flag given on the command line for a
// reproduce line: a credential as "$IDSCHECK_…", never its value; each
// --reading apart; ok is false for a flag that is not a target flag.
// --target-file is repeated as given: the file, not the line, holds the
// rest of the description.
func (t *targetFlags) reproduceFlag(name, value string) (parts []string, ok bool) {
	if !containsString(targetFlagNames, name) {
		return nil, false
	}
	switch env, secret := credentialEnv[name]; {
	case secret:
		return []string{"--" + name + `="$` + env + `"`}, true
	case name == "reading":
		for _, kv := range strings.Split(t.cli.readings.String(), ",") {
			parts = append(parts, "--reading="+shellQuote(kv))
		}
		return parts, true
	}
	return []string{"--" + name + "=" + shellQuote(value)}, true
}

// reproduceArgs renders every target flag set on fs (after Parse), in
// fs.Visit's order, then the credentials taken from IDSCHECK_* variables:
// the target's part of a reproduce line, for a command that builds its own.
func (t *targetFlags) reproduceArgs(fs *flag.FlagSet) []string {
	var parts []string
	fs.Visit(func(f *flag.Flag) {
		if p, ok := t.reproduceFlag(f.Name, f.Value.String()); ok {
			parts = append(parts, p...)
		}
	})
	return append(parts, t.reproduceEnv()...)
}

// reproduceEnv renders the credentials taken from IDSCHECK_* variables, for
// the end of a reproduce line.
func (t *targetFlags) reproduceEnv() []string {
	var parts []string
	for _, name := range t.fromEnv {
		parts = append(parts, "--"+name+`="$`+credentialEnv[name]+`"`)
	}
	return parts
}

// redactAll replaces every secret (and its JSON-escaped form) in s.
func redactAll(s string, secrets []string) string {
	return redact.NewRedactor(secrets...).String(s)
}
