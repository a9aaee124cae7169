package atp

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// fakeATP is a small in-memory ATP site (docs/atp-binding.md) for the
// workload's tests, independent of the bundled server: it verifies signed
// intents, consumes nonces (a retry under the same key gets the row),
// evaluates preconditions and action_dedup_keys, charges through the
// harness's rail (create with an idempotency key, confirm), settles or
// compensates on the rail's answer, its callback or its reconciliation
// sweep, and signs receipts with its site key. Mutants:
//
//   - "double-charge": an execute of a row that is executing or settled
//     charges again (a new payment intent, confirmed);
//   - "no-reconcile": no reconciliation sweep (an executing row whose rail
//     reply and callback were lost stays executing);
//   - "fresh-receipt": every answer of a settled row carries a receipt
//     signed anew (another issued_at).
//
// And one reading, not a bug: "nonce-reading" answers every replay of a
// signed intent 409 nonce_consumed, under the key it was authorized with
// too (DecisionNonceSameKey, reading "nonce").
type fakeATP struct {
	railURL  string
	mutant   string
	interval time.Duration
	hc       *http.Client
	siteKey  ed25519.PrivateKey

	mu      sync.Mutex
	agents  map[string]ed25519.PublicKey
	nonces  map[string]string // agent/nonce -> first consumed at
	rows    map[string]*fakeATPRow
	byPI    map[string]*fakeATPRow
	dedup   map[string]bool
	settled map[string]bool
	seq     int

	done chan struct{}
	wg   sync.WaitGroup
}

type fakeATPRow struct {
	key       string
	intent    Intent
	state     string
	body      json.RawMessage
	receipt   json.RawMessage
	pi        string
	expires   time.Time
	created   string
	updated   string
	resigning int
}

func newFakeATP(railURL, mutant string, interval time.Duration) (*fakeATP, *httptest.Server) {
	f := &fakeATP{railURL: railURL, mutant: mutant, interval: interval, hc: &http.Client{Timeout: 500 * time.Millisecond},
		siteKey: ed25519.NewKeyFromSeed(bytes.Repeat([]byte{42}, 32)),
		agents:  map[string]ed25519.PublicKey{}, nonces: map[string]string{}, rows: map[string]*fakeATPRow{},
		byPI: map[string]*fakeATPRow{}, dedup: map[string]bool{}, settled: map[string]bool{}, done: make(chan struct{})}
	if mutant != "no-reconcile" {
		f.wg.Go(f.sweeper)
	}
	return f, httptest.NewServer(f)
}

func (f *fakeATP) close() { close(f.done); f.wg.Wait() }

func atpNow() string { return FormatTime(time.Now()) }

func atpWriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func fakeSiteFail(w http.ResponseWriter, status int, code string) {
	atpWriteJSON(w, status, map[string]string{"error": code})
}

// doc renders a row (under f.mu).
func (f *fakeATP) doc(r *fakeATPRow) []byte {
	receipt := r.receipt
	if f.mutant == "fresh-receipt" && r.state == StateSettled {
		r.resigning++
		receipt = f.sign(r, ReceiptSettlement, fmt.Sprintf("2026-01-01T00:00:%02d.000Z", r.resigning%60))
	}
	if receipt == nil {
		receipt = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		IntentID       string          `json:"intent_id"`
		IdempotencyKey string          `json:"idempotency_key"`
		State          string          `json:"state"`
		Body           json.RawMessage `json:"body"`
		Receipt        json.RawMessage `json:"receipt"`
		CreatedAt      string          `json:"created_at"`
		UpdatedAt      string          `json:"updated_at"`
	}{r.intent.IntentID, r.key, r.state, r.body, receipt, r.created, r.updated})
	return b
}

func (f *fakeATP) answer(w http.ResponseWriter, status int, r *fakeATPRow) {
	f.mu.Lock()
	b := f.doc(r)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func (f *fakeATP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/health":
		io.WriteString(w, `{"ok":true}`)
	case p == PathConfig:
		atpWriteJSON(w, 200, map[string]any{"binding": Binding, "reconcile_interval_seconds": 60, "action_dedup_window_seconds": 600, "rail": f.railURL})
	case p == PathKeys:
		atpWriteJSON(w, 200, JWKSet{Keys: []JWK{NewJWK("site-1", f.siteKey.Public().(ed25519.PublicKey))}})
	case r.Method == http.MethodPut && strings.HasPrefix(p, PathAgents):
		f.register(w, r, strings.TrimPrefix(p, PathAgents))
	case r.Method == http.MethodPost && p == PathAuthorize:
		f.authorize(w, r)
	case r.Method == http.MethodPost && p == PathExecute:
		f.execute(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(p, PathIntents):
		f.mu.Lock()
		row := f.rows[strings.TrimPrefix(p, PathIntents)+" "+r.Header.Get(HeaderKey)]
		f.mu.Unlock()
		if row == nil {
			fakeSiteFail(w, 404, "not_found")
			return
		}
		f.answer(w, 200, row)
	case r.Method == http.MethodPost && p == PathRailEvents:
		var ev RailEvent
		json.NewDecoder(r.Body).Decode(&ev)
		f.resolve(ev.PaymentIntent.ID)
		w.WriteHeader(204)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeATP) register(w http.ResponseWriter, r *http.Request, id string) {
	var reg AgentRegistration
	if json.NewDecoder(r.Body).Decode(&reg) != nil {
		fakeSiteFail(w, 400, "bad_registration")
		return
	}
	pk, err := PublicKey(reg.PublicKey)
	if err != nil {
		fakeSiteFail(w, 400, "bad_key")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch old, ok := f.agents[id]; {
	case !ok:
		f.agents[id] = pk
		w.WriteHeader(201)
	case old.Equal(pk):
		w.WriteHeader(200)
	default:
		fakeSiteFail(w, 409, "agent_key_conflict")
	}
}

func (f *fakeATP) authorize(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(HeaderKey)
	if len(key) < KeyMin || len(key) > KeyMax {
		fakeSiteFail(w, 400, "idempotency_key_required")
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var in Intent
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if d.Decode(&in) != nil {
		fakeSiteFail(w, 400, "invalid_intent")
		return
	}
	f.mu.Lock()
	pk := f.agents[in.AgentID]
	f.mu.Unlock()
	if pk == nil || VerifyIntent(raw, pk) != nil {
		fakeSiteFail(w, 400, "invalid_signature")
		return
	}
	exp, err := ParseTime(in.ExpiresAt)
	if err != nil {
		fakeSiteFail(w, 400, "invalid_intent")
		return
	}
	var body bytes.Buffer
	json.Compact(&body, raw)
	f.mu.Lock()
	id := in.IntentID + " " + key
	if row := f.rows[id]; row != nil && f.mutant != "nonce-reading" {
		f.mu.Unlock()
		f.answer(w, 200, row) // a retry under the same key: the row
		return
	}
	if at, ok := f.nonces[in.AgentID+"/"+in.Nonce]; ok {
		f.mu.Unlock()
		atpWriteJSON(w, 409, map[string]string{"error": ErrNonceConsumed, "first_consumed_at": at})
		return
	}
	switch {
	case !time.Now().Before(exp):
		f.mu.Unlock()
		fakeSiteFail(w, 410, ErrIntentExpired)
		return
	case in.Precondition != nil && !f.settled[in.Precondition.IntentSettled]:
		f.mu.Unlock()
		fakeSiteFail(w, 422, "precondition_failed")
		return
	case in.ActionDedupKey != "" && f.dedup[in.AgentID+"/"+in.ActionDedupKey]:
		f.mu.Unlock()
		fakeSiteFail(w, 409, "action_dedup_conflict")
		return
	}
	t := atpNow()
	f.nonces[in.AgentID+"/"+in.Nonce] = t
	if in.ActionDedupKey != "" {
		f.dedup[in.AgentID+"/"+in.ActionDedupKey] = true
	}
	row := &fakeATPRow{key: key, intent: in, state: StateAuthorized, body: body.Bytes(), expires: exp, created: t, updated: t}
	f.rows[id] = row
	f.mu.Unlock()
	f.answer(w, 200, row)
}

func (f *fakeATP) execute(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get(HeaderKey)
	var ex Execute
	if json.NewDecoder(r.Body).Decode(&ex) != nil || len(key) < KeyMin {
		fakeSiteFail(w, 400, "invalid_request")
		return
	}
	f.mu.Lock()
	row := f.rows[ex.IntentID+" "+key]
	if row == nil {
		f.mu.Unlock()
		fakeSiteFail(w, 404, "not_authorized")
		return
	}
	state := row.state
	switch {
	case state == StateAuthorized && !time.Now().Before(row.expires):
		row.state, row.updated = StateExpired, atpNow()
		f.mu.Unlock()
		fakeSiteFail(w, 410, ErrIntentExpired)
		return
	case state == StateAuthorized:
		row.state, row.updated = StateExecuting, atpNow()
	}
	f.mu.Unlock()
	switch {
	case state == StateAuthorized:
		f.charge(row, true)
	case f.mutant == "double-charge" && (state == StateExecuting || state == StateSettled):
		f.charge(row, false)
	}
	f.mu.Lock()
	status := 200
	if row.state == StateExecuting {
		status = 202
	}
	f.mu.Unlock()
	f.answer(w, status, row)
}

// charge creates the row's payment intent (keyed: one per transaction;
// the double-charge mutant makes a new one) and confirms it.
func (f *fakeATP) charge(row *fakeATPRow, keyed bool) {
	pi, err := f.createPI(row, keyed)
	if err != nil {
		return // executing: a callback or the sweep resolves it
	}
	f.mu.Lock()
	if keyed {
		row.pi = pi
	}
	f.byPI[pi] = row
	f.mu.Unlock()
	var p RailPaymentIntent
	if f.rail(http.MethodPost, RailPathPaymentIntents+"/"+pi+"/confirm", nil, "", &p) == nil {
		f.apply(row, p)
	}
}

func (f *fakeATP) createPI(row *fakeATPRow, keyed bool) (string, error) {
	f.mu.Lock()
	in := row.intent
	f.mu.Unlock()
	idem := ""
	if keyed {
		idem = in.IntentID + "/" + row.key
	}
	var p RailPaymentIntent
	err := f.rail(http.MethodPost, RailPathPaymentIntents, map[string]any{"intent_id": in.IntentID, "amount": in.Amount, "currency": in.Currency, "payee": in.Payee}, idem, &p)
	return p.ID, err
}

func (f *fakeATP) rail(method, path string, body any, idem string, into any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, f.railURL+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("rail: %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}

// apply moves an executing row on the rail's word.
func (f *fakeATP) apply(row *fakeATPRow, p RailPaymentIntent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if row.state != StateExecuting {
		return
	}
	switch p.Status {
	case RailSucceeded:
		row.state, row.updated = StateSettled, atpNow()
		row.receipt = f.sign(row, ReceiptSettlement, row.updated)
		f.settled[row.intent.IntentID] = true
	case RailDeclined, RailCanceled, RailRefunded:
		row.state, row.updated = StateCompensated, atpNow()
		row.receipt = f.sign(row, ReceiptCompensation, row.updated)
	}
}

func (f *fakeATP) sign(row *fakeATPRow, typ, at string) json.RawMessage {
	b := map[string]any{"type": typ, "intent_id": row.intent.IntentID, "idempotency_key": row.key, "agent_id": row.intent.AgentID,
		"amount": row.intent.Amount, "currency": row.intent.Currency, "payee": row.intent.Payee, "issued_at": at}
	if typ == ReceiptSettlement {
		b["rail_reference"], b["state"] = row.pi, StateSettled
	} else {
		b["references_intent_id"], b["reason"], b["state"] = row.intent.IntentID, "declined", StateCompensated
	}
	body, _ := json.Marshal(b)
	r, _ := SignReceipt(body, "site-1", f.siteKey)
	return r
}

// resolve reads a payment intent at the rail (a callback is only a notice)
// and applies it.
func (f *fakeATP) resolve(pi string) {
	f.mu.Lock()
	row := f.byPI[pi]
	f.mu.Unlock()
	if row == nil {
		return
	}
	var p RailPaymentIntent
	if f.rail(http.MethodGet, RailPathPaymentIntents+"/"+pi, nil, "", &p) == nil {
		f.apply(row, p)
	}
}

// sweeper reconciles executing rows against the rail every interval: a
// payment intent never created is created (the same key: the same one)
// and confirmed; one left unconfirmed is confirmed; a decided one applied.
func (f *fakeATP) sweeper() {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-t.C:
		}
		f.mu.Lock()
		var todo []*fakeATPRow
		for _, r := range f.rows {
			if r.state == StateExecuting {
				todo = append(todo, r)
			}
		}
		f.mu.Unlock()
		for _, row := range todo {
			f.mu.Lock()
			pi := row.pi
			f.mu.Unlock()
			if pi == "" {
				f.charge(row, true)
				continue
			}
			var p RailPaymentIntent
			if f.rail(http.MethodGet, RailPathPaymentIntents+"/"+pi, nil, "", &p) != nil {
				continue
			}
			if p.Status == RailRequiresConfirmation {
				if f.rail(http.MethodPost, RailPathPaymentIntents+"/"+pi+"/confirm", nil, "", &p) != nil {
					continue
				}
			}
			f.apply(row, p)
		}
	}
}
