package atp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idscheck/idscheck/sink"
)

// The payment rail (docs/atp-binding.md, "The rail"): the ATP site charges
// through it, as through Stripe's PaymentIntents. A site creates a payment
// intent (no money moves), then confirms it (the charge); confirming one
// payment intent twice charges once, so its ID is the rail's idempotent
// reference. The rail counts money per ATP intent_id: a verdict on ATP is
// a verdict on charges. It can charge and lose its reply, decline, hold a
// confirm, answer slowly, and drop or delay its callback to the site.
//
// The harness hosts it on its effect sink (RailOf mounts it there, under
// RailPathPaymentIntents): the sink's faults (a partition of the proxy in
// front of it, its delay) reach the rail too, and its confirms are counted
// and held through the sink's machinery (sink.Relay).

// maxBody bounds a create's body.
const maxBody = 64 << 10

// maxHold bounds how long one callback is delayed.
const maxHold = 30 * time.Second

// PaymentIntent is the rail's document of one payment intent.
type PaymentIntent = RailPaymentIntent

// Charge is money the rail moved: one confirm that charged.
type Charge struct {
	Seq           int       `json:"seq"`
	PaymentIntent string    `json:"payment_intent"`
	IntentID      string    `json:"intent_id"`
	ChargeID      string    `json:"charge_id"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	At            time.Time `json:"at"`
	Refunded      bool      `json:"refunded"`
	LostReply     bool      `json:"lost_reply"` // the rail charged and dropped its answer
}

// RailCall is one call the rail received.
type RailCall struct {
	Seq           int       `json:"seq"`
	Op            string    `json:"op"` // create, confirm, cancel, get
	PaymentIntent string    `json:"payment_intent,omitempty"`
	IntentID      string    `json:"intent_id,omitempty"`
	Status        int       `json:"status"` // the HTTP status answered (0: dropped)
	At            time.Time `json:"at"`
}

// Callback is one callback the rail sent (or dropped).
type Callback struct {
	PaymentIntent string    `json:"payment_intent"`
	IntentID      string    `json:"intent_id"`
	Type          string    `json:"type"`
	Dropped       bool      `json:"dropped"`
	Status        int       `json:"status"` // the site's answer (0: none)
	Err           string    `json:"err,omitempty"`
	At            time.Time `json:"at"`
}

// Rail is a running payment rail, served by one effect sink (RailOf). Its
// methods are safe for concurrent use.
type Rail struct {
	sink   *sink.Sink
	mu     sync.Mutex
	closed bool // the sink closed: no more callbacks
	rail   rail
}

var (
	_ http.Handler = (*Rail)(nil)
	_ io.Closer    = (*Rail)(nil)
)

// rail is the rail's state (under Rail.mu).
type rail struct {
	pis        map[string]*PaymentIntent
	byCreate   map[string]string // the create's Idempotency-Key -> payment intent id
	charges    []Charge
	calls      []RailCall
	callbacks  []Callback
	lose       int             // the next lose confirms that charge drop their reply
	decline    map[string]bool // intent ids whose confirms decline
	refuse     map[string]bool // intent ids whose confirms answer 503 without acting
	down       map[string]bool // intent ids whose payment intents are answered 503 but their creation
	callback   []string        // the site's callback URLs, one per replica (none: none sent)
	cbNext     int             // the replica the next callback goes to
	cbDrop     int             // the next cbDrop callbacks are dropped
	cbDropAll  bool
	cbDelay    time.Duration
	cbInflight int
}

func newRail() rail {
	return rail{pis: map[string]*PaymentIntent{}, byCreate: map[string]string{}, decline: map[string]bool{}, refuse: map[string]bool{}, down: map[string]bool{}}
}

// RailOf returns the payment rail the effect sink s serves, mounting it
// under RailPathPaymentIntents on first use: every caller of one sink (the
// steps, the chaos workload, its faults) shares one rail. nil for a nil
// sink.
func RailOf(s *sink.Sink) *Rail {
	if s == nil {
		return nil
	}
	return s.Mount(RailPathPaymentIntents, func() http.Handler { return &Rail{sink: s, rail: newRail()} }).(*Rail)
}

// Close stops the rail's callbacks (the sink closes it when it closes).
func (s *Rail) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// SetCallback sets the URLs the rail calls back after each confirm that
// decided (the site's POST /api/atp/rail/events, on each of its
// replicas): the callbacks go round them, and one that cannot reach its
// replica is sent to the next; none (or only "") sends none.
func (s *Rail) SetCallback(urls ...string) {
	s.mu.Lock()
	s.rail.callback = nil
	for _, u := range urls {
		if u != "" {
			s.rail.callback = append(s.rail.callback, u)
		}
	}
	s.mu.Unlock()
}

// LoseReplies makes the next n confirms that charge drop their reply after
// charging.
func (s *Rail) LoseReplies(n int) {
	s.mu.Lock()
	s.rail.lose = n
	s.mu.Unlock()
}

// DropCallbacks makes the next n callbacks be dropped (not sent).
func (s *Rail) DropCallbacks(n int) {
	s.mu.Lock()
	s.rail.cbDrop = n
	s.mu.Unlock()
}

// DropAllCallbacks drops every callback while on.
func (s *Rail) DropAllCallbacks(on bool) {
	s.mu.Lock()
	s.rail.cbDropAll = on
	s.mu.Unlock()
}

// SetCallbackDelay delays every callback by d.
func (s *Rail) SetCallbackDelay(d time.Duration) {
	s.mu.Lock()
	s.rail.cbDelay = d
	s.mu.Unlock()
}

// Decline makes every confirm for the ATP intent decline (nothing charged).
func (s *Rail) Decline(intentID string) {
	s.mu.Lock()
	s.rail.decline[intentID] = true
	s.mu.Unlock()
}

// RefuseConfirms makes every confirm for the ATP intent answer 503 without
// acting (the rail is unavailable for it: nothing is charged), until
// release.
func (s *Rail) RefuseConfirms(intentID string) (release func()) {
	s.mu.Lock()
	s.rail.refuse[intentID] = true
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.rail.refuse, intentID)
		s.mu.Unlock()
	}
}

// Unreachable makes the rail answer 503, without acting, to every call
// about the ATP intent's payment intents (confirm, GET, cancel) but their
// creation, until release: the site can create one and learns nothing
// after, neither from a confirm nor when it reconciles.
func (s *Rail) Unreachable(intentID string) (release func()) {
	s.mu.Lock()
	s.rail.down[intentID] = true
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.rail.down, intentID)
		s.mu.Unlock()
	}
}

// downLocked answers 503 for a payment intent of an unreachable intent.
func (s *Rail) downLocked(w http.ResponseWriter, op string, p *PaymentIntent) bool {
	if p == nil || !s.rail.down[p.IntentID] {
		return false
	}
	s.railRecordLocked(op, p.ID, p.IntentID, http.StatusServiceUnavailable)
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the rail is unavailable"})
	return true
}

// Charges returns the money the rail moved for an intent, net of refunds:
// the number of charges not refunded.
func (s *Rail) Charges(intentID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.rail.charges {
		if c.IntentID == intentID && !c.Refunded {
			n++
		}
	}
	return n
}

// AllCharges returns every charge, refunded ones included, in order.
func (s *Rail) AllCharges() []Charge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Charge(nil), s.rail.charges...)
}

// Calls returns every rail call, in order.
func (s *Rail) Calls() []RailCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]RailCall(nil), s.rail.calls...)
}

// Callbacks returns every callback sent or dropped, in order.
func (s *Rail) Callbacks() []Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Callback(nil), s.rail.callbacks...)
}

// PaymentIntents returns the payment intents created for an ATP intent.
func (s *Rail) PaymentIntents(intentID string) []PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PaymentIntent
	for _, p := range s.rail.pis {
		if p.IntentID == intentID {
			out = append(out, *p)
		}
	}
	return out
}

// Confirms counts the confirm calls that reached the rail for an ATP intent
// (held ones included).
func (s *Rail) Confirms(intentID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sink.Arrived(confirmKey(intentID))
}

// WaitConfirms waits until n confirms for the intent have reached the rail
// (held ones included), or ctx ends.
func (s *Rail) WaitConfirms(ctx context.Context, intentID string, n int) error {
	return s.sink.WaitCalls(ctx, confirmKey(intentID), n)
}

// HoldConfirms holds the confirms of an ATP intent before they act, until
// release (or 30 s, or the sink's Close). A held confirm whose caller gives
// up acts at once: the request reached the rail.
func (s *Rail) HoldConfirms(intentID string) (release func()) {
	return s.sink.Hold(confirmKey(intentID))
}

// confirmKey is the key under which confirms are counted and held (it
// shares the sink's machinery; no sink key of a target's effect starts
// with it).
func confirmKey(intentID string) string { return "rail-confirm:" + intentID }

// ServeHTTP serves the rail's routes (mounted on the sink).
func (s *Rail) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, RailPathPaymentIntents), "/")
	parts := strings.Split(rest, "/")
	switch {
	case r.Method == http.MethodPost && rest == "":
		s.railCreate(w, r)
	case r.Method == http.MethodGet && len(parts) == 1 && rest != "":
		s.railGet(w, parts[0])
	case r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "confirm":
		s.railConfirm(w, r, parts[0])
	case r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "cancel":
		s.railCancel(w, parts[0])
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "the rail serves POST /rail/payment_intents, GET /rail/payment_intents/{id}, POST /rail/payment_intents/{id}/confirm and /cancel"})
	}
}

func (s *Rail) railRecordLocked(op, pi, intent string, status int) {
	s.rail.calls = append(s.rail.calls, RailCall{Seq: len(s.rail.calls) + 1, Op: op, PaymentIntent: pi, IntentID: intent, Status: status, At: time.Now()})
}

func (s *Rail) railCreate(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	var b struct {
		IntentID string `json:"intent_id"`
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
		Payee    string `json:"payee"`
	}
	refused := ""
	switch {
	case err != nil || len(raw) > maxBody:
		refused = "unreadable or oversized body"
	case json.Unmarshal(raw, &b) != nil:
		refused = "body is not a JSON object"
	case b.IntentID == "":
		refused = "intent_id missing"
	case b.Amount <= 0:
		refused = "amount must be a positive integer"
	case b.Currency == "":
		refused = "currency missing"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if refused != "" {
		s.railRecordLocked("create", "", b.IntentID, http.StatusBadRequest)
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": refused})
		return
	}
	key := r.Header.Get(sink.HeaderKey)
	if id, ok := s.rail.byCreate[key]; ok && key != "" {
		s.railRecordLocked("create", id, b.IntentID, http.StatusOK)
		writeJSON(w, http.StatusOK, s.rail.pis[id])
		return
	}
	p := &PaymentIntent{ID: "pi_" + newID(), IntentID: b.IntentID, Status: RailRequiresConfirmation, Amount: b.Amount, Currency: b.Currency, Payee: b.Payee}
	s.rail.pis[p.ID] = p
	if key != "" {
		s.rail.byCreate[key] = p.ID
	}
	s.railRecordLocked("create", p.ID, p.IntentID, http.StatusCreated)
	writeJSON(w, http.StatusCreated, p)
}

func (s *Rail) railGet(w http.ResponseWriter, id string) {
	s.mu.Lock()
	p, ok := s.rail.pis[id]
	if s.downLocked(w, "get", p) {
		s.mu.Unlock()
		return
	}
	var doc PaymentIntent
	status := http.StatusNotFound
	if ok {
		doc, status = *p, http.StatusOK
	}
	s.railRecordLocked("get", id, doc.IntentID, status)
	s.mu.Unlock()
	if !ok {
		writeJSON(w, status, map[string]any{"error": "no such payment intent"})
		return
	}
	writeJSON(w, status, doc)
}

func (s *Rail) railConfirm(w http.ResponseWriter, r *http.Request, id string) {
	s.mu.Lock()
	p, ok := s.rail.pis[id]
	if !ok {
		s.railRecordLocked("confirm", id, "", http.StatusNotFound)
		s.mu.Unlock()
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such payment intent"})
		return
	}
	if s.downLocked(w, "confirm", p) {
		s.mu.Unlock()
		return
	}
	if s.rail.refuse[p.IntentID] {
		s.railRecordLocked("confirm", id, p.IntentID, http.StatusServiceUnavailable)
		s.mu.Unlock()
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the rail is unavailable"})
		return
	}
	key := confirmKey(p.IntentID)
	s.mu.Unlock()
	// Counted as arrived at once (WaitConfirms), held, delayed: the sink's
	// machinery, which records it as a call that is no effect.
	s.sink.Relay(r.Context(), key, "rail.confirm", id)
	s.mu.Lock()
	var event string
	lost := false
	if p.Status == RailRequiresConfirmation {
		if s.rail.decline[p.IntentID] {
			p.Status, event = RailDeclined, "payment_intent.declined"
		} else {
			p.Status, p.ChargeID, event = RailSucceeded, "ch_"+newID(), "payment_intent.succeeded"
			c := Charge{Seq: len(s.rail.charges) + 1, PaymentIntent: p.ID, IntentID: p.IntentID, ChargeID: p.ChargeID, Amount: p.Amount, Currency: p.Currency, At: time.Now()}
			if s.rail.lose > 0 {
				s.rail.lose--
				s.sink.NoteLostReply()
				c.LostReply, lost = true, true
			}
			s.rail.charges = append(s.rail.charges, c)
		}
	}
	doc := *p
	status := http.StatusOK
	if lost {
		status = 0
	}
	s.railRecordLocked("confirm", p.ID, p.IntentID, status)
	var cb *Callback
	var urls []string
	if n := len(s.rail.callback); n > 0 {
		urls = append(s.rail.callback[s.rail.cbNext%n:], s.rail.callback[:s.rail.cbNext%n]...)
		s.rail.cbNext++
	}
	drop, cbDelay := false, s.rail.cbDelay
	if event != "" && len(urls) > 0 {
		cb = &Callback{PaymentIntent: p.ID, IntentID: p.IntentID, Type: event, At: time.Now()}
		if s.rail.cbDropAll || s.rail.cbDrop > 0 {
			if !s.rail.cbDropAll {
				s.rail.cbDrop--
			}
			drop, cb.Dropped = true, true
			s.rail.callbacks = append(s.rail.callbacks, *cb)
		} else if !s.closed {
			s.rail.cbInflight++
		}
	}
	closed := s.closed
	s.mu.Unlock()
	if cb != nil && !drop && !closed {
		go s.sendCallback(urls, *cb, doc, cbDelay)
	}
	if lost {
		sink.DropConnection(w)
		return
	}
	writeJSON(w, status, doc)
}

// sendCallback posts one callback to the site's first replica in urls,
// and to the next when it cannot be reached (bounded: 5 s each).
func (s *Rail) sendCallback(urls []string, cb Callback, doc PaymentIntent, delay time.Duration) {
	defer func() {
		s.mu.Lock()
		s.rail.cbInflight--
		s.rail.callbacks = append(s.rail.callbacks, cb)
		s.mu.Unlock()
	}()
	if delay > 0 {
		time.Sleep(min(delay, maxHold))
	}
	body, _ := json.Marshal(map[string]any{"type": cb.Type, "payment_intent": doc})
	for _, url := range urls {
		status, err := postCallback(url, body)
		cb.At = time.Now()
		cb.Status, cb.Err = status, ""
		if err == nil {
			return
		}
		cb.Err = err.Error()
	}
}

// postCallback posts body to url (bounded: 5 s) and returns the status.
func postCallback(url string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	return resp.StatusCode, nil
}

func (s *Rail) railCancel(w http.ResponseWriter, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.rail.pis[id]
	if s.downLocked(w, "cancel", p) {
		return
	}
	if !ok {
		s.railRecordLocked("cancel", id, "", http.StatusNotFound)
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no such payment intent"})
		return
	}
	switch p.Status {
	case RailRequiresConfirmation:
		p.Status = RailCanceled
	case RailSucceeded:
		p.Status = RailRefunded
		for i := range s.rail.charges {
			if s.rail.charges[i].PaymentIntent == p.ID {
				s.rail.charges[i].Refunded = true
			}
		}
	}
	s.railRecordLocked("cancel", p.ID, p.IntentID, http.StatusOK)
	writeJSON(w, http.StatusOK, p)
}

// Summary describes the rail's counts in one line (for logs).
func (s *Rail) Summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	refunded := 0
	for _, c := range s.rail.charges {
		if c.Refunded {
			refunded++
		}
	}
	return fmt.Sprintf("%d payment intents, %d charges (%d refunded), %d callbacks", len(s.rail.pis), len(s.rail.charges), refunded, len(s.rail.callbacks))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// newID returns a fresh random ID (the suffix of pi_… and ch_…).
func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
