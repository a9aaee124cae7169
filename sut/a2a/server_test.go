package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const testKey = "test-key"

// fakeClock is a clock moved by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type testEnv struct {
	t     testing.TB
	srv   *Server
	base  string
	clock *fakeClock
	n     int
	cfg   Config
}

// testStore, when set (TestPostgres), gives newEnv a PostgreSQL store.
var testStore func(testing.TB) string

// testDB is the store of a test's queue: a fresh SQLite file, or a fresh
// PostgreSQL database under TestPostgres.
func testDB(t testing.TB) string {
	if testStore != nil {
		return testStore(t)
	}
	return filepath.Join(t.TempDir(), "a2a.db")
}

func newEnv(t testing.TB, mutant string, mod ...func(*Config)) *testEnv {
	t.Helper()
	clock := &fakeClock{now: time.Unix(1_767_225_600, 0)}
	c := Config{DBPath: filepath.Join(t.TempDir(), "a2a.db"), APIKey: testKey, Mutant: mutant, Clock: clock.Now}
	if testStore != nil {
		c.Store, c.ReplicaID = testStore(t), "r1"
	}
	for _, f := range mod {
		f(&c)
	}
	srv, err := Open(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &testEnv{t: t, srv: srv, base: hs.URL, clock: clock, cfg: c}
}

type resp struct {
	status int
	body   []byte
}

func (r resp) String() string { return fmt.Sprintf("%d %s", r.status, r.body) }

func (r resp) json() map[string]any {
	var m map[string]any
	json.Unmarshal(r.body, &m)
	return m
}

func (e *testEnv) do(method, path string, body any) resp {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		if b, ok := body.([]byte); ok {
			rd = bytes.NewReader(b)
		} else {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
	}
	req, _ := http.NewRequest(method, e.base+path, rd)
	req.Header.Set("X-API-KEY", testKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 500 {
		e.t.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return resp{res.StatusCode, b}
}

// agent returns a fresh agent id.
func (e *testEnv) agent(name string) string { e.n++; return fmt.Sprintf("agent:%s-%d", name, e.n) }

// task is a task body; safety "" sends no metadata; key nil: no key.
func task(sender, recipient, kind, safety string, key *string) map[string]any {
	t := map[string]any{"sender": sender, "recipient": recipient, "intent_text": "work", "task_kind": kind}
	if safety != "" {
		m := map[string]any{"duplicate_safety": safety}
		if key != nil {
			m["key"] = *key
		}
		t["idempotency"] = m
	}
	return t
}

func str(s string) *string { return &s }

func entryOf(r resp) map[string]any { m, _ := r.json()["entry"].(map[string]any); return m }

func taskID(entry map[string]any) string {
	t, _ := entry["task"].(map[string]any)
	id, _ := t["id"].(string)
	return id
}

func num(v any) int { f, _ := v.(float64); return int(f) }

func (e *testEnv) enqueue(body map[string]any) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/a2a/tasks", body)
	if r.status != 201 {
		e.t.Fatalf("enqueue: %s", r)
	}
	return entryOf(r)
}

func (e *testEnv) lease(recipient string) (map[string]any, int) {
	e.t.Helper()
	r := e.do("POST", "/a2a/lease", map[string]any{"recipient": recipient})
	return entryOf(r), r.status
}

func (e *testEnv) status(id string) map[string]any {
	e.t.Helper()
	return entryOf(e.do("GET", "/a2a/tasks/"+id, nil))
}

func (e *testEnv) retry(policy map[string]any) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/a2a/retry-stale", policy)
	if r.status != 200 {
		e.t.Fatalf("retry-stale: %s", r)
	}
	rep, _ := r.json()["report"].(map[string]any)
	return rep
}

func (e *testEnv) audit(query string) []map[string]any {
	e.t.Helper()
	var out struct {
		Rows []map[string]any `json:"rows"`
	}
	json.Unmarshal(e.do("GET", "/a2a/audit?"+query, nil).body, &out)
	return out.Rows
}

func ids(list any) []string {
	var out []string
	l, _ := list.([]any)
	for _, x := range l {
		m, _ := x.(map[string]any)
		id, _ := m["task_id"].(string)
		out = append(out, id)
	}
	return out
}

func reasonOf(rep map[string]any, id string) string {
	l, _ := rep["skipped"].([]any)
	for _, x := range l {
		m, _ := x.(map[string]any)
		if m["task_id"] == id {
			r, _ := m["reason"].(string)
			return r
		}
	}
	return ""
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// staleLease enqueues a task to a fresh recipient, leases it and ages the
// lease past the default minimum lease age.
func (e *testEnv) staleLease(kind, safety string, key *string) (id, recipient string) {
	e.t.Helper()
	recipient = e.agent("recv")
	id = taskID(e.enqueue(task(e.agent("send"), recipient, kind, safety, key)))
	if _, st := e.lease(recipient); st != 200 {
		e.t.Fatalf("lease: %d", st)
	}
	e.clock.advance(6 * time.Minute)
	return id, recipient
}

var enabled = map[string]any{"enabled": true, "scan_limit": 1000, "max_requeues": 1000}

func TestOpenRefuses(t *testing.T) {
	for _, c := range []Config{{APIKey: "k"}, {DBPath: "x.db"}, {DBPath: "x.db", APIKey: "k", Mutant: "nope"}, {Store: "mysql://x", APIKey: "k"}} {
		if _, err := Open(t.Context(), c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestMalformedNever5xx(t *testing.T) {
	e := newEnv(t, "")
	for _, c := range []struct {
		method, path string
		body         []byte
		want         int
	}{
		{"POST", "/a2a/tasks", []byte(`{`), 400},
		{"POST", "/a2a/tasks", []byte(`{"sender":1}`), 400},
		{"POST", "/a2a/tasks", []byte(`{"sender":"a","recipient":"b","idempotency":{"duplicate_safety":"maybe"}}`), 400},
		{"POST", "/a2a/tasks", []byte(`{"sender":"a","recipient":"b","idempotency":{"duplicate_safety":"idempotent","key":"  "}}`), 400},
		{"POST", "/a2a/lease", []byte(`[]`), 400},
		{"POST", "/a2a/tasks/nope/result", []byte(`{"status":"completed"}`), 404},
		{"POST", "/a2a/tasks/nope/result", []byte(`{"status":"done"}`), 400},
		{"POST", "/a2a/retry-stale", []byte(`{"max_attempts":-1}`), 400},
		{"POST", "/a2a/retry-stale", []byte(`{"scan_limit":0}`), 400},
		{"POST", "/a2a/repair", []byte(`{"task_id":"x","reason":"r","command":{"action":"requeue"}}`), 400},
		{"GET", "/a2a/queue?limit=x", nil, 400},
		{"GET", "/a2a/nothing", nil, 404},
		// Text a PostgreSQL column refuses: malformed, or naming nothing, on both stores.
		{"POST", "/a2a/tasks", []byte(`{"sender":"a\u0000","recipient":"b"}`), 400},
		{"POST", "/a2a/tasks", []byte(`{"sender":"a","recipient":"b","task_kind":"k\u0000"}`), 400},
		{"POST", "/a2a/tasks", []byte(`{"sender":"a","recipient":"b","idempotency":{"duplicate_safety":"idempotent","key":"k\u0000"}}`), 400},
		{"POST", "/a2a/lease", []byte(`{"recipient":"r\u0000"}`), 400},
		{"POST", "/a2a/results/drain", []byte(`{"sender":"s\u0000"}`), 400},
		{"GET", "/a2a/tasks/%FF%00", nil, 404},
		{"POST", "/a2a/tasks/%00/result", []byte(`{"status":"completed"}`), 404},
		{"POST", "/a2a/repair", []byte(`{"task_id":"x\u0000","reason":"r","command":{"action":"force_error"}}`), 404},
		{"GET", "/a2a/audit?task_id=%00", nil, 400},
	} {
		if r := e.do(c.method, c.path, c.body); r.status != c.want {
			t.Errorf("%s %s %s: %s, want %d", c.method, c.path, c.body, r, c.want)
		}
	}
	req, _ := http.NewRequest("GET", e.base+"/a2a/queue", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 {
		t.Errorf("no API key: %d", res.StatusCode)
	}
}

// TestLifecycle: enqueue, lease (attempt 1), post, post again (no-op),
// drain, compact.
func TestLifecycle(t *testing.T) {
	e := newEnv(t, "")
	s, r := e.agent("s"), e.agent("r")
	ent := e.enqueue(task(s, r, "k", SafetyIdempotent, str("key-1")))
	id := taskID(ent)
	if ent["state"] != StateQueued || num(ent["attempt"]) != 0 {
		t.Fatalf("enqueued %v", ent)
	}
	l, st := e.lease(r)
	if st != 200 || taskID(l) != id || num(l["attempt"]) != 1 || l["state"] != StateInFlight {
		t.Fatalf("lease %d %v", st, l)
	}
	if _, st := e.lease(r); st != 204 {
		t.Fatalf("second lease %d", st)
	}
	res := map[string]any{"status": "completed", "content": map[string]any{"invoice": 42}}
	for i := range 2 {
		p := e.do("POST", "/a2a/tasks/"+id+"/result", res)
		if p.status != 200 || (i == 1) != (p.json()["duplicate"] == true) {
			t.Fatalf("post %d: %s", i, p)
		}
	}
	if p := e.do("POST", "/a2a/tasks/"+id+"/result", map[string]any{"status": "completed", "content": 1}); p.status != 409 {
		t.Fatalf("another result: %s", p)
	}
	d := e.do("POST", "/a2a/results/drain", map[string]any{"sender": s})
	if n := len(d.json()["results"].([]any)); n != 1 {
		t.Fatalf("drained %d", n)
	}
	if c := e.do("POST", "/a2a/compact", nil).json(); num(c["dropped"]) != 1 {
		t.Fatalf("compact %v", c)
	}
	if r := e.do("GET", "/a2a/tasks/"+id, nil); r.status != 404 {
		t.Fatalf("compacted status %s", r)
	}
}

func TestSchedulerFromEnv(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	s, err := SchedulerFromEnv(get, 1)
	if err != nil || s.Enabled {
		t.Fatalf("default %+v %v: the scheduler is opt-in", s, err)
	}
	env["COVENANT_A2A_AUTO_RETRY_SCHEDULER"] = "1"
	env["COVENANT_A2A_AUTO_RETRY_INTERVAL_MS"] = "1000"
	s, err = SchedulerFromEnv(get, 10)
	if err != nil || !s.Enabled || s.Interval != 100*time.Millisecond || s.Policy.MinLeaseAgeMS != 30000 || !s.Policy.Enabled {
		t.Fatalf("%+v %v", s, err)
	}
	env["COVENANT_A2A_AUTO_RETRY_INTERVAL_MS"] = "0"
	if _, err := SchedulerFromEnv(get, 1); err == nil {
		t.Error("interval 0 accepted")
	}
	env["COVENANT_A2A_AUTO_RETRY_SCHEDULER"] = "maybe"
	if _, err := SchedulerFromEnv(get, 1); err == nil {
		t.Error("a non-boolean opt-in accepted")
	}
}

// TestHealthPublishesTimeScale: GET /health says how fast the queue runs
// (the scale its durations were divided by; 1 when none was given), so a
// harness told nothing of it still knows.
func TestHealthPublishesTimeScale(t *testing.T) {
	for _, tc := range []struct {
		scale, want float64
	}{{0, 1}, {100, 100}} {
		e := newEnv(t, "", func(c *Config) { c.TimeScale = tc.scale })
		r := e.do(http.MethodGet, "/health", nil)
		if got, ok := r.json()["time_scale"].(float64); r.status != 200 || !ok || got != tc.want {
			t.Errorf("time scale %v: GET /health answered %s, want 200 with time_scale %v", tc.scale, r, tc.want)
		}
	}
}
