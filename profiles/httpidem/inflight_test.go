package httpidem

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/verdict"
)

// slowEndpoint is a tiny idempotent endpoint with no effect sink: a body
// member delay_ms makes it slow, GET /count counts every payment (a
// difference read). inFlight says what a duplicate of a request still
// running gets: "conflict" (409 with a problem), "wait" (the original's
// answer, once it is done) or "double" (it runs too).
func slowEndpoint(t *testing.T, inFlight string) *httptest.Server {
	var mu sync.Mutex
	done := map[string][]byte{}
	running := map[string]chan struct{}{}
	n := 0
	mux := http.NewServeMux()
	mux.HandleFunc("GET /count", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, `{"count": %d}`, n)
	})
	mux.HandleFunc("POST /pay", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reference string `json:"reference"`
			DelayMS   int    `json:"delay_ms"`
		}
		if json.NewDecoder(r.Body).Decode(&body) != nil || body.DelayMS > 5000 {
			http.Error(w, `{"title":"bad body"}`, 400)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		for {
			if b, ok := done[key]; ok {
				mu.Unlock()
				w.WriteHeader(201)
				w.Write(b)
				return
			}
			ch, busy := running[key]
			if !busy || inFlight == "double" {
				break
			}
			if inFlight == "conflict" {
				mu.Unlock()
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(409)
				w.Write([]byte(`{"title":"a request with this key is in flight"}`))
				return
			}
			mu.Unlock()
			<-ch
			mu.Lock()
		}
		ch := make(chan struct{})
		running[key] = ch
		n++
		id := n
		mu.Unlock()
		time.Sleep(time.Duration(body.DelayMS) * time.Millisecond)
		b := fmt.Appendf(nil, `{"id":"pay_%d","reference":%q}`, id, body.Reference)
		mu.Lock()
		done[key] = b
		delete(running, key)
		close(ch)
		mu.Unlock()
		w.WriteHeader(201)
		w.Write(b)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTPIdemInFlightWithoutSink: with no effect sink, the declared slow
// request puts a duplicate in flight, and each variant's in-flight rule
// passes the endpoint that follows it and fails the one that does not.
func TestHTTPIdemInFlightWithoutSink(t *testing.T) {
	if testing.Short() {
		t.Skip("slow requests")
	}
	cases := []struct {
		inFlight, variant string
		want              map[string]verdict.Verdict
	}{
		{"conflict", VariantIETF, map[string]verdict.Verdict{"IETF-2.6-concurrent-conflict": verdict.Pass, "IETF-2.7-concurrent-409": verdict.Pass}},
		{"wait", VariantIETF, map[string]verdict.Verdict{"IETF-2.6-concurrent-conflict": verdict.Fail}},
		{"wait", VariantT0, map[string]verdict.Verdict{"T0-R2-wait-in-flight": verdict.Pass, "T0-R3-no-duplicate-error": verdict.Pass}},
		{"conflict", VariantT0, map[string]verdict.Verdict{"T0-R3-no-duplicate-error": verdict.Fail}},
		{"double", VariantT0, map[string]verdict.Verdict{"T0-R2-wait-in-flight": verdict.Fail}},
		{"wait", VariantStripe, map[string]verdict.Verdict{"STRIPE-IDEM-not-saved": verdict.Pass}},
	}
	// The slow request takes 2 s: the duplicate is in flight by a margin
	// (half of it) that no scheduling delay of a loaded machine reaches;
	// with 400 ms the judgment went BLOCKED (honestly) under load.
	for _, tc := range cases {
		t.Run(tc.inFlight+"/"+tc.variant, func(t *testing.T) {
			srv := slowEndpoint(t, tc.inFlight)
			ep, err := ParseEndpoint(json.RawMessage(`{"variant": "`+tc.variant+`", "path": "/pay", "key_format": "token",
				"body": {"reference": "{{unique}}", "delay_ms": 0}, "slow": {"delay_ms": 2000}, "id": "id",
				"count": {"path": "/count", "pointer": "/count", "difference": true}}`), nil)
			if err != nil {
				t.Fatal(err)
			}
			var sel []string
			for id := range tc.want {
				sel = append(sel, id)
			}
			res, err := Profile().Run(t.Context(), features.RunConfig{Seed: 1, Select: sel, Budget: 30 * time.Second,
				Target: features.Target{BaseURL: srv.URL, Described: ep}})
			if err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, r := range res.Rules {
				if want, ok := tc.want[r.RuleID]; ok {
					got++
					if r.Verdict != want {
						t.Errorf("%s: %s (%s), want %s", r.RuleID, r.Verdict, r.Reason, want)
					}
				}
			}
			if got != len(tc.want) {
				t.Errorf("%d of %d rules got a verdict", got, len(tc.want))
			}
		})
	}
}
