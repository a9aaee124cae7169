package intent

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// simBus is a correct Intent Protocol bus, simulated one intent at a time in
// server time, with lost answers, requests lost before the bus, lazy expiry
// and both readings of extend. Every operation it records is applied at an
// instant inside its [Call, Return]; the checker must find nothing in what
// it records.
type simBus struct {
	rng     *rand.Rand
	ops     []checker.Operation
	effects []checker.Effect
	lease   int64
	// extendFromNow: extend sets expiry = now + seconds; otherwise it adds
	// the seconds to the current expiry.
	extendFromNow bool
	bug           simBug
}

// simBug is a deliberate defect of the simulated bus.
type simBug int

const (
	bugNone          simBug = iota
	bugStaleToken           // any token once granted for the intent is accepted
	bugHijack               // a claim takes a claimed intent whose lease is live
	bugReclaimDone          // a fulfilled intent can be claimed again
	bugReplayNewID          // a duplicate publish creates a new intent
	bugForgetsExtend        // extend answers 200 and does nothing
	bugNoMaxAttempts        // an intent is handed out beyond max_attempts
)

type simIntent struct {
	key, id  string
	phase    uint8
	token    string
	expiry   int64
	attempts int
	max      int
	tokens   []string // every token a worker learned, stale ones too
	t        int64    // server time of the last event
	seq      int
}

// window returns a call and return around server instant t; lost answers
// return "unknown" at a give-up time after t.
func (b *simBus) window(t int64) (call, ret int64) {
	return t - b.rng.Int64N(5e6) - 1, t + b.rng.Int64N(5e6) + 1
}

// outcome draws what the client learns: 0 answer, 1 answer lost (applied),
// 2 request lost before the bus (not applied).
func (b *simBus) outcome() int {
	switch p := b.rng.IntN(100); {
	case p < 8:
		return 1
	case p < 12:
		return 2
	}
	return 0
}

func (b *simBus) record(op checker.Operation, fate int, t int64) {
	op.Call, op.Return = b.window(t)
	if fate != 0 {
		op.Outcome = verdict.OutcomeUnknown
		op.Output = checker.Output{}
		op.Return = t + 1e9 // the client gave up
		if op.Kind == OpClaim {
			op.Key = "" // nobody learned which intent it took
		}
	}
	b.ops = append(b.ops, op)
}

// expire applies lazy expiry at t, as a claim or cleanup would see it.
func (in *simIntent) expire(t int64) {
	if in.phase == phaseClaimed && t >= in.expiry {
		in.token = ""
		if in.attempts >= in.max {
			in.phase = phaseDead
		} else {
			in.phase = phaseOpen
		}
	}
}

func (b *simBus) claim(in *simIntent, client int, t int64) {
	in.expire(t)
	fate := b.outcome()
	if fate == 2 {
		b.record(checker.Operation{ClientID: client, Kind: OpClaim}, 2, t)
		return
	}
	open := in.phase == phaseOpen ||
		(b.bug == bugHijack && in.phase == phaseClaimed) ||
		(b.bug == bugReclaimDone && in.phase == phaseFulfilled)
	if !open || in.attempts >= in.max {
		// 204: no key; nothing to model
		b.record(checker.Operation{ClientID: client, Kind: OpClaim, Output: checker.Output{Status: 204}, Outcome: verdict.OutcomeOK}, fate, t)
		return
	}
	in.seq++
	in.phase, in.attempts, in.expiry = phaseClaimed, in.attempts+1, t+b.lease
	in.token = fmt.Sprintf("%s-t%d", in.id, in.seq)
	b.record(checker.Operation{ClientID: client, Kind: OpClaim, Key: in.id, Outcome: verdict.OutcomeOK,
		Output: checker.Output{Status: 200, ID: in.id, Token: in.token, Attempts: in.attempts, LeaseNs: b.lease}}, fate, t)
	if fate == 0 { // only a worker that got the answer holds the token
		in.tokens = append(in.tokens, in.token)
		b.effects = append(b.effects, checker.Effect{Key: in.key, Intent: in.id, Token: in.token, At: t + 1})
	}
}

func (b *simBus) mutate(in *simIntent, kind checker.OpKind, token string, client int, t int64) {
	fate := b.outcome()
	op := checker.Operation{ClientID: client, Kind: kind, Key: in.id, Input: checker.Input{Token: token}, Outcome: verdict.OutcomeOK}
	if kind == OpExtend {
		op.Input.ExtendNs = b.lease / 2
	}
	if fate == 2 {
		b.record(op, 2, t)
		return
	}
	valid := in.phase == phaseClaimed && in.token == token && t < in.expiry
	if b.bug == bugStaleToken && in.phase == phaseClaimed {
		valid = true
	}
	if !valid {
		op.Output.Status = 404
		b.record(op, fate, t)
		return
	}
	switch kind {
	case OpExtend:
		if b.bug == bugForgetsExtend {
			break
		}
		if b.extendFromNow {
			in.expiry = t + op.Input.ExtendNs
		} else {
			in.expiry += op.Input.ExtendNs
		}
	case OpFulfill:
		in.phase, in.token = phaseFulfilled, ""
	case OpFail:
		in.token = ""
		if in.attempts >= in.max {
			in.phase = phaseDead
		} else {
			in.phase = phaseOpen
		}
	}
	op.Output.Status = 200
	b.record(op, fate, t)
}

func (b *simBus) status(in *simIntent, client int, t int64) {
	if in.phase == phaseClaimed && t >= in.expiry && b.rng.IntN(2) == 0 {
		in.expire(t) // lazy: a cleanup pass ran before this read
	}
	state := phaseNames[in.phase]
	b.record(checker.Operation{ClientID: client, Kind: checker.OpStatus, Key: in.id, Outcome: verdict.OutcomeOK, Output: checker.Output{Status: 200, State: state}}, 0, t)
}

// unit simulates one unit of work from publish to its end.
func (b *simBus) unit(u int, start int64) {
	in := &simIntent{key: fmt.Sprintf("k%d", u), id: fmt.Sprintf("i%d", u), max: 3, t: start}
	step := func() int64 { in.t += 1e6 + b.rng.Int64N(b.lease/3); return in.t }
	body := "b-" + in.key
	declared := in.max // what the publisher asks for
	if b.bug == bugNoMaxAttempts {
		in.max += 3
	}
	// publishes: retried until one is answered, plus duplicates and a conflict
	created := false
	for try := 0; try < 6; try++ {
		t := step()
		fate := b.outcome()
		id := in.id
		if b.bug == bugReplayNewID && created {
			id = fmt.Sprintf("%s-dup%d", in.id, try)
		}
		op := checker.Operation{ClientID: b.rng.IntN(8), Kind: checker.OpPublish, Key: in.key, Input: checker.Input{Body: body, MaxAttempts: declared}, Outcome: verdict.OutcomeOK,
			Output: checker.Output{Status: 201, ID: id, Body: "r-" + id}}
		if fate != 2 {
			created = true
		}
		b.record(op, fate, t)
		if fate == 0 {
			break
		}
	}
	if !created {
		return
	}
	if b.bug == bugReplayNewID {
		b.record(checker.Operation{ClientID: 8, Kind: checker.OpPublish, Key: in.key, Input: checker.Input{Body: body}, Outcome: verdict.OutcomeOK,
			Output: checker.Output{Status: 201, ID: in.id + "-again", Body: "r-" + in.id + "-again"}}, 0, step())
	}
	if b.rng.IntN(4) == 0 {
		b.record(checker.Operation{ClientID: 9, Kind: checker.OpPublish, Key: in.key, Input: checker.Input{Body: body + "x"}, Outcome: verdict.OutcomeOK,
			Output: checker.Output{Status: 422}}, 0, step())
	}
	// random work
	for range 4 + b.rng.IntN(12) {
		t := step()
		switch p := b.rng.IntN(100); {
		case p < 35:
			b.claim(in, 10+b.rng.IntN(4), t)
		case p < 70 && len(in.tokens) > 0:
			tok := in.tokens[b.rng.IntN(len(in.tokens))]
			kinds := []checker.OpKind{OpFulfill, OpFail, OpExtend}
			b.mutate(in, kinds[b.rng.IntN(3)], tok, 20+b.rng.IntN(4), t)
		case p < 85:
			b.status(in, 30, t)
		default:
			in.t += b.lease // a stall
		}
	}
	// drain: finish it, then read it back
	for range 20 {
		if in.phase == phaseFulfilled || in.phase == phaseDead {
			break
		}
		in.t += b.lease + 1
		in.expire(in.t)
		if in.phase == phaseOpen && in.attempts < in.max {
			in.seq++
			in.phase, in.attempts, in.expiry = phaseClaimed, in.attempts+1, in.t+b.lease
			in.token = fmt.Sprintf("%s-t%d", in.id, in.seq)
			in.tokens = append(in.tokens, in.token)
			b.record(checker.Operation{ClientID: 40, Kind: OpClaim, Key: in.id, Outcome: verdict.OutcomeOK,
				Output: checker.Output{Status: 200, ID: in.id, Token: in.token, Attempts: in.attempts, LeaseNs: b.lease}}, 0, in.t)
			b.effects = append(b.effects, checker.Effect{Key: in.key, Intent: in.id, Token: in.token, At: in.t + 1})
			b.mutate(in, OpFulfill, in.token, 40, step())
		}
	}
	b.status(in, 41, step())
}

// TestSimulatedCorrectBus checks histories of a simulated correct bus under
// many seeds: the checker must not raise a single anomaly (no false alarm),
// and every model must decide.
func TestSimulatedCorrectBus(t *testing.T) {
	seeds := 300
	if testing.Short() {
		seeds = 60
	}
	for seed := range uint64(seeds) {
		b := &simBus{rng: rand.New(rand.NewPCG(seed, 42)), lease: 1e9, extendFromNow: seed%2 == 0}
		for u := range 30 {
			b.unit(u, int64(u)*3e8)
		}
		r := Check(checker.History{Ops: b.ops}, checker.Ledger{Effects: b.effects}, Options{MaxEffects: -1})
		if v := r.Verdict(); v != verdict.Pass {
			t.Fatalf("seed %d (extend from now %v): verdict %s on a correct bus, counts %v:%s", seed, b.extendFromNow, v, r.Counts, explain(r))
		}
		if r.Queue.Lost != 0 || r.Queue.Acknowledged == 0 {
			t.Fatalf("seed %d: queue %+v", seed, r.Queue)
		}
	}
}

// TestSimulatedBuggyBus gives the simulated bus one defect at a time: the
// checker must catch each in some of the seeds, with the anomaly it names.
func TestSimulatedBuggyBus(t *testing.T) {
	for _, tc := range []struct {
		name string
		bug  simBug
		want []checker.AnomalyKind // any of these
	}{
		{"stale token accepted", bugStaleToken, []checker.AnomalyKind{StaleTokenAccepted, checker.NotLinearizable}},
		{"lease hijack", bugHijack, []checker.AnomalyKind{DoubleLease, checker.NotLinearizable}},
		{"fulfilled intent reclaimed", bugReclaimDone, []checker.AnomalyKind{FulfilledTwice, checker.NotLinearizable}},
		{"replay creates a new intent", bugReplayNewID, []checker.AnomalyKind{checker.IdempotencyViolation}},
		{"extend does nothing", bugForgetsExtend, []checker.AnomalyKind{StaleTokenAccepted, DoubleLease, checker.NotLinearizable}},
		{"claims beyond max attempts", bugNoMaxAttempts, []checker.AnomalyKind{AttemptsExceeded}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caught := 0
			const seeds = 40
			for seed := range uint64(seeds) {
				b := &simBus{rng: rand.New(rand.NewPCG(seed, 42)), lease: 1e9, extendFromNow: seed%2 == 0, bug: tc.bug}
				for u := range 30 {
					b.unit(u, int64(u)*3e8)
				}
				r := Check(checker.History{Ops: b.ops}, checker.Ledger{Effects: b.effects}, Options{MaxEffects: -1})
				assertNamedAgreeWithModels(t, r)
				for _, k := range tc.want {
					if r.Counts[k] > 0 {
						caught++
						break
					}
				}
			}
			t.Logf("caught in %d of %d seeds", caught, seeds)
			if caught == 0 {
				t.Errorf("never caught in %d seeds (want any of %v)", seeds, tc.want)
			}
		})
	}
}

// FuzzSimulatedBus hunts false alarms: no history of the correct simulated
// bus, whatever the seed and lease, may raise an anomaly.
// Run: go test ./checker -run '^$' -fuzz FuzzSimulatedBus -fuzztime 30s
func FuzzSimulatedBus(f *testing.F) {
	f.Add(uint64(1), uint16(1000), true)
	f.Add(uint64(2), uint16(50), false)
	f.Fuzz(func(t *testing.T, seed uint64, leaseMs uint16, fromNow bool) {
		lease := int64(max(leaseMs, 20)) * 1e6
		b := &simBus{rng: rand.New(rand.NewPCG(seed, 42)), lease: lease, extendFromNow: fromNow}
		for u := range 10 {
			b.unit(u, int64(u)*3e8)
		}
		r := Check(checker.History{Ops: b.ops}, checker.Ledger{Effects: b.effects}, Options{MaxEffects: -1})
		if v := r.Verdict(); v != verdict.Pass {
			t.Fatalf("verdict %s on a correct bus, counts %v:%s", v, r.Counts, explain(r))
		}
	})
}

// assertNamedAgreeWithModels checks that every key a named check flagged is
// one its porcupine model also found illegal: two independent readings of
// the protocol must agree.
func assertNamedAgreeWithModels(t *testing.T, r checker.Report) {
	t.Helper()
	if detailOf(r).contradicted > 0 {
		t.Errorf("%d named findings were dropped: their model accepted the partition", detailOf(r).contradicted)
	}
	failing := map[string]bool{}
	for _, m := range r.Models {
		for _, k := range m.Failing {
			failing[m.Model+"/"+k] = true
		}
	}
	for _, a := range r.Anomalies {
		model := ""
		switch a.Kind {
		case DoubleLease, StaleTokenAccepted, FulfilledTwice, DeadTooEarly, AttemptsExceeded:
			model = ModelLease
		case checker.IdempotencyViolation:
			model = checker.ModelIdempotency
		default:
			continue
		}
		if !failing[model+"/"+a.Key] {
			t.Errorf("%s on %s, but the %s model accepts that partition: %s", a.Kind, a.Key, model, a.Explanation)
		}
	}
}
