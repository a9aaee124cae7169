package ids

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSink is the effect sink of the binding, for the tests: it counts
// effects per key, honours Idempotency-Key (the header is sent for S1
// commands only), and can hold POSTs, answer 503 without acting, or act
// and lose its reply (the connection is closed before any answer).
type fakeSink struct {
	t  testing.TB
	ts *httptest.Server

	mu       sync.Mutex
	effects  map[string]int    // key → effects made
	lastID   map[string]string // key → last effect id
	byHeader map[string]string // Idempotency-Key → effect id
	posts    map[string]int    // key → POSTs received (acted or not)
	gets     int
	n        int
	hold     chan struct{} // non-nil: POSTs wait until it is closed
	arrived  chan string   // the key of every POST, as it arrives
	loseNext int           // act, then drop the connection without a reply
	failNext int           // answer 503 without acting
}

func newFakeSink(t testing.TB) *fakeSink {
	k := &fakeSink{t: t, effects: map[string]int{}, lastID: map[string]string{}, byHeader: map[string]string{},
		posts: map[string]int{}, arrived: make(chan string, 1024)}
	k.ts = httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(func() {
		k.release()
		k.ts.Close()
	})
	return k
}

func (k *fakeSink) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/effects/") {
		key := strings.TrimPrefix(r.URL.Path, "/effects/")
		k.mu.Lock()
		k.gets++
		n, id := k.effects[key], k.lastID[key]
		k.mu.Unlock()
		if n == 0 {
			w.WriteHeader(404)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"effect_id":%q,"count":%d}`, id, n)
		return
	}
	if r.Method != "POST" || r.URL.Path != "/effects" {
		w.WriteHeader(404)
		return
	}
	var e effectRequest
	if err := json.NewDecoder(r.Body).Decode(&e); err != nil || e.IdempotencyKey == "" || e.TenantID == "" || e.Command == "" || e.CommandID == "" {
		k.t.Errorf("sink: bad effect request: %v %+v", err, e)
		w.WriteHeader(400)
		return
	}
	k.mu.Lock()
	k.posts[e.IdempotencyKey]++
	hold := k.hold
	k.mu.Unlock()
	select {
	case k.arrived <- e.IdempotencyKey:
	default:
	}
	if hold != nil {
		<-hold
	}
	k.mu.Lock()
	if k.failNext > 0 {
		k.failNext--
		k.mu.Unlock()
		w.WriteHeader(503)
		return
	}
	status := 201
	hk := r.Header.Get("Idempotency-Key")
	id, seen := k.byHeader[hk]
	if hk != "" && seen {
		status = 200
	} else {
		k.n++
		id = fmt.Sprintf("eff_%d", k.n)
		k.effects[e.IdempotencyKey]++
		k.lastID[e.IdempotencyKey] = id
		if hk != "" {
			k.byHeader[hk] = id
		}
	}
	lose := k.loseNext > 0
	if lose {
		k.loseNext--
	}
	k.mu.Unlock()
	if lose {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"effect_id":%q}`, id)
}

func (k *fakeSink) holdPosts() {
	k.mu.Lock()
	k.hold = make(chan struct{})
	k.mu.Unlock()
}

func (k *fakeSink) release() {
	k.mu.Lock()
	if k.hold != nil {
		close(k.hold)
		k.hold = nil
	}
	k.mu.Unlock()
}

func (k *fakeSink) set(f func(k *fakeSink)) {
	k.mu.Lock()
	f(k)
	k.mu.Unlock()
}

// effectsOf is the number of effects made for key; postsOf the POSTs.
func (k *fakeSink) effectsOf(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.effects[key]
}

func (k *fakeSink) postsOf(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.posts[key]
}

func (k *fakeSink) totalEffects() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, c := range k.effects {
		n += c
	}
	return n
}

// waitArrivals waits (at most d) for n POSTs to have arrived.
func (k *fakeSink) waitArrivals(n int, d time.Duration) int {
	got := 0
	deadline := time.After(d)
	for got < n {
		select {
		case <-k.arrived:
			got++
		case <-deadline:
			return got
		}
	}
	return got
}

// fakeClock is the server's clock in tests: it moves only by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testEnv is a server on a fresh database behind a loopback HTTP server,
// with its fake sink and clock.
type testEnv struct {
	t     testing.TB
	srv   *Server
	ts    *httptest.Server
	sink  *fakeSink
	clock *fakeClock
	cfg   Config
	hc    *http.Client
}

// testStore, when set (TestPostgres), gives newEnv a PostgreSQL store.
var testStore func(testing.TB) string

func newEnv(t testing.TB, mutant string, mod ...func(*Config)) *testEnv {
	t.Helper()
	sink := newFakeSink(t)
	clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	cfg := Config{DBPath: filepath.Join(t.TempDir(), "ids.db"), SinkURL: sink.ts.URL, TimeScale: 1, Mutant: mutant,
		Clock: clock.now, Logger: slog.New(slog.DiscardHandler), SinkTimeout: 5 * time.Second}
	if testStore != nil {
		cfg.Store, cfg.ReplicaID = testStore(t), "r1"
	}
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	e := &testEnv{t: t, srv: srv, ts: ts, sink: sink, clock: clock, cfg: cfg,
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}}
	t.Cleanup(func() {
		sink.release()
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return e
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) decision() string { return r.header.Get(hdrDecision) }

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	return m
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

func (e *testEnv) do(method, path string, body []byte, hdr ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.cfg.APIKey != "" {
		req.Header.Set("X-API-Key", e.cfg.APIKey)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, b}
}

func (e *testEnv) get(path string) resp { return e.do("GET", path, nil) }

// send POSTs an envelope.
func (e *testEnv) send(env map[string]any) resp {
	e.t.Helper()
	b, err := json.Marshal(env)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do("POST", "/commands", b)
}

// env builds an envelope of cmd ("entity.action") with args; kv pairs set
// or (with a nil value) remove top-level fields.
func mkEnv(cmd string, args map[string]any, kv ...any) map[string]any {
	entity, action, _ := strings.Cut(cmd, ".")
	m := map[string]any{
		"command_id": "cmd-1", "tenant_id": "acme", "actor_id": "alice",
		"intent": map[string]any{"entity": entity, "action": action, "target": "t-1"},
		"args":   args,
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	return m
}

func note(text string, kv ...any) map[string]any {
	return mkEnv(cmdNoteAdd, map[string]any{"text": text}, kv...)
}

func payment(amount int, kv ...any) map[string]any {
	return mkEnv(cmdPaymentCapture, map[string]any{"amount_minor": amount, "currency": "EUR"}, kv...)
}

func refund(amount int, kv ...any) map[string]any {
	return mkEnv(cmdRefundIssue, map[string]any{"amount_minor": amount, "payment_ref": "pay-1"}, kv...)
}

func keyOf(t *testing.T, r resp) string {
	t.Helper()
	k, _ := r.json(t)["idempotency_key"].(string)
	if len(k) != 64 {
		t.Fatalf("no idempotency_key in %s", r)
	}
	return k
}

// evidence is GET /evidence of a key.
func (e *testEnv) evidence(tenant, key string) []map[string]any {
	e.t.Helper()
	r := e.get(evidenceURL(tenant, key))
	if r.status != 200 {
		e.t.Fatalf("evidence: %s", r)
	}
	var doc struct {
		Evidence []map[string]any `json:"evidence"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		e.t.Fatal(err)
	}
	return doc.Evidence
}

// eventually polls cond every 20 ms for at most d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// commandStatus is the status GET /commands/{id} reports.
func (e *testEnv) commandStatus(id string) string {
	e.t.Helper()
	r := e.get("/commands/" + id)
	if r.status != 200 {
		return fmt.Sprint(r.status)
	}
	s, _ := r.json(e.t)["status"].(string)
	return s
}
