package ids

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/pgtest"
	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// pgStore is a fresh, empty store (pgtest.Store).
func pgStore(t testing.TB) string { return pgtest.Store(t) }

// TestPostgres runs the server's behaviour tests, every mutant's scenario
// and the crash test on a PostgreSQL store: the same behaviour as on
// SQLite.
func TestPostgres(t *testing.T) {
	pgtest.Shared(t)
	testStore = pgStore
	defer func() { testStore = nil }()
	for _, c := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"KeyWorkedExample", TestKeyWorkedExample}, {"KeyInputs", TestKeyInputs}, {"ReplayByteIdentical", TestReplayByteIdentical},
		{"RejectedOutcomeIsTerminal", TestRejectedOutcomeIsTerminal}, {"InProgressDuplicate", TestInProgressDuplicate},
		{"ConcurrentStorm", TestConcurrentStorm}, {"Collision", TestCollision}, {"ReplayToAnotherActor", TestReplayToAnotherActor},
		{"Confirmations", TestConfirmations}, {"TenantScope", TestTenantScope}, {"RateLimit", TestRateLimit},
		{"WindowExpiry", TestWindowExpiry}, {"S1LostReply", TestS1LostReply}, {"NonS1LostReplyReconciles", TestNonS1LostReplyReconciles},
		{"SinkDown", TestSinkDown}, {"Outbox", TestOutbox}, {"RegistryAndRoutes", TestRegistryAndRoutes}, {"Malformed", TestMalformed},
		{"StatusURLAnswers", TestStatusURLAnswers}, {"ReplayByReference", TestReplayByReference}, {"Mutants", TestMutants},
		{"Crash", func(t *testing.T) {
			if testing.Short() {
				t.Skip("runs server processes")
			}
			crashTest(t, func(t *testing.T) string { return pgStore(t) })
		}},
	} {
		t.Run(c.name, c.f)
	}
}

// replica opens another replica of e's server on e's store (PostgreSQL),
// named id, behind its own HTTP server, with e's sink and clock.
func (e *testEnv) replica(t testing.TB, id, mutant string) *testEnv {
	t.Helper()
	cfg := e.cfg
	cfg.ReplicaID, cfg.Mutant = id, mutant
	srv, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open replica %s: %v", id, err)
	}
	r := &testEnv{t: t, srv: srv, ts: httptest.NewServer(srv.Handler()), sink: e.sink, clock: e.clock, cfg: cfg, hc: e.hc}
	t.Cleanup(func() { r.ts.Close(); srv.Close() })
	return r
}

func newPGEnv(t *testing.T, mutant string, mod ...func(*Config)) *testEnv {
	store := pgStore(t)
	return newEnv(t, mutant, append([]func(*Config){func(c *Config) { c.Store, c.ReplicaID = store, "r1" }}, mod...)...)
}

// storm sends n copies of env (each with its own command_id) at once, in
// turn over reps, and returns the answers.
func storm(reps []*testEnv, n int, env func(i int) map[string]any) []resp {
	start := make(chan struct{})
	out := make([]resp, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := mustJSON(env(i))
			<-start
			out[i] = reps[i%len(reps)].do("POST", "/commands", b)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// TestReplicasShareStore: replicas over one PostgreSQL store are one
// server: a retry on another replica replays; a storm spread over them
// executes once, whatever the shielding; the duplicates of a key are
// rate-limited together; their dispatchers deliver each outbox row once;
// a replica leaves the record another replica is executing alone, and so
// does one that starts meanwhile.
func TestReplicasShareStore(t *testing.T) {
	pgtest.Shared(t)
	t.Run("retry on the other replica", func(t *testing.T) {
		a := newPGEnv(t, "")
		b := a.replica(t, "r2", "")
		first := a.send(note("x"))
		again := b.send(note("x", "command_id", "cmd-2"))
		if first.status != 201 || again.status != 201 || again.decision() != decReplayed || !bytes.Equal(first.body, again.body) {
			t.Fatalf("first %s, retry on the other replica %s %q", first, again, again.decision())
		}
		key := keyOf(t, first)
		if n := a.sink.effectsOf(key); n != 1 {
			t.Fatalf("%d effects", n)
		}
		if ev := b.evidence("acme", key); len(ev) != 2 || ev[0]["decision"] != decFirstSeen || ev[1]["decision"] != decReplayed {
			t.Fatalf("evidence: %v", ev)
		}
	})
	for _, cmd := range []struct {
		name string
		env  func(kv ...any) map[string]any
	}{
		{"note.add (no shielding)", func(kv ...any) map[string]any { return note("storm", kv...) }},
		{"payment.capture (S1)", func(kv ...any) map[string]any { return payment(700, kv...) }},
		{"refund.issue (S2, outbox)", func(kv ...any) map[string]any { return refund(700, kv...) }},
	} {
		t.Run("storm over three "+cmd.name, func(t *testing.T) {
			a := newPGEnv(t, "")
			reps := []*testEnv{a, a.replica(t, "r2", ""), a.replica(t, "r3", "")}
			out := storm(reps, 60, func(i int) map[string]any { return cmd.env("command_id", fmt.Sprint("c", i)) })
			firsts, key := 0, ""
			for _, r := range out {
				switch {
				case (r.status == 201 || r.status == 202) && r.decision() == decFirstSeen:
					firsts++
					key = keyOf(t, r)
				case (r.status == 201 || r.status == 202) && r.decision() == decReplayed:
				default:
					t.Fatalf("answer %s %q", r, r.decision())
				}
			}
			if firsts != 1 {
				t.Fatalf("%d first_seen answers", firsts)
			}
			eventually(t, 10*time.Second, "the effect is made", func() bool { return a.sink.effectsOf(key) >= 1 })
			eventually(t, 10*time.Second, "every replica's outbox is drained", func() bool { return a.srv.outboxOpen(t) == 0 })
			if n := a.sink.effectsOf(key); n != 1 {
				t.Fatalf("%d effects of the storm", n)
			}
		})
	}
	t.Run("rate limit over both", func(t *testing.T) {
		a := newPGEnv(t, "")
		reps := []*testEnv{a, a.replica(t, "r2", "")}
		if r := a.send(note("rl")); r.status != 201 {
			t.Fatal(r)
		}
		for i := range rateLimitMax {
			if r := reps[i%2].send(note("rl", "command_id", fmt.Sprint("d", i))); r.status != 201 {
				t.Fatalf("duplicate %d: %s", i, r)
			}
		}
		for _, rep := range reps {
			if r := rep.send(note("rl", "command_id", "over")); r.status != 429 || r.header.Get("Retry-After") != "60" {
				t.Fatalf("over the limit, counted over both replicas: %s", r)
			}
		}
	})
	t.Run("each outbox row is dispatched once", func(t *testing.T) {
		a := newPGEnv(t, "")
		reps := []*testEnv{a, a.replica(t, "r2", ""), a.replica(t, "r3", "")}
		a.sink.holdPosts()
		var keys []string
		for i := range 30 {
			r := reps[i%3].send(refund(100+i, "command_id", fmt.Sprint("r", i)))
			if r.status != 201 {
				t.Fatalf("refund %d: %s", i, r)
			}
			keys = append(keys, keyOf(t, r))
		}
		// Every dispatcher has had its turns while the first POSTs are held.
		a.sink.waitArrivals(3, 5*time.Second)
		a.sink.waitArrivals(1, 600*time.Millisecond)
		a.sink.release()
		eventually(t, 15*time.Second, "the outbox drains", func() bool { return a.srv.outboxOpen(t) == 0 })
		for _, k := range keys {
			if p := a.sink.postsOf(k); p != 1 {
				t.Errorf("refund %s: %d POSTs, want 1", k, p)
			}
		}
	})
	t.Run("a replica leaves the other's record in progress", func(t *testing.T) {
		a := newPGEnv(t, "")
		a.sink.holdPosts()
		first := make(chan resp, 1)
		go func() { first <- a.send(note("held")) }()
		if a.sink.waitArrivals(1, 5*time.Second) != 1 {
			t.Fatal("the first POST did not reach the sink")
		}
		b := a.replica(t, "r2", "") // starts (and resumes its own records) while r1's is in flight
		if r := b.send(note("held", "command_id", "cmd-2")); r.status != 202 || r.decision() != decReplayed {
			t.Fatalf("a duplicate on the other replica: %s", r)
		}
		// r2's resumer runs every 200 ms: over a second, it must not touch r1's record.
		if a.sink.waitArrivals(1, time.Second) != 0 {
			t.Fatal("the other replica executed a record r1 is executing")
		}
		a.sink.release()
		if r := <-first; r.status != 201 || a.sink.postsOf(a.srv.keyOfNote(t, "held")) != 1 {
			t.Fatalf("first %s, %d POSTs", r, a.sink.postsOf(a.srv.keyOfNote(t, "held")))
		}
	})
	t.Run("a replica starts while a transaction hangs", func(t *testing.T) {
		a := newPGEnv(t, "")
		if r := a.send(note("x")); r.status != 201 {
			t.Fatal(r)
		}
		// A transaction left open on every table, as a replica cut from the
		// store in the middle of one leaves it.
		db, err := sql.Open("pgx", a.cfg.Store) // no idle timeout: it hangs as long as the test wants
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		for _, table := range []string{"records", "evidence", "confirmations", "outbox", "rate_windows"} {
			if _, err := tx.Exec("LOCK TABLE " + table + " IN ROW EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
		}
		opened := make(chan error, 1)
		go func() {
			cfg := a.cfg
			cfg.ReplicaID = "r2"
			srv, err := Open(context.Background(), cfg)
			if err == nil {
				srv.Close()
			}
			opened <- err
		}()
		select {
		case err := <-opened:
			if err != nil {
				t.Fatalf("open: %v", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("a replica waits for a transaction of another to open")
		}
	})
	t.Run("a silent transaction ends", func(t *testing.T) {
		a := newPGEnv(t, "")
		var v string
		if err := a.srv.wdb.QueryRow("SHOW idle_in_transaction_session_timeout").Scan(&v); err != nil || v != pgstore.IdleInTransaction {
			t.Fatalf("idle_in_transaction_session_timeout %q (%v), want %s", v, err, pgstore.IdleInTransaction)
		}
	})
	t.Run("a lost store is a 503", func(t *testing.T) {
		a := newPGEnv(t, "")
		b := a.replica(t, "r2", "")
		b.srv.wdb.Close() // what a replica cut from its store sees
		for _, env := range []map[string]any{note("lost"), payment(5), refund(5)} {
			r := b.send(env)
			if r.status != 503 || r.json(t)["code"] != codeUnavailable || r.header.Get("Retry-After") == "" {
				t.Fatalf("a command with the store lost: %s", r)
			}
		}
		if r := b.get("/commands/cmd-1"); r.status != 503 {
			t.Fatalf("a status read with the store lost: %s", r)
		}
		if r := a.send(note("lost")); r.status != 201 || r.decision() != decFirstSeen {
			t.Fatalf("the retry on a replica that has its store: %s", r)
		}
	})
}

// replicaScenario sends, for 8 keys, a retry after the original's answer
// (on another replica) and a pair of concurrent duplicates (on two), over
// reps; it returns how many keys took effect more than once.
func replicaScenario(t *testing.T, reps []*testEnv) int {
	sink := reps[0].sink
	dup := 0
	for i := range 8 {
		seq, conc := fmt.Sprint("seq", i), fmt.Sprint("conc", i)
		reps[0].send(note(seq))
		reps[len(reps)-1].send(note(seq, "command_id", "retry"))
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); reps[(j+i)%len(reps)].send(note(conc, "command_id", fmt.Sprint("c", j))) }()
		}
		wg.Wait()
		for _, k := range []string{seq, conc} {
			if sink.effectsOf(reps[0].srv.keyOfNote(t, k)) > 1 {
				dup++
			}
		}
	}
	return dup
}

// TestReplicaMutants: each replica mutant is correct on one replica (no
// key takes effect twice) and executes twice over two replicas sharing the
// store; the correct server is correct on both.
func TestReplicaMutants(t *testing.T) {
	pgtest.Shared(t)
	for _, m := range ReplicaMutants() {
		t.Run(m.Name, func(t *testing.T) {
			if !ruleIDs[m.Breaks] || m.Description == "" {
				t.Fatalf("mutant %+v: unknown rule or no description", m)
			}
			one := newPGEnv(t, m.Name)
			if n := replicaScenario(t, []*testEnv{one}); n != 0 {
				t.Errorf("on one replica %s executed %d keys twice: it must be correct there", m.Name, n)
			}
			a := newPGEnv(t, m.Name)
			if n := replicaScenario(t, []*testEnv{a, a.replica(t, "r2", m.Name)}); n == 0 {
				t.Errorf("on two replicas %s executed no key twice", m.Name)
			}
			c := newPGEnv(t, "")
			if n := replicaScenario(t, []*testEnv{c, c.replica(t, "r2", "")}); n != 0 {
				t.Errorf("the correct server on two replicas executed %d keys twice", n)
			}
		})
	}
}

// TestPostgresRefusesWhatItCannotStore: a value PostgreSQL cannot hold in
// a text (a NUL character) is a malformed request, a 400, as a value the
// envelope's own checks refuse; never a 500, nor a 503 asking for a retry
// that cannot succeed.
func TestPostgresRefusesWhatItCannotStore(t *testing.T) {
	e := newPGEnv(t, "")
	if r := e.send(note("nul", "command_id", "cmd-\x00-1")); r.status != 400 {
		t.Fatalf("a command_id with a NUL: %s", r)
	}
	if r := e.get("/commands/a%00b"); r.status >= 500 {
		t.Fatalf("a status read of an id with a NUL: %s", r)
	}
}

// TestPostgresNeedsReplicaID: a shared store without a replica name is
// refused at Open (replicas left at one default name would take over each
// other's work).
func TestPostgresNeedsReplicaID(t *testing.T) {
	cfg := Config{Store: pgStore(t), SinkURL: "http://127.0.0.1:1"}
	if _, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "ReplicaID") {
		t.Fatalf("Open without ReplicaID: %v", err)
	}
}
