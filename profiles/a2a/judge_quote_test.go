package a2a

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	suta2a "github.com/idscheck/idscheck/sut/a2a"
	"github.com/idscheck/idscheck/verdict"
)

// edit changes one JSON answer of the bundled queue on its way to the
// harness: it may change its status and its body; it reports whether it
// changed anything.
type edit func(r *http.Request, status *int, doc map[string]any) bool

// certifyThrough runs the profile against its bundled queue (mutant "" or
// one, at time scale ts; 0: the default) with every JSON answer passed
// through e (nil: none); it returns each rule's verdict and reason, and
// how many answers e changed.
func certifyThrough(t *testing.T, mutant string, ts float64, e edit, rules ...string) (map[string]string, int64) {
	t.Helper()
	p := Profile()
	if ts == 0 {
		ts = p.DefaultTimeScale()
	}
	b, err := p.Bundled(t.Context(), harness.BundledConfig{Dir: t.TempDir(), Mutant: mutant, TimeScale: ts})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var changed atomic.Int64
	h := b.Handler
	if e != nil {
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, r)
			status, body := rec.Code, rec.Body.Bytes()
			var doc map[string]any
			if json.Unmarshal(body, &doc) == nil && doc != nil && e(r, &status, doc) {
				changed.Add(1)
				body, _ = json.Marshal(doc)
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.Header().Del("Content-Length")
			w.WriteHeader(status)
			w.Write(body)
		})
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	target := b.Target
	target.BaseURL = srv.URL
	res, err := p.Run(t.Context(), features.RunConfig{Target: target, Seed: 1, Select: rules})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range res.Rules {
		got[r.RuleID] = string(r.Verdict) + ": " + r.Reason
	}
	return got, changed.Load()
}

func wantA2A(t *testing.T, got map[string]string, id string, want verdict.Verdict, why string) {
	t.Helper()
	if !strings.HasPrefix(got[id], string(want)+":") {
		t.Errorf("%s: %s, want %s: %s", id, got[id], want, why)
	}
}

// TestA2AChecksAcceptWhatTheTextAllows (issue 28, judge the quote): each
// case is an answer the text allows though the binding spells it
// otherwise; on main each failed its rule. The mutant named beside it
// still fails the rule.
func TestA2AChecksAcceptWhatTheTextAllows(t *testing.T) {
	if testing.Short() {
		t.Skip("certifies the bundled queue per case")
	}
	cases := []struct {
		name, rule, mutant string
		ts                 float64
		change             edit
	}{
		// "validates that a present key is non-empty": refused, with a
		// status and code of its own.
		{"an empty key refused 422", RuleKeyValidated, suta2a.MutantEmptyKeyAccepted, 0, func(r *http.Request, status *int, doc map[string]any) bool {
			if *status == 400 && doc["error"] == "invalid_idempotency_key" {
				*status, doc["error"] = 422, "empty_key"
				return true
			}
			return false
		}},
		// "requires an explicit duplicate-risk posture": refused otherwise.
		{"a repair without posture refused 422", RuleRepairPosture, suta2a.MutantRepairWithoutPosture, 0, func(r *http.Request, status *int, doc map[string]any) bool {
			if *status == 400 && doc["error"] == "duplicate_risk_required" {
				*status, doc["error"] = 422, "posture_missing"
				return true
			}
			return false
		}},
		// "posting the same result twice must not corrupt mailbox state":
		// a repeated post refused 409 leaves it as it was.
		{"the same result posted again refused 409", RuleRecvResultTwice, suta2a.MutantResultReposted, 0, func(r *http.Request, status *int, doc map[string]any) bool {
			if strings.HasSuffix(r.URL.Path, "/result") && doc["duplicate"] == true {
				*status = http.StatusConflict
				for k := range doc {
					delete(doc, k)
				}
				doc["error"] = "result_exists"
				return true
			}
			return false
		}},
		// "observable via auto_requeue audit rows": a row that does not
		// say the attempt.
		{"an auto_requeue row without attempt", RuleGateObservable, suta2a.MutantNoAuditRow, 0, func(r *http.Request, _ *int, doc map[string]any) bool {
			rows, _ := doc["rows"].([]any)
			n := false
			for _, x := range rows {
				if row, _ := x.(map[string]any); row != nil && row["action"] == "auto_requeue" {
					delete(row, "attempt")
					n = true
				}
			}
			return n
		}},
		// "receives a replayed result immediately instead of being leased
		// again": a new task with the result at once, no flag.
		{"a cache replay without the replayed flag", RuleCacheReplay, suta2a.MutantNoCacheReplay, 0, func(r *http.Request, _ *int, doc map[string]any) bool {
			e, _ := doc["entry"].(map[string]any)
			res, _ := e["result"].(map[string]any)
			if res != nil && res["replayed"] == true {
				delete(res, "replayed")
				return true
			}
			return false
		}},
		// "Only a requeue makes it queued again": a target whose scheduler
		// runs every 60 ms on leases older than 300 ms requeues the
		// explicit-lease scenario's task before it asks again, with the
		// auto_requeue row on record.
		{"a lease again after the scheduler's requeue", RuleExplicitLease, suta2a.MutantLeaseExpires, 1000, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, n := certifyThrough(t, "", tc.ts, tc.change, tc.rule)
			wantA2A(t, got, tc.rule, verdict.Pass, "an answer the text allows")
			if tc.change != nil && n == 0 {
				t.Fatal("no answer was changed: the case was not exercised")
			}
			if tc.change == nil && !strings.Contains(got[tc.rule], "after a requeue on record") {
				t.Fatalf("%s: %s: the task was not leased again after the scheduler's requeue: the case was not exercised", tc.rule, got[tc.rule])
			}
			got, _ = certifyThrough(t, tc.mutant, 0, nil, tc.rule)
			wantA2A(t, got, tc.rule, verdict.Fail, "mutant "+tc.mutant)
		})
	}
}
