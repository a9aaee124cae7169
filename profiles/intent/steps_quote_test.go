package intent

// Tests of issue 28, "judge the quote": each check reads only what the
// sentence it judges requires of the reply it reads, accepts every answer
// the text allows, reads a state back instead of judging the status of a
// request the text does not forbid, rests on no timing the harness does not
// control, and still fails on a real violation.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	sut "github.com/idscheck/idscheck/sut/intent"
	"github.com/idscheck/idscheck/verdict"
)

func isNA(err error) bool { return err != nil && errors.Is(err, features.ErrNotApplicable) }

func resp(status int, body string) *client.Response {
	return &client.Response{Status: status, Header: http.Header{}, Body: []byte(body)}
}

// TestErrorShapeOnlyOnErrorResponses: "All error responses MUST use the
// following shape" asks nothing of a 2xx (a refusal the target did not
// make is the refusing rule's finding): N/A, not a failure; an error
// without the shape still fails.
func TestErrorShapeOnlyOnErrorResponses(t *testing.T) {
	w := testWorld()
	w.last = resp(200, `{"ok": true}`)
	if err := w.jsonError(); !isNA(err) {
		t.Errorf("a 200 judged by the error shape: %v, want N/A", err)
	}
	w.last = resp(403, `{"error": "forbidden"}`)
	if err := w.jsonError(); err == nil || isNA(err) {
		t.Errorf("a 403 without the shape: %v, want a failure", err)
	}
	w.last = resp(403, `{"error": {"code": "forbidden", "message": "no"}}`)
	if err := w.jsonError(); err != nil {
		t.Errorf("a 403 with the shape: %v", err)
	}
}

// TestStatusBoundChecksOnlyOnTheirStatus: a code that belongs to one status
// and "The 204 response MUST include Retry-After: 1." judge nothing on
// another status (N/A, not a vacuous pass nor a failure), and still fail on
// their own status.
func TestStatusBoundChecksOnlyOnTheirStatus(t *testing.T) {
	w := testWorld()
	w.last = resp(200, `{}`)
	if err := w.headerIfStatus(204, "Retry-After", "1"); !isNA(err) {
		t.Errorf("Retry-After judged on a 200: %v, want N/A", err)
	}
	w.last = resp(204, ``)
	if err := w.headerIfStatus(204, "Retry-After", "1"); err == nil || isNA(err) {
		t.Errorf("a 204 without Retry-After: %v, want a failure", err)
	}
	w.last.Header.Set("Retry-After", "1")
	if err := w.headerIfStatus(204, "Retry-After", "1"); err != nil {
		t.Errorf("a 204 with Retry-After: 1: %v", err)
	}
	w.last = resp(404, `{"error": {"code": "not_found", "message": "no"}}`)
	if err := w.codeIfStatus(403, "forbidden"); !isNA(err) {
		t.Errorf("the 403 code judged on a 404: %v, want N/A", err)
	}
	w.last = resp(403, `{"error": {"code": "denied", "message": "no"}}`)
	if err := w.codeIfStatus(403, "forbidden"); err == nil || isNA(err) {
		t.Errorf("a 403 with another code: %v, want a failure", err)
	}
}

// TestClaimNotReturnedReadsTheHandOut: the eligibility rules forbid a
// hand-out, whatever the answer that finds nothing (204, a 200 naming no
// intent, a refusal); handing the intent out, or a 5xx, fails.
func TestClaimNotReturnedReadsTheHandOut(t *testing.T) {
	w := testWorld()
	w.register("A", "aaaa", actorMain)
	for _, r := range []*client.Response{resp(204, ``), resp(200, `{}`), resp(200, `{"id": "bbbb"}`), resp(403, `{"error": {"code": "forbidden", "message": "x"}}`)} {
		w.last = r
		if err := w.claimNotReturned("A"); err != nil {
			t.Errorf("%d %s: %v", r.Status, r.Body, err)
		}
	}
	for _, r := range []*client.Response{resp(200, `{"id": "aaaa"}`), resp(500, `boom`)} {
		w.last = r
		if err := w.claimNotReturned("A"); err == nil {
			t.Errorf("%d %s passed", r.Status, r.Body)
		}
	}
	for _, r := range []*client.Response{resp(204, ``), resp(200, `{}`), resp(200, `null`), resp(404, ``)} {
		if _, ok := handedOut(r); ok {
			t.Errorf("%d %s read as a hand-out", r.Status, r.Body)
		}
	}
	if id, ok := handedOut(resp(200, `{"id": "aaaa"}`)); !ok || id != "aaaa" {
		t.Errorf("a 200 with an id: %q, %v", id, ok)
	}
}

// TestFieldContains: the error of a failed intent carries the failure's
// message, however the bus words around it; a missing or other one fails.
func TestFieldContains(t *testing.T) {
	w := testWorld()
	for _, b := range []string{`{"error": "attempt 1"}`, `{"error": "worker said: attempt 1"}`} {
		w.last = resp(200, b)
		if err := w.fieldContains("error", "attempt 1"); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
	for _, b := range []string{`{}`, `{"error": null}`, `{"error": "boom"}`, `{"error": {"message": "attempt 1"}}`} {
		w.last = resp(200, b)
		if err := w.fieldContains("error", "attempt 1"); err == nil {
			t.Errorf("%s passed", b)
		}
	}
}

// TestFieldIsNot: another key's read passes unless it carries the value.
func TestFieldIsNot(t *testing.T) {
	w := testWorld()
	for _, r := range []*client.Response{resp(404, `{"error": {"code": "not_found", "message": "x"}}`), resp(200, `{"value": "other"}`), resp(403, `x`)} {
		w.last = r
		if err := w.fieldIsNot("value", "hello"); err != nil {
			t.Errorf("%d %s: %v", r.Status, r.Body, err)
		}
	}
	for _, r := range []*client.Response{resp(200, `{"value": "hello"}`), resp(502, ``)} {
		w.last = r
		if err := w.fieldIsNot("value", "hello"); err == nil {
			t.Errorf("%d %s passed", r.Status, r.Body)
		}
	}
}

// TestAnsweredWithinTimesTheAnswer: what holds only for a while after a
// request is judged on an answer that came within it, and N/A after it.
func TestAnsweredWithinTimesTheAnswer(t *testing.T) {
	w := testWorld() // time scale 60: 120 protocol s are 2 s
	t0 := time.Now()
	ref := resp(201, `{}`)
	ref.Exchange.Call = t0
	w.remember["late"] = ref
	w.last = resp(204, ``)
	w.last.Exchange.Return = t0.Add(1900 * time.Millisecond)
	if err := w.answeredWithin(120, "late"); err != nil {
		t.Errorf("an answer 1.9 s after: %v", err)
	}
	w.last.Exchange.Return = t0.Add(2100 * time.Millisecond)
	if err := w.answeredWithin(120, "late"); !isNA(err) {
		t.Errorf("an answer 2.1 s after: %v, want N/A", err)
	}
}

// TestDoubleLeaseOnlyWhenLeasesOverlap (timing): an intent handed out
// again after its first lease could have ended (a storm that outlasted a
// lease on a slow machine) is no double lease, and the storm's count is of
// distinct intents; two hand-outs whose leases provably overlap still fail.
func TestDoubleLeaseOnlyWhenLeasesOverlap(t *testing.T) {
	w := testWorld() // time scale 60: a 60 s lease is 1 s
	w.register("b1", "a", actorMain)
	w.register("b2", "b", actorMain)
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w.storm = []claimResult{
		{status: 200, id: "a", token: "t1", call: at(0), ret: at(10), leaseProto: 60},
		{status: 200, id: "b", token: "t2", call: at(0), ret: at(20), leaseProto: 60},
		{status: 200, id: "a", token: "t3", call: at(1200), ret: at(1210), leaseProto: 60},
		{status: 204, call: at(0), ret: at(30)},
		{status: 200, call: at(0), ret: at(40)}, // a 200 naming no intent hands nothing out
	}
	if err := w.noDoubleLease(); err != nil {
		t.Errorf("a reclaim after the lease: %v", err)
	}
	if err := w.allHandedOut(2); err != nil {
		t.Errorf("two distinct intents handed out: %v", err)
	}
	if err := w.distinctTokens(); err != nil {
		t.Errorf("distinct tokens: %v", err)
	}
	w.storm[2].call, w.storm[2].ret = at(500), at(510)
	if err := w.noDoubleLease(); err == nil {
		t.Error("two overlapping leases of one intent passed")
	}
	w.storm = append(w.storm, claimResult{status: 200, id: "elsewhere", token: "t9", call: at(0), ret: at(50), leaseProto: 60})
	if err := w.allHandedOut(2); !isNA(err) {
		t.Errorf("an intent of another namespace in the storm: %v, want N/A (isolation's finding)", err)
	}
	w.storm = append(w.storm, claimResult{status: 500})
	if err := w.allHandedOut(2); err == nil || isNA(err) {
		t.Error("a 500 in the storm passed")
	}
}

// TestClaimedWhatTheyGot: at-least-once after the duplicates: every intent
// a publish was answered with is handed out; the count is idempotency's.
func TestClaimedWhatTheyGot(t *testing.T) {
	w := testWorld()
	w.batch = []*client.Response{resp(201, `{"id": "a"}`), resp(201, `{"id": "a"}`)}
	w.claimSeq = []string{"a", "z"}
	if err := w.claimedWhatTheyGot(); err != nil {
		t.Errorf("the acknowledged intent was claimed: %v", err)
	}
	if err := w.claimedCount(1); err == nil {
		t.Error("two intents counted as one")
	}
	w.claimSeq = []string{"z"}
	if err := w.claimedWhatTheyGot(); err == nil {
		t.Error("an acknowledged intent never handed out passed")
	}
}

// emptyClaimAs200 answers a claim that finds nothing with 200 and no body
// instead of §7.3's 204.
func emptyClaimAs200(r *http.Request, status int, doc map[string]any) int {
	if r.URL.Path == "/claim" && status == http.StatusNoContent {
		return http.StatusOK
	}
	return status
}

// eligibilityRules are judged by claims that must not hand an intent out.
var eligibilityRules = []string{"INTENT-7.3-eligible-visibility", "INTENT-6.2-private", "INTENT-7.3-eligible-target",
	"INTENT-6.4-target-worker", "INTENT-7.3-eligible-capability", "INTENT-6.5-capability-exact", "INTENT-6.1-namespace-isolation",
	"INTENT-7.3-eligible-status", "INTENT-7.3-eligible-attempts", "INTENT-3.3-expiry-dead-direct", "INTENT-12-retry-backoff",
	"INTENT-7.3-eligible-run-at", "INTENT-3.1-dead-terminal", "INTENT-3.1-fulfilled-terminal", "INTENT-7.2-idem-replay",
	"INTENT-8.2-generate-key"}

// TestNothingToClaimAnswered200 (eligibility): a bus that answers "nothing
// to claim" with 200 and no intent breaks §7.3's 204 row alone: every rule
// of eligibility passes (they forbid a hand-out, not another answer), and
// Retry-After, which binds a 204, is N/A. A bus that hands a private intent
// to another key, or a 204 without Retry-After, still fails.
func TestNothingToClaimAnswered200(t *testing.T) {
	rules := append([]string{"INTENT-7.3-no-content-204", "INTENT-7.3-retry-after"}, eligibilityRules...)
	got := certifyTampered(t, rules, emptyClaimAs200)
	want := map[string]verdict.Verdict{"INTENT-7.3-no-content-204": verdict.NonStrict, "INTENT-7.3-retry-after": verdict.NA}
	for _, r := range eligibilityRules {
		want[r] = verdict.Pass
	}
	wantVerdicts(t, got, want)

	got = certifyMutantTampered(t, sut.MutantVisibilityLeak, []string{"INTENT-7.3-eligible-visibility"}, nil)
	if !failed(got["INTENT-7.3-eligible-visibility"]) {
		t.Errorf("visibility-leak: INTENT-7.3-eligible-visibility %s, want a failure", got["INTENT-7.3-eligible-visibility"])
	}
	got = certifyMutantTampered(t, sut.MutantNoRetryAfter, []string{"INTENT-7.3-retry-after"}, nil)
	if !failed(got["INTENT-7.3-retry-after"]) {
		t.Errorf("no-retry-after: INTENT-7.3-retry-after %s, want a failure", got["INTENT-7.3-retry-after"])
	}
}

// allCredentials gives the bundled server a dashboard password and a
// metrics token beside its admin token.
func allCredentials(c *sut.Config) {
	c.DashboardPassword, c.MetricsToken = "dash-tamper", "metrics-tamper"
}

// verdictsOf maps each rule of a run to its verdict.
func verdictsOf(res *features.RunResult) map[string]verdict.Verdict {
	out := map[string]verdict.Verdict{}
	for _, r := range res.Rules {
		out[r.RuleID] = r.Verdict
	}
	return out
}

// readRules are judged by GET replies for which the text gives no status.
var readRules = []string{"INTENT-7.7-result-fields", "INTENT-7.7-result-access", "INTENT-7.8-status-access", "INTENT-8.6-dead-list",
	"INTENT-8.6-dead-detail", "INTENT-8.5-admin-detail", "INTENT-5.3-admin-token", "INTENT-5.3-admin-basic", "INTENT-5.3-admin-methods",
	"INTENT-9-metrics-auth", "INTENT-2-metrics-endpoint", "INTENT-8.1-dashboard", "INTENT-8-admin-exempt-limits",
	"INTENT-3.2-fulfill-transition", "INTENT-3.3-dead-at-max-attempts", "INTENT-8.5-admin-cancel"}

// TestReadsAnsweredWithAnother2xx: GET /result, /status, /admin/…,
// /metrics and the dashboard answered 203 (the text gives them no status)
// pass their rules; the admin list refused to the admin token still fails.
func TestReadsAnsweredWithAnother2xx(t *testing.T) {
	is := func(r *http.Request, prefixes ...string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(r.URL.Path, p) {
				return true
			}
		}
		return false
	}
	got := verdictsOf(certifyRun(t, "", readRules, func(h http.Handler) http.Handler {
		return tamper(h, func(r *http.Request, status int, doc map[string]any) int {
			if r.Method == http.MethodGet && status == http.StatusOK && is(r, "/result/", "/status/", "/admin/", "/metrics") {
				return http.StatusNonAuthoritativeInfo
			}
			return status
		})
	}, allCredentials))
	for _, r := range readRules {
		// INTENT-7.7-result-access is also judged under the readings of
		// admin-result-access: READING is its pass.
		// INTENT-8-admin-exempt-limits needs its burst inside one rate-limit
		// window (1 s at time scale 60): on a loaded machine it is N/A,
		// never a verdict, and it says so.
		if v := got[r]; v != verdict.Pass && !(r == "INTENT-7.7-result-access" && v == verdict.Reading) &&
			!(r == "INTENT-8-admin-exempt-limits" && v == verdict.NA) {
			t.Errorf("rule %s: %s, want PASS", r, v)
		}
	}
	got = verdictsOf(certifyRun(t, "", []string{"INTENT-5.3-admin-token"}, func(h http.Handler) http.Handler {
		return tamper(h, func(r *http.Request, status int, doc map[string]any) int {
			if r.URL.Path == "/admin/dead" && r.Header.Get(HeaderAdminToken) != "" {
				return http.StatusForbidden
			}
			return status
		})
	}, allCredentials))
	if !failed(got["INTENT-5.3-admin-token"]) {
		t.Errorf("INTENT-5.3-admin-token: %s, want a failure", got["INTENT-5.3-admin-token"])
	}
}

// TestRefusalJudgedApartFromItsStatus: a malformed publish refused with 422
// and an extension of an expired lease refused with 409 pass the rules
// whose quotes ask for a refusal (§4.1's ranges, the required fields, "A
// lease extension MUST fail"); the 400 and the 404 fail the rows that give
// them. Accepting an empty goal still fails INTENT-4.1-goal-length.
func TestRefusalJudgedApartFromItsStatus(t *testing.T) {
	rules := []string{"INTENT-7.2-required-fields", "INTENT-4.1-goal-length", "INTENT-4.1-priority-range", "INTENT-4.1-namespace-format",
		"INTENT-7.2-bad-request-400", "INTENT-7.4-extend-expired-lease", "INTENT-3.3-token-expired-404"}
	other := func(r *http.Request, status int, doc map[string]any) int {
		switch {
		case r.URL.Path == "/intent" && status == http.StatusBadRequest:
			return http.StatusUnprocessableEntity
		case strings.HasPrefix(r.URL.Path, "/extend_claim/") && status == http.StatusNotFound:
			return http.StatusConflict
		}
		return status
	}
	got := certifyTampered(t, rules, other)
	// INTENT-7.2-required-fields is also judged under the readings of
	// null-payload: READING is its pass.
	if got["INTENT-7.2-required-fields"] != verdict.Reading {
		t.Errorf("rule INTENT-7.2-required-fields: %s, want READING", got["INTENT-7.2-required-fields"])
	}
	wantVerdicts(t, got, map[string]verdict.Verdict{
		"INTENT-4.1-goal-length": verdict.Pass, "INTENT-4.1-priority-range": verdict.Pass,
		"INTENT-4.1-namespace-format": verdict.Pass, "INTENT-7.4-extend-expired-lease": verdict.Pass,
		"INTENT-7.2-bad-request-400": verdict.NonStrict, "INTENT-3.3-token-expired-404": verdict.Fail,
	})
	// Accepting an empty goal fails the range and the 400 row both: the
	// refusal gates nothing.
	got = certifyTampered(t, []string{"INTENT-4.1-goal-length", "INTENT-7.2-bad-request-400"}, func(r *http.Request, status int, doc map[string]any) int {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/intent" && status == http.StatusBadRequest && bytes.Contains(b, []byte(`"goal": ""`)) {
			return http.StatusCreated
		}
		return status
	})
	for _, r := range []string{"INTENT-4.1-goal-length", "INTENT-7.2-bad-request-400"} {
		if !failed(got[r]) {
			t.Errorf("an empty goal accepted: %s %s, want a failure", r, got[r])
		}
	}
	// A lease revived after its expiry fails "MUST fail" and §3.3's 404
	// both, on the one answer.
	got = certifyMutantTampered(t, sut.MutantExtendAfterExpiry, []string{"INTENT-7.4-extend-expired-lease", "INTENT-3.3-token-expired-404"}, nil)
	for _, r := range []string{"INTENT-7.4-extend-expired-lease", "INTENT-3.3-token-expired-404"} {
		if !failed(got[r]) {
			t.Errorf("extend-after-expiry: %s %s, want a failure", r, got[r])
		}
	}
}

// TestRefusedGatesNothing: any 4xx is a refusal; anything else is not.
func TestRefusedGatesNothing(t *testing.T) {
	w := testWorld()
	for _, st := range []int{400, 404, 409, 422, 429} {
		w.last = resp(st, ``)
		if err := w.refused(); err != nil {
			t.Errorf("%d: %v", st, err)
		}
	}
	for _, st := range []int{200, 204, 500} {
		w.last = resp(st, ``)
		if err := w.refused(); err == nil {
			t.Errorf("%d passed as a refusal", st)
		}
	}
}

// TestFulfilledTerminalByState: a repeated fulfil answered 200 as a no-op
// leaves the intent fulfilled with its first result: terminal holds. A bus
// whose repeated fulfil replaces the stored result still fails it.
func TestFulfilledTerminalByState(t *testing.T) {
	rules := []string{"INTENT-3.1-fulfilled-terminal", "INTENT-7.3-eligible-status"}
	var mu sync.Mutex
	done := map[string]bool{}
	again := map[string]any{}
	repeat := func(overwrite bool) rewrite {
		return func(r *http.Request, status int, doc map[string]any) int {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case strings.HasPrefix(r.URL.Path, "/fulfill/"):
				id := strings.TrimPrefix(r.URL.Path, "/fulfill/")
				if status/100 == 2 {
					done[id] = true
					return status
				}
				if done[id] && status/100 == 4 && doc != nil {
					var b struct{ Result any }
					body, _ := io.ReadAll(r.Body)
					json.Unmarshal(body, &b)
					if overwrite {
						again[id] = b.Result
					}
					clear(doc)
					doc["id"], doc["status"] = id, "fulfilled"
					return http.StatusOK
				}
			case strings.HasPrefix(r.URL.Path, "/result/"):
				if v, ok := again[strings.TrimPrefix(r.URL.Path, "/result/")]; ok && doc != nil {
					doc["result"] = v
				}
			}
			return status
		}
	}
	wantVerdicts(t, certifyTampered(t, rules, repeat(false)), map[string]verdict.Verdict{
		"INTENT-3.1-fulfilled-terminal": verdict.Pass, "INTENT-7.3-eligible-status": verdict.Pass})
	clear(done)
	if got := certifyTampered(t, rules, repeat(true)); !failed(got["INTENT-3.1-fulfilled-terminal"]) {
		t.Errorf("a repeated fulfil that replaces the result: INTENT-3.1-fulfilled-terminal %s, want a failure", got["INTENT-3.1-fulfilled-terminal"])
	}
}

// TestAtLeastOnceIsDeliveryNotCount: a count off by one breaks the rules of
// the count (attempts-increment, claim-attempts), not at-least-once
// delivery, redelivery, the requeue or /fail, which the reclaim and the
// state show.
func TestAtLeastOnceIsDeliveryNotCount(t *testing.T) {
	rules := []string{"INTENT-12-at-least-once", "INTENT-2-redelivery", "INTENT-3.2-expiry-requeue", "INTENT-7.6-fail",
		"INTENT-3.3-attempts-increment", "INTENT-4.2-claim-attempts", "INTENT-3.3-token-overwritten-404"}
	got := certifyTampered(t, rules, func(r *http.Request, status int, doc map[string]any) int {
		if v, ok := doc["claim_attempts"].(float64); ok {
			doc["claim_attempts"] = v + 1
		}
		return status
	})
	for _, r := range []string{"INTENT-12-at-least-once", "INTENT-2-redelivery", "INTENT-3.2-expiry-requeue", "INTENT-7.6-fail", "INTENT-3.3-token-overwritten-404"} {
		if got[r] != verdict.Pass {
			t.Errorf("rule %s: %s, want PASS", r, got[r])
		}
	}
	for _, r := range []string{"INTENT-3.3-attempts-increment", "INTENT-4.2-claim-attempts"} {
		if !failed(got[r]) {
			t.Errorf("rule %s: %s, want a failure", r, got[r])
		}
	}
}

// TestDuplicateBehindOneIDFailsIdempotencyNotDelivery: a bus that answers
// every duplicate of the storm with one id but stores a second intent
// breaks idempotency; the intent the publishes got is delivered, so
// at-least-once holds.
func TestDuplicateBehindOneIDFailsIdempotencyNotDelivery(t *testing.T) {
	var once atomic.Bool
	second := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/intent" && strings.HasSuffix(r.Header.Get(HeaderIdempotencyKey), "-storm") && once.CompareAndSwap(false, true) {
				b, _ := io.ReadAll(r.Body)
				dup := r.Clone(r.Context())
				dup.Header.Del(HeaderIdempotencyKey)
				dup.Body = io.NopCloser(bytes.NewReader(b))
				h.ServeHTTP(discard{}, dup)
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
			h.ServeHTTP(w, r)
		})
	}
	got := certifyWrapped(t, "", []string{"INTENT-7.2-idem-replay", "INTENT-12-at-least-once"}, second)
	if !failed(got["INTENT-7.2-idem-replay"]) {
		t.Errorf("INTENT-7.2-idem-replay: %s, want a failure", got["INTENT-7.2-idem-replay"])
	}
	if got["INTENT-12-at-least-once"] != verdict.Pass {
		t.Errorf("INTENT-12-at-least-once: %s, want PASS", got["INTENT-12-at-least-once"])
	}
}

// discard is a ResponseWriter that keeps nothing.
type discard struct{}

func (discard) Header() http.Header         { return http.Header{} }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// TestDefaultMaxAttemptsJudgedAlone: a bus whose default max_attempts is 5
// breaks §3.3's default (a SHOULD) alone: the MUSTs of a dead intent are
// judged on an intent that states its max_attempts, and pass.
func TestDefaultMaxAttemptsJudgedAlone(t *testing.T) {
	rules := []string{"INTENT-3.3-default-max-attempts", "INTENT-7.3-eligible-attempts", "INTENT-7.3-eligible-status",
		"INTENT-3.3-dead-at-max-attempts", "INTENT-12-dead-letter-archival"}
	default5 := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/intent" {
				var m map[string]any
				b, _ := io.ReadAll(r.Body)
				if json.Unmarshal(b, &m) == nil && m != nil {
					if _, ok := m["max_attempts"]; !ok {
						m["max_attempts"] = 5
						b, _ = json.Marshal(m)
					}
				}
				r.Body = io.NopCloser(bytes.NewReader(b))
				r.ContentLength = int64(len(b))
			}
			h.ServeHTTP(w, r)
		})
	}
	got := certifyWrapped(t, "", rules, default5)
	wantVerdicts(t, got, map[string]verdict.Verdict{"INTENT-3.3-default-max-attempts": verdict.NonStrict,
		"INTENT-7.3-eligible-attempts": verdict.Pass, "INTENT-7.3-eligible-status": verdict.Pass,
		"INTENT-3.3-dead-at-max-attempts": verdict.Pass, "INTENT-12-dead-letter-archival": verdict.Pass})
	if got := certifyMutantTampered(t, sut.MutantMaxAttemptsIgnored, []string{"INTENT-7.3-eligible-attempts"}, nil); !failed(got["INTENT-7.3-eligible-attempts"]) {
		t.Errorf("max-attempts-ignored: INTENT-7.3-eligible-attempts %s, want a failure", got["INTENT-7.3-eligible-attempts"])
	}
}

// TestKVIsolationCatchesAReaderAndRestsOnTheReadBack: another key reading
// my value fails per-key isolation at once; a bus that returns the value
// under another member than §7.9's "value" breaks kv-get, and the
// isolation checks that read "value" are blocked by it, never failed.
func TestKVIsolationCatchesAReaderAndRestsOnTheReadBack(t *testing.T) {
	rules := []string{"INTENT-12-isolation", "INTENT-7.9-kv-isolation", "INTENT-7.9-kv-get"}
	got := certifyTampered(t, rules, func(r *http.Request, status int, doc map[string]any) int {
		if strings.HasPrefix(r.URL.Path, "/get/") && status == http.StatusNotFound && r.Header.Get(HeaderAPIKey) != "main-tamper" {
			clear(doc)
			doc["value"] = "hello"
			return http.StatusOK
		}
		return status
	})
	if !failed(got["INTENT-12-isolation"]) {
		t.Errorf("another key reads my value: INTENT-12-isolation %s, want a failure", got["INTENT-12-isolation"])
	}
	got = certifyTampered(t, rules, func(r *http.Request, status int, doc map[string]any) int {
		if strings.HasPrefix(r.URL.Path, "/get/") && doc != nil {
			if v, ok := doc["value"]; ok {
				delete(doc, "value")
				doc["data"] = v
			}
		}
		return status
	})
	if !failed(got["INTENT-7.9-kv-get"]) {
		t.Errorf("INTENT-7.9-kv-get: %s, want a failure", got["INTENT-7.9-kv-get"])
	}
	for _, r := range []string{"INTENT-12-isolation", "INTENT-7.9-kv-isolation"} {
		if failed(got[r]) {
			t.Errorf("rule %s: %s, want no failure (it rests on the read-back kv-get judges)", r, got[r])
		}
	}
}

// TestClaimCountNotBehindTheReplyExample: a claim reply without the
// example's goal and payload breaks INTENT-7.3-claim-response alone: the
// count, read from the reply, is judged and passes.
func TestClaimCountNotBehindTheReplyExample(t *testing.T) {
	rules := []string{"INTENT-7.3-claim-response", "INTENT-3.3-attempts-increment", "INTENT-4.2-claim-attempts"}
	got := certifyTampered(t, rules, dropFields([]string{"goal", "payload"}, "/claim"))
	wantVerdicts(t, got, map[string]verdict.Verdict{"INTENT-7.3-claim-response": verdict.NonStrict,
		"INTENT-3.3-attempts-increment": verdict.Pass, "INTENT-4.2-claim-attempts": verdict.Pass})
}

// slowNth delays the answer to the nth request that match picks by d.
func slowNth(n int64, d time.Duration, match func(r *http.Request) bool) func(http.Handler) http.Handler {
	var seen atomic.Int64
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if match(r) && seen.Add(1) == n {
				time.Sleep(d)
			}
			h.ServeHTTP(w, r)
		})
	}
}

// TestDelayJudgedOnlyWhileNotDue (timing): a claim answered after the
// delayed intent could be due (300 protocol s, 5 s at time scale 60) is no
// evidence about the delay (N/A); a bus that ignores the delay still fails
// INTENT-7.3-eligible-run-at.
func TestDelayJudgedOnlyWhileNotDue(t *testing.T) {
	rules := []string{"INTENT-7.3-eligible-run-at"}
	claim := func(r *http.Request) bool { return r.URL.Path == "/claim" }
	res := certifyRun(t, "", rules, slowNth(2, 5300*time.Millisecond, claim))
	for _, r := range res.Rules {
		if r.RuleID == "INTENT-7.3-eligible-run-at" && (failed(r.Verdict) || !strings.Contains(r.Reason, "too late to judge")) {
			t.Errorf("a claim answered after the delay: %s (%s), want no failure and the late check N/A", r.Verdict, r.Reason)
		}
	}
	noDelay := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/intent" {
				b, _ := io.ReadAll(r.Body)
				var m map[string]any
				if json.Unmarshal(b, &m) == nil && m != nil {
					delete(m, "delay")
					b, _ = json.Marshal(m)
				}
				r.Body = io.NopCloser(bytes.NewReader(b))
				r.ContentLength = int64(len(b))
			}
			h.ServeHTTP(w, r)
		})
	}
	if got := certifyWrapped(t, "", rules, noDelay); !failed(got["INTENT-7.3-eligible-run-at"]) {
		t.Errorf("delay ignored: INTENT-7.3-eligible-run-at %s, want a failure", got["INTENT-7.3-eligible-run-at"])
	}
}

// TestPublisherFilterNeedsNoClock (timing): the own-key filter is judged by
// passing over another key's intent, not by a 204 that a lapsed lease of
// the first intent would turn into a hand-out; a bus that ignores the
// filter still fails INTENT-7.3-publisher-filter.
func TestPublisherFilterNeedsNoClock(t *testing.T) {
	rules := []string{"INTENT-7.3-publisher-filter"}
	filtered := func(r *http.Request) bool { return r.URL.Path == "/claim" && r.URL.Query().Get("publisher") != "" }
	got := certifyWrapped(t, "", rules, slowNth(3, 1600*time.Millisecond, filtered))
	wantVerdicts(t, got, map[string]verdict.Verdict{"INTENT-7.3-publisher-filter": verdict.Pass})
	ignore := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/claim" {
				q := r.URL.Query()
				q.Del("publisher")
				r.URL.RawQuery = q.Encode()
			}
			h.ServeHTTP(w, r)
		})
	}
	if got := certifyWrapped(t, "", rules, ignore); !failed(got["INTENT-7.3-publisher-filter"]) {
		t.Errorf("filter ignored: INTENT-7.3-publisher-filter %s, want a failure", got["INTENT-7.3-publisher-filter"])
	}
}

// TestExpiresAtReadWhereShown: a bus that shows expires_at in no reply
// leaves INTENT-4.2-expires-at-default N/A; one whose intents expire an
// hour early still fails it.
func TestExpiresAtReadWhereShown(t *testing.T) {
	rules := []string{"INTENT-4.2-expires-at-default"}
	got := certifyTampered(t, rules, dropField("expires_at", "/result/", "/admin/intents/"))
	wantVerdicts(t, got, map[string]verdict.Verdict{"INTENT-4.2-expires-at-default": verdict.NA})
	got = certifyTampered(t, rules, func(r *http.Request, status int, doc map[string]any) int {
		if v, ok := doc["expires_at"].(float64); ok {
			doc["expires_at"] = v - 60 // an hour of protocol time at time scale 60
		}
		return status
	})
	if !failed(got["INTENT-4.2-expires-at-default"]) {
		t.Errorf("INTENT-4.2-expires-at-default: %s, want a failure", got["INTENT-4.2-expires-at-default"])
	}
}

// TestResultErrorWorded: "The response MUST include error when last_error
// is present" holds for an error that words the failure's message its own
// way; a /result without the error still fails.
func TestResultErrorWorded(t *testing.T) {
	rules := []string{"INTENT-7.7-result-error-field"}
	got := certifyTampered(t, rules, func(r *http.Request, status int, doc map[string]any) int {
		if v, ok := doc["error"].(string); ok && strings.HasPrefix(r.URL.Path, "/result/") {
			doc["error"] = "the worker reported: " + v
		}
		return status
	})
	wantVerdicts(t, got, map[string]verdict.Verdict{"INTENT-7.7-result-error-field": verdict.Pass})
	if got := certifyTampered(t, rules, dropField("error", "/result/")); !failed(got["INTENT-7.7-result-error-field"]) {
		t.Errorf("no error in /result: INTENT-7.7-result-error-field %s, want a failure", got["INTENT-7.7-result-error-field"])
	}
}
