package httpidem

import (
	"bytes"
	"context"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
)

// TestPostgres runs the endpoint's behaviour tests, and every mutant's
// scenario, on a PostgreSQL store: the same behaviour as on SQLite.
func TestPostgres(t *testing.T) {
	pgtest.Shared(t)
	testStore = pgtest.Database
	defer func() { testStore = nil }()
	for name, f := range map[string]func(*testing.T){
		"FirstAndRetry": TestFirstAndRetry, "Mismatch": TestMismatch, "CallerScope": TestCallerScope,
		"InFlightConflict": TestInFlightConflict, "T0WaitsInFlight": TestT0WaitsInFlight, "T0WaitShares502": TestT0WaitShares502,
		"T0WaitBounded": TestT0WaitBounded, "Rejections": TestRejections, "SinkFailure": TestSinkFailure,
		"LostReply": TestLostReply, "T0UnknownResolved": TestT0UnknownResolved, "StripeKeys": TestStripeKeys,
		"Expiry": TestExpiry, "Storm": TestStorm, "Mutants": TestMutants, "Routes": TestRoutes, "Validation": TestValidation,
	} {
		t.Run(name, f)
	}
}

// replica opens another replica of e's endpoint on e's store (PostgreSQL),
// named id, behind its own HTTP server.
func (e *testEnv) replica(t testing.TB, id string, mutant string) *testEnv {
	t.Helper()
	cfg := e.cfg
	cfg.ReplicaID, cfg.Mutant = id, mutant
	srv, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open replica %s: %v", id, err)
	}
	r := &testEnv{t: t, srv: srv, ts: httptest.NewServer(srv.Handler()), sink: e.sink, clock: e.clock, cfg: cfg, hc: e.hc,
		waits: make(chan string, 64)}
	srv.waitHook = func(_, key string) { r.waits <- key }
	t.Cleanup(func() { r.ts.Close(); srv.Close() })
	return r
}

func newPGEnv(t *testing.T, variant, mutant string) *testEnv {
	url := pgtest.Database(t)
	return newEnv(t, variant, mutant, func(c *Config) { c.Store, c.ReplicaID = url, "r1" })
}

// TestReplicasShareStore: two replicas over one PostgreSQL store are one
// endpoint: a retry on the other replica replays; a storm spread over both
// pays once; a t0 duplicate on the other replica waits for the original;
// a replica that restarts leaves the other's reservation in flight alone.
func TestReplicasShareStore(t *testing.T) {
	t.Run("retry on the other replica", func(t *testing.T) {
		a := newPGEnv(t, VariantIETF, "")
		b := a.replica(t, "r2", "")
		first := a.pay(tokA, "k", body("r"))
		again := b.pay(tokA, "k", body("r"))
		if first.status != 201 || again.status != 201 || !again.replayed() || !bytes.Equal(first.body, again.body) {
			t.Fatalf("first %s, retry on the other replica %s", first, again)
		}
		if n := a.sink.effectsOf(sinkKey(tokA, "k")); n != 1 {
			t.Fatalf("%d effects", n)
		}
	})
	for _, v := range []string{VariantIETF, VariantT0, VariantStripe} {
		t.Run("storm over both "+v, func(t *testing.T) {
			a := newPGEnv(t, v, "")
			reps := []*testEnv{a, a.replica(t, "r2", "")}
			var chans []<-chan resp
			for i := range 48 {
				chans = append(chans, reps[i%2].payAsync(tokA, "storm", body("r")))
			}
			var created []byte
			for _, ch := range chans {
				r := receive(t, ch)
				switch {
				case (r.status == 409 && v != VariantT0) || r.status == 503:
				case r.status == 201 && (created == nil || bytes.Equal(r.body, created)):
					created = r.body
				default:
					t.Fatalf("answer %s (the payment: %s)", r, created)
				}
			}
			if n := a.sink.effectsOf(sinkKey(tokA, "storm")); n != 1 || len(a.list(tokA, "r")) != 1 {
				t.Fatalf("%d effects, %d payments", n, len(a.list(tokA, "r")))
			}
		})
	}
	t.Run("t0 waits for the original on the other replica", func(t *testing.T) {
		a := newPGEnv(t, VariantT0, "")
		b := a.replica(t, "r2", "")
		release := a.sink.hold(sinkKey(tokA, "ref"))
		orig := a.payAsync(tokA, "ref", body("r"))
		a.sink.waitArrival(t)
		dup := b.payAsync(tokA, "ref", body("r"))
		b.waiting(t)
		release()
		o, d := receive(t, orig), receive(t, dup)
		if o.status != 201 || d.status != 201 || !bytes.Equal(o.body, d.body) || a.sink.effectsOf(sinkKey(tokA, "ref")) != 1 {
			t.Fatalf("original %s, duplicate %s", o, d)
		}
	})
	t.Run("a restarting replica leaves the other's reservation", func(t *testing.T) {
		a := newPGEnv(t, VariantIETF, "")
		release := a.sink.hold(sinkKey(tokA, "k"))
		orig := a.payAsync(tokA, "k", body("r"))
		a.sink.waitArrival(t)
		b := a.replica(t, "r2", "") // opens (recovers) while r1's request is in flight
		if r := b.pay(tokA, "k", body("r")); r.status != 409 {
			t.Fatalf("a duplicate on the replica that started meanwhile: %s, want 409", r)
		}
		release()
		if o := receive(t, orig); o.status != 201 || a.sink.effectsOf(sinkKey(tokA, "k")) != 1 {
			t.Fatalf("original %s, %d effects", o, a.sink.effectsOf(sinkKey(tokA, "k")))
		}
	})
}

// replicaScenario sends, for 8 keys, a retry after the original's answer
// and a pair of concurrent duplicates, over reps (in turn); it returns how
// many keys took effect more than once.
func replicaScenario(t *testing.T, reps []*testEnv) int {
	sink := reps[0].sink
	dup := 0
	for i := range 8 {
		seq, conc := "seq"+string(rune('a'+i)), "conc"+string(rune('a'+i))
		reps[0].pay(tokA, seq, body(seq))
		reps[len(reps)-1].pay(tokA, seq, body(seq))
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Add(1)
			go func() { defer wg.Done(); reps[(j+i)%len(reps)].pay(tokA, conc, body(conc)) }()
		}
		wg.Wait()
		for _, k := range []string{seq, conc} {
			if sink.effectsOf(sinkKey(tokA, k)) > 1 {
				dup++
			}
		}
	}
	return dup
}

// TestReplicaMutants: each replica mutant is correct on one replica (no
// key takes effect twice) and pays twice over two replicas sharing the
// store; the correct endpoint is correct on both.
func TestReplicaMutants(t *testing.T) {
	for _, m := range ReplicaMutants() {
		t.Run(m.Name, func(t *testing.T) {
			if httpidemRules[m.Breaks] != m.Variant || m.Description == "" {
				t.Fatalf("mutant %+v: unknown rule or no description", m)
			}
			one := newPGEnv(t, m.Variant, m.Name)
			if n := replicaScenario(t, []*testEnv{one}); n != 0 {
				t.Errorf("on one replica %s paid %d keys twice: it must be correct there", m.Name, n)
			}
			a := newPGEnv(t, m.Variant, m.Name)
			if n := replicaScenario(t, []*testEnv{a, a.replica(t, "r2", m.Name)}); n == 0 {
				t.Errorf("on two replicas %s paid no key twice", m.Name)
			}
			c := newPGEnv(t, m.Variant, "")
			if n := replicaScenario(t, []*testEnv{c, c.replica(t, "r2", "")}); n != 0 {
				t.Errorf("the correct endpoint on two replicas paid %d keys twice", n)
			}
		})
	}
}
