package atp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/idscheck/idscheck/sut/atp/fakerail"
	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// agentSeed is the agent key of the tests (RFC 8032 §7.1, test 1: the
// binding's worked example).
var agentSeed, _ = hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")

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
// with its fake rail and clock, and agent agt_1 registered.
type testEnv struct {
	t      testing.TB
	srv    *Server
	ts     *httptest.Server
	rail   *fakerail.Rail
	railTS *httptest.Server
	clock  *fakeClock
	cfg    Config
	hc     *http.Client
	agent  ed25519.PrivateKey
}

var testStart = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// testStore, when set (TestPostgres), gives newEnv a PostgreSQL store.
var testStore func(testing.TB) string

// storeOf is the store of cfg: its PostgreSQL URL, else its SQLite file.
func storeOf(cfg Config) string {
	if cfg.Store != "" {
		return cfg.Store
	}
	return cfg.DBPath
}

func newEnv(t testing.TB, mutant string, mod ...func(*Config)) *testEnv {
	t.Helper()
	rail := fakerail.New()
	railTS := httptest.NewServer(rail)
	clock := &fakeClock{t: testStart}
	cfg := Config{DBPath: filepath.Join(t.TempDir(), "atp.db"), RailURL: railTS.URL, Mutant: mutant, Clock: clock.now,
		Logger: slog.New(slog.DiscardHandler), RailTimeout: 5 * time.Second}
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
	waitSwept(t, srv)
	e := &testEnv{t: t, srv: srv, ts: httptest.NewServer(srv.Handler()), rail: rail, railTS: railTS, clock: clock, cfg: cfg,
		hc:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second},
		agent: ed25519.NewKeyFromSeed(agentSeed)}
	t.Cleanup(func() {
		rail.Release()
		rail.WaitCallbacks()
		e.ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		railTS.Close()
	})
	if r := e.register("agt_1", e.agent.Public().(ed25519.PublicKey)); r.status != 201 {
		t.Fatalf("register: %s", r)
	}
	return e
}

// waitSwept waits (bounded) until the sweep srv runs at Open is done: a
// row the test leaves open afterwards is the test's to resolve (a sweep
// late on a loaded machine would otherwise resolve it behind its back).
func waitSwept(t testing.TB, srv *Server) {
	t.Helper()
	select {
	case <-srv.swept:
	case <-time.After(30 * time.Second):
		t.Fatal("the sweep at Open did not end within 30s")
	}
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

// tx is the transaction document of an answer.
type tx struct {
	IntentID       string          `json:"intent_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	State          string          `json:"state"`
	Body           json.RawMessage `json:"body"`
	Receipt        json.RawMessage `json:"receipt"`
	CreatedAt      string          `json:"created_at"`
	UpdatedAt      string          `json:"updated_at"`
}

func (r resp) tx(t testing.TB) tx {
	t.Helper()
	var x tx
	if err := json.Unmarshal(r.body, &x); err != nil || x.State == "" {
		t.Fatalf("not a transaction: %s (%v)", r, err)
	}
	return x
}

func (x tx) hasReceipt() bool { return len(x.Receipt) > 0 && string(x.Receipt) != "null" }

func (e *testEnv) do(method, path string, body []byte, hdr ...string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.ts.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.cfg.APIKey != "" {
		req.Header.Set(headerAPIKey, e.cfg.APIKey)
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

func (e *testEnv) register(id string, pub ed25519.PublicKey) resp {
	e.t.Helper()
	return e.do("PUT", pathAgents+id, mustJSON(map[string]any{"public_key": map[string]any{"kty": "OKP", "crv": "Ed25519",
		"x": b64.EncodeToString(pub)}}))
}

func (e *testEnv) authorize(key string, intent []byte) resp {
	e.t.Helper()
	return e.do("POST", pathAuthorize, intent, headerKey, key)
}

func (e *testEnv) execute(key, intentID string) resp {
	e.t.Helper()
	return e.do("POST", pathExecute, mustJSON(map[string]any{"intent_id": intentID}), headerKey, key)
}

func (e *testEnv) poll(key, intentID string) resp {
	e.t.Helper()
	return e.do("GET", pathIntents+intentID, nil, headerKey, key)
}

// key is an idempotency key of the tests (36 characters).
func key(name string) string { return fmt.Sprintf("%-20s-0123456789abcde", name)[:36] }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// intent builds intent id of agt_1 (expires ten minutes after the clock),
// kv pairs set or (nil) remove members, signed with key k (nil: the
// environment's agent key).
func (e *testEnv) intent(id string, kv ...any) []byte {
	m := map[string]any{"intent_id": id, "agent_id": "agt_1", "nonce": "n_" + id,
		"expires_at": e.clock.now().Add(10 * time.Minute).Format(time.RFC3339), "amount": 1250, "currency": "EUR",
		"payee": "merchant_42"}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
		} else {
			m[kv[i].(string)] = kv[i+1]
		}
	}
	return signIntent(m, e.agent)
}

// signIntent signs m (its signature member replaced) with the test's own
// JCS and Ed25519, not the server's code.
func signIntent(m map[string]any, k ed25519.PrivateKey) []byte {
	delete(m, "signature")
	c, err := jcs.Transform(mustJSON(m))
	if err != nil {
		panic(err)
	}
	m["signature"] = b64.EncodeToString(ed25519.Sign(k, c))
	return mustJSON(m)
}

// eventually polls cond every 10 ms for at most d.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// states is the state history of a row, from the store (a SQLite file,
// or a PostgreSQL URL).
func states(t testing.TB, store, intentID, key string) []string {
	t.Helper()
	driver, dsnOf, q := "sqlite", dsn(store, true), `SELECT state FROM history WHERE intent_id = ? AND idempotency_key = ? ORDER BY seq`
	if pgstore.IsPostgres(store) {
		driver, dsnOf, q = "pgx", store, pgstore.DollarParams(q)
	}
	db, err := sql.Open(driver, dsnOf)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(q, intentID, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		rows.Scan(&s)
		out = append(out, s)
	}
	return out
}

// monotonic fails t when a history moves back.
func monotonic(t testing.TB, hist []string) {
	t.Helper()
	for i := 1; i < len(hist); i++ {
		if rank(hist[i]) <= rank(hist[i-1]) {
			t.Fatalf("the state moved back or stayed: %v", hist)
		}
	}
}

// verifyReceipt checks a receipt with the JWK set of GET /api/atp/keys
// alone, with the test's own JCS (not the server's code); it returns the
// receipt's body.
func (e *testEnv) verifyReceipt(raw json.RawMessage) map[string]any {
	e.t.Helper()
	var set struct {
		Keys []struct{ Kty, Crv, Kid, X string } `json:"keys"`
	}
	if err := json.Unmarshal(e.do("GET", pathKeys, nil).body, &set); err != nil {
		e.t.Fatal(err)
	}
	var r struct {
		Body      json.RawMessage `json:"body"`
		Alg, Kid  string
		Signature string
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.Alg != "Ed25519" {
		e.t.Fatalf("receipt %s: %v", raw, err)
	}
	sig, err := b64.DecodeString(r.Signature)
	if err != nil {
		e.t.Fatalf("receipt signature: %v", err)
	}
	msg, err := jcs.Transform(r.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, k := range set.Keys {
		x, _ := b64.DecodeString(k.X)
		if k.Kid == r.Kid && k.Kty == "OKP" && k.Crv == "Ed25519" && ed25519.Verify(ed25519.PublicKey(x), msg, sig) {
			var body map[string]any
			json.Unmarshal(r.Body, &body)
			return body
		}
	}
	e.t.Fatalf("receipt %s does not verify with the published keys", raw)
	return nil
}
