package intent

// Tests of issue 18, item 7: a check that the text does not back accepts
// every answer the text allows, and still fails on a real violation.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idscheck/idscheck/client"
	sut "github.com/idscheck/idscheck/sut/intent"
	"github.com/idscheck/idscheck/verdict"
)

// TestDistinctTokensAcceptsAnyStringToken: the two MUSTs judged by "every
// claim token is distinct" say nothing of the token's format: uppercase hex
// and base64url tokens pass; a repeated or missing token still fails.
func TestDistinctTokensAcceptsAnyStringToken(t *testing.T) {
	w := testWorld()
	ok := [][]claimResult{
		{{status: 200, id: "a", token: "0123456789ABCDEF0123456789ABCDEF"}, {status: 200, id: "b", token: "0123456789abcdef0123456789abcdef"}},
		{{status: 200, id: "a", token: "q7Z0-xY_3kLmN9pQrStUvWxYz0123456789abcdEFGH"}, {status: 204}},
	}
	for i, s := range ok {
		w.storm = s
		if err := w.distinctTokens(); err != nil {
			t.Errorf("case %d: tokens the text allows refused: %v", i, err)
		}
	}
	bad := [][]claimResult{
		{{status: 200, id: "a", token: "tok"}, {status: 200, id: "b", token: "tok"}},
		{{status: 200, id: "a", token: ""}},
	}
	for i, s := range bad {
		w.storm = s
		if err := w.distinctTokens(); err == nil {
			t.Errorf("case %d: a repeated or missing token passed", i)
		}
	}
}

// publishAnswers200 answers every successful POST /intent with 200 OK.
func publishAnswers200(r *http.Request, status int, doc map[string]any) int {
	if r.Method == http.MethodPost && r.URL.Path == "/intent" && status == http.StatusCreated {
		return http.StatusOK
	}
	return status
}

// TestPublishAnswered200FailsOnlyCreated201 (F13): a bus that answers a
// publish with 200 breaks §7.2's table row alone; the idempotency MUSTs,
// the signature and the field ranges, judged on the same replies, pass.
func TestPublishAnswered200FailsOnlyCreated201(t *testing.T) {
	got := certifyTampered(t, []string{"INTENT-7.2-created-201", "INTENT-7.2-idem-replay", "INTENT-7.2-idem-per-key",
		"INTENT-5.2-body-exact-bytes", "INTENT-4.1-goal-length", "INTENT-3.1-states"}, publishAnswers200)
	wantVerdicts(t, got, map[string]verdict.Verdict{
		"INTENT-7.2-created-201":      verdict.NonStrict,
		"INTENT-7.2-idem-replay":      verdict.Pass,
		"INTENT-7.2-idem-per-key":     verdict.Pass,
		"INTENT-5.2-body-exact-bytes": verdict.Pass,
		"INTENT-4.1-goal-length":      verdict.Pass,
		"INTENT-3.1-states":           verdict.Pass,
	})
}

// TestIdemReplayWithAnotherStatusFails (F13): "the same response" is still
// held to: duplicates answered with another status than the first fail
// INTENT-7.2-idem-replay.
func TestIdemReplayWithAnotherStatusFails(t *testing.T) {
	var n atomic.Int64
	got := certifyTampered(t, []string{"INTENT-7.2-idem-replay"}, func(r *http.Request, status int, doc map[string]any) int {
		if r.Method == http.MethodPost && r.URL.Path == "/intent" && r.Header.Get(HeaderIdempotencyKey) != "" && status == http.StatusCreated && n.Add(1) > 1 {
			return http.StatusOK
		}
		return status
	})
	if !failed(got["INTENT-7.2-idem-replay"]) {
		t.Errorf("INTENT-7.2-idem-replay: %s, want a failure", got["INTENT-7.2-idem-replay"])
	}
}

// dropField removes name from the answers to the paths with one of prefixes.
func dropField(name string, prefixes ...string) rewrite {
	return func(r *http.Request, status int, doc map[string]any) int {
		for _, p := range prefixes {
			if doc != nil && strings.HasPrefix(r.URL.Path, p) {
				delete(doc, name)
			}
		}
		return status
	}
}

// claimAttemptsRules are the rules judged by "the claim_attempts of …",
// and rules whose checks follow those probes.
var claimAttemptsRules = []string{"INTENT-3.3-attempts-increment", "INTENT-12-at-least-once", "INTENT-3.3-dead-at-max-attempts",
	"INTENT-3.3-token-overwritten-404", "INTENT-7.6-fail", "INTENT-8.5-admin-retry", "INTENT-7.7-result-error-field"}

// TestClaimAttemptsReadWhereTheTargetShowsIt (F2, F3): a claim reply and a
// /status reply without claim_attempts break nothing (the text shows the
// field there in an example, or not at all): the value is read from /result
// or the admin detail. A bus that shows it nowhere leaves the checks N/A,
// and what follows them is still judged.
func TestClaimAttemptsReadWhereTheTargetShowsIt(t *testing.T) {
	t.Run("claim and status replies without it", func(t *testing.T) {
		got := certifyTampered(t, claimAttemptsRules, dropField("claim_attempts", "/claim", "/status/"))
		want := map[string]verdict.Verdict{}
		for _, r := range claimAttemptsRules {
			want[r] = verdict.Pass
		}
		wantVerdicts(t, got, want)
	})
	t.Run("no reply with it", func(t *testing.T) {
		got := certifyTampered(t, claimAttemptsRules, dropField("claim_attempts", "/"))
		wantVerdicts(t, got, map[string]verdict.Verdict{
			"INTENT-3.3-attempts-increment":    verdict.NA,
			"INTENT-3.3-token-overwritten-404": verdict.Pass,
			"INTENT-7.7-result-error-field":    verdict.Pass,
			"INTENT-3.3-dead-at-max-attempts":  verdict.Pass,
		})
	})
}

// TestWrongClaimAttemptsFails (F2): a count that does not increment once
// per claim still fails INTENT-3.3-attempts-increment, wherever it is read.
func TestWrongClaimAttemptsFails(t *testing.T) {
	got := certifyTampered(t, []string{"INTENT-3.3-attempts-increment"}, func(r *http.Request, status int, doc map[string]any) int {
		if v, ok := doc["claim_attempts"].(float64); ok {
			doc["claim_attempts"] = v + 1
		}
		return status
	})
	if !failed(got["INTENT-3.3-attempts-increment"]) {
		t.Errorf("INTENT-3.3-attempts-increment: %s, want a failure", got["INTENT-3.3-attempts-increment"])
	}
}

// TestExpiredLastLeaseReadAfterCleanup (F15): a bus that dead-letters an
// expired last-attempt lease in its (lazy) cleanup pass, and reports
// "claimed" until then, passes INTENT-3.3-expiry-dead-direct; one that
// requeues the intent instead still fails it.
func TestExpiredLastLeaseReadAfterCleanup(t *testing.T) {
	rules := []string{"INTENT-3.3-expiry-dead-direct", "INTENT-3.2-expiry-dead"}
	var cleaned atomic.Bool
	lazy := func(r *http.Request, status int, doc map[string]any) int {
		if r.URL.Path == "/admin/cleanup" {
			cleaned.Store(true)
		}
		if strings.HasPrefix(r.URL.Path, "/status/") && doc["status"] == "dead" && !cleaned.Load() {
			doc["status"] = "claimed"
		}
		return status
	}
	wantVerdicts(t, certifyTampered(t, rules, lazy), map[string]verdict.Verdict{
		"INTENT-3.3-expiry-dead-direct": verdict.Pass, "INTENT-3.2-expiry-dead": verdict.Pass})
	requeues := func(r *http.Request, status int, doc map[string]any) int {
		if strings.HasPrefix(r.URL.Path, "/status/") && doc["status"] == "dead" {
			doc["status"] = "open"
		}
		return status
	}
	if got := certifyTampered(t, rules, requeues); !failed(got["INTENT-3.3-expiry-dead-direct"]) {
		t.Errorf("INTENT-3.3-expiry-dead-direct: %s, want a failure", got["INTENT-3.3-expiry-dead-direct"])
	}
}

// resultFieldRules are the rules judged through fields that §7.7 shows in
// its example /result body only.
var resultFieldRules = []string{"INTENT-3.3-fail-backoff", "INTENT-3.3-backoff-formula", "INTENT-12-retry-backoff",
	"INTENT-3.3-lease-expiry", "INTENT-3.3-token-expired-404", "INTENT-7.4-extend", "INTENT-7.7-result-fields",
	"INTENT-7.5-result-type-default", "INTENT-4.2-result-type-values", "INTENT-4.1-delay"}

// exampleResultFields are the fields of §7.7's example that no sentence
// requires of the reply.
var exampleResultFields = []string{"run_at", "claim_expires_at", "completed_at", "goal", "result_type"}

func dropFields(names []string, prefixes ...string) rewrite {
	return func(r *http.Request, status int, doc map[string]any) int {
		for _, n := range names {
			dropField(n, prefixes...)(r, status, doc)
		}
		return status
	}
}

// TestResultFieldsReadWhereTheTargetShowsThem (F12): a /result without the
// example's run_at, claim_expires_at, completed_at, goal and result_type
// fails nothing: the timestamps are read from the admin detail, or, when
// no reply shows them, the checks that need them are N/A and the waits
// fall back on the protocol's durations.
func TestResultFieldsReadWhereTheTargetShowsThem(t *testing.T) {
	t.Run("not in /result", func(t *testing.T) {
		got := certifyTampered(t, resultFieldRules, dropFields(exampleResultFields, "/result/"))
		for _, r := range resultFieldRules {
			if v := got[r]; v != verdict.Pass && v != verdict.NA {
				t.Errorf("rule %s: %s, want PASS or N/A", r, v)
			}
		}
		wantVerdicts(t, got, map[string]verdict.Verdict{"INTENT-3.3-fail-backoff": verdict.Pass, "INTENT-3.3-lease-expiry": verdict.Pass})
	})
	t.Run("in no reply", func(t *testing.T) {
		got := certifyTampered(t, resultFieldRules, dropFields(exampleResultFields, "/result/", "/admin/intents/", "/claim", "/status/"))
		wantVerdicts(t, got, map[string]verdict.Verdict{
			"INTENT-3.3-fail-backoff":      verdict.NA,
			"INTENT-3.3-lease-expiry":      verdict.Pass,
			"INTENT-3.3-token-expired-404": verdict.Pass,
			"INTENT-4.1-delay":             verdict.Pass,
			"INTENT-7.4-extend":            verdict.Pass,
			"INTENT-7.7-result-fields":     verdict.Pass,
		})
	})
}

// TestResultFieldsStillCatchTheirBugs (F12): with run_at shown by the admin
// detail alone, a bus without backoff still fails INTENT-3.3-fail-backoff;
// with no lease end shown anywhere, a lease that never lapses still fails
// INTENT-3.3-lease-expiry.
func TestResultFieldsStillCatchTheirBugs(t *testing.T) {
	got := certifyMutantTampered(t, sut.MutantNoBackoff, []string{"INTENT-3.3-fail-backoff"}, dropFields(exampleResultFields, "/result/"))
	if !failed(got["INTENT-3.3-fail-backoff"]) {
		t.Errorf("no-backoff: INTENT-3.3-fail-backoff %s, want a failure", got["INTENT-3.3-fail-backoff"])
	}
	got = certifyMutantTampered(t, sut.MutantLeaseNeverExpires, []string{"INTENT-3.3-lease-expiry"},
		dropFields(exampleResultFields, "/result/", "/admin/intents/", "/claim", "/status/"))
	if !failed(got["INTENT-3.3-lease-expiry"]) {
		t.Errorf("lease-never-expires: INTENT-3.3-lease-expiry %s, want a failure", got["INTENT-3.3-lease-expiry"])
	}
}

// publishReply applies edit to the answers of POST /intent.
func publishReply(edit func(doc map[string]any)) rewrite {
	return func(r *http.Request, status int, doc map[string]any) int {
		if r.Method == http.MethodPost && r.URL.Path == "/intent" && doc != nil && status/100 == 2 {
			edit(doc)
		}
		return status
	}
}

// TestPublishReplyBeyondTheIDIsFree (F5, F6): a publish reply with the state
// "open", or with no status and no namespace, breaks nothing, and an intent
// in another namespace is still found by the namespace it was sent with; a
// reply without an id, or with a wrong namespace, still fails.
func TestPublishReplyBeyondTheIDIsFree(t *testing.T) {
	rules := []string{"INTENT-7.2-publish-response", "INTENT-4.1-namespace-default", "INTENT-7.3-claim-namespace-default", "INTENT-8.3-purge-all"}
	all := map[string]verdict.Verdict{}
	for _, r := range rules {
		all[r] = verdict.Pass
	}
	t.Run("state open", func(t *testing.T) {
		wantVerdicts(t, certifyTampered(t, rules, publishReply(func(doc map[string]any) { doc["status"] = "open" })), all)
	})
	t.Run("id alone", func(t *testing.T) {
		wantVerdicts(t, certifyTampered(t, rules, publishReply(func(doc map[string]any) {
			delete(doc, "status")
			delete(doc, "namespace")
		})), all)
	})
	t.Run("wrong namespace", func(t *testing.T) {
		got := certifyTampered(t, []string{"INTENT-7.2-publish-response"}, publishReply(func(doc map[string]any) { doc["namespace"] = "elsewhere" }))
		if !failed(got["INTENT-7.2-publish-response"]) {
			t.Errorf("INTENT-7.2-publish-response: %s, want a failure", got["INTENT-7.2-publish-response"])
		}
	})
	t.Run("no id", func(t *testing.T) {
		got := certifyTampered(t, []string{"INTENT-7.2-publish-response"}, publishReply(func(doc map[string]any) { delete(doc, "id") }))
		if !failed(got["INTENT-7.2-publish-response"]) {
			t.Errorf("INTENT-7.2-publish-response: %s, want a failure", got["INTENT-7.2-publish-response"])
		}
	})
}

// TestVisibilityDefaultJudgedByBehaviour (F4): a /status reply without a
// visibility field passes INTENT-4.1-visibility-default; a bus whose
// default lets any key claim an intent still fails it.
func TestVisibilityDefaultJudgedByBehaviour(t *testing.T) {
	rules := []string{"INTENT-4.1-visibility-default"}
	got := certifyTampered(t, rules, dropField("visibility", "/status/"))
	wantVerdicts(t, got, map[string]verdict.Verdict{"INTENT-4.1-visibility-default": verdict.Pass})
	got = certifyMutantTampered(t, sut.MutantVisibilityLeak, rules, nil)
	if !failed(got["INTENT-4.1-visibility-default"]) {
		t.Errorf("visibility-leak: INTENT-4.1-visibility-default %s, want a failure", got["INTENT-4.1-visibility-default"])
	}
}

// TestClaimReplyBeyondTheTokenIsFree (F11): a claim reply with a base64
// token and without the example's priority and namespace passes
// INTENT-7.3-claim-response; one without a token still fails it.
func TestClaimReplyBeyondTheTokenIsFree(t *testing.T) {
	w := testWorld()
	w.last = &client.Response{Status: 200, Body: []byte(`{"id": "x", "claim_token": "q7Z0-xY_3kLmN9pQ", "claim_timeout": 60}`)}
	if err := w.tokenFormat(); err != nil {
		t.Errorf("a base64 token refused: %v", err)
	}
	for _, body := range []string{`{"id": "x", "claim_timeout": 60}`, `{"id": "x", "claim_token": ""}`, `{"id": "x", "claim_token": 7}`} {
		w.last = &client.Response{Status: 200, Body: []byte(body)}
		if err := w.tokenFormat(); err == nil {
			t.Errorf("%s: a missing token passed", body)
		}
	}
	got := certifyTampered(t, []string{"INTENT-7.3-claim-response"}, func(r *http.Request, status int, doc map[string]any) int {
		if strings.HasPrefix(r.URL.Path, "/claim") && doc != nil {
			delete(doc, "priority")
			delete(doc, "namespace")
		}
		return status
	})
	wantVerdicts(t, got, map[string]verdict.Verdict{"INTENT-7.3-claim-response": verdict.Pass})
}

// TestExampleBodiesAreFree (F7-F10): /health, generate_key and cleanup
// replies that share nothing with the text's example bodies pass their
// rules, and so does Prometheus text with other metric names; a wrong
// status, a body that is no JSON object, or no Prometheus text still fails.
func TestExampleBodiesAreFree(t *testing.T) {
	rules := []string{"INTENT-7.1-health", "INTENT-8.2-generate-key", "INTENT-8.4-cleanup"}
	plain := func(r *http.Request, status int, doc map[string]any) int {
		switch r.URL.Path {
		case "/health", "/admin/cleanup":
			clear(doc)
			doc["fine"] = "yes"
		case "/admin/generate_key":
			delete(doc, "owner")
		}
		return status
	}
	wantVerdicts(t, certifyTampered(t, rules, plain), map[string]verdict.Verdict{
		"INTENT-7.1-health": verdict.Pass, "INTENT-8.2-generate-key": verdict.Pass, "INTENT-8.4-cleanup": verdict.Pass})
	broken := func(r *http.Request, status int, doc map[string]any) int {
		switch r.URL.Path {
		case "/health":
			return http.StatusServiceUnavailable
		case "/admin/cleanup":
			return http.StatusNotFound
		case "/admin/generate_key":
			delete(doc, "api_key")
		}
		return status
	}
	got := certifyTampered(t, rules, broken)
	for _, r := range rules {
		if !failed(got[r]) {
			t.Errorf("rule %s: %s, want a failure", r, got[r])
		}
	}

	w := testWorld()
	w.last = &client.Response{Status: 200, Header: http.Header{"Content-Type": {"text/plain; version=0.0.4"}},
		Body: []byte("# HELP bus_queue_depth Intents by state\n# TYPE bus_queue_depth gauge\nbus_queue_depth{state=\"open\"} 4\n")}
	if err := w.prometheusText(); err != nil {
		t.Errorf("Prometheus text with other metric names refused: %v", err)
	}
	w.last = &client.Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"intents": 4}`)}
	if err := w.prometheusText(); err == nil {
		t.Error("a JSON body passed as Prometheus text")
	}
}

// extendTo answers an extension by seconds outside 10–3600 with 200 and a
// lease ending end(seconds) protocol seconds from now, shown by /result.
func extendTo(end func(seconds float64) float64) rewrite {
	var mu sync.Mutex
	ends := map[string]float64{}
	return func(r *http.Request, status int, doc map[string]any) int {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/extend_claim/"):
			var req struct{ Seconds float64 }
			b, _ := io.ReadAll(r.Body)
			if json.Unmarshal(b, &req) == nil && (req.Seconds < 10 || req.Seconds > 3600) {
				at := time.Now().Add(time.Duration(end(req.Seconds) / 60 * float64(time.Second)))
				ends[strings.TrimPrefix(r.URL.Path, "/extend_claim/")] = float64(at.UnixNano()) / 1e9
				return http.StatusOK
			}
		case strings.HasPrefix(r.URL.Path, "/result/"):
			if at, ok := ends[strings.TrimPrefix(r.URL.Path, "/result/")]; ok && doc != nil {
				doc["claim_expires_at"] = at
			}
		}
		return status
	}
}

// TestExtensionHonouredAsSent (F17): a bus that honours an extension by 1
// or 7200 seconds as sent passes INTENT-7.4-extend; one whose lease then
// ends far from anything the request allows still fails it.
func TestExtensionHonouredAsSent(t *testing.T) {
	rules := []string{"INTENT-7.4-extend"}
	got := certifyTampered(t, rules, extendTo(func(s float64) float64 { return s }))
	wantVerdicts(t, got, map[string]verdict.Verdict{"INTENT-7.4-extend": verdict.Pass})
	got = certifyTampered(t, rules, extendTo(func(s float64) float64 { return 3*s + 4000 }))
	if !failed(got["INTENT-7.4-extend"]) {
		t.Errorf("INTENT-7.4-extend: %s, want a failure", got["INTENT-7.4-extend"])
	}
}

// successAs answers every success of the mutations, the admin POSTs and
// the KV set with status instead of their 200 (or 201).
func successAs(status int) rewrite {
	return func(r *http.Request, got int, doc map[string]any) int {
		p := r.URL.Path
		if r.Method == http.MethodPost && got/100 == 2 && (strings.HasPrefix(p, "/fulfill/") || strings.HasPrefix(p, "/fail/") ||
			strings.HasPrefix(p, "/extend_claim/") || strings.HasPrefix(p, "/set/") || (strings.HasPrefix(p, "/admin/") && p != "/admin/generate_key")) {
			return status
		}
		return got
	}
}

// TestMutationSuccessIsAny2xx (F14): fulfill, fail, extend_claim, the admin
// POSTs and KV set answered 202 break none of the rules judged on them; a
// fulfil or an extension refused with 409 still fails its rule.
func TestMutationSuccessIsAny2xx(t *testing.T) {
	rules := []string{"INTENT-7.5-fulfill", "INTENT-7.5-fulfill-without-result", "INTENT-3.2-fulfill-transition", "INTENT-7.4-extend",
		"INTENT-4.2-result-type-values", "INTENT-3.3-dead-at-max-attempts", "INTENT-8.2-revoke-key", "INTENT-8.5-admin-cancel",
		"INTENT-8.5-admin-retry", "INTENT-8.3-purge-namespace", "INTENT-8.4-cleanup", "INTENT-7.9-kv-get", "INTENT-8.3-purge-all"}
	got := certifyTampered(t, rules, successAs(http.StatusAccepted))
	want := map[string]verdict.Verdict{}
	for _, r := range rules {
		want[r] = verdict.Pass
	}
	wantVerdicts(t, got, want)
	got = certifyTampered(t, []string{"INTENT-7.5-fulfill", "INTENT-7.4-extend"}, func(r *http.Request, status int, doc map[string]any) int {
		if status == http.StatusOK && (strings.HasPrefix(r.URL.Path, "/fulfill/") || strings.HasPrefix(r.URL.Path, "/extend_claim/")) {
			return http.StatusConflict
		}
		return status
	})
	for _, r := range []string{"INTENT-7.5-fulfill", "INTENT-7.4-extend"} {
		if !failed(got[r]) {
			t.Errorf("rule %s: %s, want a failure", r, got[r])
		}
	}
}

// TestPriorityOrderWithAnotherDefault (F16): a bus whose default priority
// is not 100 still passes INTENT-7.3-highest-priority; one that picks the
// lowest priority first still fails it.
func TestPriorityOrderWithAnotherDefault(t *testing.T) {
	rules := []string{"INTENT-7.3-highest-priority"}
	default0 := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/intent" {
				var m map[string]any
				b, _ := io.ReadAll(r.Body)
				if json.Unmarshal(b, &m) == nil && m != nil {
					if _, ok := m["priority"]; !ok {
						m["priority"] = 0
						b, _ = json.Marshal(m)
					}
				}
				r.Body = io.NopCloser(bytes.NewReader(b))
				r.ContentLength = int64(len(b))
			}
			h.ServeHTTP(w, r)
		})
	}
	wantVerdicts(t, certifyWrapped(t, "", rules, default0), map[string]verdict.Verdict{"INTENT-7.3-highest-priority": verdict.Pass})
	if got := certifyWrapped(t, sut.MutantPriorityInverted, rules, default0); !failed(got["INTENT-7.3-highest-priority"]) {
		t.Errorf("priority-inverted: INTENT-7.3-highest-priority %s, want a failure", got["INTENT-7.3-highest-priority"])
	}
}

// TestRuleJudgedByItsOwnRow (F18): a rule is not failed by a detail of
// another row. A revoked key refused with 403, a fulfil of a dead intent
// refused with 409, a body over 8KB refused with 400 and a rate limit
// answered 429 with another code pass the rules whose quotes ask for none
// of these details (the rows that do still fail); accepting each still
// fails its rule (a dead intent's, by the state read back: fulfilled).
func TestRuleJudgedByItsOwnRow(t *testing.T) {
	rules := []string{"INTENT-8.2-revoke-key", "INTENT-3.1-dead-terminal", "INTENT-15-size-limits", "INTENT-15-rate-limit"}
	otherRefusal := func(r *http.Request, status int, doc map[string]any) int {
		switch {
		case r.URL.Path == "/claim" && status == http.StatusUnauthorized:
			doc["error"] = map[string]any{"code": "forbidden", "message": "key revoked"}
			return http.StatusForbidden
		case strings.HasPrefix(r.URL.Path, "/fulfill/") && status == http.StatusNotFound:
			return http.StatusConflict
		case r.URL.Path == "/intent" && status == http.StatusRequestEntityTooLarge:
			doc["error"] = map[string]any{"code": "invalid_request", "message": "too big"}
			return http.StatusBadRequest
		case status == http.StatusTooManyRequests && doc != nil:
			doc["error"] = map[string]any{"code": "slow_down", "message": "later"}
		}
		return status
	}
	got := certifyTampered(t, rules, otherRefusal)
	want := map[string]verdict.Verdict{}
	for _, r := range rules {
		want[r] = verdict.Pass
	}
	wantVerdicts(t, got, want)
	// A fulfil of the dead intent taken: the state read back is fulfilled.
	var mu sync.Mutex
	revived := map[string]bool{}
	accepted := func(r *http.Request, status int, doc map[string]any) int {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.URL.Path == "/claim" && status == http.StatusUnauthorized:
			return http.StatusNoContent
		case strings.HasPrefix(r.URL.Path, "/fulfill/") && status == http.StatusNotFound:
			revived[strings.TrimPrefix(r.URL.Path, "/fulfill/")] = true
			return http.StatusOK
		case strings.HasPrefix(r.URL.Path, "/status/") && revived[strings.TrimPrefix(r.URL.Path, "/status/")] && doc != nil:
			doc["status"] = "fulfilled"
		case r.URL.Path == "/intent" && status == http.StatusRequestEntityTooLarge:
			return http.StatusCreated
		case status == http.StatusTooManyRequests:
			return http.StatusNoContent
		}
		return status
	}
	got = certifyTampered(t, rules, accepted)
	for _, r := range rules {
		if !failed(got[r]) {
			t.Errorf("rule %s: %s, want a failure", r, got[r])
		}
	}
}
