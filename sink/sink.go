// Package sink is the effect sink the harness hosts: the stand-in for every
// external provider (a card processor, a mailer, a legacy ledger) of a
// target whose commands have external side effects. The target calls it for
// each effect (its API is documented with the bindings, in docs/); the sink counts
// what it did per idempotency key and per call, so a verdict is about
// effects, not responses.
//
// The sink honours an Idempotency-Key header only for the commands it is
// told are shielded by provider-side idempotency (HonourKeys); for every
// other command it acts on every call, as a legacy provider does. It can be
// told to act and lose its reply, to answer slowly, or to hold the calls
// of one key until released (a handler held open); partitions are
// toxiproxy's job, in front of it.
package sink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Paths of the sink's API (documented with the bindings, in docs/).
const (
	PathEffects = "/effects" // POST: act; GET /effects/{key}: what was done for key
	HeaderKey   = "Idempotency-Key"
)

// maxBody bounds a call's body.
const maxBody = 64 << 10

// maxHold bounds how long a held call waits for its release.
const maxHold = 30 * time.Second

// Call is one POST the sink received.
type Call struct {
	Seq       int       `json:"seq"`
	Key       string    `json:"key"`     // the body's idempotency_key
	Header    string    `json:"header"`  // the Idempotency-Key header, if any
	Command   string    `json:"command"` // the body's command (registry name)
	CommandID string    `json:"command_id,omitempty"`
	Tenant    string    `json:"tenant_id,omitempty"`
	EffectID  string    `json:"effect_id"`
	New       bool      `json:"new"`     // a new effect (false: an S1 replay, nothing happened)
	Lost      bool      `json:"lost"`    // the sink acted and dropped its reply
	Refused   string    `json:"refused"` // why the call was refused without acting ("" when it acted)
	At        time.Time `json:"at"`

	relayed bool // a mounted handler's call (Relay), not an effect's
}

// Effect is one effect the sink performed.
type Effect struct {
	Key       string    `json:"key"`
	Command   string    `json:"command"`
	EffectID  string    `json:"effect_id"`
	At        time.Time `json:"at"`
	Tenant    string    `json:"tenant_id,omitempty"`  // the body's tenant_id
	CommandID string    `json:"command_id,omitempty"` // the body's command_id
}

// Sink is a running effect sink. Its methods are safe for concurrent use.
type Sink struct {
	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	s1       map[string]bool     // commands whose Idempotency-Key is honoured
	byKey    map[string][]string // key -> effect ids, in order
	calls    []Call
	effects  []Effect
	lose     int            // the next lose POSTs act and drop their reply
	loseKey  map[string]int // key -> the next POSTs for it that act and drop their reply
	fail     int            // the next fail POSTs answer 503 without acting
	lost     int            // replies dropped so far
	delay    time.Duration  // every POST waits this long before answering
	holds    map[string]chan struct{}
	holdAll  chan struct{}  // non-nil: every POST waits for it (HoldAll)
	inflight map[string]int // POSTs per key that arrived and are not recorded yet
	tick     int            // counts every answered or dropped call, GETs included
	lostAt   map[string]int // key -> tick of its last dropped reply
	answerAt map[string]int // key -> tick of its last answered POST or GET
	waiters  []waiter
	closed   bool

	mounts []mounted // handlers served beside the sink's routes (Mount)

	// reads are the counts read since the last TakeReads, the latest
	// value of each: what a check saw at the sink, for its proof.
	reads  []Read
	readAt map[string]int // What+"\x00"+Key -> index in reads
}

// Read is one count read at the sink (Effects, Calls, Arrived,
// TotalEffects, TotalArrivals) and the value it returned.
type Read struct {
	What string `json:"what"`          // "effects", "calls", "arrivals"
	Key  string `json:"key,omitempty"` // "": in all
	N    int    `json:"n"`
}

// maxReads bounds the counts kept between two TakeReads.
const maxReads = 64

// readLocked notes a count read; a count read again keeps its latest value.
func (s *Sink) readLocked(what, key string, n int) {
	id := what + "\x00" + key
	if i, ok := s.readAt[id]; ok {
		s.reads[i].N = n
		return
	}
	if len(s.reads) >= maxReads {
		return
	}
	if s.readAt == nil {
		s.readAt = map[string]int{}
	}
	s.readAt[id] = len(s.reads)
	s.reads = append(s.reads, Read{What: what, Key: key, N: n})
}

// TakeReads returns the counts read since the last call, in the order first
// read, each with the latest value read, and forgets them: what a check
// read at the sink, for the proof of its verdict.
func (s *Sink) TakeReads() []Read {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.reads
	s.reads, s.readAt = nil, nil
	return out
}

type waiter struct {
	key string
	n   int
	ch  chan struct{}
}

// Start listens on addr (e.g. "127.0.0.1:0") and serves the sink.
func Start(addr string) (*Sink, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("effect sink: listen on %s: %w", addr, err)
	}
	s := &Sink{ln: ln, s1: map[string]bool{}, byKey: map[string][]string{}, holds: map[string]chan struct{}{}, inflight: map[string]int{}, loseKey: map[string]int{}, lostAt: map[string]int{}, answerAt: map[string]int{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// URL is the sink's base URL.
func (s *Sink) URL() string { return "http://" + s.ln.Addr().String() }

// Addr is the address it listens on.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Close stops the sink and releases every held call.
func (s *Sink) Close() error {
	s.mu.Lock()
	s.closed = true
	for k, ch := range s.holds {
		close(ch)
		delete(s.holds, k)
	}
	if s.holdAll != nil {
		close(s.holdAll)
		s.holdAll = nil
	}
	s.mu.Unlock()
	s.closeMounts()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	return nil
}

// HonourKeys makes the sink honour Idempotency-Key for these commands
// (those a registry shields with S1), replacing the previous set.
func (s *Sink) HonourKeys(commands ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.s1 = map[string]bool{}
	for _, c := range commands {
		s.s1[c] = true
	}
}

// LoseReplies makes the next n POSTs act, then drop the connection without
// an answer. LoseReplies(0) also clears every LoseReplyOf.
func (s *Sink) LoseReplies(n int) {
	s.mu.Lock()
	s.lose = n
	if n == 0 {
		clear(s.loseKey)
	}
	s.mu.Unlock()
}

// LoseReplyOf makes the next POST for key act, then drop the connection
// without an answer; POSTs for other keys (another command's retry, a
// resumer reconciling an earlier loss) are answered as usual.
func (s *Sink) LoseReplyOf(key string) {
	s.mu.Lock()
	s.loseKey[key] = 1
	s.mu.Unlock()
}

// FailNext makes the next n POSTs answer 503 without acting (the provider
// is down: nothing happened).
func (s *Sink) FailNext(n int) {
	s.mu.Lock()
	s.fail = n
	s.mu.Unlock()
}

// LostReplies returns how many replies the sink has dropped so far (calls
// that acted and answered nothing, LoseReplies).
func (s *Sink) LostReplies() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// SetDelay makes every POST wait d before it acts and answers (0: none).
func (s *Sink) SetDelay(d time.Duration) {
	s.mu.Lock()
	s.delay = d
	s.mu.Unlock()
}

// Hold makes the POSTs for key wait, before acting, until release is
// called (or 30 s pass, or the sink closes). Release is idempotent.
func (s *Sink) Hold(key string) (release func()) {
	s.mu.Lock()
	ch, ok := s.holds[key]
	if !ok {
		ch = make(chan struct{})
		s.holds[key] = ch
	}
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.holds[key] == ch {
				delete(s.holds, key)
				close(ch)
			}
			s.mu.Unlock()
		})
	}
}

// HoldAll makes every POST wait, before acting, until release is called
// (or 30 s pass, or the sink closes): for a target whose sink keys the
// harness does not know. Release is idempotent.
func (s *Sink) HoldAll() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.holdAll != nil {
		close(s.holdAll) // one hold at a time: the earlier one is released
	}
	s.holdAll = ch
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		if s.holdAll == ch { // not released yet, nor by Close
			s.holdAll = nil
			close(ch)
		}
		s.mu.Unlock()
	}
}

// WaitArrivals waits until at least n POSTs to /effects have arrived in
// all (held ones included), or ctx ends.
func (s *Sink) WaitArrivals(ctx context.Context, n int) error {
	deadline := time.NewTicker(5 * time.Millisecond)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		got := len(s.effectCalls())
		for _, v := range s.inflight {
			got += v
		}
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the effect sink saw %d calls, fewer than %d: %w", got, n, ctx.Err())
		case <-deadline.C:
		}
	}
}

// effectCalls are the recorded POSTs to /effects (not the calls of a
// mounted handler).
func (s *Sink) effectCalls() []Call {
	var out []Call
	for _, c := range s.calls {
		if !c.relayed {
			out = append(out, c)
		}
	}
	return out
}

// TotalArrivals returns how many POSTs to /effects have arrived in all,
// held ones included.
func (s *Sink) TotalArrivals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.effectCalls())
	for _, v := range s.inflight {
		n += v
	}
	s.readLocked("arrivals", "", n)
	return n
}

// TotalEffects returns how many effects the sink performed in all.
func (s *Sink) TotalEffects() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readLocked("effects", "", len(s.effects))
	return len(s.effects)
}

// WaitCalls waits until at least n POSTs for key have arrived (held ones
// included), or ctx ends.
func (s *Sink) WaitCalls(ctx context.Context, key string, n int) error {
	s.mu.Lock()
	if s.arrivedLocked(key) >= n {
		s.mu.Unlock()
		return nil
	}
	w := waiter{key: key, n: n, ch: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the effect sink saw fewer than %d calls for key %s: %w", n, key, ctx.Err())
	}
}

// arrivals counts POSTs per key as they arrive, before any hold.
func (s *Sink) arrivedLocked(key string) int {
	n := 0
	for _, c := range s.calls {
		if c.Key == key {
			n++
		}
	}
	return n + s.pendingLocked(key)
}

// pending counts POSTs for a key that arrived and have not been recorded.
func (s *Sink) pendingLocked(key string) int { return s.inflight[key] }

// Resolved reports whether the caller has settled every reply the sink
// lost for key: after the last dropped reply, it called again (POST) or
// asked what was done (GET /effects/{key}) and got an answer. True when no
// reply for key was lost.
func (s *Sink) Resolved(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostAt[key] == 0 || s.answerAt[key] > s.lostAt[key]
}

// Arrived returns how many POSTs for key have reached the sink, those held
// or not yet answered included.
func (s *Sink) Arrived(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.arrivedLocked(key)
	s.readLocked("arrivals", key, n)
	return n
}

// Effects returns how many effects the sink performed for key.
func (s *Sink) Effects(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readLocked("effects", key, len(s.byKey[key]))
	return len(s.byKey[key])
}

// Calls returns how many POSTs for key the sink answered or dropped
// (refused ones included).
func (s *Sink) Calls(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Key == key {
			n++
		}
	}
	s.readLocked("calls", key, n)
	return n
}

// AllCalls returns every recorded call, in order.
func (s *Sink) AllCalls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// AllEffects returns every effect performed, in order.
func (s *Sink) AllEffects() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Effect(nil), s.effects...)
}

// callBody is what a target sends (documented with the bindings, in docs/).
type callBody struct {
	TenantID       string          `json:"tenant_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	CommandID      string          `json:"command_id"`
	Command        string          `json:"command"`
	Args           json.RawMessage `json:"args"`
}

func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.mountFor(r.URL.Path); h != nil {
		h.ServeHTTP(w, r)
		return
	}
	switch {
	case r.URL.Path == "/health":
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	case r.Method == http.MethodPost && r.URL.Path == PathEffects:
		s.post(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, PathEffects+"/"):
		key := strings.TrimPrefix(r.URL.Path, PathEffects+"/")
		s.mu.Lock()
		ids := s.byKey[key]
		s.tick++
		s.answerAt[key] = s.tick
		s.mu.Unlock()
		if len(ids) == 0 {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "no effect for this key"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"effect_id": ids[0], "count": len(ids)})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "the effect sink serves POST /effects and GET /effects/{idempotency_key}"})
	}
}

func (s *Sink) post(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	var b callBody
	refused := ""
	switch {
	case err != nil:
		refused = "unreadable body: " + err.Error()
	case len(raw) > maxBody:
		refused = "body over 64 KiB"
	case json.Unmarshal(raw, &b) != nil:
		refused = "body is not a JSON object"
	case b.IdempotencyKey == "":
		refused = "idempotency_key missing"
	case b.Command == "":
		refused = "command missing"
	}
	failed := false
	if refused == "" {
		s.mu.Lock()
		if s.fail > 0 {
			s.fail--
			failed = true
		}
		s.mu.Unlock()
	}
	if failed {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "the provider is unavailable (nothing was done)"})
		return
	}
	header := r.Header.Get(HeaderKey)
	s.mu.Lock()
	s.inflight[b.IdempotencyKey]++
	s.notifyLocked()
	hold := s.holds[b.IdempotencyKey]
	if hold == nil {
		hold = s.holdAll
	}
	delay := s.delay
	s.mu.Unlock()
	if hold != nil && refused == "" {
		select {
		case <-hold:
		case <-r.Context().Done():
		case <-time.After(maxHold):
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
	}
	s.mu.Lock()
	s.inflight[b.IdempotencyKey]--
	c := Call{Seq: len(s.calls) + 1, Key: b.IdempotencyKey, Header: header, Command: b.Command, CommandID: b.CommandID, Tenant: b.TenantID, Refused: refused, At: time.Now()}
	status := http.StatusCreated
	if refused == "" {
		ids := s.byKey[c.Key]
		if header != "" && header == c.Key && s.s1[c.Command] && len(ids) > 0 {
			c.EffectID, status = ids[0], http.StatusOK
		} else {
			c.EffectID, c.New = newID(), true
			s.byKey[c.Key] = append(ids, c.EffectID)
			s.effects = append(s.effects, Effect{Key: c.Key, Command: c.Command, EffectID: c.EffectID, At: c.At, Tenant: c.Tenant, CommandID: c.CommandID})
		}
		switch {
		case s.loseKey[c.Key] > 0:
			s.loseKey[c.Key]--
			s.lost++
			c.Lost = true
		case s.lose > 0:
			s.lose--
			s.lost++
			c.Lost = true
		}
	}
	s.calls = append(s.calls, c)
	s.tick++
	if c.Lost {
		s.lostAt[c.Key] = s.tick
	} else {
		s.answerAt[c.Key] = s.tick
	}
	s.notifyLocked()
	s.mu.Unlock()
	switch {
	case refused != "":
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": refused})
	case c.Lost:
		dropConnection(w)
	default:
		writeJSON(w, status, map[string]any{"effect_id": c.EffectID})
	}
}

// notifyLocked wakes the WaitCalls waiters whose count is reached.
func (s *Sink) notifyLocked() {
	kept := s.waiters[:0]
	for _, w := range s.waiters {
		if s.arrivedLocked(w.key) >= w.n {
			close(w.ch)
			continue
		}
		kept = append(kept, w)
	}
	s.waiters = kept
}

// dropConnection closes the connection without an answer: the caller cannot
// tell whether the sink acted.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // a reset, not a clean close
	}
	conn.Close()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return "eff_" + hex.EncodeToString(b[:])
}
