package httpidem

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/verdict"
)

// postEffect posts one effect for key to the sink at url and waits for
// its answer (held while the sink holds; bounded by 20 s).
func postEffect(url, key, ref string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	raw, _ := json.Marshal(map[string]string{"idempotency_key": key, "command": "charge", "command_id": ref})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+sink.PathEffects, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// runGapSink is runGap with the effect sink: m's executions post their
// effect to it, so the original is held there while its duplicates come.
func runGapSink(t *testing.T, m gapMW, variant string, want map[string]verdict.Verdict) *features.RunResult {
	t.Helper()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m.sink = s.URL()
	srv := gapEndpoint(t, m)
	ep, err := ParseEndpoint(json.RawMessage(gapDescription(variant, "")), nil)
	if err != nil {
		t.Fatal(err)
	}
	var sel []string
	for id := range want {
		sel = append(sel, id)
	}
	res, err := Profile().Run(t.Context(), features.RunConfig{Seed: 1, Select: sel, Budget: 30 * time.Second, Sink: s,
		Target: features.Target{BaseURL: srv.URL, Described: ep}})
	if err != nil {
		t.Fatal(err)
	}
	checkVerdicts(t, res, want)
	return res
}

func checkVerdicts(t *testing.T, res *features.RunResult, want map[string]verdict.Verdict) {
	t.Helper()
	got := map[string]bool{}
	for _, r := range res.Rules {
		if w, ok := want[r.RuleID]; ok {
			got[r.RuleID] = true
			if r.Verdict != w {
				t.Errorf("%s: %s (%s), want %s", r.RuleID, r.Verdict, r.Reason, w)
			}
		}
	}
	for id := range want {
		if !got[id] {
			t.Errorf("%s got no verdict", id)
		}
	}
}

// secondDuplicateCases: a layer whose rejection of a duplicate in flight
// releases the original's claim (Powertools' Middy integration: a 500,
// and the in-progress record deleted) lets a second duplicate, sent while
// the original is still in flight, execute: two creations under one key,
// caught under each variant by the rule whose quote they break; a layer
// that keeps the claim (409 to both duplicates, or waits for both)
// passes.
var secondDuplicateCases = []struct {
	name, variant string
	mw            gapMW
	want          map[string]verdict.Verdict
	// say: words the reason of the failed rule names the double creation by
	fails, says string
}{
	{"ietf: 409 that releases the claim", VariantIETF, gapMW{inFlight: "conflict", release: true},
		map[string]verdict.Verdict{"IETF-2.6-concurrent-conflict": verdict.Fail}, "IETF-2.6-concurrent-conflict", "at most 1 thing(s)"},
	{"ietf: 409 to both", VariantIETF, gapMW{inFlight: "conflict"},
		map[string]verdict.Verdict{"IETF-2.6-concurrent-conflict": verdict.Pass}, "", ""},
	{"t0: 500 that releases the claim", VariantT0, gapMW{dup500: true, release: true},
		map[string]verdict.Verdict{"T0-0-no-further-effect": verdict.Fail}, "T0-0-no-further-effect", "1 thing(s)"},
	{"t0: waits for both", VariantT0, gapMW{inFlight: "wait"},
		map[string]verdict.Verdict{"T0-0-no-further-effect": verdict.Pass, "T0-R2-wait-in-flight": verdict.Pass, "T0-R3-no-duplicate-error": verdict.Pass}, "", ""},
	{"stripe: 500 that releases the claim", VariantStripe, gapMW{dup500: true, release: true},
		map[string]verdict.Verdict{"STRIPE-IDEM-same-result": verdict.Fail}, "STRIPE-IDEM-same-result", "1 thing(s)"},
	{"stripe: 409 that releases the claim", VariantStripe, gapMW{inFlight: "conflict", release: true},
		map[string]verdict.Verdict{"STRIPE-IDEM-same-result": verdict.Fail}, "STRIPE-IDEM-same-result", "1 thing(s)"},
	{"stripe: 409 to both", VariantStripe, gapMW{inFlight: "conflict"},
		map[string]verdict.Verdict{"STRIPE-IDEM-same-result": verdict.Pass, "STRIPE-IDEM-not-saved": verdict.Pass}, "", ""},
}

// checkSecondDuplicateReason: the failed rule's evidence is the count of
// the scenario that sends the second duplicate.
func checkSecondDuplicateReason(t *testing.T, res *features.RunResult, rule, says string) {
	t.Helper()
	if rule == "" {
		return
	}
	for _, r := range res.Rules {
		if r.RuleID != rule {
			continue
		}
		found := false
		for _, ev := range r.Evidence {
			found = found || (strings.Contains(ev.Scenario, "second") && strings.Contains(ev.Expected, says) && ev.Observed == "2")
		}
		if !found {
			t.Errorf("%s: %q %+v, want the double creation of the second-duplicate scenario as evidence", rule, r.Reason, r.Evidence)
		}
	}
}

// TestHTTPIdemSecondDuplicateInFlightWithSink (issue 29, profile round 3):
// the original is held at the effect sink (a barrier, no timing) while
// the first duplicate is answered and a second one sent.
func TestHTTPIdemSecondDuplicateInFlightWithSink(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the profile per case")
	}
	for _, tc := range secondDuplicateCases {
		t.Run(tc.name, func(t *testing.T) {
			res := runGapSink(t, tc.mw, tc.variant, tc.want)
			checkSecondDuplicateReason(t, res, tc.fails, tc.says)
		})
	}
}

// TestHTTPIdemSecondDuplicateInFlightSlow: without the sink, the declared
// slow request keeps the original in flight; the second duplicate is sent
// once the first was answered (or after 3/8 of a slow request's time,
// when it waits) and judged only if the original answered at least half
// a slow request's time after it.
func TestHTTPIdemSecondDuplicateInFlightSlow(t *testing.T) {
	if testing.Short() {
		t.Skip("slow requests")
	}
	const slow = `"slow": {"delay_ms": 1500}`
	for _, i := range []int{0, 3, 4} {
		tc := secondDuplicateCases[i]
		t.Run(tc.name, func(t *testing.T) {
			res := runGap(t, gapEndpoint(t, tc.mw), gapDescription(tc.variant, slow), tc.want)
			checkSecondDuplicateReason(t, res, tc.fails, tc.says)
		})
	}
}

// TestHTTPIdemSecondDuplicateNotInFlightJudgesNothing: without the sink,
// a second duplicate sent less than half a slow request's time before the
// original's answer may have met the completed original, so nothing of
// the scenario is judged (its steps stop: BLOCKED, never PASS), though
// the first duplicate was in flight. Times are set, not measured.
func TestHTTPIdemSecondDuplicateNotInFlightJudgesNothing(t *testing.T) {
	const took = 1500 * time.Millisecond
	t0 := time.Now()
	held := func(sent, answered time.Duration) *httpHeld {
		return &httpHeld{sent: t0.Add(sent), got: true, answered: t0.Add(answered)}
	}
	w := &httpWorld{env: &features.Env{Budget: time.Second}, reqs: map[string]*httpRequest{}, slowTook: took,
		first: held(0, 1200*time.Millisecond), dup: held(took/4, 1200*time.Millisecond)}
	if err := w.releaseHeld(t.Context()); err != nil {
		t.Fatalf("the first duplicate alone, 825 ms before the original's answer: %v", err)
	}
	w.dup2 = held(took*3/8, 1200*time.Millisecond)
	err := w.releaseHeld(t.Context())
	if err == nil || !strings.Contains(err.Error(), "second duplicate") || !strings.Contains(err.Error(), "nothing is judged") {
		t.Fatalf("got %v, want the second duplicate named as maybe not in flight", err)
	}
}
