// Package fakerail is an in-process payment rail of the ATP binding
// (docs/atp-binding.md, "The rail") for the tests and the load generator of
// sut/atp: Stripe-like payment intents, created (nothing charged), then
// confirmed (charged once per payment intent), canceled (refunded when
// charged). It counts money per intent_id and can misbehave on demand:
// decline, lose its reply after acting, hold confirms or cancels, be
// unreachable.
//
// It is not the harness's rail: the server and the harness do not share
// code, and this one exists only for the server's own tests.
package fakerail

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// PI is a payment intent.
type PI struct {
	ID       string `json:"id"`
	IntentID string `json:"intent_id"`
	Status   string `json:"status"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Payee    string `json:"payee,omitempty"`
	ChargeID string `json:"charge_id,omitempty"`
}

// Rail is the fake rail; it is an http.Handler. Its methods are safe for
// concurrent use.
type Rail struct {
	mu       sync.Mutex
	n        int
	pis      map[string]*PI
	byKey    map[string]string // Idempotency-Key → payment intent id
	charges  map[string]int    // intent_id → confirms that moved money
	refunds  map[string]int    // intent_id → refunds
	creates  map[string]int    // intent_id → payment intents created
	confirms map[string]int    // intent_id → confirm calls
	cancels  int
	gets     int

	down        bool
	loseCreate  int
	loseConfirm int
	failConfirm int // answer 503 without acting
	decline     map[string]bool
	hold        chan struct{}
	arrived     chan string // intent_id of every confirm, as it arrives
	holdCancel  chan struct{}
	cancelsIn   chan string // intent_id of every cancel, as it arrives

	callbackURL string
	cbWG        sync.WaitGroup
	hc          *http.Client
}

// New returns an empty rail.
func New() *Rail {
	return &Rail{pis: map[string]*PI{}, byKey: map[string]string{}, charges: map[string]int{}, refunds: map[string]int{},
		creates: map[string]int{}, confirms: map[string]int{}, decline: map[string]bool{}, arrived: make(chan string, 4096),
		cancelsIn: make(chan string, 4096),
		hc:        &http.Client{Timeout: 5 * time.Second}}
}

// SetDown makes the rail unreachable (every connection is closed without
// an answer) or reachable again.
func (r *Rail) SetDown(down bool) { r.mu.Lock(); r.down = down; r.mu.Unlock() }

// LoseCreates: the next n creations act, then lose their reply.
func (r *Rail) LoseCreates(n int) { r.mu.Lock(); r.loseCreate = n; r.mu.Unlock() }

// LoseConfirms: the next n confirms act (charge), then lose their reply.
func (r *Rail) LoseConfirms(n int) { r.mu.Lock(); r.loseConfirm = n; r.mu.Unlock() }

// FailConfirms: the next n confirms answer 503 and do nothing.
func (r *Rail) FailConfirms(n int) { r.mu.Lock(); r.failConfirm = n; r.mu.Unlock() }

// Decline makes every confirm of intentID's payment intents decline.
func (r *Rail) Decline(intentID string) { r.mu.Lock(); r.decline[intentID] = true; r.mu.Unlock() }

// HoldConfirms makes confirms wait (before acting) until Release.
func (r *Rail) HoldConfirms() { r.mu.Lock(); r.hold = make(chan struct{}); r.mu.Unlock() }

// Release lets held confirms go on.
func (r *Rail) Release() {
	r.mu.Lock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
	r.mu.Unlock()
}

// WaitConfirms waits (at most d) for n confirms to arrive; it returns how
// many did.
func (r *Rail) WaitConfirms(n int, d time.Duration) int { return waitArrivals(r.arrived, n, d) }

// HoldCancels makes cancels wait (before acting) until ReleaseCancels.
func (r *Rail) HoldCancels() { r.mu.Lock(); r.holdCancel = make(chan struct{}); r.mu.Unlock() }

// ReleaseCancels lets held cancels go on.
func (r *Rail) ReleaseCancels() {
	r.mu.Lock()
	if r.holdCancel != nil {
		close(r.holdCancel)
		r.holdCancel = nil
	}
	r.mu.Unlock()
}

// WaitCancels waits (at most d) for n cancels to arrive; it returns how
// many did.
func (r *Rail) WaitCancels(n int, d time.Duration) int { return waitArrivals(r.cancelsIn, n, d) }

func waitArrivals(c <-chan string, n int, d time.Duration) int {
	got := 0
	t := time.NewTimer(d)
	defer t.Stop()
	for got < n {
		select {
		case <-c:
			got++
		case <-t.C:
			return got
		}
	}
	return got
}

// SetCallback makes the rail call POST {site}/api/atp/rail/events after
// every confirm that acted ("" stops it), in the background.
func (r *Rail) SetCallback(site string) {
	r.mu.Lock()
	r.callbackURL = strings.TrimRight(site, "/")
	r.mu.Unlock()
}

// WaitCallbacks waits for the callbacks under way.
func (r *Rail) WaitCallbacks() { r.cbWG.Wait() }

// Charges is the money moved for intentID: charges net of refunds.
func (r *Rail) Charges(intentID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.charges[intentID] - r.refunds[intentID]
}

// Created is the number of payment intents created for intentID.
func (r *Rail) Created(intentID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.creates[intentID]
}

// Confirms is the number of confirm calls for intentID's payment intents.
func (r *Rail) Confirms(intentID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.confirms[intentID]
}

// Totals are the rail's counts: charges net of refunds, and the intents
// charged at least once (net).
func (r *Rail) Totals() (charges, intents int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, n := range r.charges {
		net := n - r.refunds[id]
		charges += net
		if net > 0 {
			intents++
		}
	}
	return charges, intents
}

// PaymentIntent returns a copy of payment intent id.
func (r *Rail) PaymentIntent(id string) (PI, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pis[id]
	if !ok {
		return PI{}, false
	}
	return *p, true
}

// PaymentIntents returns copies of intentID's payment intents.
func (r *Rail) PaymentIntents(intentID string) []PI {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []PI
	for i := 1; i <= r.n; i++ {
		if p := r.pis[fmt.Sprintf("pi_%06d", i)]; p != nil && p.IntentID == intentID {
			out = append(out, *p)
		}
	}
	return out
}

func hangUp(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}

func reply(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

func (r *Rail) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	down := r.down
	r.mu.Unlock()
	if down {
		hangUp(w)
		return
	}
	rest, ok := strings.CutPrefix(req.URL.Path, "/rail/payment_intents")
	if !ok {
		reply(w, 404, map[string]string{"error": "not_found"})
		return
	}
	switch {
	case rest == "" && req.Method == "POST":
		r.create(w, req)
	case strings.HasSuffix(rest, "/confirm") && req.Method == "POST":
		r.confirm(w, strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/confirm"))
	case strings.HasSuffix(rest, "/cancel") && req.Method == "POST":
		r.cancel(w, strings.TrimSuffix(strings.TrimPrefix(rest, "/"), "/cancel"))
	case strings.HasPrefix(rest, "/") && req.Method == "GET":
		r.mu.Lock()
		r.gets++
		p, ok := r.pis[rest[1:]]
		var c PI
		if ok {
			c = *p
		}
		r.mu.Unlock()
		if !ok {
			reply(w, 404, map[string]string{"error": "no_such_payment_intent"})
			return
		}
		reply(w, 200, c)
	default:
		reply(w, 405, map[string]string{"error": "method_not_allowed"})
	}
}

func (r *Rail) create(w http.ResponseWriter, req *http.Request) {
	var in struct {
		IntentID string `json:"intent_id"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
		Payee    string `json:"payee"`
	}
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil || in.IntentID == "" || in.Amount <= 0 || in.Currency == "" {
		reply(w, 400, map[string]string{"error": "invalid_request"})
		return
	}
	key := req.Header.Get("Idempotency-Key")
	r.mu.Lock()
	status := 201
	var p *PI
	if id, ok := r.byKey[key]; ok && key != "" {
		p, status = r.pis[id], 200
	} else {
		r.n++
		p = &PI{ID: fmt.Sprintf("pi_%06d", r.n), IntentID: in.IntentID, Status: "requires_confirmation", Amount: in.Amount,
			Currency: in.Currency, Payee: in.Payee}
		r.pis[p.ID] = p
		r.creates[in.IntentID]++
		if key != "" {
			r.byKey[key] = p.ID
		}
	}
	c := *p
	lose := r.loseCreate > 0
	if lose {
		r.loseCreate--
	}
	r.mu.Unlock()
	if lose {
		hangUp(w)
		return
	}
	reply(w, status, c)
}

func (r *Rail) confirm(w http.ResponseWriter, id string) {
	r.mu.Lock()
	p, ok := r.pis[id]
	if !ok {
		r.mu.Unlock()
		reply(w, 404, map[string]string{"error": "no_such_payment_intent"})
		return
	}
	r.confirms[p.IntentID]++
	hold := r.hold
	r.mu.Unlock()
	select {
	case r.arrived <- p.IntentID:
	default:
	}
	if hold != nil {
		<-hold
	}
	r.mu.Lock()
	if r.failConfirm > 0 {
		r.failConfirm--
		r.mu.Unlock()
		reply(w, 503, map[string]string{"error": "unavailable"})
		return
	}
	acted := false
	if p.Status == "requires_confirmation" {
		acted = true
		if r.decline[p.IntentID] {
			p.Status = "declined"
		} else {
			p.Status = "succeeded"
			p.ChargeID = "ch_" + strings.TrimPrefix(p.ID, "pi_")
			r.charges[p.IntentID]++
		}
	}
	c := *p
	lose := r.loseConfirm > 0
	if lose {
		r.loseConfirm--
	}
	cb := r.callbackURL
	r.mu.Unlock()
	if acted && cb != "" {
		r.cbWG.Add(1)
		go func() {
			defer r.cbWG.Done()
			typ := "payment_intent.succeeded"
			if c.Status == "declined" {
				typ = "payment_intent.declined"
			}
			b, _ := json.Marshal(map[string]any{"type": typ, "payment_intent": c})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", cb+"/api/atp/rail/events", bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			if res, err := r.hc.Do(req); err == nil {
				res.Body.Close()
			}
		}()
	}
	if lose {
		hangUp(w)
		return
	}
	reply(w, 200, c)
}

func (r *Rail) cancel(w http.ResponseWriter, id string) {
	r.mu.Lock()
	p, ok := r.pis[id]
	if !ok {
		r.mu.Unlock()
		reply(w, 404, map[string]string{"error": "no_such_payment_intent"})
		return
	}
	r.cancels++
	hold := r.holdCancel
	r.mu.Unlock()
	select {
	case r.cancelsIn <- p.IntentID:
	default:
	}
	if hold != nil {
		<-hold
	}
	r.mu.Lock()
	switch p.Status {
	case "requires_confirmation":
		p.Status = "canceled"
	case "succeeded":
		p.Status = "refunded"
		r.refunds[p.IntentID]++
	}
	c := *p
	r.mu.Unlock()
	reply(w, 200, c)
}
