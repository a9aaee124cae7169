package intent

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
)

const (
	testSecret = "test-secret"
	testAdmin  = "test-admin"
	testDash   = "test-dash"
	testMetric = "test-metrics"
)

// testStore, when set (TestPostgres), gives newBus a PostgreSQL store.
var testStore func(testing.TB) string

type testBus struct {
	t   *testing.T
	srv *Server
	ts  *httptest.Server
	cfg Config
}

// newBus starts a server on a fresh database in t.TempDir() behind a real
// loopback HTTP server. mod changes the config before Open.
func newBus(t *testing.T, mod func(*Config)) *testBus {
	t.Helper()
	cfg := Config{DBPath: filepath.Join(t.TempDir(), "bus.db"), Secret: testSecret, AdminSecret: testAdmin,
		DashboardPassword: testDash, MetricsToken: testMetric, TimeScale: 1, Seed: 1, Logger: slog.New(slog.DiscardHandler)}
	if testStore != nil {
		cfg.Store, cfg.ReplicaID = testStore(t), "r1"
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &testBus{t: t, srv: srv, ts: ts, cfg: cfg}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (r resp) code(t *testing.T) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body is not JSON: %q", r.body)
	}
	return e.Error.Code
}

// do sends one request; hdr holds header pairs ("X-API-KEY", "k", ...). A
// nil key header defaults to the main key unless noKey is in hdr.
func (b *testBus) do(method, path string, body any, hdr ...string) resp {
	b.t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		j, _ := json.Marshal(v)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, b.ts.URL+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set(hdrAPIKey, testSecret)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.ts.Client().Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, out}
}

// signed returns the §5.2 headers of a request signed with the main key:
// X-Timestamp, X-Nonce and X-Signature, the lower-case hex HMAC-SHA256 of
// the signing string. target is the path and query as sent; asSent picks
// the reading of repeated query parameters. The signing string is the
// server's own (TestSignatureKnownAnswers holds it to known answers).
func (b *testBus) signed(method, target, body, ts, nonce string, asSent bool) []string {
	b.t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		b.t.Fatal(err)
	}
	cp, ok := canonicalPath(u.EscapedPath(), u.RawQuery, asSent)
	if !ok {
		b.t.Fatalf("cannot sign %q", target)
	}
	mac := hmac.New(sha256.New, []byte(testSecret))
	mac.Write(signingString(method, cp, ts, nonce, []byte(body)))
	return []string{hdrTimestamp, ts, hdrNonce, nonce, hdrSignature, hex.EncodeToString(mac.Sum(nil))}
}

func (b *testBus) publish(body any, hdr ...string) string {
	b.t.Helper()
	r := b.do("POST", pathIntent, body, hdr...)
	if r.status != 201 {
		b.t.Fatalf("publish: %d %s", r.status, r.body)
	}
	var c createIntentResponse
	r.json(b.t, &c)
	return c.ID
}

func (b *testBus) claim(query string, hdr ...string) (claimResponse, bool) {
	b.t.Helper()
	r := b.do("POST", pathClaim+query, nil, hdr...)
	if r.status == 204 {
		return claimResponse{}, false
	}
	if r.status != 200 {
		b.t.Fatalf("claim: %d %s", r.status, r.body)
	}
	var c claimResponse
	r.json(b.t, &c)
	return c, true
}

func (b *testBus) statusOf(id string) intentView {
	b.t.Helper()
	r := b.do("GET", pathStatus+id, nil)
	if r.status != 200 {
		b.t.Fatalf("status: %d %s", r.status, r.body)
	}
	var v intentView
	r.json(b.t, &v)
	return v
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"default secret", Config{DBPath: filepath.Join(dir, "a.db"), Secret: "dev_secret"}, "dev_secret"},
		{"no secret", Config{DBPath: filepath.Join(dir, "b.db")}, "BUS_SECRET"},
		{"unknown mutant", Config{DBPath: filepath.Join(dir, "c.db"), Secret: "x", Mutant: "nope"}, MutantIdemKeyIgnored},
		{"negative scale", Config{DBPath: filepath.Join(dir, "d.db"), Secret: "x", TimeScale: -1}, "time scale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(context.Background(), tc.cfg)
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr bool
		check   func(Config) bool
	}{
		{"defaults", map[string]string{}, false, func(c Config) bool {
			return c.DBPath == "infrastructure.db" && c.CleanupInterval == DefaultCleanupInterval && c.TimeScale == 1 && !c.RequireSignatures
		}},
		{"all set", map[string]string{"BUS_SECRET": "s", "BUS_ADMIN_SECRET": "a", "DASHBOARD_PASSWORD": "d", "BUS_METRICS_TOKEN": "m",
			"BUS_DB_PATH": "x.db", "BUS_TRUST_PROXY": "true", "BUS_ENFORCE_HTTPS": "1", "BUS_REQUIRE_SIGNATURES": "yes",
			"BUS_MAINTENANCE_MODE": "on", "BUS_CLEANUP_INTERVAL_SECONDS": "300"}, false, func(c Config) bool {
			return c.Secret == "s" && c.AdminSecret == "a" && c.DashboardPassword == "d" && c.MetricsToken == "m" && c.DBPath == "x.db" &&
				c.TrustProxy && c.EnforceHTTPS && c.RequireSignatures && c.Maintenance && c.CleanupInterval == 300*time.Second
		}},
		{"interval too small", map[string]string{"BUS_CLEANUP_INTERVAL_SECONDS": "299"}, true, nil},
		{"interval too big", map[string]string{"BUS_CLEANUP_INTERVAL_SECONDS": "86401"}, true, nil},
		{"bad bool", map[string]string{"BUS_REQUIRE_SIGNATURES": "maybe"}, true, nil},
		{"bad scale", map[string]string{"IDSCHECK_TIME_SCALE": "0"}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.check != nil && !tc.check(c) {
				t.Fatalf("config %+v", c)
			}
		})
	}
}

func TestCreateIntentValidation(t *testing.T) {
	b := newBus(t, nil)
	long := strings.Repeat("x", 257)
	for _, tc := range []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"not json", `{`, 400, codeInvalidPayload},
		{"array", `[1]`, 400, codeInvalidPayload},
		{"null body", `null`, 400, codeInvalidPayload},
		{"empty body", ``, 400, codeInvalidPayload},
		{"trailing", `{"goal":"g","payload":1} {}`, 400, codeInvalidPayload},
		{"missing goal", `{"payload":1}`, 400, codeInvalidRequest},
		{"missing payload", `{"goal":"g"}`, 400, codeInvalidRequest},
		{"goal number", `{"goal":1,"payload":1}`, 400, codeInvalidGoal},
		{"goal null", `{"goal":null,"payload":1}`, 400, codeInvalidGoal},
		{"goal empty", `{"goal":"","payload":1}`, 400, codeInvalidGoal},
		{"goal long", `{"goal":"` + long + `","payload":1}`, 400, codeInvalidGoal},
		{"namespace bad char", `{"goal":"g","payload":1,"namespace":"a b"}`, 400, codeInvalidNamespace},
		{"namespace long", `{"goal":"g","payload":1,"namespace":"` + strings.Repeat("n", 65) + `"}`, 400, codeInvalidNamespace},
		{"namespace number", `{"goal":"g","payload":1,"namespace":5}`, 400, codeInvalidNamespace},
		{"visibility", `{"goal":"g","payload":1,"visibility":"secret"}`, 400, codeInvalidVisibility},
		{"priority high", `{"goal":"g","payload":1,"priority":1001}`, 400, codeInvalidPriority},
		{"priority negative", `{"goal":"g","payload":1,"priority":-1}`, 400, codeInvalidPriority},
		{"priority fraction", `{"goal":"g","payload":1,"priority":1.5}`, 400, codeInvalidPriority},
		{"priority string", `{"goal":"g","payload":1,"priority":"1"}`, 400, codeInvalidPriority},
		{"priority huge", `{"goal":"g","payload":1,"priority":1e400}`, 400, codeInvalidPriority},
		{"delay negative", `{"goal":"g","payload":1,"delay":-1}`, 400, codeInvalidDelay},
		{"delay string", `{"goal":"g","payload":1,"delay":"soon"}`, 400, codeInvalidDelay},
		{"max_attempts 0", `{"goal":"g","payload":1,"max_attempts":0}`, 400, codeInvalidMaxAttempts},
		{"max_attempts 21", `{"goal":"g","payload":1,"max_attempts":21}`, 400, codeInvalidMaxAttempts},
		{"backoff low", `{"goal":"g","payload":1,"backoff_base":0.5}`, 400, codeInvalidBackoffBase},
		{"backoff high", `{"goal":"g","payload":1,"backoff_base":3600.5}`, 400, codeInvalidBackoffBase},
		{"target_worker number", `{"goal":"g","payload":1,"target_worker":7}`, 400, codeInvalidTargetWorker},
		{"target_worker empty", `{"goal":"g","payload":1,"target_worker":""}`, 400, codeInvalidTargetWorker},
		{"capability comma", `{"goal":"g","payload":1,"required_capability":"a,b"}`, 400, codeInvalidRequiredCapability},
		{"capability bool", `{"goal":"g","payload":1,"required_capability":true}`, 400, codeInvalidRequiredCapability},
		{"payload too large", `{"goal":"g","payload":"` + strings.Repeat("p", 7200) + `"}`, 413, codePayloadTooLarge},
		{"body too large", `{"goal":"g","payload":1,"x":"` + strings.Repeat("p", 8200) + `"}`, 413, codePayloadTooLarge},
		{"minimal", `{"goal":"g","payload":null}`, 201, ""},
		{"all fields", `{"goal":"g","payload":{"a":[1,2]},"namespace":"n.s-1_x","visibility":"public","priority":1000,"delay":0.5,
			"max_attempts":20,"backoff_base":3600,"target_worker":"w1","required_capability":"gpu","unknown":1}`, 201, ""},
		{"nulls are defaults", `{"goal":"g","payload":1,"namespace":null,"priority":null,"target_worker":null}`, 201, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do("POST", pathIntent, tc.body, "Content-Type", "application/json")
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" {
				if got := r.code(t); got != tc.code {
					t.Fatalf("code %q, want %q", got, tc.code)
				}
			}
		})
	}
}

func TestSecurityHeadersAndErrorShape(t *testing.T) {
	b := newBus(t, nil)
	for _, tc := range []struct {
		name, method, path string
		body               string
		hdr                []string
		status             int
		code               string
	}{
		{"health", "GET", "/health", "", nil, 200, ""},
		{"unknown path", "GET", "/nope", "", nil, 404, codeNotFound},
		{"unknown admin path", "GET", "/admin/nope", "", nil, 404, codeNotFound},
		{"trailing slash id", "GET", "/status/", "", nil, 404, codeNotFound},
		{"wrong method", "GET", "/intent", "", nil, 405, codeMethodNotAllowed},
		{"wrong method claim", "DELETE", "/claim", "", nil, 405, codeMethodNotAllowed},
		{"too large", "POST", "/intent", strings.Repeat("x", 9000), nil, 413, codePayloadTooLarge},
		{"no key", "POST", "/intent", `{}`, []string{hdrAPIKey, ""}, 401, codeUnauthorized},
		{"bad key", "POST", "/claim", ``, []string{hdrAPIKey, "wrong"}, 401, codeUnauthorized},
		{"unknown intent", "GET", "/result/abc", "", nil, 404, codeNotFound},
		{"admin without auth", "POST", "/admin/cleanup", "", nil, 401, codeUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(tc.method, tc.path, tc.body, tc.hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			for _, kv := range securityHeaders {
				if got := r.header.Get(kv[0]); got != kv[1] {
					t.Errorf("%s = %q, want %q", kv[0], got, kv[1])
				}
			}
			if tc.code != "" {
				if ct := r.header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				if got := r.code(t); got != tc.code {
					t.Fatalf("code %q, want %q", got, tc.code)
				}
			}
		})
	}
	var h healthBody
	b.do("GET", "/health", nil).json(t, &h)
	if !h.OK || h.Version != serverVersion || h.TimeScale != 1 {
		t.Fatalf("health %+v", h)
	}
}

func TestIdempotency(t *testing.T) {
	b := newBus(t, nil)
	body1 := `{"goal":"g","payload":{"a":1,"b":[1,2]},"priority":5}`
	same := "{ \"priority\": 5, \"payload\": {\"b\": [1, 2], \"a\": 1},\n \"goal\": \"g\" }"
	id := b.publish(body1, hdrIdempotencyKey, "k1")
	r := b.do("POST", pathIntent, same, hdrIdempotencyKey, "k1")
	var c createIntentResponse
	r.json(t, &c)
	if r.status != 201 || c.ID != id || r.header.Get(hdrIdempotentReplay) != "true" {
		t.Fatalf("replay: %d %s (want id %s)", r.status, r.body, id)
	}
	r = b.do("POST", pathIntent, `{"goal":"g","payload":{"a":2}}`, hdrIdempotencyKey, "k1")
	if r.status != 422 || r.code(t) != codeIdempotencyConflict {
		t.Fatalf("conflict: %d %s", r.status, r.body)
	}
	// A rejected request does not consume a key.
	if r := b.do("POST", pathIntent, `{"goal":""}`, hdrIdempotencyKey, "k2"); r.status != 400 {
		t.Fatalf("invalid: %d", r.status)
	}
	b.publish(`{"goal":"g","payload":1}`, hdrIdempotencyKey, "k2")
	if r := b.do("POST", pathIntent, body1, hdrIdempotencyKey, ""); r.status != 201 {
		t.Fatalf("no key: %d", r.status)
	}
	// Concurrent duplicates yield one intent.
	const n = 20
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", b.ts.URL+pathIntent, strings.NewReader(`{"goal":"c","payload":1}`))
			req.Header.Set(hdrAPIKey, testSecret)
			req.Header.Set(hdrIdempotencyKey, "storm")
			res, err := b.ts.Client().Do(req)
			if err != nil {
				return
			}
			defer res.Body.Close()
			var c createIntentResponse
			json.NewDecoder(res.Body).Decode(&c)
			ids[i] = c.ID
		}()
	}
	wg.Wait()
	for i := range ids {
		if ids[i] == "" || ids[i] != ids[0] {
			t.Fatalf("concurrent duplicates got ids %v", ids)
		}
	}
	var count int
	if err := b.srv.rdb.QueryRow(`SELECT COUNT(*) FROM intents WHERE goal = 'c'`).Scan(&count); err != nil || count != 1 {
		t.Fatalf("%d intents for one key (err %v)", count, err)
	}
	// Keys are scoped per API key: another key with the same Idempotency-Key gets its own intent.
	tk := b.generateKey("bob")
	other := b.publish(body1, hdrIdempotencyKey, "k1", hdrAPIKey, tk)
	if other == id {
		t.Fatal("idempotency key shared across API keys")
	}
	if r := b.do("POST", pathIntent, body1, hdrIdempotencyKey, strings.Repeat("k", 256)); r.code(t) != codeInvalidIdempotencyKey {
		t.Fatalf("long key: %d %s", r.status, r.body)
	}
}

func (b *testBus) generateKey(owner string) string {
	b.t.Helper()
	r := b.do("POST", pathGenerateKey, map[string]string{"owner": owner}, hdrAdminToken, testAdmin)
	if r.status != 201 {
		b.t.Fatalf("generate_key: %d %s", r.status, r.body)
	}
	var g generateKeyResponse
	r.json(b.t, &g)
	if !strings.HasPrefix(g.APIKey, "tk_") || g.Owner != owner {
		b.t.Fatalf("generate_key: %+v", g)
	}
	return g.APIKey
}

func TestClaimOrderAndRouting(t *testing.T) {
	b := newBus(t, nil)
	// Tie-breakers: priority DESC, run_at ASC, claim_attempts ASC, created_at ASC, id ASC.
	low := b.publish(`{"goal":"g","payload":1,"priority":1}`)
	high := b.publish(`{"goal":"g","payload":1,"priority":900}`)
	mid1 := b.publish(`{"goal":"g","payload":1,"priority":500}`)
	mid2 := b.publish(`{"goal":"g","payload":1,"priority":500}`)
	for _, want := range []string{high, mid1, mid2, low} {
		c, ok := b.claim("")
		if !ok || c.ID != want {
			t.Fatalf("claimed %q, want %q", c.ID, want)
		}
		if c.ClaimAttempts != 1 || len(c.ClaimToken) != 32 || c.ClaimTimeout != 60 {
			t.Fatalf("claim response %+v", c)
		}
	}
	r := b.do("POST", pathClaim, nil)
	if r.status != 204 || r.header.Get(hdrRetryAfter) != "1" {
		t.Fatalf("empty claim: %d Retry-After %q", r.status, r.header.Get(hdrRetryAfter))
	}

	tk := b.generateKey("alice")
	nsID := b.publish(`{"goal":"g","payload":1,"namespace":"other","visibility":"public"}`)
	priv := b.publish(`{"goal":"g","payload":1,"namespace":"priv"}`)
	tw := b.publish(`{"goal":"g","payload":1,"namespace":"tw","target_worker":"w7","visibility":"public"}`)
	capID := b.publish(`{"goal":"g","payload":1,"namespace":"cap","required_capability":"gpu","visibility":"public"}`)
	goalID := b.publish(`{"goal":"special","payload":1,"namespace":"goal"}`)
	b.publish(`{"goal":"later","payload":1,"namespace":"delay","delay":3600}`)
	for _, tc := range []struct {
		name, query string
		hdr         []string
		want        string // "" means 204
	}{
		{"default namespace is empty", "", nil, ""},
		{"namespace isolation", "?namespace=other", nil, nsID},
		{"private to another key", "?namespace=priv", []string{hdrAPIKey, tk}, ""},
		{"private to publisher", "?namespace=priv", nil, priv},
		{"target worker missing", "?namespace=tw", nil, ""},
		{"target worker other", "?namespace=tw", []string{hdrWorkerID, "w8"}, ""},
		{"target worker by query", "?namespace=tw&worker_id=w7", []string{hdrAPIKey, tk}, tw},
		{"capability missing", "?namespace=cap", []string{hdrWorkerCapabilities, "cpu, GPU"}, ""},
		{"capability matched", "?namespace=cap", []string{hdrWorkerCapabilities, "cpu, gpu"}, capID},
		{"goal filter other", "?namespace=goal&goal=x", nil, ""},
		{"goal filter", "?namespace=goal&goal=special", nil, goalID},
		{"delay", "?namespace=delay", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := b.claim(tc.query, tc.hdr...)
			if tc.want == "" && ok {
				t.Fatalf("claimed %s, want none", c.ID)
			}
			if tc.want != "" && c.ID != tc.want {
				t.Fatalf("claimed %q, want %q", c.ID, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, query string
		hdr         []string
		status      int
		code        string
	}{
		{"bad namespace", "?namespace=a%20b", nil, 400, codeInvalidNamespace},
		{"foreign publisher", "?publisher=someone", nil, 403, codeForbidden},
		{"bad body", "", []string{}, 400, codeInvalidPayload},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.name == "bad body" {
				body = "{"
			}
			r := b.do("POST", pathClaim+tc.query, body, tc.hdr...)
			if r.status != tc.status || r.code(t) != tc.code {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
}

// clockBus is newBus on a fake clock at time scale 1, with no lazy cleanup
// unless mod sets an interval: the test moves time itself, so each
// assertion is made at an exact instant and nothing sleeps.
func clockBus(t *testing.T, mod func(*Config)) (*testBus, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	b := newBus(t, func(c *Config) {
		c.Clock = clk.Now
		c.TimeScale = 1
		c.CleanupInterval = 1e9 * time.Second
		if mod != nil {
			mod(c)
		}
	})
	return b, clk
}

// ms is one millisecond of the fake clock: "just before" and "just after"
// an instant the server computed in float seconds.
const ms = time.Millisecond

func TestLeaseLifecycle(t *testing.T) {
	b, clk := clockBus(t, nil)
	t0 := clk.unix()
	id := b.publish(`{"goal":"g","payload":1,"max_attempts":2,"backoff_base":1}`)
	c1, ok := b.claim("")
	if !ok || c1.ID != id || !near(c1.ClaimExpiresAt, t0+60) {
		t.Fatalf("first claim %v %+v", ok, c1)
	}
	if _, ok := b.claim(""); ok {
		t.Fatal("claimed an intent under an active lease")
	}
	v := b.statusOf(id)
	if v.Status != stateClaimed || v.ClaimExpiresAt == nil || !near(*v.ClaimExpiresAt, t0+60) {
		t.Fatalf("status %+v", v)
	}
	// Backoff after the lease (§3.3): 1*2^1 s + jitter in [0, 2) after t0+60.
	runAt := v.RunAt
	if runAt < t0+62 || runAt >= t0+64 {
		t.Fatalf("run_at %.3f: want t0+62 ≤ run_at < t0+64", runAt-t0)
	}
	clk.Advance(60*time.Second - ms)
	if v := b.statusOf(id); v.Status != stateClaimed {
		t.Fatalf("1 ms before the lease ends: %s", v.Status)
	}
	clk.Advance(ms) // t0+60: the lease has ended
	if v := b.statusOf(id); v.Status != stateOpen {
		t.Fatalf("at the end of the lease: %s", v.Status)
	}
	clk.AdvanceTo(runAt - 0.001)
	if _, ok := b.claim(""); ok {
		t.Fatal("reclaimed 1 ms before run_at")
	}
	clk.AdvanceTo(runAt)
	c2, ok := b.claim("")
	t2 := clk.unix()
	if !ok || c2.ID != id || c2.ClaimAttempts != 2 || c2.ClaimToken == c1.ClaimToken || !near(c2.ClaimExpiresAt, t2+60) {
		t.Fatalf("reclaim at run_at: %v %+v", ok, c2)
	}
	for _, path := range []string{pathFulfill, pathFail, pathExtendClaim} {
		r := b.do("POST", path+id, map[string]any{"claim_token": c1.ClaimToken, "seconds": 60})
		if r.status != 404 || r.code(t) != codeNotFound {
			t.Fatalf("stale token on %s: %d %s", path, r.status, r.body)
		}
	}
	// The second lease lapses with attempts spent: dead at its end, before any write.
	clk.Advance(60*time.Second - ms)
	if v := b.statusOf(id); v.Status != stateClaimed {
		t.Fatalf("1 ms before the last lease ends: %s", v.Status)
	}
	clk.Advance(ms)
	if v := b.statusOf(id); v.Status != stateDead || v.CompletedAt == nil || !near(*v.CompletedAt, t2+60) {
		t.Fatalf("at the end of the last lease: %+v", v)
	}
	if _, ok := b.claim(""); ok {
		t.Fatal("claimed a dead intent")
	}
	r := b.do("GET", pathDead, nil, hdrAdminToken, testAdmin)
	var dl deadLetters
	r.json(t, &dl)
	if len(dl.DeadLetters) != 1 || dl.DeadLetters[0].IntentID != id || !near(dl.DeadLetters[0].DiedAt, t2+60) {
		t.Fatalf("dead letters %s", r.body)
	}
	r = b.do("GET", pathDeadLetter+id, nil, hdrAdminToken, testAdmin)
	var d deadLetter
	r.json(t, &d)
	if string(d.Payload) != "1" {
		t.Fatalf("dead letter %s", r.body)
	}
	if r := b.do("POST", pathAdminIntents+id+"/retry", nil, hdrAdminToken, testAdmin); r.status != 200 {
		t.Fatalf("retry %d %s", r.status, r.body)
	}
	if v := b.statusOf(id); v.Status != stateOpen || v.ClaimAttempts != 0 || !near(v.RunAt, clk.unix()) {
		t.Fatalf("after retry %+v", v)
	}
	if r := b.do("GET", pathDeadLetter+id, nil, hdrAdminToken, testAdmin); r.status != 404 {
		t.Fatalf("dead letter kept after retry: %d", r.status)
	}
	if r := b.do("POST", pathAdminIntents+id+"/retry", nil, hdrAdminToken, testAdmin); r.status != 409 {
		t.Fatalf("retry of an open intent: %d", r.status)
	}
	if c3, ok := b.claim(""); !ok || c3.ID != id || c3.ClaimAttempts != 1 {
		t.Fatalf("claim after retry: %v %+v", ok, c3)
	}
}

// TestTimeScale: at time scale 600 the server divides every protocol
// duration by 600 on its clock (a 60 s lease lasts 100 ms), values on the
// wire stay in protocol units (claim_timeout: 60), and the ±300 s timestamp
// window stays in real seconds.
func TestTimeScale(t *testing.T) {
	b, clk := clockBus(t, func(c *Config) { c.TimeScale = 600 })
	var h healthBody
	b.do("GET", pathHealth, nil).json(t, &h)
	if h.TimeScale != 600 {
		t.Fatalf("health time_scale %v", h.TimeScale)
	}
	t0 := clk.unix()
	id := b.publish(`{"goal":"g","payload":1,"max_attempts":2,"backoff_base":60,"delay":60}`)
	if v := b.statusOf(id); !near(v.RunAt, t0+0.1) || !near(v.ExpiresAt, t0+144) {
		t.Fatalf("delay 60 s and TTL 24 h at scale 600: run_at t0+%.4f, expires_at t0+%.4f", v.RunAt-t0, v.ExpiresAt-t0)
	}
	clk.AdvanceTo(t0 + 0.1 - 0.001)
	if _, ok := b.claim(""); ok {
		t.Fatal("claimed before its delay of 60 s / 600")
	}
	clk.AdvanceTo(t0 + 0.1)
	c, ok := b.claim("")
	t1 := clk.unix()
	if !ok || c.ClaimTimeout != 60 || !near(c.ClaimExpiresAt, t1+0.1) {
		t.Fatalf("claim at scale 600: %v %+v", ok, c)
	}
	// After the lease: backoff 60*2^1 s + [0, 2) s of jitter, all / 600.
	if v := b.statusOf(id); v.RunAt < c.ClaimExpiresAt+0.2 || v.RunAt >= c.ClaimExpiresAt+0.2+2.0/600 {
		t.Fatalf("run_at %.4f after the lease's end", v.RunAt-c.ClaimExpiresAt)
	}
	r := b.do("POST", pathExtendClaim+id, map[string]any{"claim_token": c.ClaimToken, "seconds": 600})
	var m mutationResponse
	r.json(t, &m)
	if r.status != 200 || m.ClaimExpiresAt == nil || !near(*m.ClaimExpiresAt, t1+1) {
		t.Fatalf("extend 600 s at scale 600: %d %s", r.status, r.body)
	}
	b.do("POST", "/set/k", `{"value":1,"ttl":60}`)
	clk.AdvanceTo(t1 + 0.1 - 0.001)
	if r := b.do("GET", "/get/k", nil); r.status != 200 {
		t.Fatalf("ttl 60 s / 600, 1 ms before its end: %d", r.status)
	}
	clk.AdvanceTo(t1 + 0.1)
	if r := b.do("GET", "/get/k", nil); r.status != 404 {
		t.Fatalf("ttl 60 s / 600, at its end: %d", r.status)
	}
	// The rate-limit minute lasts 100 ms.
	tk := b.generateKey("scaled")
	for i := 1; i <= 60; i++ {
		if r := b.do("GET", "/get/x", nil, hdrAPIKey, tk); r.status != 404 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	if r := b.do("GET", "/get/x", nil, hdrAPIKey, tk); r.status != 429 || r.header.Get(hdrRetryAfter) != "1" {
		t.Fatalf("61st request: %d Retry-After %q", r.status, r.header.Get(hdrRetryAfter))
	}
	clk.Advance(100 * ms)
	if r := b.do("GET", "/get/x", nil, hdrAPIKey, tk); r.status != 404 {
		t.Fatalf("after a scaled minute: %d", r.status)
	}
	// The timestamp window is not scaled: 300 real seconds, not 0.5.
	s, _ := clockBus(t, func(c *Config) { c.TimeScale = 600; c.RequireSignatures = true; c.Clock = clk.Now })
	body := `{"goal":"g","payload":1}`
	if frac := clk.unix() - t0; !near(frac, 0.3) {
		t.Fatalf("the clock is t0+%.4f, want t0+0.3", frac)
	}
	old := strconv.FormatInt(clk.Now().Unix()-299, 10) // 299.3 s old
	if r := s.do("POST", pathIntent, body, s.signed("POST", pathIntent, body, old, "n1", false)...); r.status != 201 {
		t.Fatalf("a timestamp 299.3 s old at scale 600: %d %s", r.status, r.body)
	}
}

func TestFulfillFailExtend(t *testing.T) {
	b, clk := clockBus(t, nil)
	id := b.publish(`{"goal":"g","payload":1,"max_attempts":2,"backoff_base":1}`)
	c, _ := b.claim("")
	tk := b.generateKey("mallory")
	for _, tc := range []struct {
		name, path string
		body       any
		hdr        []string
		status     int
		code       string
	}{
		{"fulfill without token", pathFulfill + id, nil, nil, 400, codeInvalidRequest},
		{"fulfill token number", pathFulfill + id, `{"claim_token":5}`, nil, 400, codeInvalidClaimToken},
		{"fulfill wrong token", pathFulfill + id, map[string]string{"claim_token": strings.Repeat("0", 32)}, nil, 404, codeNotFound},
		{"fulfill other key", pathFulfill + id, map[string]string{"claim_token": c.ClaimToken}, []string{hdrAPIKey, tk}, 404, codeNotFound},
		{"fulfill bad result_type", pathFulfill + id, map[string]any{"claim_token": c.ClaimToken, "result_type": "xml"}, nil, 400, codeInvalidResultType},
		{"fulfill text not string", pathFulfill + id, map[string]any{"claim_token": c.ClaimToken, "result_type": "text", "result": 5}, nil, 400, codeInvalidResult},
		{"fail error number", pathFail + id, map[string]any{"claim_token": c.ClaimToken, "error": 5}, nil, 400, codeInvalidError},
		{"extend no seconds", pathExtendClaim + id, map[string]any{"claim_token": c.ClaimToken}, nil, 400, codeInvalidSeconds},
		{"extend 9 s", pathExtendClaim + id, map[string]any{"claim_token": c.ClaimToken, "seconds": 9}, nil, 400, codeInvalidSeconds},
		{"extend 3601 s", pathExtendClaim + id, map[string]any{"claim_token": c.ClaimToken, "seconds": 3601}, nil, 400, codeInvalidSeconds},
		{"extend unknown id", pathExtendClaim + "nope", map[string]any{"claim_token": c.ClaimToken, "seconds": 60}, nil, 404, codeNotFound},
		{"extend", pathExtendClaim + id, map[string]any{"claim_token": c.ClaimToken, "seconds": 600}, nil, 200, ""},
		{"fail", pathFail + id, map[string]any{"claim_token": c.ClaimToken, "error": "boom"}, nil, 200, ""},
		{"fail twice", pathFail + id, map[string]any{"claim_token": c.ClaimToken}, nil, 404, codeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do("POST", tc.path, tc.body, tc.hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" && r.code(t) != tc.code {
				t.Fatalf("code %s", r.body)
			}
		})
	}
	// The fail (at attempt 1) requeues with backoff_base*2^1 + [0, 2) s.
	now := clk.unix()
	v := b.statusOf(id)
	if v.Status != stateOpen || v.Error == nil || *v.Error != "boom" || v.RunAt < now+2 || v.RunAt >= now+4 {
		t.Fatalf("after fail at %.3f: %+v; want run_at in [now+2, now+4)", now, v)
	}
	clk.AdvanceTo(v.RunAt - 0.001)
	if _, ok := b.claim(""); ok {
		t.Fatal("claimed 1 ms before the backoff ends")
	}
	// Second attempt, at the end of the backoff: fail again → dead with a dead letter.
	clk.AdvanceTo(v.RunAt)
	c2, ok := b.claim("")
	if !ok || c2.ClaimAttempts != 2 {
		t.Fatalf("second claim %+v", c2)
	}
	r := b.do("POST", pathFail+id, map[string]any{"claim_token": c2.ClaimToken, "error": "again"})
	var m mutationResponse
	r.json(t, &m)
	if m.Status != stateDead {
		t.Fatalf("fail at max attempts: %s", r.body)
	}
	// Fulfil with the token in a header and no body.
	id2 := b.publish(`{"goal":"h","payload":1,"namespace":"h"}`)
	c3, _ := b.claim("?namespace=h")
	if r := b.do("POST", pathFulfill+id2, nil, hdrClaimToken, c3.ClaimToken); r.status != 200 {
		t.Fatalf("fulfil with header: %d %s", r.status, r.body)
	}
	r = b.do("GET", pathResult+id2, nil)
	var res intentView
	r.json(t, &res)
	if res.Status != stateFulfilled || res.Result != nil || res.CompletedAt == nil {
		t.Fatalf("result %s", r.body)
	}
	// An extension 1 ms before the lease ends renews it; at the end of the
	// lease it fails (§7.4 "A lease extension MUST fail if the existing
	// lease has already expired."), and so do fulfil and fail.
	id3 := b.publish(`{"goal":"x","payload":1,"namespace":"x"}`)
	c4, _ := b.claim("?namespace=x")
	clk.Advance(60*time.Second - ms)
	r = b.do("POST", pathExtendClaim+id3, map[string]any{"claim_token": c4.ClaimToken, "seconds": 60})
	var ext mutationResponse
	r.json(t, &ext)
	if r.status != 200 || ext.ClaimExpiresAt == nil || !near(*ext.ClaimExpiresAt, clk.unix()+60) {
		t.Fatalf("extend 1 ms before expiry: %d %s", r.status, r.body)
	}
	clk.AdvanceTo(*ext.ClaimExpiresAt)
	for _, path := range []string{pathExtendClaim, pathFulfill, pathFail} {
		if r := b.do("POST", path+id3, map[string]any{"claim_token": c4.ClaimToken, "seconds": 60}); r.status != 404 || r.code(t) != codeNotFound {
			t.Fatalf("%s at the end of the lease: %d %s", path, r.status, r.body)
		}
	}
	// Result with a stored value, and access control.
	id4 := b.publish(`{"goal":"y","payload":1,"namespace":"y"}`)
	c5, _ := b.claim("?namespace=y")
	b.do("POST", pathFulfill+id4, map[string]any{"claim_token": c5.ClaimToken, "result": "done", "result_type": "text"})
	r = b.do("GET", pathResult+id4, nil)
	r.json(t, &res)
	if string(res.Result) != `"done"` || *res.ResultType != "text" {
		t.Fatalf("result %s", r.body)
	}
	if r := b.do("GET", pathResult+id4, nil, hdrAPIKey, tk); r.status != 403 {
		t.Fatalf("foreign result: %d", r.status)
	}
	if r := b.do("GET", pathResult+id4, nil, hdrAPIKey, "", hdrAdminToken, testAdmin); r.status != 200 {
		t.Fatalf("admin result: %d", r.status)
	}
}

func TestHMAC(t *testing.T) {
	b, clk := clockBus(t, func(c *Config) { c.RequireSignatures = true })
	sign := func(method, path, body, ts, nonce string) []string {
		return b.signed(method, path, body, ts, nonce, false)
	}
	at := func(d int64) string { return strconv.FormatInt(clk.Now().Unix()+d, 10) } // the clock stands on a whole second
	now := at(0)
	body := `{"goal":"g","payload":1}`
	for _, tc := range []struct {
		name   string
		method string
		path   string
		body   string
		hdr    []string
		status int
		code   string
	}{
		{"unsigned", "POST", "/intent", body, nil, 401, codeSignatureRequired},
		{"signed", "POST", "/intent", body, sign("POST", "/intent", body, now, "n1"), 201, ""},
		{"nonce replay", "POST", "/intent", body, sign("POST", "/intent", body, now, "n1"), 401, codeNonceReused},
		{"query sorted", "POST", "/claim?namespace=x&goal=a", "", sign("POST", "/claim?namespace=x&goal=a", "", now, "n2"), 204, ""},
		{"bad signature", "POST", "/intent", body, sign("POST", "/intent", body+" ", now, "n3"), 401, codeInvalidSignature},
		// §5.2 "Reject timestamps outside ±300 seconds of server time".
		{"300 s behind", "POST", "/intent", body, sign("POST", "/intent", body, at(-300), "w1"), 201, ""},
		{"300 s ahead", "POST", "/intent", body, sign("POST", "/intent", body, at(300), "w2"), 201, ""},
		{"301 s behind", "POST", "/intent", body, sign("POST", "/intent", body, at(-301), "n4"), 401, codeInvalidTimestamp},
		{"301 s ahead", "POST", "/intent", body, sign("POST", "/intent", body, at(301), "w3"), 401, codeInvalidTimestamp},
		{"bad timestamp", "POST", "/intent", body, sign("POST", "/intent", body, "yesterday", "n5"), 401, codeInvalidTimestamp},
		{"upper-case hex", "POST", "/intent", body, func() []string {
			h := sign("POST", "/intent", body, now, "n6")
			h[5] = strings.ToUpper(h[5])
			return h
		}(), 401, codeInvalidSignature},
		{"health needs none", "GET", "/health", "", nil, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(tc.method, tc.path, tc.body, tc.hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" && r.code(t) != tc.code {
				t.Fatalf("code: %s", r.body)
			}
		})
	}
}

func TestAdminAuthAndMetrics(t *testing.T) {
	b := newBus(t, nil)
	basic := func(user, pass string) string {
		req, _ := http.NewRequest("GET", "/", nil)
		req.SetBasicAuth(user, pass)
		return req.Header.Get("Authorization")
	}
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		status             int
	}{
		{"token", "POST", pathCleanup, []string{hdrAdminToken, testAdmin}, 200},
		{"basic", "POST", pathCleanup, []string{"Authorization", basic("admin", testDash)}, 200},
		{"basic wrong user", "POST", pathCleanup, []string{"Authorization", basic("root", testDash)}, 401},
		{"no fallback to BUS_SECRET", "POST", pathCleanup, []string{hdrAdminToken, testSecret}, 401},
		{"api key is not admin", "GET", pathDead, nil, 401},
		{"dashboard", "GET", pathDashboard, []string{"Authorization", basic("admin", testDash)}, 200},
		{"dashboard prompt", "GET", pathDashboard, nil, 401},
		{"metrics bearer", "GET", pathMetrics, []string{"Authorization", "Bearer " + testMetric}, 200},
		{"metrics admin", "GET", pathMetrics, []string{hdrAdminToken, testAdmin}, 200},
		{"metrics wrong bearer", "GET", pathMetrics, []string{"Authorization", "Bearer x"}, 401},
		{"metrics api key", "GET", pathMetrics, nil, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(tc.method, tc.path, nil, tc.hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.name == "dashboard prompt" && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Basic") {
				t.Fatal("no Basic prompt")
			}
			if tc.name == "dashboard" && !strings.Contains(string(r.body), "<html") {
				t.Fatal("dashboard is not HTML")
			}
		})
	}
	b.publish(`{"goal":"g","payload":1,"namespace":"m"}`)
	b.generateKey("k")
	r := b.do("GET", pathMetrics, nil, "Authorization", "Bearer "+testMetric)
	for _, want := range []string{`intent_bus_intents_total{status="open",namespace="m"} 1`, "intent_bus_dead_letters_total 0", "intent_bus_tester_keys_total 1", "# TYPE intent_bus_intents_total gauge"} {
		if !strings.Contains(string(r.body), want) {
			t.Errorf("metrics lack %q:\n%s", want, r.body)
		}
	}
	for _, tc := range []struct {
		name, path string
		body       string
		status     int
		code       string
	}{
		{"generate no owner", pathGenerateKey, `{}`, 400, codeInvalidRequest},
		{"generate owner number", pathGenerateKey, `{"owner":1}`, 400, codeInvalidOwner},
		{"revoke unknown", pathRevokeKey, `{"api_key":"tk_nope"}`, 404, codeNotFound},
		{"revoke bad", pathRevokeKey, `{"api_key":[]}`, 400, codeInvalidAPIKey},
		{"purge unconfirmed", pathPurge, `{"confirm":false}`, 400, codeInvalidConfirm},
		{"purge bad namespace", pathPurge, `{"confirm":true,"namespace":"a b"}`, 400, codeInvalidNamespace},
		{"cancel unknown", pathAdminIntents + "nope/cancel", ``, 404, codeNotFound},
		{"detail unknown", pathAdminIntents + "nope", ``, 404, codeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			if tc.name == "detail unknown" {
				method = "GET"
			}
			r := b.do(method, tc.path, tc.body, hdrAdminToken, testAdmin)
			if r.status != tc.status || r.code(t) != tc.code {
				t.Fatalf("%d %s", r.status, r.body)
			}
		})
	}
}

func TestTesterKeysAndAdminOps(t *testing.T) {
	b, clk := clockBus(t, nil)
	tk := b.generateKey("carol")
	// §15 "Rate limiting: 60 requests/minute per tester key": the publish
	// and 59 reads fill the minute that starts with the publish; the 61st
	// request waits for its end.
	id := b.publish(`{"goal":"g","payload":{"x":1},"namespace":"t"}`, hdrAPIKey, tk)
	for i := 2; i <= 60; i++ {
		if r := b.do("GET", pathStatus+id, nil, hdrAPIKey, tk); r.status != 200 {
			t.Fatalf("request %d of the minute: %d %s", i, r.status, r.body)
		}
	}
	last := b.do("GET", pathStatus+id, nil, hdrAPIKey, tk)
	if last.status != 429 || last.code(t) != codeRateLimited || last.header.Get(hdrRetryAfter) != "60" {
		t.Fatalf("61st request: %d Retry-After %q %s", last.status, last.header.Get(hdrRetryAfter), last.body)
	}
	clk.Advance(59*time.Second + 500*ms)
	if r := b.do("GET", pathStatus+id, nil, hdrAPIKey, tk); r.status != 429 || r.header.Get(hdrRetryAfter) != "1" {
		t.Fatalf("0.5 s before the minute ends: %d Retry-After %q", r.status, r.header.Get(hdrRetryAfter))
	}
	clk.Advance(500 * ms) // the minute has ended: a new one starts
	if r := b.do("GET", pathStatus+id, nil, hdrAPIKey, tk); r.status != 200 {
		t.Fatalf("after the minute: %d %s", r.status, r.body)
	}
	// The main key is exempt.
	if r := b.do("GET", pathStatus+id, nil, hdrAPIKey, testSecret); r.status != 403 {
		t.Fatalf("main key: %d", r.status)
	}
	r := b.do("GET", pathAdminIntents+id, nil, hdrAdminToken, testAdmin)
	var v intentView
	r.json(t, &v)
	if string(v.Payload) != `{"x":1}` || v.Publisher != tk {
		t.Fatalf("admin detail %s", r.body)
	}
	if r := b.do("POST", pathAdminIntents+id+"/cancel", nil, hdrAdminToken, testAdmin); r.status != 200 {
		t.Fatalf("cancel %d", r.status)
	}
	if r := b.do("GET", pathDeadLetter+id, nil, hdrAdminToken, testAdmin); r.status != 200 {
		t.Fatalf("dead letter after cancel %d", r.status)
	}
	if r := b.do("POST", pathRevokeKey, map[string]string{"api_key": tk}, hdrAdminToken, testAdmin); r.status != 200 {
		t.Fatalf("revoke %d %s", r.status, r.body)
	}
	if r := b.do("POST", pathClaim, nil, hdrAPIKey, tk); r.status != 401 {
		t.Fatalf("revoked key: %d", r.status)
	}
	b.publish(`{"goal":"g","payload":1,"namespace":"p1"}`)
	b.publish(`{"goal":"g","payload":1,"namespace":"p2"}`)
	r = b.do("POST", pathPurge, `{"confirm":true,"namespace":"p1"}`, hdrAdminToken, testAdmin)
	var pr map[string]any
	r.json(t, &pr)
	if pr["intents_deleted"] != float64(1) {
		t.Fatalf("purge namespace %s", r.body)
	}
	r = b.do("POST", pathPurge, `{"confirm":true}`, hdrAdminToken, testAdmin)
	r.json(t, &pr)
	if pr["intents_deleted"] != float64(2) || pr["dead_letters_deleted"] != float64(1) {
		t.Fatalf("purge all %s", r.body)
	}
}

func TestKVStore(t *testing.T) {
	b, clk := clockBus(t, nil)
	tk := b.generateKey("dave")
	for _, tc := range []struct {
		name, method, path string
		body               any
		hdr                []string
		status             int
		code               string
		value              string
	}{
		{"get missing", "GET", "/get/a", nil, nil, 404, codeNotFound, ""},
		{"set", "POST", "/set/a", `{"value":"hello"}`, nil, 200, "", ""},
		{"get", "GET", "/get/a", nil, nil, 200, "", `"hello"`},
		{"isolated per key", "GET", "/get/a", nil, []string{hdrAPIKey, tk}, 404, codeNotFound, ""},
		{"set object", "POST", "/set/a", `{"value":{"n":1},"ttl":86400}`, nil, 200, "", ""},
		{"get object", "GET", "/get/a", nil, nil, 200, "", `{"n":1}`},
		{"no value", "POST", "/set/a", `{"ttl":5}`, nil, 400, codeInvalidRequest, ""},
		{"ttl too long", "POST", "/set/a", `{"value":1,"ttl":86401}`, nil, 400, codeInvalidTTL, ""},
		{"ttl zero", "POST", "/set/a", `{"value":1,"ttl":0}`, nil, 400, codeInvalidTTL, ""},
		{"short ttl", "POST", "/set/b", `{"value":1,"ttl":1}`, nil, 200, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.do(tc.method, tc.path, tc.body, tc.hdr...)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" && r.code(t) != tc.code {
				t.Fatalf("code %s", r.body)
			}
			if tc.value != "" {
				var g getResponse
				r.json(t, &g)
				if string(g.Value) != tc.value {
					t.Fatalf("value %s", g.Value)
				}
			}
		})
	}
	// "b" was set with ttl 1 at the start: it lives until 1 s later, exactly;
	// "a" with ttl 86400.
	clk.Advance(time.Second - ms)
	if r := b.do("GET", "/get/b", nil); r.status != 200 {
		t.Fatalf("ttl 1, 1 ms before it ends: %d %s", r.status, r.body)
	}
	clk.Advance(ms)
	if r := b.do("GET", "/get/b", nil); r.status != 404 || r.code(t) != codeNotFound {
		t.Fatalf("ttl 1, at its end: %d %s", r.status, r.body)
	}
	clk.Advance(86400*time.Second - time.Second - ms)
	if r := b.do("GET", "/get/a", nil); r.status != 200 {
		t.Fatalf("ttl 86400, 1 ms before it ends: %d %s", r.status, r.body)
	}
	clk.Advance(ms)
	if r := b.do("GET", "/get/a", nil); r.status != 404 {
		t.Fatalf("ttl 86400, at its end: %d %s", r.status, r.body)
	}
	// Without a ttl a value lives 600 s (§7.9).
	b.do("POST", "/set/c", `{"value":3}`)
	clk.Advance(600*time.Second - ms)
	if r := b.do("GET", "/get/c", nil); r.status != 200 {
		t.Fatalf("default ttl, 1 ms before 600 s: %d", r.status)
	}
	clk.Advance(ms)
	if r := b.do("GET", "/get/c", nil); r.status != 404 {
		t.Fatalf("default ttl, at 600 s: %d", r.status)
	}
}

func TestMaintenanceAndHTTPS(t *testing.T) {
	b := newBus(t, func(c *Config) { c.Maintenance = true })
	if r := b.do("POST", pathIntent, `{"goal":"g","payload":1}`); r.status != 503 || r.code(t) != codeMaintenance {
		t.Fatalf("maintenance: %d %s", r.status, r.body)
	}
	if r := b.do("GET", pathHealth, nil); r.status != 200 {
		t.Fatalf("health in maintenance: %d", r.status)
	}
	if r := b.do("POST", pathCleanup, nil, hdrAdminToken, testAdmin); r.status != 200 {
		t.Fatalf("admin in maintenance: %d", r.status)
	}
	h := newBus(t, func(c *Config) { c.EnforceHTTPS = true; c.TrustProxy = true })
	if r := h.do("GET", pathHealth, nil); r.status != 403 || r.code(t) != codeHTTPSRequired {
		t.Fatalf("plain HTTP: %d", r.status)
	}
	if r := h.do("GET", pathHealth, nil, "X-Forwarded-Proto", "https"); r.status != 200 {
		t.Fatalf("behind TLS proxy: %d", r.status)
	}
}

// rows counts the rows of table straight from the database.
func (b *testBus) rows(table string) int {
	b.t.Helper()
	var n int
	if err := b.srv.rdb.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		b.t.Fatal(err)
	}
	return n
}

// cleanupAt runs POST /admin/cleanup at the clock's instant.
func (b *testBus) cleanupAt() cleanupStats {
	b.t.Helper()
	r := b.do("POST", pathCleanup, nil, hdrAdminToken, testAdmin)
	if r.status != 200 {
		b.t.Fatalf("cleanup: %d %s", r.status, r.body)
	}
	var st cleanupStats
	r.json(b.t, &st)
	return st
}

// TestCleanup: what one pass removes at each boundary (§8.4, §15), on the
// fake clock.
func TestCleanup(t *testing.T) {
	b, clk := clockBus(t, nil)
	t0 := clk.unix()
	open := b.publish(`{"goal":"g","payload":1}`) // expires t0+86400 (§4.2: 24 h)
	dead := b.publish(`{"goal":"g","payload":1,"max_attempts":1,"namespace":"d"}`)
	b.claim("?namespace=d") // the lease ends t0+60 with the attempts spent
	requeue := b.publish(`{"goal":"g","payload":1,"namespace":"r"}`)
	b.claim("?namespace=r") // the lease ends t0+60 with attempts left
	done := b.publish(`{"goal":"g","payload":1,"namespace":"f"}`)
	cf, _ := b.claim("?namespace=f")
	b.do("POST", pathFulfill+done, map[string]string{"claim_token": cf.ClaimToken}) // completed t0, kept 7 days
	b.publish(`{"goal":"g","payload":1,"namespace":"i"}`, hdrIdempotencyKey, "k1")  // key kept 24 h
	b.do("POST", "/set/k", `{"value":1,"ttl":30}`)                                  // expires t0+30

	clk.Advance(30*time.Second - ms)
	if st := b.cleanupAt(); st != (cleanupStats{}) {
		t.Fatalf("at t0+29.999 the pass removed %+v", st)
	}
	clk.Advance(ms) // t0+30
	if st := b.cleanupAt(); st != (cleanupStats{StoreDeleted: 1}) {
		t.Fatalf("at t0+30: %+v, want the KV entry only", st)
	}
	clk.Advance(30 * time.Second) // t0+60: both leases have ended
	if st := b.cleanupAt(); st != (cleanupStats{ExpiredClaimsDead: 1, ExpiredClaimsRequeued: 1}) {
		t.Fatalf("at t0+60: %+v", st)
	}
	if v := b.statusOf(dead); v.Status != stateDead {
		t.Fatalf("status %+v", v)
	}
	if v := b.statusOf(requeue); v.Status != stateOpen || v.Error == nil || *v.Error != "lease expired" {
		t.Fatalf("requeued %+v", v)
	}
	if r := b.do("GET", pathDeadLetter+dead, nil, hdrAdminToken, testAdmin); r.status != 200 {
		t.Fatalf("dead letter: %d", r.status)
	}
	clk.AdvanceTo(t0 + 86400 - 0.001)
	if st := b.cleanupAt(); st != (cleanupStats{}) {
		t.Fatalf("1 ms before 24 h: %+v", st)
	}
	clk.AdvanceTo(t0 + 86400)
	// Both open intents expire (the requeued one too: its TTL runs from
	// publication); the idempotency key of 24 h goes with them.
	if st := b.cleanupAt(); st != (cleanupStats{ExpiredOpenDeleted: 3, IdempotencyDeleted: 1}) {
		t.Fatalf("at 24 h: %+v", st)
	}
	if r := b.do("GET", pathStatus+open, nil); r.status != 404 {
		t.Fatalf("expired open intent: %d", r.status)
	}
	// Fulfilled at t0, dead at t0+60 (and its dead letter): kept 7 days.
	clk.AdvanceTo(t0 + retentionSeconds - 0.001)
	if st := b.cleanupAt(); st != (cleanupStats{}) {
		t.Fatalf("1 ms before 7 days: %+v", st)
	}
	clk.AdvanceTo(t0 + retentionSeconds)
	if st := b.cleanupAt(); st != (cleanupStats{FulfilledDeleted: 1}) {
		t.Fatalf("at 7 days: %+v", st)
	}
	clk.AdvanceTo(t0 + retentionSeconds + 60)
	if st := b.cleanupAt(); st != (cleanupStats{DeadDeleted: 1, DeadLettersDeleted: 1}) {
		t.Fatalf("at 7 days after the death: %+v", st)
	}
	if n := b.rows("intents") + b.rows("dead_letters") + b.rows("store") + b.rows("idempotency"); n != 0 {
		t.Fatalf("%d rows left", n)
	}
}

// TestCleanupLazy: traffic runs the pass once the interval has passed
// (§16 "Cleanup is lazy: triggered by request traffic"); a failed pass
// backs off 60 s (§16 "the server enforces a 60-second backoff before
// retrying").
func TestCleanupLazy(t *testing.T) {
	b, clk := clockBus(t, func(c *Config) { c.CleanupInterval = 300 * time.Second })
	// trafficAt sends one client request and waits for the pass it may start.
	trafficAt := func() {
		t.Helper()
		if r := b.do("GET", "/get/none", nil); r.status != 404 {
			t.Fatalf("traffic: %d %s", r.status, r.body)
		}
		b.srv.cleanWG.Wait()
	}
	b.do("POST", "/set/k", `{"value":1,"ttl":1}`) // expired from t0+1, deleted by a pass
	clk.Advance(300*time.Second - ms)
	trafficAt()
	if n := b.rows("store"); n != 1 {
		t.Fatalf("a pass ran 1 ms before the interval: %d store rows", n)
	}
	if err := failpoint.Enable(FailpointInsideCleanup, `return("error")`); err != nil {
		t.Fatal(err)
	}
	clk.Advance(ms) // t0+300: the pass runs, and fails
	trafficAt()
	failpoint.Disable(FailpointInsideCleanup)
	if n := b.rows("store"); n != 1 {
		t.Fatalf("a failed pass deleted rows: %d store rows", n)
	}
	clk.Advance(60*time.Second - ms) // 1 ms before the back-off ends
	trafficAt()
	if n := b.rows("store"); n != 1 {
		t.Fatalf("a pass ran during the 60 s back-off: %d store rows", n)
	}
	clk.Advance(ms)
	trafficAt()
	if n := b.rows("store"); n != 0 {
		t.Fatalf("no pass 60 s after the failed one: %d store rows", n)
	}
	// The next pass is due a full interval later.
	b.do("POST", "/set/k2", `{"value":1,"ttl":1}`)
	clk.Advance(300*time.Second - ms)
	trafficAt()
	if n := b.rows("store"); n != 1 {
		t.Fatalf("a pass ran before the interval: %d store rows", n)
	}
	clk.Advance(ms)
	trafficAt()
	if n := b.rows("store"); n != 0 {
		t.Fatalf("no pass at the interval: %d store rows", n)
	}

	// A failing manual pass is reported and leaves the rows alone.
	b.do("POST", "/set/k3", `{"value":1,"ttl":1}`)
	clk.Advance(2 * time.Second)
	if err := failpoint.Enable(FailpointInsideCleanup, `return("error")`); err != nil {
		t.Fatal(err)
	}
	r := b.do("POST", pathCleanup, nil, hdrAdminToken, testAdmin)
	failpoint.Disable(FailpointInsideCleanup)
	if r.status < 500 || b.rows("store") != 1 {
		t.Fatalf("cleanup with failpoint: %d %s", r.status, r.body)
	}
}

func TestMutantsListed(t *testing.T) {
	ms := Mutants()
	if len(ms) < 12 {
		t.Fatalf("%d mutants, want at least 12", len(ms))
	}
	seen := map[string]bool{}
	for _, m := range ms {
		if m.Name == "" || m.Description == "" || m.Breaks == "" || seen[m.Name] {
			t.Fatalf("bad mutant %+v", m)
		}
		seen[m.Name] = true
		s, err := Open(context.Background(), Config{DBPath: filepath.Join(t.TempDir(), "m.db"), Secret: "x", Mutant: m.Name})
		if err != nil {
			t.Fatalf("open %s: %v", m.Name, err)
		}
		s.Close()
	}
}

// TestMutantsMisbehave shows that each mutant changes the behaviour the
// clean server is tested for: the same probe passes clean and fails mutated.
func TestMutantsMisbehave(t *testing.T) {
	probes := map[string]func(b *testBus, clk *fakeClock) error{
		MutantIdemKeyIgnored: func(b *testBus, clk *fakeClock) error {
			a := b.publish(`{"goal":"g","payload":1}`, hdrIdempotencyKey, "k")
			if c := b.publish(`{"goal":"g","payload":1}`, hdrIdempotencyKey, "k"); c != a {
				return fmt.Errorf("replay created %s, first %s", c, a)
			}
			return nil
		},
		MutantIdemConflictAccepted: func(b *testBus, clk *fakeClock) error {
			b.publish(`{"goal":"g","payload":1}`, hdrIdempotencyKey, "k")
			if r := b.do("POST", pathIntent, `{"goal":"g","payload":2}`, hdrIdempotencyKey, "k"); r.status != 422 {
				return fmt.Errorf("conflict answered %d", r.status)
			}
			return nil
		},
		MutantStaleTokenAccepted: func(b *testBus, clk *fakeClock) error {
			id := b.publish(`{"goal":"g","payload":1}`)
			b.claim("")
			if r := b.do("POST", pathFulfill+id, map[string]string{"claim_token": "x"}); r.status != 404 {
				return fmt.Errorf("wrong token answered %d", r.status)
			}
			return nil
		},
		MutantPriorityInverted: func(b *testBus, clk *fakeClock) error {
			b.publish(`{"goal":"g","payload":1,"priority":1}`)
			hi := b.publish(`{"goal":"g","payload":1,"priority":2}`)
			if c, _ := b.claim(""); c.ID != hi {
				return fmt.Errorf("claimed the lower priority")
			}
			return nil
		},
		MutantNamespaceLeak: func(b *testBus, clk *fakeClock) error {
			b.publish(`{"goal":"g","payload":1,"namespace":"a"}`)
			if _, ok := b.claim("?namespace=b"); ok {
				return fmt.Errorf("claimed across namespaces")
			}
			return nil
		},
		MutantVisibilityLeak: func(b *testBus, clk *fakeClock) error {
			tk := b.generateKey("o")
			b.publish(`{"goal":"g","payload":1}`)
			if _, ok := b.claim("", hdrAPIKey, tk); ok {
				return fmt.Errorf("another key claimed a private intent")
			}
			return nil
		},
		MutantNoRetryAfter: func(b *testBus, clk *fakeClock) error {
			if r := b.do("POST", pathClaim, nil); r.header.Get(hdrRetryAfter) != "1" {
				return fmt.Errorf("204 without Retry-After")
			}
			return nil
		},
		MutantNonJSON404: func(b *testBus, clk *fakeClock) error {
			var e errorBody
			if json.Unmarshal(b.do("GET", "/nope", nil).body, &e) != nil {
				return fmt.Errorf("404 is not JSON")
			}
			return nil
		},
		MutantMissingSecurityHeaders: func(b *testBus, clk *fakeClock) error {
			if b.do("GET", "/health", nil).header.Get("X-Frame-Options") != "DENY" {
				return fmt.Errorf("no X-Frame-Options")
			}
			return nil
		},
		MutantAdminSecretFallback: func(b *testBus, clk *fakeClock) error {
			if r := b.do("POST", pathCleanup, nil, hdrAdminToken, testSecret); r.status != 401 {
				return fmt.Errorf("BUS_SECRET accepted as admin token")
			}
			return nil
		},
		MutantNoBackoff: func(b *testBus, clk *fakeClock) error {
			id := b.publish(`{"goal":"g","payload":1,"backoff_base":3600}`)
			c, _ := b.claim("")
			b.do("POST", pathFail+id, map[string]string{"claim_token": c.ClaimToken})
			if _, ok := b.claim(""); ok {
				return fmt.Errorf("reclaimed at once after fail")
			}
			return nil
		},
		MutantMaxAttemptsIgnored: func(b *testBus, clk *fakeClock) error {
			id := b.publish(`{"goal":"g","payload":1,"max_attempts":1}`)
			c, _ := b.claim("")
			b.do("POST", pathFail+id, map[string]string{"claim_token": c.ClaimToken})
			if st := b.statusOf(id).Status; st != stateDead {
				return fmt.Errorf("status %s after the last attempt failed", st)
			}
			return nil
		},
		MutantNonceReplayAccepted: func(b *testBus, clk *fakeClock) error {
			ts := strconv.FormatInt(clk.Now().Unix(), 10)
			h := b.signed("POST", "/claim", "", ts, "n", false)
			b.do("POST", pathClaim, nil, h...)
			if r := b.do("POST", pathClaim, nil, h...); r.status != 401 {
				return fmt.Errorf("replayed nonce answered %d", r.status)
			}
			return nil
		},
	}
	probes[MutantLeaseNeverExpires] = func(b *testBus, clk *fakeClock) error {
		b.publish(`{"goal":"g","payload":1,"backoff_base":1}`)
		b.claim("")
		// The lease ends at 60 s, the backoff 1*2^1 + [0, 2) s later.
		clk.Advance(64 * time.Second)
		if _, ok := b.claim(""); !ok {
			return fmt.Errorf("an expired lease was not reclaimed after its backoff")
		}
		return nil
	}
	probes[MutantExtendAfterExpiry] = func(b *testBus, clk *fakeClock) error {
		id := b.publish(`{"goal":"g","payload":1,"backoff_base":3600}`)
		c, _ := b.claim("")
		clk.Advance(60 * time.Second) // the lease has ended
		if r := b.do("POST", pathExtendClaim+id, map[string]any{"claim_token": c.ClaimToken, "seconds": 60}); r.status != 404 {
			return fmt.Errorf("extend after expiry answered %d", r.status)
		}
		return nil
	}
	probes[MutantClaimNonAtomic] = func(b *testBus, clk *fakeClock) error {
		for round := range 5 {
			ns := fmt.Sprintf("race%d", round)
			b.publish(`{"goal":"g","payload":1,"namespace":"` + ns + `"}`)
			var wg sync.WaitGroup
			var mu sync.Mutex
			won := 0
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("POST", b.ts.URL+pathClaim+"?namespace="+ns, nil)
					req.Header.Set(hdrAPIKey, testSecret)
					res, err := b.ts.Client().Do(req)
					if err != nil {
						return
					}
					res.Body.Close()
					if res.StatusCode == 200 {
						mu.Lock()
						won++
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if won != 1 {
				return fmt.Errorf("%d workers claimed the same intent", won)
			}
		}
		return nil
	}
	// The racy mutants' windows are widened, so their races show at every
	// run (the failpoints are evaluated in those mutants' branches only).
	for _, fp := range []string{FailpointIdemRacyWindow, FailpointClaimRacyWindow} {
		if err := failpoint.Enable(fp, `return("barrier")`); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { failpoint.Disable(fp) })
	}
	// Every probe runs on a fake clock that only it moves.
	for name, probe := range probes {
		t.Run(name, func(t *testing.T) {
			if err := probe(clockBus(t, nil)); err != nil {
				t.Fatalf("clean server fails the probe: %v", err)
			}
			if err := probe(clockBus(t, func(c *Config) { c.Mutant = name })); err == nil {
				t.Fatalf("mutant %s passes the probe", name)
			}
		})
	}
}

// TestOpenIntentCap: a tester key gets 429 limit_exceeded at 2,000 open
// intents; the main key is exempt; cancelling one frees a slot.
func TestOpenIntentCap(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes 2,000 intents")
	}
	b, clk := clockBus(t, nil)
	tk := b.generateKey("erin")
	body := `{"goal":"g","payload":1,"namespace":"cap"}`
	// 60 concurrent publishes a minute of the fake clock, the most the rate
	// limit allows (they share group commits); 34 minutes stay well inside
	// the intents' 24 h.
	for done := 0; done < testerOpenCap; {
		n := min(testerRateLimit, testerOpenCap-done)
		statuses := make(chan int, n)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req, _ := http.NewRequest("POST", b.ts.URL+pathIntent, strings.NewReader(body))
				req.Header.Set(hdrAPIKey, tk)
				res, err := b.ts.Client().Do(req)
				if err != nil {
					statuses <- 0
					return
				}
				res.Body.Close()
				statuses <- res.StatusCode
			}()
		}
		wg.Wait()
		close(statuses)
		for st := range statuses {
			if st != 201 {
				t.Fatalf("publish %d–%d: a request answered %d", done+1, done+n, st)
			}
		}
		done += n
		clk.Advance(time.Minute)
	}
	if n := b.rows("intents"); n != testerOpenCap {
		t.Fatalf("%d intents", n)
	}
	r := b.do("POST", pathIntent, body, hdrAPIKey, tk)
	if r.status != 429 || r.code(t) != codeLimitExceeded || r.header.Get(hdrRetryAfter) == "" {
		t.Fatalf("2001st intent: %d %s", r.status, r.body)
	}
	b.publish(body) // the main key is exempt
	var id string
	if err := b.srv.rdb.QueryRow(b.srv.sql(`SELECT id FROM intents WHERE publisher = ? LIMIT 1`), tk).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if r := b.do("POST", pathAdminIntents+id+"/cancel", nil, hdrAdminToken, testAdmin); r.status != 200 {
		t.Fatalf("cancel: %d", r.status)
	}
	b.publish(body, hdrAPIKey, tk)
}
