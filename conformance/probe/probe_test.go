package probe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/conformance/probe"
	"github.com/idscheck/idscheck/profiles/httpidem/realmw"
)

// fiberTarget describes the realmw payments endpoint as realmw_test.go's
// endpointJSON does (no variant: the probe judges all three), with a
// shorter slow request.
const fiberTarget = `{
  "url": "http://127.0.0.1:8090",
  "http_idempotency": {
    "method": "POST",
    "path": "/v1/payments",
    "body": {"reference": "{{unique}}", "amount": 1000},
    "vary": {"amount": 2000},
    "invalid": {"amount": 0},
    "key": {"header": "Idempotency-Key"},
    "key_format": "token",
    "key_spec": {"uuid": true},
    "key_ttl_seconds": 1800,
    "id": "id",
    "count": {"path": "/v1/payments?reference={{unique}}", "pointer": "/count"},
    "slow": {"delay_ms": 800},
    "key_scope": "caller",
    "callers": [
      {"headers": {"Authorization": "Bearer caller-one"}},
      {"headers": {"Authorization": "Bearer caller-two"}}
    ]
  }
}`

// verdictOf is what a table implies for rule under variant, as Agree
// reads it: the verdicts of the behaviours that deviate from it (joined
// with /), else PASS; "" when no behaviour names it.
func verdictOf(t *probe.Table, variant, rule string) string {
	seen, dev := false, []string{}
	for _, b := range t.Behaviours {
		for _, e := range b.Expect {
			if e.Variant != variant || e.Rule != rule {
				continue
			}
			seen = true
			if !slices.Contains(e.Verdicts, "PASS") {
				for _, v := range e.Verdicts {
					if !slices.Contains(dev, v) {
						dev = append(dev, v)
					}
				}
			}
		}
	}
	switch {
	case !seen:
		return ""
	case len(dev) > 0:
		return strings.Join(dev, "/")
	}
	return "PASS"
}

func behaviour(t *testing.T, tab *probe.Table, id string) probe.Behaviour {
	t.Helper()
	for _, b := range tab.Behaviours {
		if b.ID == id {
			return b
		}
	}
	t.Fatalf("no behaviour %q in the table", id)
	return probe.Behaviour{}
}

// checkVerdicts compares the table's implied verdicts with want
// ("variant rule" → verdict).
func checkVerdicts(t *testing.T, tab *probe.Table, want map[string]string) {
	t.Helper()
	for k, w := range want {
		v, rule, _ := strings.Cut(k, " ")
		if got := verdictOf(tab, v, rule); got != w {
			t.Errorf("%s %s: the table implies %q, want %q", v, rule, got, w)
		}
	}
}

func checkObserved(t *testing.T, tab *probe.Table, want map[string][]string) {
	t.Helper()
	for id, subs := range want {
		b := behaviour(t, tab, id)
		for _, s := range subs {
			if !strings.Contains(b.Observed, s) {
				t.Errorf("%s: observed %q, want it to say %q\nevidence:\n  %s", id, b.Observed, s, strings.Join(b.Evidence, "\n  "))
			}
		}
	}
}

func measure(t *testing.T, url, target string) *probe.Table {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tab, err := probe.Measure(ctx, url, []byte(target))
	if err != nil {
		t.Fatalf("Measure: %v", err)
	}
	for _, b := range tab.Behaviours {
		for _, e := range b.Expect {
			if slices.Contains(e.Verdicts, "BLOCKED") && !e.Intermittent && (e.BlockedBy == "" || verdictOf(tab, e.Variant, e.BlockedBy) == "PASS" || verdictOf(tab, e.Variant, e.BlockedBy) == "") {
				t.Errorf("%s: %s %s may be BLOCKED by %q, which no expectation of the table fails", b.ID, e.Variant, e.Rule, e.BlockedBy)
			}
		}
	}
	return tab
}

// TestMeasureFiber: the probe sees on Fiber v2 and v3 what
// TestFiberDeviationsByHand asserts by hand, and maps it to the verdicts
// docs/http-idempotency.md's worked example explains.
func TestMeasureFiber(t *testing.T) {
	for _, v := range realmw.Versions() {
		t.Run("fiber"+v, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv, err := realmw.Start(v, ln, realmw.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			// Fiber cannot be held by a barrier: the duplicate is in flight
			// only if it is sent while the handler still sleeps. On a loaded
			// machine the probe may say "not measured"; measure again with a
			// longer sleep before anything is asserted.
			tab := measure(t, srv.URL, fiberTarget)
			if inFlightNotMeasured(tab) {
				t.Logf("in flight not measured with delay_ms 800 (a loaded machine): again with 3000")
				tab = measure(t, srv.URL, strings.Replace(fiberTarget, `"delay_ms": 800`, `"delay_ms": 3000`, 1))
			}
			if inFlightNotMeasured(tab) {
				t.Skip("the duplicate could not be sent while Fiber's handler slept, twice: the machine is too loaded to measure Fiber's in-flight answer")
			}
			checkObserved(t, tab, map[string][]string{
				"key-too-long":             {"500", "0 payments"},
				"key-256":                  {"500", "0 payments"},
				"retry-after-complete":     {"201", "same result", "1 payment"},
				"replay-marker":            {"no replay marker", "not echoed"},
				"same-key-other-payload":   {"201", "the first answer replayed", "1 payment"},
				"two-callers-one-key":      {"the first caller's result", "0 payments"},
				"rejection-then-corrected": {"400, then 400", "the stored rejection replayed", "0 payments"},
				"in-flight-duplicate":      {"duplicate 201", "the original's result", "1 payment"},
				"key-outside-format":       {"processed"},
			})
			checkVerdicts(t, tab, map[string]string{
				"ietf IETF-2.6-first-request":          "PASS",
				"ietf IETF-2.5-identify-key":           "PASS",
				"ietf IETF-2.6-retry-result":           "PASS",
				"ietf IETF-2.6-concurrent-conflict":    "FAIL",
				"ietf IETF-2.7-concurrent-409":         "NON-STRICT/BLOCKED",
				"ietf IETF-2.7-mismatch-422":           "NON-STRICT",
				"ietf IETF-5-validate-key":             "NON-STRICT",
				"ietf IETF-5-composite-key":            "NON-STRICT",
				"ietf RFC9110-15.6-server-error":       "PASS",
				"ietf IETF-2.7-missing-400":            "",
				"t0 T0-R1-original-response":           "PASS",
				"t0 T0-0-no-further-effect":            "PASS",
				"t0 T0-R2-wait-in-flight":              "PASS",
				"t0 T0-R3-no-duplicate-error":          "PASS",
				"t0 T0-R3-key-tells-new":               "PASS",
				"t0 T0-KEYS-caller-scope":              "FAIL",
				"t0 T0-REPLAY-rejection-keeps-key":     "FAIL",
				"t0 T0-REPLAY-accepted-only":           "FAIL",
				"stripe STRIPE-IDEM-post-accepts-keys": "PASS",
				"stripe STRIPE-IDEM-same-result":       "PASS",
				"stripe STRIPE-IDEM-params-compared":   "FAIL",
				"stripe STRIPE-IDEM-not-saved":         "FAIL",
				"stripe STRIPE-IDEM-key-255":           "NON-STRICT/BLOCKED",
				"stripe RFC9110-15.6-server-error":     "NON-STRICT",
			})
		})
	}
}

// fakeMode is how the fake middleware behaves.
type fakeMode struct {
	keyBy      string // "key" (the default), "body" (dedupes on the payload, ignoring the key), "none" (no idempotency), "fingerprint" (by the key, and a payload seen under another key is refused with 409, as idempot.dev's middlewares do)
	inFlight   string // "conflict" (409 with a problem document), "wait" (the original's answer), "execute" (a second payment), "500", "500-release" (a 500 that releases the original's claim)
	mismatch   string // "422" (with a link to documentation), "execute", "replay" (the first answer)
	storeRej   bool   // a rejection is stored under its key and replayed
	marker     bool   // a replay carries Idempotent-Replayed: true
	badKey     int    // the status of a key outside the published format: 400, or 0 to process it
	failLonger int    // keys longer than this get a 500 (0: none)
	shared     bool   // keys are not scoped to the caller
	requireKey bool   // a request without a key gets 400 with a link
	flakyRetry bool   // every other replay is answered 409 (the answer stored only after it was sent)
}

// fakeTarget describes the fake as an honest operator would; requires_key
// and slow as the test needs.
func fakeTarget(requireKey, slow bool) string {
	s := ""
	if slow {
		s = `"slow": {"delay_ms": 600},`
	}
	return fmt.Sprintf(`{"http_idempotency": {
  "path": "/v1/payments",
  "body": {"reference": "{{unique}}", "amount": 1000},
  "vary": {"amount": 2000},
  "invalid": {"amount": 0},
  "key_format": "token",
  "key_spec": {"min_length": 8, "max_length": 255, "pattern": "[A-Za-z0-9_-]+"},
  "requires_key": %v,
  "id": "id",
  "count": {"path": "/v1/payments?reference={{unique}}", "pointer": "/count"},
  %s
  "callers": [{"headers": {"Authorization": "Bearer one"}}, {"headers": {"Authorization": "Bearer two"}}],
  "documented": {"replay_header": "Idempotent-Replayed"}
}}`, requireKey, s)
}

type fakeEntry struct {
	done   chan struct{}
	fp     string
	status int
	body   []byte
	dup    chan struct{} // closed when a duplicate arrives while in flight
	once   sync.Once
}

// fake is a tiny payments endpoint with its own idempotency layer.
type fake struct {
	mode    fakeMode
	mu      sync.Mutex
	n       int
	byRef   map[string]int
	entries map[string]*fakeEntry
	seen    map[string]string // keyBy fingerprint: a payload -> the key it first came with
	replays int               // replays answered (flakyRetry)
}

var keyRE = regexp.MustCompile(`^[A-Za-z0-9_-]{8,255}$`)

func startFake(t *testing.T, m fakeMode) string {
	f := &fake{mode: m, byRef: map[string]int{}, entries: map[string]*fakeEntry{}, seen: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// create runs the handler: a 400 for an invalid payment, else a payment
// after delay_ms; held until delay_ms after a duplicate arrives, so the
// duplicate is in flight whatever the scheduling (a barrier, not a race).
func (f *fake) create(body []byte, e *fakeEntry) (int, []byte) {
	var req struct {
		Reference string  `json:"reference"`
		Amount    float64 `json:"amount"`
		DelayMS   float64 `json:"delay_ms"`
	}
	if json.Unmarshal(body, &req) != nil || req.Amount <= 0 || req.Reference == "" {
		b, _ := json.Marshal(map[string]string{"error": "amount must be > 0 and reference set"})
		return 400, b
	}
	if req.DelayMS > 0 {
		d := time.Duration(req.DelayMS) * time.Millisecond
		time.Sleep(d)
		if e != nil {
			select {
			case <-e.dup:
				time.Sleep(d)
			default:
			}
		}
	}
	f.mu.Lock()
	f.n++
	f.byRef[req.Reference]++
	id := fmt.Sprintf("pay_%d", f.n)
	f.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"id": id, "reference": req.Reference, "amount": req.Amount})
	return 201, b
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		writeJSON(w, 200, map[string]string{"status": "ok"})
		return
	case r.Method == http.MethodGet && r.URL.Path == "/v1/payments":
		f.mu.Lock()
		n := f.byRef[r.URL.Query().Get("reference")]
		f.mu.Unlock()
		writeJSON(w, 200, map[string]int{"count": n})
		return
	case r.Method != http.MethodPost || r.URL.Path != "/v1/payments":
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	answer := func(st int, b []byte, replay bool) {
		w.Header().Set("Content-Type", "application/json")
		if replay && f.mode.marker {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.WriteHeader(st)
		w.Write(b)
	}
	key := r.Header.Get("Idempotency-Key")
	m := f.mode
	switch {
	case key == "" && m.requireKey:
		writeJSON(w, 400, map[string]string{"type": "https://example.test/docs/idempotency-key", "title": "Idempotency-Key is required"})
		return
	case key == "" || m.keyBy == "none":
		st, b := f.create(body, nil)
		answer(st, b, false)
		return
	case m.failLonger > 0 && len(key) > m.failLonger:
		http.Error(w, "key too long for the store", 500)
		return
	case !keyRE.MatchString(key) && m.badKey != 0:
		writeJSON(w, m.badKey, map[string]string{"error": "the key is outside the published format"})
		return
	}
	sk := key
	if !m.shared {
		sk = r.Header.Get("Authorization") + "|" + key
	}
	fp := strings.Join(strings.Fields(string(body)), "")
	if m.keyBy == "body" {
		sk = fp
	}
	f.mu.Lock()
	if m.keyBy == "fingerprint" {
		if k, ok := f.seen[fp]; ok && k != sk {
			f.mu.Unlock()
			writeJSON(w, 409, map[string]string{"title": "fingerprint conflict"})
			return
		}
		f.seen[fp] = sk
	}
	e := f.entries[sk]
	if e == nil {
		e = &fakeEntry{done: make(chan struct{}), fp: fp, dup: make(chan struct{})}
		f.entries[sk] = e
		f.mu.Unlock()
		e.status, e.body = f.create(body, e)
		f.mu.Lock()
		if e.status >= 400 && !m.storeRej {
			delete(f.entries, sk)
		} else {
			f.entries[sk] = e // the result is saved, even where a refusal deleted the claim meanwhile
		}
		f.mu.Unlock()
		close(e.done)
		answer(e.status, e.body, false)
		return
	}
	f.mu.Unlock()
	select {
	case <-e.done:
	default:
		e.once.Do(func() { close(e.dup) })
		switch m.inFlight {
		case "conflict":
			writeJSON(w, 409, map[string]string{"type": "https://example.test/docs/in-flight", "title": "the original request is still in flight"})
			return
		case "500":
			http.Error(w, "IdempotencyAlreadyInProgressError", 500)
			return
		case "500-release":
			// Powertools' Middy integration: the refusal's error
			// handler deletes the original's in-progress record.
			f.mu.Lock()
			if f.entries[sk] == e {
				delete(f.entries, sk)
			}
			f.mu.Unlock()
			http.Error(w, "IdempotencyAlreadyInProgressError", 500)
			return
		case "execute":
			st, b := f.create(body, nil)
			answer(st, b, false)
			return
		}
		<-e.done
	}
	if e.fp != fp && m.mismatch != "replay" {
		if m.mismatch == "422" {
			writeJSON(w, 422, map[string]string{"type": "https://example.test/docs/key-reused", "title": "the key was used with another payload"})
			return
		}
		st, b := f.create(body, nil)
		answer(st, b, false)
		return
	}
	if m.flakyRetry {
		f.mu.Lock()
		f.replays++
		odd := f.replays%2 == 1
		f.mu.Unlock()
		if odd {
			writeJSON(w, 409, map[string]string{"title": "a request with this key is in progress"})
			return
		}
	}
	answer(e.status, e.body, true)
}

// conforming is a fake that follows the draft and Stripe's page (and
// t-0's, but for the in-flight duplicate, where the texts disagree).
var conforming = fakeMode{inFlight: "conflict", mismatch: "422", marker: true, badKey: 400, requireKey: true}

// TestMeasureFakesFlip: on a conforming fake each behaviour implies PASS;
// on fakes deviating in each, the same expectations flip to FAIL or
// NON-STRICT.
func TestMeasureFakesFlip(t *testing.T) {
	t.Run("conforming", func(t *testing.T) {
		tab := measure(t, startFake(t, conforming), fakeTarget(true, true))
		checkVerdicts(t, tab, map[string]string{
			"ietf IETF-2.6-first-request":          "PASS",
			"ietf IETF-2.5-identify-key":           "PASS",
			"ietf IETF-2.6-retry-result":           "PASS",
			"ietf IETF-2.6-concurrent-conflict":    "PASS",
			"ietf IETF-2.7-concurrent-409":         "PASS",
			"ietf IETF-2.7-mismatch-422":           "PASS",
			"ietf IETF-2.7-fail-uncorrected":       "PASS",
			"ietf IETF-2.7-missing-400":            "PASS",
			"ietf IETF-5-validate-key":             "PASS",
			"ietf IETF-5-composite-key":            "PASS",
			"ietf RFC9110-15.6-server-error":       "PASS",
			"t0 T0-R1-original-response":           "PASS",
			"t0 T0-0-no-further-effect":            "PASS",
			"t0 T0-R3-key-tells-new":               "PASS",
			"t0 T0-KEYS-caller-scope":              "PASS",
			"t0 T0-REPLAY-rejection-keeps-key":     "PASS",
			"t0 T0-REPLAY-accepted-only":           "PASS",
			"t0 T0-R2-wait-in-flight":              "FAIL", // the draft's 409 is an error t-0 forbids
			"t0 T0-R3-no-duplicate-error":          "FAIL",
			"stripe STRIPE-IDEM-post-accepts-keys": "PASS",
			"stripe STRIPE-IDEM-same-result":       "PASS",
			"stripe STRIPE-IDEM-params-compared":   "PASS",
			"stripe STRIPE-IDEM-not-saved":         "PASS",
			"stripe STRIPE-IDEM-key-255":           "PASS",
			"stripe RFC9110-15.6-server-error":     "PASS",
		})
		checkObserved(t, tab, map[string][]string{"replay-marker": {"Idempotent-Replayed", "carried by the replay only"}})
	})
	t.Run("conforming-t0", func(t *testing.T) {
		m := conforming
		m.inFlight = "wait"
		tab := measure(t, startFake(t, m), fakeTarget(true, true))
		checkVerdicts(t, tab, map[string]string{
			"t0 T0-R2-wait-in-flight":           "PASS",
			"t0 T0-R3-no-duplicate-error":       "PASS",
			"ietf IETF-2.6-concurrent-conflict": "FAIL",
			"ietf IETF-2.7-concurrent-409":      "NON-STRICT/BLOCKED",
			"stripe STRIPE-IDEM-same-result":    "PASS",
			"stripe STRIPE-IDEM-not-saved":      "PASS",
		})
	})
	t.Run("in-flight-500", func(t *testing.T) {
		m := conforming
		m.inFlight = "500"
		tab := measure(t, startFake(t, m), fakeTarget(true, true))
		checkVerdicts(t, tab, map[string]string{
			"ietf IETF-2.6-concurrent-conflict": "FAIL/BLOCKED",
			"t0 T0-R2-wait-in-flight":           "FAIL/BLOCKED",
			"stripe STRIPE-IDEM-not-saved":      "FAIL/BLOCKED",
			"stripe STRIPE-IDEM-same-result":    "PASS", // the duplicate made nothing of its own
			"ietf RFC9110-15.6-server-error":    "NON-STRICT",
			"t0 RFC9110-15.6-server-error":      "NON-STRICT",
			"stripe RFC9110-15.6-server-error":  "NON-STRICT",
		})
	})
	t.Run("in-flight-500-releases-the-claim", func(t *testing.T) {
		m := conforming
		m.inFlight = "500-release"
		tab := measure(t, startFake(t, m), fakeTarget(true, true))
		checkObserved(t, tab, map[string][]string{"in-flight-duplicate": {"second duplicate 201", "2 payments"}})
		checkVerdicts(t, tab, map[string]string{
			"ietf IETF-2.6-concurrent-conflict": "FAIL/BLOCKED",
			"t0 T0-0-no-further-effect":         "FAIL",
			"stripe STRIPE-IDEM-same-result":    "FAIL",
		})
	})
	t.Run("intermittent-retry", func(t *testing.T) {
		m := conforming
		m.flakyRetry = true
		tab := measure(t, startFake(t, m), fakeTarget(true, true))
		checkObserved(t, tab, map[string][]string{"retry-after-complete": {"of 10 immediate retries got another answer"}})
		b := behaviour(t, tab, "retry-after-complete")
		for _, rule := range []string{"IETF-2.6-retry-result", "STRIPE-IDEM-same-result"} {
			variant := map[bool]string{true: "ietf", false: "stripe"}[strings.HasPrefix(rule, "IETF")]
			for _, got := range []string{"PASS", deviationOf(rule)} {
				var ds []probe.Disagreement
				for _, d := range probe.Agree(&probe.Table{Behaviours: []probe.Behaviour{b}}, variant, map[string]string{rule: got}, nil) {
					if d.Rule == rule {
						ds = append(ds, d)
					}
				}
				if len(ds) > 0 {
					t.Errorf("%s %s: an intermittent deviation disagrees with %s: %+v", variant, rule, got, ds)
				}
			}
		}
	})
	t.Run("deviant", func(t *testing.T) {
		m := fakeMode{inFlight: "execute", mismatch: "replay", storeRej: true, marker: true, failLonger: 64, shared: true}
		// It declares requires_key but executes a request without a key.
		tab := measure(t, startFake(t, m), fakeTarget(true, true))
		checkVerdicts(t, tab, map[string]string{
			"ietf IETF-2.6-first-request":        "NON-STRICT/BLOCKED", // the 255-character key it publishes gets a 500
			"ietf IETF-2.6-retry-result":         "PASS",
			"ietf IETF-2.6-concurrent-conflict":  "FAIL",
			"ietf IETF-2.7-concurrent-409":       "NON-STRICT/BLOCKED",
			"ietf IETF-2.7-mismatch-422":         "NON-STRICT",
			"ietf IETF-2.7-missing-400":          "NON-STRICT",
			"ietf IETF-5-validate-key":           "NON-STRICT",
			"ietf IETF-5-composite-key":          "NON-STRICT",
			"ietf RFC9110-15.6-server-error":     "NON-STRICT",
			"t0 T0-R2-wait-in-flight":            "FAIL",
			"t0 T0-0-no-further-effect":          "FAIL",
			"t0 T0-KEYS-caller-scope":            "FAIL",
			"t0 T0-REPLAY-rejection-keeps-key":   "FAIL",
			"t0 T0-REPLAY-accepted-only":         "FAIL",
			"t0 RFC9110-15.6-server-error":       "NON-STRICT",
			"stripe STRIPE-IDEM-same-result":     "FAIL",
			"stripe STRIPE-IDEM-params-compared": "FAIL",
			"stripe STRIPE-IDEM-not-saved":       "FAIL",
			"stripe STRIPE-IDEM-key-255":         "NON-STRICT/BLOCKED",
			"stripe RFC9110-15.6-server-error":   "NON-STRICT",
		})
		checkObserved(t, tab, map[string][]string{
			"rejection-retried":   {"marked as a replay", "Idempotent-Replayed"},
			"in-flight-duplicate": {"2 payments"},
		})
	})
	t.Run("no-idempotency", func(t *testing.T) {
		tab := measure(t, startFake(t, fakeMode{keyBy: "none"}), fakeTarget(false, false))
		checkVerdicts(t, tab, map[string]string{
			"ietf IETF-2.6-retry-result":     "NON-STRICT",
			"t0 T0-R1-original-response":     "FAIL",
			"t0 T0-0-no-further-effect":      "FAIL",
			"t0 T0-CAT-same-outcome":         "FAIL",
			"stripe STRIPE-IDEM-same-result": "FAIL",
			"ietf IETF-2.5-identify-key":     "PASS",
		})
		checkObserved(t, tab, map[string][]string{"in-flight-duplicate": {"not measured"}})
	})
	t.Run("dedupes-on-the-payload", func(t *testing.T) {
		tab := measure(t, startFake(t, fakeMode{keyBy: "body", badKey: 400}), fakeTarget(false, false))
		checkVerdicts(t, tab, map[string]string{
			"ietf IETF-2.5-identify-key": "NON-STRICT",
			"t0 T0-R3-key-tells-new":     "FAIL",
			"ietf IETF-2.6-retry-result": "PASS",
		})
		checkIdentify(t, tab, []string{"NON-STRICT"}, "no reading of the draft allows")
	})
	// idempot.dev's middlewares: a payload seen under another key is
	// refused (409 "fingerprint conflict"), the reading
	// new-key-seen-payload=fingerprint of the draft; t-0's text has no
	// fingerprint and tells a new request by its key.
	t.Run("refuses-a-seen-payload-under-a-new-key", func(t *testing.T) {
		m := conforming
		m.keyBy = "fingerprint"
		tab := measure(t, startFake(t, m), fakeTarget(true, false))
		checkVerdicts(t, tab, map[string]string{
			"ietf IETF-2.5-identify-key": "PASS",
			"t0 T0-R3-key-tells-new":     "FAIL",
			"ietf IETF-2.6-retry-result": "PASS",
		})
		checkIdentify(t, tab, []string{"PASS", "READING"}, "new-key-seen-payload=fingerprint")
	})
	t.Run("a-seen-payload-under-a-new-key-is-new", func(t *testing.T) {
		tab := measure(t, startFake(t, conforming), fakeTarget(true, false))
		checkIdentify(t, tab, []string{"PASS", "READING"}, "new-key-seen-payload=pair")
	})
}

// inFlightNotMeasured: the probe could not put its duplicate in flight.
func inFlightNotMeasured(tab *probe.Table) bool {
	for _, b := range tab.Behaviours {
		if b.ID == "in-flight-duplicate" {
			return strings.Contains(b.Observed, "not measured")
		}
	}
	return false
}

// checkIdentify: the new-key-same-body behaviour's ietf expectation allows
// exactly verdicts, and its Why says why.
func checkIdentify(t *testing.T, tab *probe.Table, verdicts []string, why string) {
	t.Helper()
	b := behaviour(t, tab, "new-key-same-body")
	for _, e := range b.Expect {
		if e.Variant != "ietf" || e.Rule != "IETF-2.5-identify-key" {
			continue
		}
		if !slices.Equal(e.Verdicts, verdicts) || !strings.Contains(e.Why, why) {
			t.Errorf("new-key-same-body (observed %s): %v %q, want %v and %q in the why", b.Observed, e.Verdicts, e.Why, verdicts, why)
		}
		return
	}
	t.Errorf("new-key-same-body (observed %s): no ietf expectation", b.Observed)
}

// deviationOf is the verdict a deviation from rule gives: NON-STRICT for
// the draft's SHOULDs these tests use, FAIL for the guarantees.
func deviationOf(rule string) string {
	if strings.HasPrefix(rule, "IETF-2.6-retry") {
		return "NON-STRICT"
	}
	return "FAIL"
}
