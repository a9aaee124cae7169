package features

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/spec"
)

// testRules is the catalog of the self-test suite in testdata/.
var testRules = []spec.Rule{
	{ID: "T-1-health", Level: spec.Must},
	{ID: "T-2-echo", Level: spec.Must},
	{ID: "T-3-echo-twice", Level: spec.Should},
	{ID: "T-4-untestable", Level: spec.Must, Untestable: "deployment concern"},
	{ID: "T-5-mixed", Level: spec.Must},
	{ID: "T-6-undefined", Level: spec.Must},
	{ID: "T-7-uncovered", Level: spec.May},
	{ID: "T-8-after-session", Level: spec.Must},
	{ID: "T-9-header", Level: spec.Must},
	{ID: "T-10-same-response", Level: spec.Must},
	{ID: "T-11-next-request", Level: spec.Must},
	{ID: "T-12-gate", Level: spec.Must},
	{ID: "T-13-gated", Level: spec.Must},
	{ID: "T-14-reading", Level: spec.Must, Readings: []string{"flavour"}},
	{ID: "T-15-row-a", Level: spec.Must},
	{ID: "T-16-row-b", Level: spec.Must},
	{ID: "T-17-row-c", Level: spec.Must},
	{ID: "T-18-same-gate", Level: spec.Must},
}

// selfTestSteps are the step definitions of testdata/selftest.feature.
func selfTestSteps(sc *godog.ScenarioContext, env *Env) {
	var (
		status  int
		header  http.Header
		body    []byte
		lastKey string
	)
	c, err := env.Client("selftest")
	if err != nil {
		panic(err)
	}
	send := func(ctx context.Context, method, path string, b []byte) error {
		resp, err := c.Do(ctx, clientRequest(method, path, b))
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		status, header, body = resp.Status, resp.Header, resp.Body
		return nil
	}
	jsonField := func(field, want string) error {
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return Mismatch("a JSON object", fmt.Sprintf("%.40q", body))
		}
		if fmt.Sprint(m[field]) != want {
			return Mismatch(fmt.Sprintf("%q: %s", field, want), fmt.Sprintf("%q: %v", field, m[field]))
		}
		return nil
	}
	Register(sc, env, []StepDef{
		{Pattern: `^the client sends GET "([^"]*)"$`, Kind: Action, Fn: func(ctx context.Context, path string) error {
			return send(ctx, http.MethodGet, path, nil)
		}},
		{Pattern: `^the client posts a random key to "([^"]*)"$`, Kind: Action, Fn: func(ctx context.Context, path string) error {
			lastKey = fmt.Sprintf("k-%016x", env.Rand.Uint64())
			b, _ := json.Marshal(map[string]string{"key": lastKey})
			return send(ctx, http.MethodPost, path, b)
		}},
		{Pattern: `^the client has a healthy session$`, Kind: Action, Covers: "T-1-health", Fn: func(ctx context.Context) error {
			if err := send(ctx, http.MethodGet, "/health", nil); err != nil {
				return err
			}
			return jsonField("ok", "true")
		}},
		{Pattern: `^the status is (\d+)$`, Kind: Gate, Fn: func(want int) error {
			if status != want {
				return Mismatch(fmt.Sprintf("status %d", want), fmt.Sprintf("status %d", status))
			}
			return nil
		}},
		{Pattern: `^the header "([^"]*)" is "([^"]*)"$`, Kind: Check, Fn: func(name, want string) error {
			if got := header.Get(name); got != want {
				return Mismatch(name+": "+want, fmt.Sprintf("%s: %q", name, got))
			}
			return nil
		}},
		{Pattern: `^the body is a JSON object with "([^"]*)" true$`, Kind: Check, Fn: func(field string) error {
			return jsonField(field, "true")
		}},
		{Pattern: `^the body has "([^"]*)" "([^"]*)"$`, Kind: Check, Fn: jsonField},
		{Pattern: `^the body echoes the key$`, Kind: Check, Fn: func() error {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				return fmt.Errorf("decoding body: %w", err)
			}
			if m["key"] != lastKey {
				return Mismatch("key "+lastKey, fmt.Sprintf("key %v", m["key"]))
			}
			return nil
		}},
		{Pattern: `^the client fetches the item of the id it was given$`, Kind: Action, Fn: func(ctx context.Context) error {
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				return fmt.Errorf("decoding body: %w", err)
			}
			id, _ := m["id"].(string)
			return send(ctx, http.MethodGet, "/item/"+id, nil)
		}},
		{Pattern: `^a step panics$`, Kind: Action, Fn: func() error {
			var m map[string]int
			m["boom"]++ // assignment to a nil map
			return nil
		}},
		{Pattern: `^the target offers nothing for this$`, Kind: Action, Fn: func() error {
			return NotApplicable("the test target offers nothing for this")
		}},
	})
}

// Targets of the runner tests. Each answers /health properly unless it is
// the point, so the hostile behaviour hits the scenarios.
func goodTarget(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/health":
		w.Header().Set("X-Test", "yes")
		io.WriteString(w, `{"ok":true,"version":"test","flavour":"sweet"}`)
	case r.URL.Path == "/gate":
		io.WriteString(w, `{"ok":true}`)
	case r.URL.Path == "/echo":
		var m map[string]any
		json.NewDecoder(r.Body).Decode(&m)
		var id [16]byte
		rand.Read(id[:]) // the target draws its own ids: the sequence test must normalise them
		m["id"] = hex.EncodeToString(id[:])
		json.NewEncoder(w).Encode(m)
	case strings.HasPrefix(r.URL.Path, "/item/"):
		io.WriteString(w, `{}`)
	default:
		http.NotFound(w, r)
	}
}

// oddTarget breaks one check of a response (X-Test), answers /gate with
// 503 (a failed gate, and a failed example row) and follows the other
// reading of flavour.
func oddTarget(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/health":
		io.WriteString(w, `{"ok":true,"version":"test","flavour":"sour"}`)
	case "/gate":
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"ok":true}`)
	default:
		goodTarget(w, r)
	}
}

func wrongEchoTarget(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/echo" {
		io.WriteString(w, `{"key":"somebody-else","id":"0123456789"}`)
		return
	}
	goodTarget(w, r)
}

func invalidJSONTarget(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok": tru`)
}

const script = `<script>alert(1)</script>`

func scriptTarget(w http.ResponseWriter, r *http.Request) {
	for _, h := range []string{"Content-Type", "X-Intent-Version", "X-Evil", "Retry-After", "Location"} {
		w.Header().Set(h, script)
	}
	fmt.Fprintf(w, `{"ok":%q,"key":%q,"id":%q,"error":{"code":%q,"message":%q}}`, script, script, script, script, script)
}

func resetTarget(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		goodTarget(w, r)
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

// hangTarget blocks every request but /health until the test ends.
func hangTarget(done <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			goodTarget(w, r)
			return
		}
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}
}

// startTarget serves h on loopback until the test ends. Handlers blocked in
// hangTarget are released first, so Close does not wait for them.
func startTarget(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// startHangTarget is startTarget for hangTarget.
func startHangTarget(t *testing.T) string {
	t.Helper()
	done := make(chan struct{})
	url := startTarget(t, hangTarget(done))
	t.Cleanup(func() { close(done) }) // runs before srv.Close
	return url
}

func selfTestConfig(url string, seed uint64) RunConfig {
	return RunConfig{
		Profile:        "selftest",
		Target:         Target{BaseURL: url, APIKey: "test-key"},
		Seed:           seed,
		Rules:          testRules,
		RequestTimeout: 300 * time.Millisecond,
		Suite:          &Suite{FS: os.DirFS("testdata"), Paths: []string{"selftest.feature"}, Steps: selfTestSteps},
	}
}

func verdicts(res *RunResult) map[string]verdict.Verdict {
	m := map[string]verdict.Verdict{}
	for _, r := range res.Rules {
		m[r.RuleID] = r.Verdict
	}
	return m
}

func TestRunVerdictsAgainstTargets(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    map[string]verdict.Verdict
	}{
		{"good", goodTarget, map[string]verdict.Verdict{
			"T-1-health": verdict.Pass, "T-2-echo": verdict.Pass, "T-3-echo-twice": verdict.Pass, "T-4-untestable": verdict.NA, "T-5-mixed": verdict.Pass, "T-6-undefined": verdict.Unknown, "T-8-after-session": verdict.Pass, "T-9-header": verdict.Pass, "T-10-same-response": verdict.Pass, "T-11-next-request": verdict.Pass, "T-12-gate": verdict.Pass, "T-13-gated": verdict.Pass, "T-14-reading": verdict.Reading, "T-15-row-a": verdict.Pass, "T-16-row-b": verdict.Pass, "T-18-same-gate": verdict.Pass, "T-17-row-c": verdict.Pass,
		}},
		{"odd: one failed check, row and gate each", oddTarget, map[string]verdict.Verdict{
			"T-1-health": verdict.Pass, "T-2-echo": verdict.Pass, "T-3-echo-twice": verdict.Pass, "T-4-untestable": verdict.NA, "T-5-mixed": verdict.Pass, "T-6-undefined": verdict.Unknown, "T-8-after-session": verdict.Pass, "T-9-header": verdict.Fail, "T-10-same-response": verdict.Pass, "T-11-next-request": verdict.Blocked, "T-12-gate": verdict.Fail, "T-13-gated": verdict.Blocked, "T-14-reading": verdict.Reading, "T-15-row-a": verdict.Pass, "T-16-row-b": verdict.Fail, "T-18-same-gate": verdict.Fail, "T-17-row-c": verdict.Pass,
		}},
		{"wrong echo", wrongEchoTarget, map[string]verdict.Verdict{
			"T-1-health": verdict.Pass, "T-2-echo": verdict.Pass, "T-3-echo-twice": verdict.NonStrict, "T-4-untestable": verdict.NA, "T-5-mixed": verdict.Fail, "T-6-undefined": verdict.Unknown, "T-8-after-session": verdict.Pass, "T-9-header": verdict.Pass, "T-10-same-response": verdict.Pass, "T-11-next-request": verdict.Pass, "T-12-gate": verdict.Pass, "T-13-gated": verdict.Pass, "T-14-reading": verdict.Reading, "T-15-row-a": verdict.Pass, "T-16-row-b": verdict.Pass, "T-18-same-gate": verdict.Pass, "T-17-row-c": verdict.Pass,
		}},
		{"invalid JSON", invalidJSONTarget, map[string]verdict.Verdict{
			"T-1-health": verdict.Fail, "T-2-echo": verdict.Pass, "T-3-echo-twice": verdict.NonStrict, "T-4-untestable": verdict.NA, "T-5-mixed": verdict.Fail, "T-6-undefined": verdict.Unknown, "T-8-after-session": verdict.Blocked, "T-9-header": verdict.Fail, "T-10-same-response": verdict.Fail, "T-11-next-request": verdict.Blocked, "T-12-gate": verdict.Pass, "T-13-gated": verdict.Fail, "T-14-reading": verdict.Fail, "T-15-row-a": verdict.Pass, "T-16-row-b": verdict.Pass, "T-18-same-gate": verdict.Pass, "T-17-row-c": verdict.Pass,
		}},
		{"script in every field", scriptTarget, map[string]verdict.Verdict{
			"T-1-health": verdict.Fail, "T-2-echo": verdict.Pass, "T-3-echo-twice": verdict.NonStrict, "T-4-untestable": verdict.NA, "T-5-mixed": verdict.Fail, "T-6-undefined": verdict.Unknown, "T-8-after-session": verdict.Blocked, "T-9-header": verdict.Fail, "T-10-same-response": verdict.Fail, "T-11-next-request": verdict.Blocked, "T-12-gate": verdict.Pass, "T-13-gated": verdict.Fail, "T-14-reading": verdict.Fail, "T-15-row-a": verdict.Pass, "T-16-row-b": verdict.Pass, "T-18-same-gate": verdict.Pass, "T-17-row-c": verdict.Pass,
		}},
		{"reset", resetTarget, map[string]verdict.Verdict{
			"T-1-health": verdict.Pass, "T-2-echo": verdict.Unknown, "T-3-echo-twice": verdict.Unknown, "T-4-untestable": verdict.NA, "T-5-mixed": verdict.Unknown, "T-6-undefined": verdict.Unknown, "T-8-after-session": verdict.Pass, "T-9-header": verdict.Pass, "T-10-same-response": verdict.Pass, "T-11-next-request": verdict.Pass, "T-12-gate": verdict.Unknown, "T-13-gated": verdict.Unknown, "T-14-reading": verdict.Reading, "T-15-row-a": verdict.Pass, "T-16-row-b": verdict.Unknown, "T-18-same-gate": verdict.Unknown, "T-17-row-c": verdict.Pass,
		}},
		{"hang", nil /* startHangTarget */, map[string]verdict.Verdict{
			"T-1-health": verdict.Pass, "T-2-echo": verdict.Unknown, "T-3-echo-twice": verdict.Unknown, "T-4-untestable": verdict.NA, "T-5-mixed": verdict.Unknown, "T-6-undefined": verdict.Unknown, "T-8-after-session": verdict.Pass, "T-9-header": verdict.Pass, "T-10-same-response": verdict.Pass, "T-11-next-request": verdict.Pass, "T-12-gate": verdict.Unknown, "T-13-gated": verdict.Unknown, "T-14-reading": verdict.Reading, "T-15-row-a": verdict.Pass, "T-16-row-b": verdict.Unknown, "T-18-same-gate": verdict.Unknown, "T-17-row-c": verdict.Pass,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var url string
			if tc.handler == nil {
				url = startHangTarget(t)
			} else {
				url = startTarget(t, tc.handler)
			}
			res, err := Run(ctx, selfTestConfig(url, 1))
			if err != nil {
				t.Fatal(err)
			}
			got := verdicts(res)
			for id, want := range tc.want {
				if got[id] != want {
					t.Errorf("%s: got %s, want %s (rules: %+v)", id, got[id], want, res.Rules)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("got verdicts for %d rules, want %d: %v", len(got), len(tc.want), got)
			}
			if !slices.Equal(res.NotCovered, []string{"T-7-uncovered"}) {
				t.Errorf("not covered: %v, want [T-7-uncovered]", res.NotCovered)
			}
			if len(res.Exchanges) == 0 {
				t.Error("no exchange recorded")
			}
		})
	}
}

// TestRunBlockersAndReadings checks what a BLOCKED rule names and what a
// reading verdict says, and that a declared reading is held strictly.
func TestRunBlockersAndReadings(t *testing.T) {
	byID := func(res *RunResult) map[string]verdict.RuleResult {
		m := map[string]verdict.RuleResult{}
		for _, r := range res.Rules {
			m[r.RuleID] = r
		}
		return m
	}
	res, err := Run(t.Context(), selfTestConfig(startTarget(t, oddTarget), 1))
	if err != nil {
		t.Fatal(err)
	}
	m := byID(res)
	for rule, by := range map[string]string{"T-11-next-request": "T-9-header", "T-13-gated": "T-12-gate"} {
		if m[rule].BlockedBy != by || !strings.Contains(m[rule].Reason, by) {
			t.Errorf("%s: blocked by %q (%q), want %s", rule, m[rule].BlockedBy, m[rule].Reason, by)
		}
	}
	if r := m["T-14-reading"]; r.Reading == nil || r.Reading.Decision != "flavour" || r.Reading.Follows != "sour" || r.Reading.Declared != "" {
		t.Errorf("T-14: reading %+v, want flavour follows sour", r.Reading)
	}
	res, err = Run(t.Context(), selfTestConfig(startTarget(t, invalidJSONTarget), 1))
	if err != nil {
		t.Fatal(err)
	}
	if r := byID(res)["T-8-after-session"]; r.BlockedBy != "T-1-health" {
		t.Errorf("T-8: blocked by %q, want T-1-health (the rule its precondition step covers)", r.BlockedBy)
	}

	for _, tc := range []struct {
		declared string
		want     verdict.Verdict
	}{{"sour", verdict.Pass}, {"sweet", verdict.Fail}} {
		cfg := selfTestConfig(startTarget(t, oddTarget), 1)
		cfg.Target.Readings = map[string]string{"flavour": tc.declared}
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := byID(res)["T-14-reading"]
		if r.Verdict != tc.want || r.Reading == nil || r.Reading.Declared != tc.declared {
			t.Errorf("declared %s: %s %+v, want %s with the declared reading", tc.declared, r.Verdict, r.Reading, tc.want)
		}
		if tc.want == verdict.Fail && !strings.Contains(r.Reason, "follows flavour=sour instead") {
			t.Errorf("declared sweet: reason %q does not name the reading followed", r.Reason)
		}
	}
}

func TestRunReasonsAndEvidence(t *testing.T) {
	res, err := Run(t.Context(), selfTestConfig(startTarget(t, wrongEchoTarget), 1))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]verdict.RuleResult{}
	for _, r := range res.Rules {
		byID[r.RuleID] = r
	}
	echo := byID["T-5-mixed"]
	if len(echo.Evidence) != 1 || !strings.HasPrefix(echo.Evidence[0].Expected, "key k-") || echo.Evidence[0].Observed != "key somebody-else" {
		t.Errorf("T-5 evidence: %+v", echo.Evidence)
	}
	if len(echo.Evidence) == 1 && len(echo.Evidence[0].Exchanges) != 1 {
		t.Errorf("T-5 evidence exchanges: %d, want 1", len(echo.Evidence[0].Exchanges))
	}
	if v := byID["T-2-echo"].Verdict; v != verdict.Pass {
		t.Errorf("T-2 %s: the status assertion of the scenario passed; the echo failure is T-5's alone", v)
	}
	if r := byID["T-6-undefined"].Reason; !strings.Contains(r, "undefined step: nobody wrote this step") {
		t.Errorf("T-6 reason %q does not name the undefined step", r)
	}
	if r := byID["T-4-untestable"].Reason; !strings.Contains(r, "deployment concern") {
		t.Errorf("T-4 reason %q does not say why", r)
	}
	for _, s := range res.Scenarios {
		if s.Verdict == verdict.Pass && len(s.Evidence.Exchanges) > 0 {
			t.Errorf("passing scenario %q keeps evidence", s.Name)
		}
	}
}

func TestRunGivesUpOnADeadTarget(t *testing.T) {
	cfg := selfTestConfig(startHangTarget(t), 1)
	cfg.UnknownStreak = 1
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var notRun []string
	for _, s := range res.Scenarios {
		if strings.HasPrefix(s.Reason, "not run") {
			notRun = append(notRun, s.Name)
		}
	}
	// Scenario 2 times out; the rest are not run.
	if len(notRun) != len(res.Scenarios)-2 {
		t.Errorf("scenarios not run: %q, want the %d after the first dead one", notRun, len(res.Scenarios)-2)
	}
	for _, s := range res.Scenarios {
		if strings.HasPrefix(s.Reason, "not run") && s.Verdict != verdict.Unknown {
			t.Errorf("scenario %q not run but %s", s.Name, s.Verdict)
		}
	}
}

// TestRunGivesUpOnAFlakyTarget (issue 18, case 6): transport-dead scenarios
// between live ones never make a streak, yet after TransportLimit of them in
// all the rest are not run: a target that answers now and then cannot make
// a run last hours.
func TestRunGivesUpOnAFlakyTarget(t *testing.T) {
	for _, limit := range []int{2, 100} {
		cfg := selfTestConfig(startHangTarget(t), 1)
		cfg.UnknownStreak, cfg.TransportLimit = 100, limit
		res, err := Run(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		dead, notRun := 0, 0
		for _, s := range res.Scenarios {
			switch {
			case strings.HasPrefix(s.Reason, "not run"):
				notRun++
			case s.Transport:
				dead++
			}
		}
		if limit == 2 && (dead != 2 || notRun == 0) {
			t.Errorf("limit 2: %d dead scenarios and %d not run, want 2 dead and the rest not run", dead, notRun)
		}
		if limit == 100 && (dead < 3 || notRun != 0) {
			t.Errorf("limit 100: %d dead scenarios and %d not run, want every scenario run", dead, notRun)
		}
	}
}

func TestRunSelectsRulesByGlob(t *testing.T) {
	cases := []struct {
		globs     []string
		wantRules []string
		wantScens int
		wantErr   error
	}{
		{[]string{"T-1-*"}, []string{"T-1-health"}, 1, nil},
		{[]string{"T-2-*", "T-3-*"}, []string{"T-2-echo", "T-3-echo-twice"}, 2, nil},
		{[]string{"T-5*"}, []string{"T-5-mixed"}, 2, nil},
		{[]string{"T-4-*"}, []string{"T-4-untestable"}, 0, nil},
		{[]string{"NOPE-*"}, nil, 0, ErrNoSuchRules},
	}
	url := startTarget(t, goodTarget)
	for _, tc := range cases {
		t.Run(strings.Join(tc.globs, ","), func(t *testing.T) {
			cfg := selfTestConfig(url, 1)
			cfg.Select = tc.globs
			res, err := Run(t.Context(), cfg)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			var ids []string
			for _, r := range res.Rules {
				ids = append(ids, r.RuleID)
			}
			if !slices.Equal(ids, tc.wantRules) {
				t.Errorf("rules %v, want %v", ids, tc.wantRules)
			}
			if len(res.Scenarios) != tc.wantScens {
				t.Errorf("ran %d scenarios, want %d", len(res.Scenarios), tc.wantScens)
			}
		})
	}
}

func TestRunConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*RunConfig)
	}{
		{"no URL", func(c *RunConfig) { c.Target.BaseURL = "" }},
		{"not http", func(c *RunConfig) { c.Target.BaseURL = "ftp://127.0.0.1/" }},
		{"bad glob", func(c *RunConfig) { c.Select = []string{"T-["} }},
		{"unknown profile", func(c *RunConfig) { c.Suite = nil; c.Profile = "nope" }},
		{"missing feature file", func(c *RunConfig) { c.Suite.Paths = []string{"nope.feature"} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := selfTestConfig("http://127.0.0.1:1", 1)
			tc.mod(&cfg)
			if _, err := Run(t.Context(), cfg); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

// TestRunSameSeedSameRequests: a second run with the same seed issues the
// same requests in the same order; another seed does not.
func TestRunSameSeedSameRequests(t *testing.T) {
	run := func(seed uint64) []string {
		t.Helper()
		res, err := Run(t.Context(), selfTestConfig(startTarget(t, goodTarget), seed))
		if err != nil {
			t.Fatal(err)
		}
		return RequestSequence(res.Exchanges)
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different requests:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8 sent the same requests:\n%s", strings.Join(a, "\n"))
	}
	if !slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "GET /item/"+Drawn) }) {
		t.Errorf("the id the target drew was not normalised:\n%s", strings.Join(a, "\n"))
	}
}

// TestRequestSequenceComparesHeaders: a header the seed decides (an
// Idempotency-Key) is part of the sequence; the signing headers and
// credentials are not.
func TestRequestSequenceComparesHeaders(t *testing.T) {
	ex := func(h map[string][]string) []verdict.Exchange {
		return []verdict.Exchange{{Method: "POST", Path: "/intent", ReqHeaders: h, Call: time.Unix(1, 0), Return: time.Unix(2, 0)}}
	}
	base := RequestSequence(ex(map[string][]string{"Idempotency-Key": {"s-1-k1"}, "X-Nonce": {"a"}, "X-Api-Key": {"one"}}))
	same := RequestSequence(ex(map[string][]string{"Idempotency-Key": {"s-1-k1"}, "X-Nonce": {"b"}, "X-Api-Key": {"two"}}))
	other := RequestSequence(ex(map[string][]string{"Idempotency-Key": {"f3a9c0d1e2b4"}, "X-Nonce": {"a"}, "X-Api-Key": {"one"}}))
	if !slices.Equal(base, same) {
		t.Errorf("nonce or credential made sequences differ: %q vs %q", base, same)
	}
	if slices.Equal(base, other) {
		t.Errorf("an Idempotency-Key from outside the seed went unnoticed: %q", base)
	}
	if !strings.Contains(base[0], "X-Api-Key: <credential>") || strings.Contains(base[0], "one") {
		t.Errorf("credential not normalised: %q", base[0])
	}
}

func TestRequestSequenceNormalisesWhatTheHarnessDoesNotChoose(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, int64(ms)*int64(time.Millisecond)) }
	ex := func(call, ret int, path, resp string) verdict.Exchange {
		return verdict.Exchange{Method: "GET", Path: path, Call: at(call), Return: at(ret), RespBody: resp}
	}
	a := []verdict.Exchange{
		ex(0, 1, "/a", `{"id":"id-aaaaaaaa"}`),
		ex(2, 5, "/storm/1", ""), ex(3, 4, "/storm/2", ""), // overlapping: one group
		ex(6, 7, "/x/id-aaaaaaaa", ""),
		ex(8, 9, "/short/abc", `{"v":"abc"}`),
		ex(10, 11, "/poll", ""), ex(12, 13, "/poll", ""),
	}
	b := []verdict.Exchange{
		ex(0, 1, "/a", `{"id":"id-bbbbbbbb"}`),
		ex(3, 4, "/storm/2", ""), ex(2, 5, "/storm/1", ""),
		ex(6, 7, "/x/id-bbbbbbbb", ""),
		ex(8, 9, "/short/abc", `{"v":"abc"}`),
		ex(10, 11, "/poll", ""),
	}
	sa, sb := RequestSequence(a), RequestSequence(b)
	if !slices.Equal(sa, sb) {
		t.Errorf("equal up to drawn ids and storm order, but:\n%q\n%q", sa, sb)
	}
	if sa[3] != "GET /x/"+Drawn+" " || sa[4] != "GET /short/abc " {
		t.Errorf("normalised %q", sa)
	}
	c := slices.Clone(b)
	c[3] = ex(5, 7, "/x/id-bbbbbbbb", "") // sent before the storm ended: a different order
	c[4] = ex(8, 9, "/short/abd", "")
	if slices.Equal(sa, RequestSequence(c)) {
		t.Error("a different request compared equal")
	}
}

func TestClassify(t *testing.T) {
	okEx := verdict.Exchange{Method: "GET", Path: "/x", Status: 200, Outcome: verdict.OutcomeOK}
	lost := verdict.Exchange{Method: "POST", Path: "/y", Outcome: verdict.OutcomeUnknown, Err: "timeout"}
	cases := []struct {
		name      string
		err       error
		exs       []verdict.Exchange
		want      verdict.Verdict
		reason    string
		transport bool
	}{
		{"nil", nil, []verdict.Exchange{okEx}, verdict.Pass, "", false},
		{"not applicable", fmt.Errorf("step: %w", NotApplicable("no admin token")), nil, verdict.NA, "no admin token", false},
		{"undefined", fmt.Errorf("%w: a step", godog.ErrUndefined), nil, verdict.Unknown, "undefined step: a step", false},
		{"pending", fmt.Errorf("%w: later", godog.ErrPending), nil, verdict.Unknown, "pending step", false},
		{"deadline", fmt.Errorf("claim: %w", context.DeadlineExceeded), nil, verdict.Unknown, "no answer", true},
		{"lost exchange", errors.New("decoding body: EOF"), []verdict.Exchange{okEx, lost}, verdict.Unknown, "POST /y got no answer", true},
		// A step that is not an assertion failed: a precondition.
		{"mismatch", fmt.Errorf("replay: %w", Mismatch("201", "409")), []verdict.Exchange{okEx}, verdict.Blocked, "expected 201, observed 409", false},
		{"other", errors.New("decoding body: invalid character"), []verdict.Exchange{okEx}, verdict.Blocked, "invalid character", false},
		{"stopped", fmt.Errorf("%w (T-1)", errStopped), []verdict.Exchange{okEx}, verdict.Blocked, "T-1", false},
		{"aborted", fmt.Errorf("before scenario hook failed: %w", errRunAborted), nil, verdict.Unknown, "not run", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Classify(tc.err, tc.exs)
			if r.Verdict != tc.want || !strings.Contains(r.Reason, tc.reason) || r.Transport != tc.transport {
				t.Errorf("got %s %q transport=%v, want %s containing %q transport=%v", r.Verdict, r.Reason, r.Transport, tc.want, tc.reason, tc.transport)
			}
		})
	}
}

func TestRuleVerdicts(t *testing.T) {
	// sc is a scenario whose assertions gave each named rule verdict v.
	sc := func(name string, v verdict.Verdict, rules ...string) ScenarioResult {
		s := ScenarioResult{Name: name, Verdict: v, Rules: rules}
		for _, r := range rules {
			s.Judgments = append(s.Judgments, Judgment{Rule: r, Verdict: v, Reason: string(v) + " because", BlockedBy: map[bool]string{true: "X"}[v == verdict.Blocked]})
		}
		return s
	}
	reading := func(name, rule, decision, follows string) ScenarioResult {
		return ScenarioResult{Name: name, Verdict: verdict.Pass, Rules: []string{rule}, Judgments: []Judgment{{
			Rule: rule, Verdict: verdict.Reading, Reading: &verdict.ReadingChoice{Decision: decision, Follows: follows}}}}
	}
	rules := []spec.Rule{
		{ID: "M", Level: spec.Must}, {ID: "S", Level: spec.Should}, {ID: "Y", Level: spec.May},
	}
	cases := []struct {
		name string
		scs  []ScenarioResult
		want map[string]verdict.Verdict
	}{
		{"all pass", []ScenarioResult{sc("a", verdict.Pass, "M", "S", "Y")},
			map[string]verdict.Verdict{"M": verdict.Pass, "S": verdict.Pass, "Y": verdict.Pass}},
		{"fail by level", []ScenarioResult{sc("a", verdict.Pass, "M", "S", "Y"), sc("b", verdict.Fail, "M", "S", "Y")},
			map[string]verdict.Verdict{"M": verdict.Fail, "S": verdict.NonStrict, "Y": verdict.NonStrict}},
		{"only the rule judged fails", []ScenarioResult{{Name: "a", Verdict: verdict.Fail, Rules: []string{"M", "S"},
			Judgments: []Judgment{{Rule: "M", Verdict: verdict.Pass}, {Rule: "S", Verdict: verdict.Fail}}}},
			map[string]verdict.Verdict{"M": verdict.Pass, "S": verdict.NonStrict}},
		{"fail beats unknown", []ScenarioResult{sc("a", verdict.Unknown, "M"), sc("b", verdict.Fail, "M")},
			map[string]verdict.Verdict{"M": verdict.Fail}},
		{"unknown beats blocked", []ScenarioResult{sc("a", verdict.Blocked, "M"), sc("b", verdict.Unknown, "M")},
			map[string]verdict.Verdict{"M": verdict.Unknown}},
		{"blocked beats pass", []ScenarioResult{sc("a", verdict.Pass, "M"), sc("b", verdict.Blocked, "M")},
			map[string]verdict.Verdict{"M": verdict.Blocked}},
		{"unknown beats pass", []ScenarioResult{sc("a", verdict.Pass, "M"), sc("b", verdict.Unknown, "M")},
			map[string]verdict.Verdict{"M": verdict.Unknown}},
		{"all n/a", []ScenarioResult{sc("a", verdict.NA, "M"), sc("b", verdict.NA, "M")},
			map[string]verdict.Verdict{"M": verdict.NA}},
		{"pass with some n/a", []ScenarioResult{sc("a", verdict.NA, "M"), sc("b", verdict.Pass, "M")},
			map[string]verdict.Verdict{"M": verdict.Pass}},
		{"a reading beside passes", []ScenarioResult{sc("a", verdict.Pass, "M"), reading("b", "M", "d", "x")},
			map[string]verdict.Verdict{"M": verdict.Reading}},
		{"the same reading twice", []ScenarioResult{reading("a", "M", "d", "x,y"), reading("b", "M", "d", "x")},
			map[string]verdict.Verdict{"M": verdict.Reading}},
		{"readings that contradict each other", []ScenarioResult{reading("a", "M", "d", "x"), reading("b", "M", "d", "y")},
			map[string]verdict.Verdict{"M": verdict.Fail}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, notCovered := RuleVerdicts(rules, tc.scs, 20, 100)
			m := map[string]verdict.Verdict{}
			for _, r := range got {
				m[r.RuleID] = r.Verdict
			}
			for id, v := range tc.want {
				if m[id] != v {
					t.Errorf("%s: %s, want %s", id, m[id], v)
				}
			}
			if len(got)+len(notCovered) != len(rules) {
				t.Errorf("%d verdicts + %d not covered != %d rules", len(got), len(notCovered), len(rules))
			}
		})
	}
}

// TestRuleEvidenceIsCapped: each check keeps its own latest exchanges,
// at most maxEx (issue 28, case 4: never evicted by another check's), and
// a rule at most DefaultEvidenceChecks checks; the reason says what was
// left out.
func TestRuleEvidenceIsCapped(t *testing.T) {
	var exs []verdict.Exchange
	for i := range 50 {
		exs = append(exs, verdict.Exchange{Path: fmt.Sprint("/", i), RespBody: strings.Repeat("é", 100)})
	}
	trimmed := TrimExchanges(exs, 50, 11)
	s := ScenarioResult{Name: "a", Verdict: verdict.Pass, Rules: []string{"M"},
		Judgments: []Judgment{{Rule: "M", Verdict: verdict.Fail, Evidence: verdict.Evidence{Scenario: "a", Exchanges: trimmed}}}}
	small := ScenarioResult{Name: "b", Verdict: verdict.Pass, Rules: []string{"M"},
		Judgments: []Judgment{{Rule: "M", Verdict: verdict.Fail, Evidence: verdict.Evidence{Scenario: "b", Exchanges: trimmed[:3]}}}}
	scs := []ScenarioResult{small, s, s, s, s, s}
	got, _ := RuleVerdicts([]spec.Rule{{ID: "M", Level: spec.Must}}, scs, 30, 11)
	evs := got[0].Evidence
	if len(evs) != DefaultEvidenceChecks {
		t.Fatalf("%d checks kept, want %d", len(evs), DefaultEvidenceChecks)
	}
	if len(evs[0].Exchanges) != 3 {
		t.Errorf("the first check keeps %d of its 3 exchanges", len(evs[0].Exchanges))
	}
	for _, ev := range evs[1:] {
		if len(ev.Exchanges) != 30 || ev.Omitted != 20 || ev.Exchanges[29].Path != "/49" {
			t.Errorf("a check keeps %d exchanges (omitted %d), the last %s: want its latest 30", len(ev.Exchanges), ev.Omitted, ev.Exchanges[len(ev.Exchanges)-1].Path)
		}
	}
	for _, want := range []string{`[the evidence of scenario "a" keeps its last 30 of 50 exchanges; history.jsonl has all]`, "[evidence of the first 4 of 6 checks]"} {
		if !strings.Contains(got[0].Reason, want) {
			t.Errorf("reason %q does not say %q", got[0].Reason, want)
		}
	}
	if b := trimmed[0].RespBody; !strings.HasPrefix(b, "ééééé…") || !strings.Contains(b, "truncated by idscheck: 10 of 200 bytes") {
		t.Errorf("body not cut on a rune boundary with a note: %q", b)
	}
	if exs[0].RespBody != strings.Repeat("é", 100) {
		t.Error("TrimExchanges modified its input")
	}
}

func clientRequest(method, path string, body []byte) client.Request {
	return client.Request{Method: method, Path: path, Body: body}
}

func TestRedact(t *testing.T) {
	tgt := Target{APIKey: "api-secret", Credentials: map[string]string{"admin-token": "adm-secret", "dashboard-password": "pw-secret", "metrics-token": "m"}}
	basic := "Basic " + "YWRtaW46cHctc2VjcmV0"     // admin:pw-secret
	keyAsBasic := "Basic YWRtaW46YXBpLXNlY3JldA==" // admin:api-secret
	ex := verdict.Exchange{
		Path:        "/get/api-secret",
		ReqHeaders:  map[string][]string{"X-Api-Key": {"api-secret"}, "X-Admin-Token": {"adm-secret"}, "Authorization": {basic, keyAsBasic}},
		ReqBody:     `{"api_key":"api-secret"}`,
		RespHeaders: map[string][]string{"X-Echo": {"adm-secret"}},
		RespBody:    "pw-secret",
	}
	shared := ex.ReqHeaders
	res := &RunResult{
		Exchanges: []verdict.Exchange{ex},
		Scenarios: []ScenarioResult{{Reason: "sent adm-secret", Evidence: verdict.Evidence{Observed: "api-secret", Exchanges: []verdict.Exchange{ex}},
			Judgments: []Judgment{{Rule: "R", Reason: "saw pw-secret", Step: "[R] api-secret", Evidence: verdict.Evidence{Observed: "adm-secret", Exchanges: []verdict.Exchange{ex}}},
				{Rule: "P", Verdict: verdict.Pass, BlockedStep: "sent api-secret", BlockedIn: "with pw-secret",
					Evidence: verdict.Evidence{Scenario: "as adm-secret", Step: "[P] api-secret", Observed: "at the effect sink: 1 effect for key pw-secret", Exchanges: []verdict.Exchange{ex}}}}}},
		Rules: []verdict.RuleResult{{Reason: "api-secret", Evidence: []verdict.Evidence{{Expected: "pw-secret", Exchanges: []verdict.Exchange{ex}}}},
			{Verdict: verdict.Blocked, BlockedStep: "sent api-secret", BlockedIn: "with adm-secret", Scenarios: []string{"as pw-secret"},
				Evidence: []verdict.Evidence{{Scenario: "as adm-secret", Step: "[P] api-secret", Observed: "pw-secret", Exchanges: []verdict.Exchange{ex}}}}},
	}
	res.Redact(tgt.Secrets())
	b, _ := json.Marshal(res)
	full, _ := json.Marshal(struct {
		R *RunResult
		E []verdict.Exchange
	}{res, res.Exchanges})
	for _, secret := range []string{"api-secret", "adm-secret", "pw-secret", "YWRtaW46cHctc2VjcmV0", "YWRtaW46YXBpLXNlY3JldA"} {
		if strings.Contains(string(full), secret) {
			t.Errorf("%s survived redaction: %s", secret, b)
		}
	}
	if shared["X-Api-Key"][0] != "api-secret" {
		t.Error("Redact modified a header map it does not own")
	}
	if res.Exchanges[0].ReqHeaders["X-Api-Key"][0] != Redacted {
		t.Errorf("API key header: %v", res.Exchanges[0].ReqHeaders)
	}
}

func TestRunSurvivesAPanickingStepRegistrar(t *testing.T) {
	cfg := selfTestConfig(startTarget(t, goodTarget), 1)
	cfg.Suite.Steps = func(*godog.ScenarioContext, *Env) { panic("boom") }
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scenarios) != 12 {
		t.Fatalf("%d scenarios, want 12", len(res.Scenarios))
	}
	for _, s := range res.Scenarios {
		if s.Verdict != verdict.Unknown || !strings.Contains(s.Reason, "registering steps panicked: boom") {
			t.Errorf("scenario %q: %s %q", s.Name, s.Verdict, s.Reason)
		}
	}
}

func TestRunProgressLines(t *testing.T) {
	var buf strings.Builder
	cfg := selfTestConfig(startTarget(t, wrongEchoTarget), 1)
	cfg.Progress = &buf
	if _, err := Run(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 12 {
		t.Fatalf("%d progress lines, want one per scenario:\n%s", len(lines), buf.String())
	}
	if !strings.HasPrefix(lines[0], "[1/12] PASS") || !strings.HasPrefix(lines[1], "[2/12] FAIL") || !strings.Contains(lines[1], "T-5-mixed: expected key k-") {
		t.Errorf("progress:\n%s", buf.String())
	}
	if strings.Contains(buf.String(), "\r") {
		t.Error("plain progress redraws lines")
	}
}

// TestRunEndsWithItsContext: a run whose context ends (Ctrl-C, --max-duration)
// stops the scenario in flight and does not run the rest, even when every
// request could wait far longer.
func TestRunEndsWithItsContext(t *testing.T) {
	cfg := selfTestConfig(startHangTarget(t), 1)
	cfg.RequestTimeout = time.Hour
	cfg.ScenarioTimeout = time.Hour
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var notRun int
	for _, s := range res.Scenarios {
		if s.Verdict == verdict.Pass && s.Name != "health answers a JSON object" {
			t.Errorf("scenario %q passed", s.Name)
		}
		if strings.Contains(s.Reason, "not run: the run was interrupted") {
			notRun++
		}
	}
	if notRun != len(res.Scenarios)-2 {
		t.Errorf("%d scenarios not run, want the %d after the one the deadline stopped", notRun, len(res.Scenarios)-2)
	}
	if v := verdicts(res)["T-2-echo"]; v != verdict.Unknown {
		t.Errorf("T-2 %s, want UNKNOWN", v)
	}
}

func TestRunProgressOnATerminalRedrawsOneLine(t *testing.T) {
	var buf strings.Builder
	cfg := selfTestConfig(startTarget(t, wrongEchoTarget), 1)
	cfg.Progress, cfg.ProgressTTY = &buf, true
	if _, err := Run(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	// Passing scenarios are redrawn in place; the others stay, one line each.
	if n := strings.Count(out, "\n"); n != 5 {
		t.Errorf("%d kept lines, want 5 (FAIL, FAIL, N/A, UNKNOWN, READING):\n%q", n, out)
	}
	if !strings.Contains(out, "\r\033[K[1/12] health answers a JSON object\r\033[K[1/12] PASS") {
		t.Errorf("no live line:\n%q", out)
	}
}

// TestRunNeverPassesAScenarioThatDidNotRun: godog skips the hooks of a
// scenario with no steps; the runner still gives it a verdict, UNKNOWN.
func TestRunNeverPassesAScenarioThatDidNotRun(t *testing.T) {
	cfg := selfTestConfig(startTarget(t, goodTarget), 1)
	cfg.Suite.Paths = []string{"empty.feature"}
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if v := verdicts(res)["T-1-health"]; v != verdict.Unknown {
		t.Errorf("T-1 %s, want UNKNOWN (rules: %+v)", v, res.Rules)
	}
	if len(res.Scenarios) != 1 || res.Scenarios[0].Verdict != verdict.Unknown {
		t.Errorf("scenarios %+v, want one UNKNOWN", res.Scenarios)
	}
}

func TestRunAStepThatPanicsIsTheHarnessBug(t *testing.T) {
	cfg := selfTestConfig(startTarget(t, goodTarget), 1)
	cfg.Suite.Paths = []string{"panic.feature"}
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Rules[slices.IndexFunc(res.Rules, func(r verdict.RuleResult) bool { return r.RuleID == "T-2-echo" })]
	if r.Verdict != verdict.Unknown || !strings.Contains(r.Reason, "runner bug: a step panicked: assignment to entry in nil map") {
		t.Errorf("T-2: %s %q", r.Verdict, r.Reason)
	}
}
