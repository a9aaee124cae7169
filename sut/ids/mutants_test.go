package ids

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
)

// mutantScenarios show, for every mutant, the behaviour that breaks its
// rule: each returns true when it observed the break. The correct server
// must not break any of them, the mutant must break its own.
var mutantScenarios = map[string]func(t *testing.T, e *testEnv) bool{
	MutantNoReservation: func(t *testing.T, e *testEnv) bool {
		// Both requests are sent at once: the first waits at the window
		// for the second long enough for a loaded machine (the 300 ms a
		// mutant run of the profile waits was missed: the mutant lived).
		wait := racyBarrier.Wait
		racyBarrier.Wait = 10 * time.Second
		defer func() { racyBarrier.Wait = wait }()
		if err := failpoint.Enable(FailpointNoReservationRacyWindow, `return("barrier")`); err != nil {
			t.Fatal(err)
		}
		defer failpoint.Disable(FailpointNoReservationRacyWindow)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.send(note("race", "command_id", fmt.Sprint("c", i)))
			}()
		}
		wg.Wait()
		return e.sink.effectsOf(e.srv.keyOfNote(t, "race")) > 1
	},
	MutantEphemeralInKey: func(t *testing.T, e *testEnv) bool {
		e.send(note("e", "message_id", "m1"))
		r := e.send(note("e", "command_id", "cmd-2", "message_id", "m2"))
		return r.decision() == decFirstSeen || e.sink.totalEffects() > 1
	},
	MutantTenantNotInKey: func(t *testing.T, e *testEnv) bool {
		e.send(note("t"))
		r := e.send(note("t", "tenant_id", "globex"))
		return r.decision() != decFirstSeen || e.sink.totalEffects() != 2
	},
	MutantReplayReexecutes: func(t *testing.T, e *testEnv) bool {
		e.send(note("r"))
		e.send(note("r", "command_id", "cmd-2"))
		return e.sink.totalEffects() > 1
	},
	MutantInFlightExecutes: func(t *testing.T, e *testEnv) bool {
		e.sink.holdPosts()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); e.send(note("f")) }()
		if e.sink.waitArrivals(1, 5*time.Second) != 1 {
			t.Fatal("the first POST did not arrive")
		}
		go func() { defer wg.Done(); e.send(note("f", "command_id", "cmd-2")) }()
		parallel := e.sink.waitArrivals(1, 300*time.Millisecond) == 1
		e.sink.release()
		wg.Wait()
		return parallel || e.sink.totalEffects() > 1
	},
	MutantConflictAccepted: func(t *testing.T, e *testEnv) bool {
		k := keyOf(t, e.send(note("one")))
		r := e.send(note("two", "command_id", "cmd-2", "idempotency_key", k))
		return r.status != 409
	},
	MutantConflictNoFingerprints: func(t *testing.T, e *testEnv) bool {
		k := keyOf(t, e.send(note("one")))
		if r := e.send(note("two", "command_id", "cmd-2", "idempotency_key", k)); r.status != 409 {
			t.Fatalf("collision: %s", r)
		}
		ev := e.evidence("acme", k)
		fps, _ := ev[len(ev)-1]["fingerprints"].(map[string]any)
		return fps == nil || fps["stored"] == nil || fps["received"] == nil || fps["stored"] == fps["received"]
	},
	MutantEvidenceAsFirstSeen: func(t *testing.T, e *testEnv) bool {
		k := keyOf(t, e.send(note("ev")))
		e.send(note("ev", "command_id", "cmd-2"))
		ev := e.evidence("acme", k)
		return len(ev) != 2 || ev[1]["decision"] != decReplayed
	},
	MutantReplayFreshID: func(t *testing.T, e *testEnv) bool {
		r1 := e.send(payment(100))
		r2 := e.send(payment(100, "command_id", "cmd-2"))
		return r1.json(t)["outcome_ref"] != r2.json(t)["outcome_ref"] || !bytes.Equal(r1.body, r2.body)
	},
	MutantConfirmationReusable: func(t *testing.T, e *testEnv) bool {
		k := keyOf(t, e.send(member()))
		tok := e.confirm("acme", "cmd-1", k)
		if r := e.send(member("confirmation_token", tok)); r.status != 201 {
			t.Fatalf("confirmed: %s", r)
		}
		e.clock.advance(61 * time.Second) // the window of member.remove, not the token's life
		return e.send(member("confirmation_token", tok)).status != 403
	},
	MutantTokenUnbound: func(t *testing.T, e *testEnv) bool {
		k := keyOf(t, e.send(cancel()))
		tok := e.confirm("acme", "cmd-1", k)
		other := e.send(cancel("command_id", "cmd-2", "confirmation_token", tok)).status != 403
		tok2 := e.confirm("acme", "cmd-1", k)
		otherKey := e.send(mkEnv(cmdOrderCancel, map[string]any{}, "confirmation_token", tok2)).status != 403
		return other || otherKey
	},
	MutantTokenUnverified: func(t *testing.T, e *testEnv) bool {
		k := keyOf(t, e.send(cancel()))
		tok := e.confirm("acme", "cmd-1", k)
		forged := tok[:4] + strings.Repeat("A", len(tok)-4) // the form of a token, never issued
		return e.send(cancel("confirmation_token", forged)).status != 403 || e.sink.totalEffects() != 0
	},
	MutantWindowHalved: func(t *testing.T, e *testEnv) bool {
		e.send(note("w")) // note.add: ttl_seconds 120
		e.clock.advance(90 * time.Second)
		r := e.send(note("w", "command_id", "cmd-2"))
		return r.decision() != decReplayed || e.sink.totalEffects() != 1
	},
	MutantReplayAsksConfirmation: func(t *testing.T, e *testEnv) bool {
		k := keyOf(t, e.send(cancel()))
		if r := e.send(cancel("confirmation_token", e.confirm("acme", "cmd-1", k))); r.status != 201 {
			t.Fatalf("confirmed: %s", r)
		}
		return e.send(cancel("command_id", "cmd-2")).status != 201
	},
	MutantOutboxDoubleDispatch: func(t *testing.T, e *testEnv) bool {
		e.sink.set(func(k *fakeSink) { k.loseNext = 1 })
		k := keyOf(t, e.send(refund(10)))
		eventually(t, 10*time.Second, "the outbox drains", func() bool { return e.srv.outboxOpen(t) == 0 })
		return e.sink.effectsOf(k) != 1
	},
	MutantNoRateLimit: func(t *testing.T, e *testEnv) bool {
		e.send(note("rl"))
		for i := range rateLimitMax + 1 {
			if e.send(note("rl", "command_id", fmt.Sprint("d", i))).status == 429 {
				return false
			}
		}
		return true
	},
	MutantReplayLeaksPrivate: func(t *testing.T, e *testEnv) bool {
		e.send(payment(100, "actor_id", "system", "effective_actor_id", "alice"))
		r := e.send(payment(100, "actor_id", "retrier", "effective_actor_id", "alice", "command_id", "cmd-2"))
		return bytes.Contains(r.body, []byte(`"private"`))
	},
	MutantEffectiveActorIgnored: func(t *testing.T, e *testEnv) bool {
		e.send(payment(100, "actor_id", "system", "effective_actor_id", "alice"))
		r := e.send(payment(100, "actor_id", "retrier", "effective_actor_id", "alice", "command_id", "cmd-2"))
		return r.decision() != decReplayed || e.sink.totalEffects() != 1
	},
}

// ruleIDs are the IDS rule IDs a mutant may name (profiles/ids's catalog).
var ruleIDs = map[string]bool{}

func init() {
	for _, id := range []string{"IDS-V-exactly-once-effects", "IDS-VI-classified", "IDS-VI-I1-same-outcome", "IDS-VII.A-key-derived",
		"IDS-VII.B-key-inputs", "IDS-VII.C-ephemeral-excluded", "IDS-VII.D-key-function", "IDS-VII.D-sha256", "IDS-VII.E-effective-actor",
		"IDS-VIII.A-check-and-set", "IDS-VIII.A-atomic", "IDS-VIII.B-stored-fields", "IDS-VIII.C-window-declared",
		"IDS-VIII.C-financial-24h", "IDS-VIII.C-expiry-may-execute", "IDS-VIII.D-reject", "IDS-VIII.D-evidence", "IDS-IX.A-no-reexecute",
		"IDS-IX.A-same-outcome", "IDS-IX.B-processing", "IDS-IX.B-correlation", "IDS-IX.B-how-to-query", "IDS-IX.B-no-parallel",
		"IDS-IX.C-stable-response", "IDS-X-bound", "IDS-X-single-use", "IDS-X-short-lived", "IDS-X-no-reconfirm", "IDS-XI-shielding",
		"IDS-XI-declared", "IDS-XII-executed-or-replayed", "IDS-XII-original-ids", "IDS-XII-decision", "IDS-XII-outcome-ref",
		"IDS-XIII-1-duplicates", "IDS-XIII-2-concurrent", "IDS-XIII-3-replay-after-success", "IDS-XIII-4-in-progress",
		"IDS-XIII-5-collision", "IDS-XIII-6-confirmation", "IDS-XV-tenant-scope", "IDS-XV-rate-limit", "IDS-XV-no-leak"} {
		ruleIDs[id] = true
	}
}

func TestMutants(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range Mutants() {
		if seen[m.Name] || !ruleIDs[m.Breaks] || m.Description == "" {
			t.Errorf("mutant %+v: duplicate name, unknown rule or no description", m)
		}
		seen[m.Name] = true
		scenario := mutantScenarios[m.Name]
		if scenario == nil {
			t.Errorf("mutant %s has no scenario", m.Name)
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			if scenario(t, newEnv(t, "")) {
				t.Errorf("the correct server breaks %s in the scenario of %s", m.Breaks, m.Name)
			}
			if !scenario(t, newEnv(t, m.Name)) {
				t.Errorf("mutant %s does not break %s", m.Name, m.Breaks)
			}
		})
	}
	if len(mutantScenarios) != len(Mutants()) {
		t.Errorf("%d scenarios for %d mutants", len(mutantScenarios), len(Mutants()))
	}
}
