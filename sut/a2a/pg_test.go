package a2a

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idscheck/idscheck/pgtest"
)

// TestPostgres runs the queue's behaviour tests, every mutant's scenario
// and the crash tests on a PostgreSQL store: the same behaviour as on
// SQLite.
func TestPostgres(t *testing.T) {
	pgtest.Shared(t)
	testStore = pgSchemas(t)
	defer func() { testStore = nil }()
	for name, f := range map[string]func(*testing.T){
		"MalformedNever5xx": TestMalformedNever5xx, "Lifecycle": TestLifecycle, "Mutants": TestMutants,
		"CrashAfterLeaseCommitNoRedelivery": TestCrashAfterLeaseCommitNoRedelivery,
		"CacheSurvivesKillAndCompaction":    TestCacheSurvivesKillAndCompaction,
	} {
		t.Run(name, f)
	}
}

// replica opens another replica of e's queue on e's store (PostgreSQL),
// named id, behind its own HTTP server, on e's clock.
func (e *testEnv) replica(t testing.TB, id, mutant string) *testEnv {
	t.Helper()
	cfg := e.cfg
	cfg.ReplicaID, cfg.Mutant = id, mutant
	srv, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatalf("open replica %s: %v", id, err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &testEnv{t: t, srv: srv, base: hs.URL, clock: e.clock, cfg: cfg, n: int(replicaAgents.Add(1)) * 100000}
}

// replicaAgents numbers the replicas' ranges of agent ids.
var replicaAgents atomic.Int64

// pgSchemas returns a store maker for t: each store a fresh, empty one
// (pgtest.Store).
func pgSchemas(t *testing.T) func(testing.TB) string {
	t.Helper()
	return func(tb testing.TB) string { return pgtest.Store(tb) }
}

// newPGEnv is a queue on a fresh PostgreSQL store, replica r1.
func newPGEnv(t *testing.T, stores func(testing.TB) string, mutant string) *testEnv {
	t.Helper()
	store := stores(t)
	return newEnv(t, mutant, func(c *Config) { c.Store, c.ReplicaID = store, "r1" })
}

// three is e and two more replicas of it.
func three(t *testing.T, e *testEnv) []*testEnv {
	return []*testEnv{e, e.replica(t, "r2", e.cfg.Mutant), e.replica(t, "r3", e.cfg.Mutant)}
}

// TestReplicasShareStore: three replicas over one PostgreSQL store are one
// queue: concurrent leases on every replica lease each task once; one
// enqueue delivered to every replica at once stores one task; a result
// posted to one replica is replayed from the cache by another; the retry
// gate run by every replica at once (their schedulers) requeues each stale
// idempotent task once, with one auto_requeue row, and no unsafe one.
func TestReplicasShareStore(t *testing.T) {
	pgtest.Shared(t)
	stores := pgSchemas(t)
	t.Run("each task leased once", func(t *testing.T) {
		reps := three(t, newPGEnv(t, stores, ""))
		r := reps[0].agent("recv")
		const tasks = 40
		for i := range tasks {
			reps[i%3].enqueue(task("agent:s", r, "k", SafetyUnsafe, nil))
		}
		var mu sync.Mutex
		leased := map[string]int{}
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				for {
					l, st := reps[i%3].lease(r)
					if st != 200 {
						if st != 204 {
							t.Errorf("lease: %d", st)
						}
						return
					}
					mu.Lock()
					leased[taskID(l)]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(leased) != tasks {
			t.Errorf("%d tasks leased, want %d", len(leased), tasks)
		}
		for id, n := range leased {
			if n != 1 {
				t.Errorf("task %s leased %d times", id, n)
			}
		}
	})
	t.Run("one enqueue delivered to every replica", func(t *testing.T) {
		reps := three(t, newPGEnv(t, stores, ""))
		body := task("agent:s", "agent:r", "k", SafetyIdempotent, str("storm"))
		body["id"] = "storm-task"
		codes := make(chan int, 30)
		var wg sync.WaitGroup
		for i := range 30 {
			wg.Go(func() { codes <- reps[i%3].do("POST", "/a2a/tasks", body).status })
		}
		wg.Wait()
		close(codes)
		created := 0
		for c := range codes {
			switch c {
			case 201:
				created++
			case 409:
			default:
				t.Errorf("a delivery answered %d", c)
			}
		}
		if created != 1 {
			t.Errorf("%d deliveries created the task, want 1", created)
		}
		if _, st := reps[1].lease("agent:r"); st != 200 {
			t.Fatalf("lease %d", st)
		}
		if _, st := reps[2].lease("agent:r"); st != 204 {
			t.Fatalf("a second lease: %d", st)
		}
	})
	t.Run("cache replay on another replica", func(t *testing.T) {
		reps := three(t, newPGEnv(t, stores, ""))
		if n := cacheScenario(t, reps); n != 0 {
			t.Errorf("%d same-key tasks were queued again on another replica", n)
		}
	})
	t.Run("every replica's gate at once", func(t *testing.T) {
		reps := three(t, newPGEnv(t, stores, ""))
		var idem, unsafe []string
		for i := range 10 {
			id, _ := reps[i%3].staleLeaseNoAdvance("k", SafetyIdempotent, str(fmt.Sprintf("g%d", i)))
			idem = append(idem, id)
			id, _ = reps[i%3].staleLeaseNoAdvance("k", SafetyUnsafe, str(fmt.Sprintf("u%d", i)))
			unsafe = append(unsafe, id)
		}
		reps[0].clock.advance(6 * time.Minute)
		p := Policy{Enabled: true, MinLeaseAgeMS: 300000, MaxAttempts: 3, MaxRequeues: 100, ScanLimit: 100}
		var mu sync.Mutex
		requeued := map[string]int{}
		var wg sync.WaitGroup
		for i := range 9 {
			wg.Go(func() {
				rep, err := reps[i%3].srv.retryStale(t.Context(), p, true)
				if err != nil {
					t.Errorf("replica %d's pass: %v", i%3, err)
					return
				}
				mu.Lock()
				for _, q := range rep.Requeued {
					requeued[q.TaskID]++
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		for _, id := range idem {
			rows := reps[1].audit("action=auto_requeue&task_id=" + id)
			if requeued[id] != 1 || len(rows) != 1 || reps[2].status(id)["state"] != StateQueued {
				t.Errorf("task %s: requeued by %d passes, %d auto_requeue rows, state %v", id, requeued[id], len(rows), reps[2].status(id)["state"])
			}
		}
		for _, id := range unsafe {
			if requeued[id] != 0 || len(reps[0].audit("action=auto_requeue&task_id="+id)) != 0 || reps[0].status(id)["state"] != StateInFlight {
				t.Errorf("unsafe task %s requeued", id)
			}
		}
		if n := len(reps[0].audit("action=" + ActionSchedulerRun)); n != 9 {
			t.Errorf("%d scan summaries, want one a pass (9)", n)
		}
	})
}

// staleLeaseNoAdvance enqueues a task to a fresh recipient and leases it
// (the caller moves the shared clock).
func (e *testEnv) staleLeaseNoAdvance(kind, safety string, key *string) (id, recipient string) {
	e.t.Helper()
	recipient = e.agent("recv")
	id = taskID(e.enqueue(task(e.agent("send"), recipient, kind, safety, key)))
	if _, st := e.lease(recipient); st != 200 {
		e.t.Fatalf("lease: %d", st)
	}
	return id, recipient
}

// cacheScenario: for 8 keys, a task is enqueued, leased and completed on
// reps[0]; a task under the same cache key is then enqueued on the last
// replica. It returns how many of those were not answered from the cache
// (queued, leasable: executed again).
func cacheScenario(t *testing.T, reps []*testEnv) int {
	t.Helper()
	a, b := reps[0], reps[len(reps)-1]
	again := 0
	for i := range 8 {
		s, r, key := a.agent("s"), a.agent("r"), fmt.Sprintf("key-%d", i)
		id := taskID(a.enqueue(task(s, r, "k", SafetyIdempotent, &key)))
		if _, st := a.lease(r); st != 200 {
			t.Fatalf("lease %d", st)
		}
		if p := a.do("POST", "/a2a/tasks/"+id+"/result", map[string]any{"status": "completed", "content": i}); p.status != 200 {
			t.Fatalf("post: %s", p)
		}
		e := b.enqueue(task(s, r, "k", SafetyIdempotent, &key))
		if res, _ := e["result"].(map[string]any); e["state"] != StateResultPending || res["replayed"] != true {
			again++
		}
	}
	return again
}

// leaseScenario: 16 rounds, each of two tasks enqueued to a fresh
// recipient and two leases sent at once, one on each replica in turn. It
// returns how many tasks were leased twice.
func leaseScenario(t *testing.T, reps []*testEnv) int {
	t.Helper()
	twice := 0
	for round := range 16 {
		r := fmt.Sprintf("agent:r-%d", round)
		for range 2 {
			reps[0].enqueue(task("agent:s", r, "k", SafetyUnsafe, nil))
		}
		got := make([]string, 2)
		barrier := make(chan struct{})
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Go(func() {
				<-barrier
				l, st := reps[(round+j)%len(reps)].lease(r)
				if st == 200 {
					got[j] = taskID(l)
				}
			})
		}
		close(barrier)
		wg.Wait()
		if got[0] != "" && got[0] == got[1] {
			twice++
		}
	}
	return twice
}

// TestReplicaMutants: each replica mutant is correct on one replica and
// breaks its rule over two replicas sharing the store; the correct queue
// is correct on both.
func TestReplicaMutants(t *testing.T) {
	pgtest.Shared(t)
	stores := pgSchemas(t)
	scenarios := map[string]func(*testing.T, []*testEnv) int{
		MutantReplicaLocalCache: cacheScenario,
		MutantCheckThenInsert:   leaseScenario,
	}
	for _, m := range ReplicaMutants() {
		t.Run(m.Name, func(t *testing.T) {
			scenario := scenarios[m.Name]
			if scenario == nil || m.Breaks == "" || m.Description == "" {
				t.Fatalf("mutant %+v: no scenario, rule or description", m)
			}
			one := newPGEnv(t, stores, m.Name)
			if n := scenario(t, []*testEnv{one}); n != 0 {
				t.Errorf("on one replica %s broke %s %d times: it must be correct there", m.Name, m.Breaks, n)
			}
			a := newPGEnv(t, stores, m.Name)
			if n := scenario(t, []*testEnv{a, a.replica(t, "r2", m.Name)}); n == 0 {
				t.Errorf("on two replicas %s never broke %s", m.Name, m.Breaks)
			}
			c := newPGEnv(t, stores, "")
			if n := scenario(t, []*testEnv{c, c.replica(t, "r2", "")}); n != 0 {
				t.Errorf("the correct queue on two replicas broke %s %d times", m.Breaks, n)
			}
		})
	}
}

// cutProxy forwards 127.0.0.1:port to target until cut, which closes its
// connections and refuses new ones until heal.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestPostgresStoreLost: a queue whose store is cut off answers every
// write and read 503 (a retryable answer, never a false success), and
// serves again once the store is back, with nothing of the failed calls
// applied.
func TestPostgresStoreLost(t *testing.T) {
	pgtest.Shared(t)
	store := pgSchemas(t)(t)
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	e := newEnv(t, "", func(c *Config) { c.Store, c.ReplicaID = u.String(), "r1" })
	r := e.agent("r")
	id := taskID(e.enqueue(task(e.agent("s"), r, "k", SafetyUnsafe, nil)))
	p.setCut(true)
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/a2a/tasks", `{"sender":"s","recipient":"` + r + `","intent_text":"x"}`},
		{"POST", "/a2a/lease", `{"recipient":"` + r + `"}`},
		{"GET", "/a2a/tasks/" + id, ""},
		{"POST", "/a2a/results/drain", `{"sender":"s"}`},
	} {
		req, _ := http.NewRequest(c.method, e.base+c.path, strings.NewReader(c.body))
		req.Header.Set("X-API-KEY", testKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 503 || !strings.Contains(string(b), "retry") {
			t.Errorf("%s %s with the store cut: %d %s, want 503 and a retry", c.method, c.path, res.StatusCode, b)
		}
	}
	p.setCut(false)
	l, st := e.lease(r)
	if st != 200 || taskID(l) != id || num(l["attempt"]) != 1 {
		t.Fatalf("the store back, the lease: %d %v (want the task, attempt 1)", st, l)
	}
	if _, st := e.lease(r); st != 204 {
		t.Fatalf("a second task was stored while the store was cut (%d)", st)
	}
}
