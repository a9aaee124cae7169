package ids

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/failpoint"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/spec"
	sutids "github.com/idscheck/idscheck/sut/ids"
	"github.com/idscheck/idscheck/verdict"
)

// rewrite edits one JSON answer of the bundled IDS server on its way to
// the harness: path is the request's path, doc the decoded body.
type rewrite func(method, path string, doc map[string]any)

// TestIDSChecksFailOnATamperedAnswer proves the checks no mutant exercises
// can fail: a proxy in front of the correct server alters one thing of its
// answers, and the rule whose assertion reads it must not pass.
func TestIDSChecksFailOnATamperedAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile per case")
	}
	commands := func(doc map[string]any, f func(c map[string]any)) {
		list, _ := doc["commands"].([]any)
		for _, c := range list {
			f(c.(map[string]any))
		}
	}
	evidence := func(f func(e map[string]any)) rewrite {
		return func(_, path string, doc map[string]any) {
			if path != "/evidence" {
				return
			}
			list, _ := doc["evidence"].([]any)
			for _, e := range list {
				f(e.(map[string]any))
			}
		}
	}
	registry := func(f func(doc map[string]any)) rewrite {
		return func(_, path string, doc map[string]any) {
			if path == "/registry" {
				f(doc)
			}
		}
	}
	var served atomic.Int64
	cases := []struct {
		rule   string
		change rewrite
	}{
		{"IDS-VI-classified", registry(func(d map[string]any) { commands(d, func(c map[string]any) { c["class"] = "I9" }) })},
		{"IDS-VIII.C-window-declared", registry(func(d map[string]any) { commands(d, func(c map[string]any) { delete(c, "ttl_seconds") }) })},
		{"IDS-XI-declared", registry(func(d map[string]any) { commands(d, func(c map[string]any) { c["shielding"] = nil }) })},
		{"IDS-VIII.C-financial-24h", registry(func(d map[string]any) {
			commands(d, func(c map[string]any) {
				if c["financial"] == true {
					c["ttl_seconds"] = 3600
				}
			})
		})},
		// The token lives 300 s (5 s at scale 60); a registry that says 60 s
		// makes the harness present it after 1.2 s: it still executes.
		{"IDS-X-short-lived", registry(func(d map[string]any) { d["confirmation_ttl_seconds"] = 60 })},
		{"IDS-VII.D-sha256", func(m, path string, doc map[string]any) {
			if k, ok := doc["idempotency_key"].(string); ok && path == "/commands" {
				doc["idempotency_key"] = k[:32]
			}
		}},
		{"IDS-IX.B-how-to-query", func(m, path string, doc map[string]any) {
			if doc["status"] == "processing" {
				doc["status_url"] = "/commands/no-such-command"
			}
		}},
		{"IDS-XII-executed-or-replayed", evidence(func(e map[string]any) { e["executed"] = true })},
		{"IDS-XII-original-ids", evidence(func(e map[string]any) { e["original_command_id"] = "someone-else" })},
		{"IDS-XII-outcome-ref", evidence(func(e map[string]any) { e["outcome_ref"] = nil })},
		// Every answer to a command says when it was served: two replays
		// are no longer the same bytes.
		{"IDS-IX.C-stable-response", func(m, path string, doc map[string]any) {
			if path == "/commands" && doc["outcome_ref"] != nil {
				doc["served"] = served.Add(1)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			res := runIDSThrough(t, tc.change, []string{tc.rule})
			for _, r := range res.Rules {
				if r.RuleID != tc.rule {
					continue
				}
				if r.Verdict != verdict.Fail && r.Verdict != verdict.NonStrict {
					t.Fatalf("%s: %s (%s), want it failed", r.RuleID, r.Verdict, r.Reason)
				}
				return
			}
			t.Fatalf("%s got no verdict", tc.rule)
		})
	}
}

// runIDSThrough certifies the correct IDS server behind a proxy that
// applies change to every JSON answer.
func runIDSThrough(t *testing.T, change rewrite, sel []string) *features.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv, err := sutids.Open(ctx, sutids.Config{DBPath: filepath.Join(t.TempDir(), "ids.db"), SinkURL: s.URL(),
		TimeScale: 60, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var doc map[string]any
		if strings.Contains(rec.Header().Get("Content-Type"), "json") && json.Unmarshal(body, &doc) == nil {
			change(r.Method, r.URL.Path, doc)
			body, _ = json.Marshal(doc)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		io.Copy(w, bytes.NewReader(body))
	}))
	defer hs.Close()
	suite := Suite()
	res, err := features.Run(ctx, features.RunConfig{Profile: Name, Rules: spec.RulesFor(Name), Suite: &suite, Seed: 1, Select: sel,
		Budget: 8 * time.Second, Sink: s, Target: features.Target{BaseURL: hs.URL, TimeScale: 60}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// runIDSWith certifies the correct IDS server whose sink calls go through
// sinkProxy (nil: straight to the sink), on the rules sel selects.
func runIDSWith(t *testing.T, sinkProxy func(next string) http.Handler, reg rewrite, sel []string) *features.RunResult {
	t.Helper()
	var edit answerEdit
	if reg != nil {
		edit = func(r *http.Request, _ []byte, doc map[string]any) { reg(r.Method, r.URL.Path, doc) }
	}
	return runIDSFull(t, "", sinkProxy, edit, sel)
}

// answerEdit edits one JSON answer, knowing the request and its body.
type answerEdit func(r *http.Request, reqBody []byte, doc map[string]any)

// runIDSFull certifies the IDS server (mutant "" for the correct one),
// its sink calls through sinkProxy (nil: straight), its answers edited by
// edit (nil: as they are).
func runIDSFull(t *testing.T, mutant string, sinkProxy func(next string) http.Handler, edit answerEdit, sel []string) *features.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sinkURL := s.URL()
	if sinkProxy != nil {
		ps := httptest.NewServer(sinkProxy(sinkURL))
		defer ps.Close()
		sinkURL = ps.URL
	}
	srv, err := sutids.Open(ctx, sutids.Config{DBPath: filepath.Join(t.TempDir(), "ids.db"), SinkURL: sinkURL,
		TimeScale: 60, Mutant: mutant, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler()
	if edit != nil {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reqBody, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(reqBody))
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			var doc map[string]any
			if json.Unmarshal(body, &doc) == nil {
				edit(r, reqBody, doc)
				body, _ = json.Marshal(doc)
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.Code)
			w.Write(body)
		})
	}
	hs := httptest.NewServer(h)
	defer hs.Close()
	suite := Suite()
	res, err := features.Run(ctx, features.RunConfig{Profile: Name, Rules: spec.RulesFor(Name), Suite: &suite, Seed: 1, Select: sel,
		Budget: 8 * time.Second, Sink: s, Target: features.Target{BaseURL: hs.URL, TimeScale: 60}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func verdicts(res *features.RunResult) map[string]string {
	out := map[string]string{}
	for _, r := range res.Rules {
		out[r.RuleID] = string(r.Verdict) + ": " + r.Reason
	}
	return out
}

// TestIDSCommandsWithoutAnExternalEffectPass: the binding never says a
// mutating command has an external effect (only that every one it has goes
// to the sink). A server whose provider is not the harness's sink makes no
// effect there at all; the duplicate rules, the key-input rule and the
// tenant rule must not fail it for that (issue 18, finding F1). Their
// violations still fail: the mutants tenant-not-in-key and
// replay-asks-confirmation (TestIDSProfileKillsMutants).
func TestIDSCommandsWithoutAnExternalEffectPass(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	silent := func(next string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusCreated)
				w.Write([]byte(`{"effect_id":"eff_elsewhere"}`))
				return
			}
			http.NotFound(w, r)
		})
	}
	sel := []string{"IDS-V-exactly-once-effects", "IDS-VII.B-key-inputs", "IDS-XV-tenant-scope", "IDS-X-no-reconfirm", "IDS-XIII-6-confirmation"}
	v := verdicts(runIDSWith(t, silent, nil, sel))
	for _, id := range sel {
		if !strings.HasPrefix(v[id], string(verdict.Pass)) {
			t.Errorf("%s: %s, want PASS for commands with no effect at the sink", id, v[id])
		}
	}
}

// TestIDSRateLimitIsJudgedOnlyAgainstADeclaredLimit: the text sets no
// threshold, so a registry that declares no duplicate_rate_limit (or one
// beyond what a scenario sends) leaves IDS-XV-rate-limit N/A, never FAIL
// (F5). The declared limit of the bundled server is still enforced: the
// no-rate-limit mutant fails (TestIDSProfileKillsMutants).
func TestIDSRateLimitIsJudgedOnlyAgainstADeclaredLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	for name, change := range map[string]func(doc map[string]any){
		"undeclared": func(doc map[string]any) { delete(doc, "duplicate_rate_limit") },
		"beyond": func(doc map[string]any) {
			doc["duplicate_rate_limit"] = map[string]any{"max": 100000, "window_seconds": 60}
		},
	} {
		t.Run(name, func(t *testing.T) {
			reg := func(_, path string, doc map[string]any) {
				if path == "/registry" {
					change(doc)
				}
			}
			v := verdicts(runIDSWith(t, nil, reg, []string{"IDS-XV-rate-limit"}))
			if !strings.HasPrefix(v["IDS-XV-rate-limit"], string(verdict.NA)) {
				t.Fatalf("IDS-XV-rate-limit: %s, want N/A", v["IDS-XV-rate-limit"])
			}
		})
	}
}

// TestIDSEvidenceAfterAProcessingFirstDelivery: the binding lets the first
// delivery be answered 202 (its effect not finished); the harness then
// resends once the command is terminal, and the evidence holds one item per
// delivery, the first with outcome_ref null. The XII rules must pass that
// (F4); their violations still fail (the tampered-evidence cases above and
// the evidence-as-first-seen mutant).
func TestIDSEvidenceAfterAProcessingFirstDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	if err := failpoint.Enable(sutids.FailpointAfterEffectBeforeCommit, `1*return("error")`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Disable(sutids.FailpointAfterEffectBeforeCommit) })
	sel := []string{"IDS-XII-decision", "IDS-XII-executed-or-replayed", "IDS-XII-outcome-ref"}
	res := runIDSWith(t, nil, nil, sel)
	v := verdicts(res)
	for _, id := range sel {
		if !strings.HasPrefix(v[id], string(verdict.Pass)) {
			t.Errorf("%s: %s, want PASS after a first delivery answered processing", id, v[id])
		}
	}
}

// TestIDSKeyRulesJudgeTheKey: the key-derivation rules judge the key the
// answer carries, not the replay (F2): a target that derives the key right
// but echoes the redelivery's command_id in its replay keeps VII.C; the
// ephemeral-in-key and effective-actor-ignored mutants still fail them
// (TestIDSProfileKillsMutants).
func TestIDSKeyRulesJudgeTheKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	echo := func(r *http.Request, reqBody []byte, doc map[string]any) {
		if r.Method != http.MethodPost || r.URL.Path != "/commands" {
			return
		}
		var req map[string]any
		if json.Unmarshal(reqBody, &req) == nil && req["command_id"] != nil && doc["command_id"] != nil {
			doc["command_id"] = req["command_id"]
		}
	}
	v := verdicts(runIDSFull(t, "", nil, echo, []string{"IDS-VII.C-ephemeral-excluded"}))
	if got := v["IDS-VII.C-ephemeral-excluded"]; !strings.HasPrefix(got, string(verdict.Pass)) {
		t.Fatalf("IDS-VII.C-ephemeral-excluded: %s, want PASS", got)
	}
}

// TestIDSEffectsAreCountedUnderTheTargetsKey: a target whose key is not
// the binding's (it posts its own key to the sink) is still caught
// re-executing (F3): the effects are counted under the key it reported,
// not found missing under the binding's.
func TestIDSEffectsAreCountedUnderTheTargetsKey(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	const prefix = "k2-"
	// The target's key is "k2-" + the binding's: in its sink calls and in
	// its answers.
	rekeySink := func(next string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			path := r.URL.Path
			var doc map[string]any
			if r.Method == http.MethodPost && json.Unmarshal(b, &doc) == nil {
				if k, ok := doc["idempotency_key"].(string); ok {
					doc["idempotency_key"] = prefix + k
				}
				b, _ = json.Marshal(doc)
			} else if strings.HasPrefix(path, "/effects/") {
				path = "/effects/" + prefix + strings.TrimPrefix(path, "/effects/")
			}
			req, _ := http.NewRequest(r.Method, next+path, bytes.NewReader(b))
			req.Header = r.Header.Clone()
			if k := req.Header.Get("Idempotency-Key"); k != "" {
				req.Header.Set("Idempotency-Key", prefix+k)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			for k, vs := range resp.Header {
				w.Header()[k] = vs
			}
			w.WriteHeader(resp.StatusCode)
			io.Copy(w, resp.Body)
		})
	}
	rekeyAnswer := func(r *http.Request, _ []byte, doc map[string]any) {
		if k, ok := doc["idempotency_key"].(string); ok && r.URL.Path == "/commands" {
			doc["idempotency_key"] = prefix + k
		}
	}
	v := verdicts(runIDSFull(t, sutids.MutantReplayReexecutes, rekeySink, rekeyAnswer, []string{"IDS-IX.A-no-reexecute"}))
	if got := v["IDS-IX.A-no-reexecute"]; !strings.HasPrefix(got, string(verdict.Fail)) {
		t.Fatalf("IDS-IX.A-no-reexecute: %s, want FAIL: the re-execution is filed under the target's own key", got)
	}
}

// TestIDSAnEffectOfTheFirstDeliveryIsNoReexecution: under
// IDS-IX.A-no-reexecute only a duplicate's effect counts (F6): a first
// delivery refused by the command that still made an effect passes it,
// since its duplicate adds none. The replay-reexecutes mutant still fails
// the rule (TestIDSProfileKillsMutants).
func TestIDSAnEffectOfTheFirstDeliveryIsNoReexecution(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	var sinkURL string
	through := func(next string) http.Handler {
		sinkURL = next
		u, _ := url.Parse(next)
		return httputil.NewSingleHostReverseProxy(u)
	}
	seen := map[string]bool{}
	var mu sync.Mutex
	effectOnRefusal := func(r *http.Request, _ []byte, doc map[string]any) {
		k, _ := doc["idempotency_key"].(string)
		if r.Method != http.MethodPost || r.URL.Path != "/commands" || doc["status"] != "rejected" || k == "" {
			return
		}
		mu.Lock()
		first := !seen[k]
		seen[k] = true
		mu.Unlock()
		if first {
			b, _ := json.Marshal(map[string]any{"tenant_id": "t", "idempotency_key": k, "command_id": doc["command_id"], "command": "audit.refusal", "args": map[string]any{}})
			if resp, err := http.Post(sinkURL+"/effects", "application/json", bytes.NewReader(b)); err == nil {
				resp.Body.Close()
			}
		}
	}
	v := verdicts(runIDSFull(t, "", through, effectOnRefusal, []string{"IDS-IX.A-no-reexecute"}))
	if got := v["IDS-IX.A-no-reexecute"]; !strings.HasPrefix(got, string(verdict.Pass)) {
		t.Fatalf("IDS-IX.A-no-reexecute: %s, want PASS", got)
	}
	if len(seen) == 0 {
		t.Fatal("no delivery was refused: the case was not exercised")
	}
}

// TestIDSFailsNameTheRuleTheEvidenceBreaks (issue 20, point 3): a FAIL
// names the rule its evidence breaks, and no other.
func TestIDSFailsNameTheRuleTheEvidenceBreaks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	keyRules := []string{"IDS-VII.A-key-derived", "IDS-VII.B-key-inputs", "IDS-VII.C-ephemeral-excluded", "IDS-VII.D-key-function", "IDS-VII.E-effective-actor"}
	want := func(t *testing.T, v map[string]string, fail []string, notFail []string) {
		t.Helper()
		for _, id := range fail {
			if !strings.HasPrefix(v[id], string(verdict.Fail)) {
				t.Errorf("%s: %s, want FAIL", id, v[id])
			}
		}
		for _, id := range notFail {
			if strings.HasPrefix(v[id], string(verdict.Fail)) {
				t.Errorf("%s: %s, want no FAIL: the evidence breaks another rule", id, v[id])
			}
		}
	}
	// (a) A replay that re-executes (the sink called again) and answers as
	// a fresh execution (the delivery's command_id, a new outcome_ref):
	// IX.A-no-reexecute fails, no key rule does (the key is right).
	t.Run("replay re-executes", func(t *testing.T) {
		var mu sync.Mutex
		seen := map[string]int{}
		fresh := func(r *http.Request, reqBody []byte, doc map[string]any) {
			k, _ := doc["idempotency_key"].(string)
			if r.Method != http.MethodPost || r.URL.Path != "/commands" || k == "" || doc["outcome_ref"] == nil {
				return
			}
			mu.Lock()
			seen[k]++
			n := seen[k]
			mu.Unlock()
			var req map[string]any
			if n > 1 && json.Unmarshal(reqBody, &req) == nil {
				doc["command_id"], doc["outcome_ref"] = req["command_id"], fmt.Sprintf("out_again_%d", n)
			}
		}
		v := verdicts(runIDSFull(t, sutids.MutantReplayReexecutes, nil, fresh, append([]string{"IDS-IX.A-no-reexecute"}, keyRules...)))
		want(t, v, []string{"IDS-IX.A-no-reexecute"}, keyRules)
	})
	// (b) A replay that carries the delivery's command_id (the original
	// outcome_ref): the same-outcome rule fails, not a key rule and not
	// no-reexecute (nothing executed again).
	t.Run("replay carries a new command_id", func(t *testing.T) {
		echo := func(r *http.Request, reqBody []byte, doc map[string]any) {
			var req map[string]any
			if r.Method == http.MethodPost && r.URL.Path == "/commands" && json.Unmarshal(reqBody, &req) == nil && doc["command_id"] != nil {
				doc["command_id"] = req["command_id"]
			}
		}
		v := verdicts(runIDSFull(t, "", nil, echo, append([]string{"IDS-IX.A-same-outcome", "IDS-IX.A-no-reexecute"}, keyRules...)))
		want(t, v, []string{"IDS-IX.A-same-outcome"}, append([]string{"IDS-IX.A-no-reexecute"}, keyRules...))
	})
	// (c) A tenant-scope bug (the tenant not in the key: the target files
	// each command's one effect under its own key): XV-tenant-scope fails,
	// the shielding rule and the evidence rules do not ("0 effects" under
	// the binding's key was the key's business).
	t.Run("tenant not in key", func(t *testing.T) {
		others := []string{"IDS-XI-shielding", "IDS-XII-decision", "IDS-XII-original-ids", "IDS-XII-outcome-ref", "IDS-VIII.B-stored-fields", "IDS-VIII.D-reject"}
		v := verdicts(runIDSFull(t, sutids.MutantTenantNotInKey, nil, nil, append([]string{"IDS-XV-tenant-scope"}, others...)))
		want(t, v, []string{"IDS-XV-tenant-scope"}, others)
	})
	// (d) A resend on behalf of the same principal executed afresh (the
	// effective actor ignored): its private details are its own. VII.E
	// fails, XV-no-leak does not.
	t.Run("fresh execution with its own private data", func(t *testing.T) {
		v := verdicts(runIDSFull(t, sutids.MutantEffectiveActorIgnored, nil, nil, []string{"IDS-VII.E-effective-actor", "IDS-XV-no-leak"}))
		want(t, v, []string{"IDS-VII.E-effective-actor"}, []string{"IDS-XV-no-leak"})
	})
}
