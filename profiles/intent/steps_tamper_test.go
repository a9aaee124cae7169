package intent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
	sut "github.com/idscheck/idscheck/sut/intent"
	"github.com/idscheck/idscheck/verdict"
)

// rewrite edits one answer of the bundled intent server on its way to the
// harness: r is the request (its body readable again), status the answer's
// status and doc its decoded JSON object (nil when the body is none). It
// returns the status to send; a doc it edits is sent re-encoded.
type rewrite func(r *http.Request, status int, doc map[string]any) int

// tamper applies change to every answer of h.
func tamper(h http.Handler, change rewrite) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(req))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		r.Body = io.NopCloser(bytes.NewReader(req))
		body := rec.Body.Bytes()
		var doc map[string]any
		if strings.Contains(rec.Header().Get("Content-Type"), "json") && json.Unmarshal(body, &doc) != nil {
			doc = nil
		}
		status := change(r, rec.Code, doc)
		if doc != nil {
			body, _ = json.Marshal(doc)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(status)
		if status != http.StatusNoContent {
			io.Copy(w, bytes.NewReader(body))
		}
	})
}

// certifyTampered runs the scenarios of the selected rules against the
// bundled server behind change (none when nil) and returns each rule's
// verdict.
func certifyTampered(t *testing.T, sel []string, change rewrite) map[string]verdict.Verdict {
	t.Helper()
	return certifyMutantTampered(t, "", sel, change)
}

// certifyMutantTampered is certifyTampered against a mutant of the bundled
// server.
func certifyMutantTampered(t *testing.T, mutant string, sel []string, change rewrite) map[string]verdict.Verdict {
	t.Helper()
	var wrap func(http.Handler) http.Handler
	if change != nil {
		wrap = func(h http.Handler) http.Handler { return tamper(h, change) }
	}
	return certifyWrapped(t, mutant, sel, wrap)
}

// certifyWrapped runs the scenarios of the selected rules against a mutant
// of the bundled server (none when "") behind wrap (none when nil).
func certifyWrapped(t *testing.T, mutant string, sel []string, wrap func(http.Handler) http.Handler) map[string]verdict.Verdict {
	t.Helper()
	out := map[string]verdict.Verdict{}
	for _, r := range certifyRun(t, mutant, sel, wrap).Rules {
		out[r.RuleID] = r.Verdict
	}
	return out
}

// certifyRun is certifyWrapped's run, whole: each rule's verdict with its
// reason, and each scenario's. opts change the bundled server's
// configuration (a dashboard password, a metrics token) before it opens.
func certifyRun(t *testing.T, mutant string, sel []string, wrap func(http.Handler) http.Handler, opts ...func(*sut.Config)) *features.RunResult {
	t.Helper()
	if testing.Short() {
		t.Skip("runs part of the intent profile")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := sut.Config{DBPath: filepath.Join(t.TempDir(), "bus.db"), Secret: "main-tamper", AdminSecret: "admin-tamper",
		TimeScale: 60, Seed: 7, Mutant: mutant, Logger: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := sut.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	res, err := Profile().Run(ctx, features.RunConfig{Seed: 1, Select: sel, Budget: 5 * time.Second,
		Target: features.Target{BaseURL: hs.URL, APIKey: cfg.Secret, TimeScale: 60, Credentials: credentialsOf(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Scenarios {
		if s.Verdict != verdict.Pass {
			t.Logf("%s: %s: %s (expected %s, observed %s)", s.Verdict, s.Name, s.Reason, s.Evidence.Expected, s.Evidence.Observed)
		}
	}
	return res
}

// wantVerdicts compares the verdicts of the named rules.
func wantVerdicts(t *testing.T, got map[string]verdict.Verdict, want map[string]verdict.Verdict) {
	t.Helper()
	for rule, v := range want {
		if got[rule] != v {
			t.Errorf("rule %s: %s, want %s", rule, got[rule], v)
		}
	}
}

// failed reports whether a verdict is a failure (of a MUST or not).
func failed(v verdict.Verdict) bool { return v == verdict.Fail || v == verdict.NonStrict }
