package httpidem

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/sink"
)

// memEndpoint is a tiny middleware-like endpoint, nothing of the bundled
// server: POST /orders with an Idempotency-Key header creates an order;
// with idem, one key executes once and every later delivery gets the
// stored answer (a mutex over a map key → answer: correct, if slow); without,
// every delivery executes (the duplicate charger). GET /count answers
// {"count": N}, everything it ever created (7 before any run);
// GET /orders/by-ref/{ref} answers {"data": {id: order, …}}.
type memEndpoint struct {
	idem bool
	// uuidKeys refuses (400) a key that is not a UUID, as a middleware
	// that publishes that format does.
	uuidKeys bool
	// sinkURL, when set, is an effect sink called twice per execution (a
	// charge and a receipt, under the request's key).
	sinkURL string

	mu     sync.Mutex
	stored map[string][]byte
	byRef  map[string]map[string]any
	total  int
	next   int
}

func newMemEndpoint(idem bool) *memEndpoint {
	return &memEndpoint{idem: idem, stored: map[string][]byte{}, byRef: map[string]map[string]any{}, total: 7}
}

func (m *memEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/count":
		m.mu.Lock()
		n := m.total
		m.mu.Unlock()
		answer(200, map[string]any{"count": n})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/orders/by-ref/"):
		m.mu.Lock()
		data := map[string]any{}
		for id, o := range m.byRef[strings.TrimPrefix(r.URL.Path, "/orders/by-ref/")] {
			data[id] = o
		}
		m.mu.Unlock()
		answer(200, map[string]any{"data": data})
	case r.Method == http.MethodPost && r.URL.Path == "/orders":
		key := strings.Trim(r.Header.Get("Idempotency-Key"), `"`) // an sf-string or a token
		var body struct {
			Ref    string  `json:"ref"`
			Amount float64 `json:"amount"`
			Order  float64 `json:"order"`
			Trace  string  `json:"trace"`
		}
		switch {
		case key == "" || len(key) > 64 || (m.uuidKeys && !uuidText.MatchString(key)):
			answer(400, map[string]any{"error": "bad idempotency key"})
			return
		case json.NewDecoder(r.Body).Decode(&body) != nil || body.Ref == "" || body.Order < 1 || !uuidText.MatchString(body.Trace):
			answer(422, map[string]any{"error": "bad body"})
			return
		case body.Amount < 0:
			answer(400, map[string]any{"error": "amount must be positive"})
			return
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if stored, ok := m.stored[key]; ok && m.idem {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			w.Write(stored)
			return
		}
		m.next++
		m.total++
		id := fmt.Sprintf("ord_%d", m.next)
		if m.byRef[body.Ref] == nil {
			m.byRef[body.Ref] = map[string]any{}
		}
		m.byRef[body.Ref][id] = map[string]any{"id": id, "amount": body.Amount}
		if m.sinkURL != "" {
			for _, cmd := range []string{"charge", "receipt"} {
				m.callSink(r.Context(), key, cmd, id)
			}
		}
		raw, _ := json.Marshal(map[string]any{"id": id, "ref": body.Ref})
		m.stored[key] = raw
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		w.Write(raw)
	default:
		answer(404, map[string]any{"error": "no such route"})
	}
}

// callSink posts one effect to the sink (bounded by 2 s).
func (m *memEndpoint) callSink(ctx context.Context, key, cmd, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	raw, _ := json.Marshal(map[string]string{"idempotency_key": key, "command": cmd, "command_id": id})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.sinkURL+sink.PathEffects, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// memDescribed is memEndpoint as a target describes it: every kind of
// unique value in the body, an invalid amount, and the count read given.
func memDescribed(count *CountRead) *Endpoint {
	return &Endpoint{Path: "/orders", ID: "id", Count: count,
		Body:    map[string]any{"ref": "ref-{{unique}}", "amount": 5.0, "order": "{{unique:int}}", "trace": "{{unique:uuid}}"},
		Invalid: map[string]any{"amount": -1.0}}
}

// runMem runs the chaos workload against m behind a fault proxy for
// 1.5 s, with lost responses and storms of 200, and judges it.
func runMem(t *testing.T, m *memEndpoint, ep *Endpoint, s *sink.Sink, seed uint64) (*WorkloadResult, checker.Report) {
	t.Helper()
	faults.SilenceToxiproxy()
	hs := httptest.NewServer(m)
	t.Cleanup(hs.Close)
	network, err := faults.NewNetwork(strings.TrimPrefix(hs.URL, "http://"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { network.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fs := []faults.Fault{&faults.LostResponse{Network: network}, &faults.DuplicateStorm{Min: 2, Max: 3, Do: func(context.Context, int) {}}}
	res, err := RunWorkload(ctx, WorkloadConfig{BaseURL: network.URL(), Endpoint: *ep, Sink: s, Seed: seed, Duration: 1500 * time.Millisecond,
		Workers: 8, Faults: fs, StormMin: 200, StormMax: 220, RequestTimeout: 500 * time.Millisecond, DrainTimeout: 10 * time.Second,
		ScheduleOptions: faults.ScheduleOptions{MinHold: 100 * time.Millisecond, MaxHold: 300 * time.Millisecond, MinGap: 50 * time.Millisecond, MaxGap: 150 * time.Millisecond}})
	if err != nil {
		t.Fatalf("RunWorkload: %v", err)
	}
	return res, Check(res.History, res.Ledger, res.Record, CheckOptions{Undrained: !res.Drained})
}

// An endpoint without an effect sink whose count read counts everything
// it created (difference): a correct one ends with no anomaly and a
// decided verdict, its creations within [answered 2xx, answered 2xx +
// unknown outcome]; its keys follow the published format (UUIDs), which it
// enforces.
func TestChaosDifferenceCountCorrectEndpointPasses(t *testing.T) {
	m := newMemEndpoint(true)
	m.uuidKeys = true
	ep := memDescribed(&CountRead{Path: "/count", Pointer: "/count", Difference: true})
	ep.KeySpec = &KeySpec{UUID: true}
	res, rep := runMem(t, m, ep, nil, 21)
	hiMustPass(t, res, rep)
	tot := res.Record.Total
	if tot == nil || tot.Before != 7 || tot.BeforeErr != "" || tot.AfterErr != "" {
		t.Fatalf("total %+v", tot)
	}
	t.Logf("%d logical requests (%d answered 2xx, %d refused, %d unsettled), %d deliveries, %d storms; count %d → %d",
		res.Requests, res.Answered, res.Refused, res.Unsettled, len(res.History.Ops), res.Storms, tot.Before, tot.After)
	if d := tot.After - tot.Before; d < res.Answered || d > res.Answered+res.Unsettled || res.Answered == 0 {
		t.Errorf("created %d, %d answered 2xx, %d unsettled", d, res.Answered, res.Unsettled)
	}
	if res.Storms == 0 || res.Refused == 0 || len(res.History.Ops) < res.Requests+200 {
		t.Errorf("%d storms, %d refused, %d deliveries of %d requests", res.Storms, res.Refused, len(res.History.Ops), res.Requests)
	}
	for _, q := range res.Record.Requests {
		if why := ep.KeySpec.Allows(q.IdempotencyKey); why != "" {
			t.Fatalf("key %q: %s", q.IdempotencyKey, why)
		}
	}
	lost := 0
	for _, op := range res.History.Ops {
		if op.Output.Status == 0 {
			lost++
		}
	}
	if lost == 0 {
		t.Error("no answer was lost: the range was not exercised")
	}
}

// The same endpoint executing every delivery: the count grew past what
// the logical requests may have created.
func TestChaosDifferenceCountDuplicateChargerIsCaught(t *testing.T) {
	m := newMemEndpoint(false)
	_, rep := runMem(t, m, memDescribed(&CountRead{Path: "/count", Pointer: "/count", Difference: true}), nil, 22)
	hiMustFail(t, rep, RuleRetryIETF, ModelEffects, "GET /count counted 7 before the run", "over the upper bound of")
}

// A count per request, an object at a pointer ({"data": {id: order}}):
// one member per request answered 2xx on a correct endpoint; two and more
// on the duplicate charger.
func TestChaosPointerObjectCount(t *testing.T) {
	count := &CountRead{Path: "/orders/by-ref/ref-{{unique}}", Pointer: "/data"}
	res, rep := runMem(t, newMemEndpoint(true), memDescribed(count), nil, 23)
	hiMustPass(t, res, rep)
	one := 0
	for _, q := range res.Record.Requests {
		if !q.CountRead() || q.Counted > 1 {
			t.Fatalf("request %+v", q)
		}
		one += q.Counted
	}
	if one < res.Answered {
		t.Errorf("%d created, %d answered 2xx", one, res.Answered)
	}
	_, rep = runMem(t, newMemEndpoint(false), memDescribed(count), nil, 24)
	hiMustFail(t, rep, RuleRetryIETF, ModelEffects, "things (by the count read)")
}

// An endpoint that calls the sink twice per execution: no anomaly when it
// executes once per key (one execution is two effects, learnt from the
// requests delivered once), a second execution's effects when it executes
// every delivery.
func TestChaosTwoSinkCallsPerExecution(t *testing.T) {
	count := &CountRead{Path: "/count", Pointer: "/count", Difference: true}
	for _, idem := range []bool{true, false} {
		t.Run(fmt.Sprintf("idem=%t", idem), func(t *testing.T) {
			s, err := sink.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			m := newMemEndpoint(idem)
			m.sinkURL = s.URL()
			res, rep := runMem(t, m, memDescribed(count), s, 25)
			if !idem {
				hiMustFail(t, rep, RuleRetryIETF, ModelEffects, "times at the sink", "the effects of one execution (2, the most any of")
				return
			}
			hiMustPass(t, res, rep)
			if d := rep.Detail.(*CheckDetail); d.EffectsPerExecution != 2 || d.LearntFrom == 0 {
				t.Errorf("detail %+v", d)
			}
			if len(res.Ledger.Effects) != 2*(res.Record.Total.After-res.Record.Total.Before) {
				t.Errorf("%d effects for %d creations", len(res.Ledger.Effects), res.Record.Total.After-res.Record.Total.Before)
			}
		})
	}
}
