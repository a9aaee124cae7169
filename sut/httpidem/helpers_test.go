package httpidem

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

// fakeSink is the effect sink (the payment processor) for the tests: it
// counts the POSTs and the effects per idempotency_key, and can hold the
// POSTs of a key until released, fail the next POSTs (500, nothing done),
// act and lose its reply (the connection closed without an answer), or
// answer GETs 503 (down).
type fakeSink struct {
	t  testing.TB
	ts *httptest.Server

	mu       sync.Mutex
	posts    map[string]int // key → POSTs received (acted or not)
	effects  map[string]int // key → effects made
	bodies   []effectRequest
	headers  []string // the Idempotency-Key header of every POST
	holds    map[string]chan struct{}
	arrived  chan string // the key of every POST, as it arrives
	failNext int         // answer 500 without acting
	loseNext int         // act, then drop the connection
	getsDown bool        // GET /effects/{key} answers 503
	gets     int
	n        int
}

func newFakeSink(t testing.TB) *fakeSink {
	k := &fakeSink{t: t, posts: map[string]int{}, effects: map[string]int{}, holds: map[string]chan struct{}{},
		arrived: make(chan string, 1024)}
	k.ts = httptest.NewServer(http.HandlerFunc(k.serve))
	t.Cleanup(func() {
		k.releaseAll()
		k.ts.Close()
	})
	return k
}

func (k *fakeSink) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/effects/") {
		key := strings.TrimPrefix(r.URL.Path, "/effects/")
		k.mu.Lock()
		k.gets++
		n, down := k.effects[key], k.getsDown
		k.mu.Unlock()
		switch {
		case down:
			w.WriteHeader(503)
		case n == 0:
			w.WriteHeader(404)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"effect_id":"eff_%s","count":%d}`, key, n)
		}
		return
	}
	if r.Method != "POST" || r.URL.Path != "/effects" {
		w.WriteHeader(404)
		return
	}
	var e effectRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.IdempotencyKey == "" || e.TenantID == "" || e.Command != commandCreate || e.CommandID == "" {
		k.t.Errorf("sink: bad effect request: %v %+v", err, e)
		w.WriteHeader(400)
		return
	}
	k.mu.Lock()
	k.posts[e.IdempotencyKey]++
	k.bodies = append(k.bodies, e)
	k.headers = append(k.headers, r.Header.Get("Idempotency-Key"))
	hold := k.holds[e.IdempotencyKey]
	k.mu.Unlock()
	select {
	case k.arrived <- e.IdempotencyKey:
	default:
	}
	if hold != nil {
		select {
		case <-hold:
		case <-time.After(20 * time.Second):
		}
	}
	k.mu.Lock()
	if k.failNext > 0 {
		k.failNext--
		k.mu.Unlock()
		w.WriteHeader(500)
		return
	}
	k.n++
	id := fmt.Sprintf("eff_%d", k.n)
	k.effects[e.IdempotencyKey]++
	lose := k.loseNext > 0
	if lose {
		k.loseNext--
	}
	k.mu.Unlock()
	if lose {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(201)
	fmt.Fprintf(w, `{"effect_id":%q}`, id)
}

// hold makes the POSTs of key wait until the returned release is called.
func (k *fakeSink) hold(key string) (release func()) {
	ch := make(chan struct{})
	k.mu.Lock()
	k.holds[key] = ch
	k.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			k.mu.Lock()
			if k.holds[key] == ch {
				delete(k.holds, key)
			}
			k.mu.Unlock()
			close(ch)
		})
	}
}

func (k *fakeSink) releaseAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, ch := range k.holds {
		close(ch)
		delete(k.holds, key)
	}
}

// waitArrival waits (bounded) for the next POST to arrive and returns its key.
func (k *fakeSink) waitArrival(t testing.TB) string {
	t.Helper()
	select {
	case key := <-k.arrived:
		return key
	case <-time.After(10 * time.Second):
		t.Fatal("no POST reached the sink")
		return ""
	}
}

func (k *fakeSink) set(f func(k *fakeSink)) {
	k.mu.Lock()
	f(k)
	k.mu.Unlock()
}

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

var testStart = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// The callers of the tests.
const (
	tokA = "tok-alice"
	tokB = "tok-bob"
)

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

	waits chan string // the keys of the t0 duplicates that started waiting
}

// testStore, when set (TestPostgres), gives newEnv a PostgreSQL store.
var testStore func(testing.TB) string

func newEnv(t testing.TB, variant, mutant string, mod ...func(*Config)) *testEnv {
	t.Helper()
	sink := newFakeSink(t)
	clock := &fakeClock{t: testStart}
	cfg := Config{DBPath: filepath.Join(t.TempDir(), "pay.db"), SinkURL: sink.ts.URL, Variant: variant,
		Callers: []string{tokA, tokB}, Mutant: mutant, Clock: clock.now, Logger: slog.New(slog.DiscardHandler),
		SinkTimeout: 5 * time.Second, InFlightWait: 10 * time.Second}
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
	e := &testEnv{t: t, srv: srv, ts: httptest.NewServer(srv.Handler()), sink: sink, clock: clock, cfg: cfg,
		hc:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second},
		waits: make(chan string, 64)}
	srv.waitHook = func(_, key string) { e.waits <- key }
	t.Cleanup(func() {
		sink.releaseAll()
		e.ts.Close()
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

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

func (r resp) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
	return m
}

func (r resp) replayed() bool { return r.header.Get(headerReplayed) == "true" }

// do sends a request; hdr are name, value pairs (added, so a name may
// repeat); a token "" sends no Authorization.
func (e *testEnv) do(method, path, token string, body []byte, hdr ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
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

// pay posts a payment as caller tok with the variant's key: the
// Idempotency-Key header (ietf: as an sf-string) or, under t0, the body's
// paymentRef. key "" sends none.
func (e *testEnv) pay(tok, key string, body map[string]any) resp {
	e.t.Helper()
	switch e.srv.variant {
	case VariantT0:
		if key != "" {
			body = with(body, "paymentRef", key)
		}
		return e.do("POST", pathPayments, tok, mustJSON(body))
	case VariantIETF:
		if key != "" {
			return e.do("POST", pathPayments, tok, mustJSON(body), headerKey, sfString(key))
		}
	default:
		if key != "" {
			return e.do("POST", pathPayments, tok, mustJSON(body), headerKey, key)
		}
	}
	return e.do("POST", pathPayments, tok, mustJSON(body))
}

// payAsync is pay in a goroutine; the answer comes on the channel.
func (e *testEnv) payAsync(tok, key string, body map[string]any) <-chan resp {
	ch := make(chan resp, 1)
	go func() { ch <- e.pay(tok, key, body) }()
	return ch
}

func (e *testEnv) list(tok, reference string) []map[string]any {
	e.t.Helper()
	r := e.do("GET", pathPayments+"?reference="+reference, tok, nil)
	if r.status != 200 {
		e.t.Fatalf("list: %s", r)
	}
	var doc struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		e.t.Fatalf("list: %v", err)
	}
	return doc.Data
}

// sinkKey is the sink's idempotency_key of caller tok's key.
func sinkKey(tok, key string) string { return CallerID(tok) + ":" + key }

// body is a valid payment request; kv pairs set (or, nil, remove) members.
func body(ref string, kv ...any) map[string]any {
	m := map[string]any{"amount": 1250, "currency": "EUR", "reference": ref}
	return with(m, kv...)
}

func with(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

// sfString serializes s as an RFC 8941 sf-string (the test's own code).
func sfString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// receive waits (bounded) for an answer.
func receive(t testing.TB, ch <-chan resp) resp {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("no answer")
		return resp{}
	}
}

// waiting waits (bounded) for a t0 duplicate to start waiting.
func (e *testEnv) waiting(t testing.TB) string {
	t.Helper()
	select {
	case k := <-e.waits:
		return k
	case <-time.After(10 * time.Second):
		t.Fatal("no duplicate started waiting")
		return ""
	}
}

// isProblem checks the RFC 9457 shape of an error answer.
func isProblem(t testing.TB, r resp, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != contentProblem {
		t.Fatalf("content type %q: %s", ct, r.body)
	}
	m := r.json(t)
	if m["code"] != code || m["title"] == "" || m["status"] != float64(status) ||
		!strings.HasPrefix(fmt.Sprint(m["type"]), "https://") {
		t.Fatalf("problem %s, want code %s", r.body, code)
	}
	return m
}

// hasLink: the answer links the documentation.
func hasLink(r resp) bool {
	return r.header.Get("Link") == `<https://idscheck.dev/docs/http-idempotency>; rel="describedby"`
}
