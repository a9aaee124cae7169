package atp

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/pgtest"
)

// TestPostgres runs the server's behaviour tests, and every mutant's
// scenario, on a PostgreSQL store: the same behaviour as on SQLite.
func TestPostgres(t *testing.T) {
	pgtest.Shared(t)
	testStore = schemaStore
	defer func() { testStore = nil }()
	for name, f := range map[string]func(*testing.T){
		"HealthConfigKeys": TestHealthConfigKeys, "Agents": TestAgents, "Settle": TestSettle,
		"IdempotencyKeyRules": TestIdempotencyKeyRules, "IntentRefused": TestIntentRefused, "NonceSingleUse": TestNonceSingleUse,
		"Expiry": TestExpiry, "Precondition": TestPrecondition, "ActionDedup": TestActionDedup,
		"KeyBoundToIntent": TestKeyBoundToIntent, "DeclineCompensates": TestDeclineCompensates, "LostConfirm": TestLostConfirm,
		"RailDown": TestRailDown, "LostCreate": TestLostCreate, "Callback": TestCallback,
		"ConcurrentExecutes": TestConcurrentExecutes, "Verify": TestVerify, "Restart": TestRestart,
		"SiteKeyRotation": TestSiteKeyRotation, "Routes": TestRoutes, "KATAuthorize": TestKATAuthorize,
		"KATReceipts": TestKATReceipts, "Mutants": TestMutants,
	} {
		t.Run(name, f)
	}
}

// replica opens another replica of e's server on e's store (PostgreSQL),
// named id, behind its own HTTP server, with e's rail and clock.
func (e *testEnv) replica(t testing.TB, id, mutant string, mod ...func(*Config)) *testEnv {
	t.Helper()
	cfg := e.cfg
	cfg.ReplicaID, cfg.Mutant = id, mutant
	for _, m := range mod {
		m(&cfg)
	}
	srv, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open replica %s: %v", id, err)
	}
	waitSwept(t, srv)
	r := *e
	r.t, r.srv, r.ts, r.cfg = t, srv, httptest.NewServer(srv.Handler()), cfg
	t.Cleanup(func() { e.rail.Release(); r.ts.Close(); srv.Close() })
	return &r
}

// schemaStore is a fresh, empty store (pgtest.Store).
func schemaStore(t testing.TB) string { return pgtest.Store(t) }

func newPGEnv(t *testing.T, mutant string, mod ...func(*Config)) *testEnv {
	u := schemaStore(t)
	return newEnv(t, mutant, append([]func(*Config){func(c *Config) { c.Store, c.ReplicaID = u, "r1" }}, mod...)...)
}

// TestOpenRefusesStore: a store that is not a PostgreSQL URL is refused.
func TestOpenRefusesStore(t *testing.T) {
	_, err := Open(context.Background(), Config{Store: "mysql://x", RailURL: "http://127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "postgres://") {
		t.Fatalf("a mysql store: %v", err)
	}
}

// TestReplicasShareStore: replicas over one PostgreSQL store are one
// server: an execute retried on another replica answers the row without a
// second charge; a storm over three charges once; the nonce consumed on
// one is consumed on all; a replica that starts while another charges
// leaves that row alone, and one that restarts resolves its own rows; a
// receipt signed on one replica with a key of its own verifies on another.
func TestReplicasShareStore(t *testing.T) {
	t.Run("retry on another replica", func(t *testing.T) {
		a := newPGEnv(t, "")
		b := a.replica(t, "r2", "")
		k := key("retry")
		if r := a.authorize(k, a.intent("int_r")); r.status != 200 {
			t.Fatal(r)
		}
		first := a.execute(k, "int_r")
		again := b.execute(k, "int_r")
		if first.status != 200 || again.status != 200 || string(first.body) != string(again.body) {
			t.Fatalf("first %s, retry on the other replica %s", first, again)
		}
		if got := b.authorize(k, a.intent("int_r")); got.status != 200 || got.tx(t).State != stateSettled {
			t.Fatalf("the authorize retried on the other replica: %s", got)
		}
		if n := a.rail.Charges("int_r"); n != 1 {
			t.Fatalf("%d charges", n)
		}
	})
	t.Run("storm over three", func(t *testing.T) {
		a := newPGEnv(t, "")
		reps := []*testEnv{a, a.replica(t, "r2", ""), a.replica(t, "r3", "")}
		k := key("storm")
		in := a.intent("int_s")
		var wg sync.WaitGroup
		auth := make([]resp, 12)
		for i := range auth {
			wg.Add(1)
			go func() { defer wg.Done(); auth[i] = reps[i%3].authorize(k, in) }()
		}
		wg.Wait()
		for _, r := range auth {
			if r.status != 200 {
				t.Fatalf("an authorize of the storm: %s", r)
			}
		}
		answers := make([]resp, 48)
		for i := range answers {
			wg.Add(1)
			go func() { defer wg.Done(); answers[i] = reps[i%3].execute(k, "int_s") }()
		}
		wg.Wait()
		for _, r := range answers {
			if x := r.tx(t); !(r.status == 200 && x.State == stateSettled) && !(r.status == 202 && x.State == stateExecuting) {
				t.Fatalf("an execute of the storm: %s", r)
			}
		}
		if a.rail.Charges("int_s") != 1 || a.rail.Created("int_s") != 1 {
			t.Fatalf("%d charges, %d payment intents", a.rail.Charges("int_s"), a.rail.Created("int_s"))
		}
	})
	t.Run("nonce consumed on every replica", func(t *testing.T) {
		a := newPGEnv(t, "")
		b := a.replica(t, "r2", "")
		in := a.intent("int_n")
		if r := a.authorize(key("n1"), in); r.status != 200 {
			t.Fatal(r)
		}
		if r := b.authorize(key("n2"), in); r.status != 409 || r.json(t)["error"] != codeNonceConsumed {
			t.Fatalf("the signed intent replayed under another key on the other replica: %s", r)
		}
	})
	t.Run("a starting replica leaves another's row", func(t *testing.T) {
		a := newPGEnv(t, "")
		k := key("held")
		a.authorize(k, a.intent("int_h"))
		a.rail.HoldConfirms()
		done := make(chan resp, 1)
		go func() { done <- a.execute(k, "int_h") }()
		if a.rail.WaitConfirms(1, 5*time.Second) != 1 {
			t.Fatal("no confirm arrived")
		}
		b := a.replica(t, "r2", "") // its sweep runs at Open, while a charges the row
		if err := b.srv.ReconcileNow(context.Background()); err != nil {
			t.Fatalf("the other replica's sweep: %v", err)
		}
		a.rail.Release()
		r := <-done
		if r.status != 200 || r.tx(t).State != stateSettled || a.rail.Charges("int_h") != 1 {
			t.Fatalf("the execute charging while another replica swept: %s, %d charges", r, a.rail.Charges("int_h"))
		}
	})
	t.Run("a restarting replica resolves its own rows", func(t *testing.T) {
		a := newPGEnv(t, "")
		b := a.replica(t, "r2", "")
		k, k10 := key("mine"), key("r10's")
		a.authorize(k, a.intent("int_m"))
		a.authorize(k10, a.intent("int_10"))
		a.rail.LoseConfirms(2) // charged, the answers lost: the rows stay executing
		if r := a.execute(k, "int_m"); r.status != 202 {
			t.Fatal(r)
		}
		if r := a.execute(k10, "int_10"); r.status != 202 {
			t.Fatal(r)
		}
		// r1 dies holding the row, as a crash in the middle of its charge
		// leaves it: claimed by r1 for a long while.
		a.srv.Close()
		db, err := sql.Open("pgx", a.cfg.Store)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`UPDATE transactions SET owner = 'r1/0123456789abcdef', lease_until = $1 WHERE intent_id = 'int_m'`,
			time.Now().Add(time.Hour).UnixNano()); err != nil {
			t.Fatal(err)
		}
		// And a row a live replica r10 holds (its name begins with r1).
		if _, err := db.Exec(`UPDATE transactions SET owner = 'r10/0123456789abcdef', lease_until = $1 WHERE intent_id = 'int_10'`,
			time.Now().Add(time.Hour).UnixNano()); err != nil {
			t.Fatal(err)
		}
		if err := b.srv.ReconcileNow(context.Background()); err != nil {
			t.Fatal(err)
		}
		if x, _ := b.srv.readRow(context.Background(), "int_m", k); x == nil || x.state != stateExecuting {
			t.Fatalf("replica r2 took a row r1 holds: %s", stateOf(x))
		}
		a2 := a.replica(t, "r1", "") // r1 again: its sweep at Open resolves its own row
		eventually(t, 5*time.Second, "the restarted r1 resolves its row", func() bool {
			x, _ := a2.srv.readRow(context.Background(), "int_m", k)
			return x != nil && x.state == stateSettled
		})
		if a.rail.Charges("int_m") != 1 {
			t.Fatalf("%d charges", a.rail.Charges("int_m"))
		}
		monotonic(t, states(t, a.cfg.Store, "int_m", k))
		if err := a2.srv.ReconcileNow(context.Background()); err != nil {
			t.Fatal(err)
		}
		if x, _ := a2.srv.readRow(context.Background(), "int_10", k10); x == nil || x.state != stateExecuting {
			t.Fatalf("the restarted r1 took the row r10 holds: %s", stateOf(x))
		}
	})
	t.Run("a sweep leaves the rows its own process charges", func(t *testing.T) {
		// r1 charges a row, the rail holding its confirm, and the claim's
		// renewals fall behind (a starved machine): its lease is past.
		// r1's own sweep knows the charge goes on and leaves the row: no
		// cancel, and the row settles with the one charge.
		a := newPGEnv(t, "")
		k := key("own")
		a.authorize(k, a.intent("int_o"))
		a.rail.HoldConfirms()
		done := make(chan resp, 1)
		go func() { done <- a.execute(k, "int_o") }()
		if a.rail.WaitConfirms(1, 10*time.Second) != 1 {
			t.Fatal("the confirm never arrived")
		}
		db, err := sql.Open("pgx", a.cfg.Store)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`UPDATE transactions SET lease_until = 1 WHERE intent_id = 'int_o'`); err != nil {
			t.Fatal(err)
		}
		if err := a.srv.ReconcileNow(context.Background()); err != nil {
			t.Fatalf("the sweep: %v", err)
		}
		a.rail.Release()
		r := <-done
		if r.status != 200 || r.tx(t).State != stateSettled || a.rail.Charges("int_o") != 1 {
			t.Fatalf("the execute whose renewals fell behind: %s, %d charges (the sweep took its row over)", r, a.rail.Charges("int_o"))
		}
	})
	t.Run("the replica that took a claim over decides the row", func(t *testing.T) {
		// r1 charges the row; its claim goes (as when its renewals are
		// late on a loaded machine, or it is cut from the store) and r2's
		// sweep takes the row over: it finds the payment intent not yet
		// confirmed and cancels it. r1's confirm charges first (and the
		// rail's callback tells r1), then r2's cancel refunds that charge:
		// the row must end as the rail says (compensated, nothing charged),
		// never settled by r1 or the callback while r2 holds it.
		a := newPGEnv(t, "")
		b := a.replica(t, "r2", "")
		k := key("takeover")
		a.authorize(k, a.intent("int_t"))
		a.rail.HoldConfirms()
		done := make(chan resp, 1)
		go func() { done <- a.execute(k, "int_t") }()
		if a.rail.WaitConfirms(1, 10*time.Second) != 1 {
			t.Fatal("r1's confirm never arrived")
		}
		db, err := sql.Open("pgx", a.cfg.Store)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`UPDATE transactions SET lease_until = 0 WHERE intent_id = 'int_t'`); err != nil {
			t.Fatal(err)
		}
		a.rail.HoldCancels()
		defer a.rail.ReleaseCancels()
		swept := make(chan error, 1)
		go func() { swept <- b.srv.ReconcileNow(context.Background()) }()
		if a.rail.WaitCancels(1, 10*time.Second) != 1 {
			t.Fatal("r2's sweep did not cancel the payment intent it found unconfirmed")
		}
		// r1's confirm charges, the rail's callback reaches r1, and r1
		// answers.
		a.rail.SetCallback(a.ts.URL)
		a.rail.Release()
		r1 := <-done
		a.rail.WaitCallbacks()
		if r1.status == 200 && r1.tx(t).State == stateSettled {
			t.Fatalf("r1 settled a row r2 had taken over: %s", r1)
		}
		if x, _ := a.srv.readRow(context.Background(), "int_t", k); x == nil || x.state != stateExecuting {
			t.Fatalf("the row is %s while r2's sweep holds it: only r2 resolves it", stateOf(x))
		}
		// r2's cancel refunds the charge that won.
		a.rail.ReleaseCancels()
		if err := <-swept; err != nil {
			t.Fatalf("r2's sweep: %v", err)
		}
		x, _ := b.srv.readRow(context.Background(), "int_t", k)
		if x == nil || x.state != stateCompensated || a.rail.Charges("int_t") != 0 {
			t.Fatalf("the row ended %s with %d net charges: want compensated, as the rail says", stateOf(x), a.rail.Charges("int_t"))
		}
		monotonic(t, states(t, a.cfg.Store, "int_t", k))
	})
	t.Run("a receipt of another replica's key verifies", func(t *testing.T) {
		a := newPGEnv(t, "", func(c *Config) { c.Seed = 1 })
		b := a.replica(t, "r2", "", func(c *Config) { c.Seed = 2 })
		k := key("keys")
		a.authorize(k, a.intent("int_k"))
		x := b.execute(k, "int_k").tx(t)
		var rc struct{ Kid string }
		json.Unmarshal(x.Receipt, &rc)
		if rc.Kid != "site-2" {
			t.Fatalf("replica r2 signs as %q", rc.Kid)
		}
		if v := a.do("POST", pathVerify, x.Receipt).json(t); v["valid"] != true {
			t.Fatalf("r2's receipt on r1: %v", v)
		}
		a.verifyReceipt(x.Receipt) // with r1's GET /api/atp/keys
	})
}

// TestStoreLost: a replica whose store stops answering answers 503 with
// Retry-After (never 500, never a success), and serves again once it is
// back.
func TestStoreLost(t *testing.T) {
	pgtest.Shared(t)
	own := pgtest.Database(t) // its own database: the test cuts it off
	e := newEnv(t, "", func(c *Config) { c.Store, c.ReplicaID = own, "r1" })
	k := key("lost")
	admin, err := sql.Open("pgx", adminURL(t, e.cfg.Store))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	dbname := strings.TrimPrefix(mustParse(t, e.cfg.Store).Path, "/")
	cut := func(allow bool) {
		t.Helper()
		if _, err := admin.Exec(`ALTER DATABASE "` + dbname + `" ALLOW_CONNECTIONS ` + map[bool]string{true: "true", false: "false"}[allow]); err != nil {
			t.Fatal(err)
		}
		if !allow {
			if _, err := admin.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, dbname); err != nil {
				t.Fatal(err)
			}
		}
	}
	cut(false)
	// A receipt under a key this replica does not know (another replica
	// may have made it) cannot be judged without the store: a 503, never
	// "valid": false.
	unknownKid := mustJSON(map[string]any{"alg": "Ed25519", "kid": "site-of-another-replica", "body": map[string]any{"x": 1},
		"signature": strings.Repeat("A", 86)})
	for _, r := range []resp{e.authorize(k, e.intent("int_lost")), e.execute(k, "int_lost"), e.poll(k, "int_lost"),
		e.do("POST", pathVerify, unknownKid)} {
		if r.status != 503 || r.header.Get("Retry-After") == "" || r.json(t)["error"] != codeUnavailable {
			t.Errorf("with the store gone: %s", r)
		}
	}
	cut(true)
	if r := e.authorize(k, e.intent("int_lost")); r.status != 200 {
		t.Fatalf("with the store back: %s", r)
	}
	if r := e.execute(k, "int_lost"); r.status != 200 || r.tx(t).State != stateSettled {
		t.Fatalf("with the store back: %s", r)
	}
}

// stateOf is the state of x ("no row": none).
func stateOf(x *row) string {
	if x == nil {
		return "no row"
	}
	return x.state
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// adminURL is store with the database postgres (to act on store's own).
func adminURL(t *testing.T, store string) string {
	u := mustParse(t, store)
	u.Path = "/postgres"
	return u.String()
}

// replicaScenario authorizes 8 intents, and for each executes it on one
// replica then again on the last one, and sends two concurrent executes
// of another on two replicas; it returns how many intents the rail charged
// more than once.
func replicaScenario(t *testing.T, reps []*testEnv) int {
	rail := reps[0].rail
	dup := 0
	for i := range 8 {
		seq, conc := "int_seq"+string(rune('a'+i)), "int_conc"+string(rune('a'+i))
		ks, kc := key(seq), key(conc)
		reps[0].authorize(ks, reps[0].intent(seq))
		reps[0].authorize(kc, reps[0].intent(conc))
		reps[0].execute(ks, seq)
		reps[len(reps)-1].execute(ks, seq)
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); reps[(i+j)%len(reps)].execute(kc, conc) }()
		}
		wg.Wait()
		for _, id := range []string{seq, conc} {
			if rail.Charges(id) > 1 {
				dup++
			}
		}
	}
	return dup
}

// TestReplicaMutants: each replica mutant is correct on one replica (no
// intent charged twice) and charges twice over two replicas sharing the
// store; the correct server is correct on both.
func TestReplicaMutants(t *testing.T) {
	for _, m := range ReplicaMutants() {
		t.Run(m.Name, func(t *testing.T) {
			if !atpRules[m.Breaks] || m.Description == "" || !knownMutant(m.Name) {
				t.Fatalf("mutant %+v: unknown rule or no description", m)
			}
			one := newPGEnv(t, m.Name)
			if n := replicaScenario(t, []*testEnv{one}); n != 0 {
				t.Errorf("on one replica %s charged %d intents twice: it must be correct there", m.Name, n)
			}
			a := newPGEnv(t, m.Name)
			if n := replicaScenario(t, []*testEnv{a, a.replica(t, "r2", m.Name)}); n == 0 {
				t.Errorf("on two replicas %s charged no intent twice", m.Name)
			}
			c := newPGEnv(t, "")
			if n := replicaScenario(t, []*testEnv{c, c.replica(t, "r2", "")}); n != 0 {
				t.Errorf("the correct server on two replicas charged %d intents twice", n)
			}
		})
	}
}

// TestPostgresRefusesWhatItCannotStore: an idempotency key of bytes that
// are not UTF-8 (the key's format allows it; PostgreSQL cannot hold it in
// a text) is a malformed request on PostgreSQL, a 400: never a 503 asking
// for a retry that cannot succeed, nor a 500.
func TestPostgresRefusesWhatItCannotStore(t *testing.T) {
	e := newPGEnv(t, "")
	bad := key("bad")[:30] + "\xff\xfe" + key("bad")[32:]
	r := e.authorize(bad, e.intent("int_badkey"))
	if r.status >= 500 {
		t.Fatalf("a key PostgreSQL cannot store: %s", r)
	}
}

// TestPostgresNeedsReplicaID: a shared store without a replica name is
// refused at Open.
func TestPostgresNeedsReplicaID(t *testing.T) {
	e := newPGEnv(t, "")
	cfg := e.cfg
	cfg.ReplicaID = ""
	if _, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "ReplicaID") {
		t.Fatalf("Open without ReplicaID: %v", err)
	}
}
