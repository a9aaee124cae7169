package intent

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// tinyBus is a correct Intent Protocol bus in ticks, for the differential
// test: it records a handful of operations of one or two keys, each applied
// at one tick of its [Call, Return], some answers lost (after or before
// taking effect), a lazy expiry, one reading of extend and of lease expiry,
// and a backoff (the checker takes backoff at its least, which only allows
// more).
type tinyBus struct {
	rng           *rand.Rand
	t             int64
	lease         int64
	fromNow       bool
	expiryBackoff bool
	backoff       int64
	ops           []checker.Operation
	effects       []checker.Effect
	intents       []*tinyIntent
	records       map[string]*tinyRecord
	held          [][2]string // (intent, token) a worker learned
	n             int
	maxes         map[string]int // max_attempts of each key's body
}

type tinyIntent struct {
	id, key       string
	deleted       bool
	phase         uint8
	token         string
	attempts, max int
	expiry, runAt int64
}

type tinyRecord struct {
	body   string
	intent string
	status int
}

// fate draws what the client learns: 0 the answer, 1 nothing though it
// took effect, 2 nothing and it never reached the bus.
func (b *tinyBus) fate() int {
	switch p := b.rng.IntN(100); {
	case p < 14:
		return 1
	case p < 22:
		return 2
	}
	return 0
}

// record adds op, applied at tick t (fate 0 and 1) or never (2).
func (b *tinyBus) record(op checker.Operation, fate int) {
	op.Call = max(b.t-b.rng.Int64N(3), 0)
	op.Return = b.t + b.rng.Int64N(3)
	if fate != 0 {
		op.Outcome = verdict.OutcomeUnknown
		op.Output = checker.Output{}
		op.Return = b.t + 40 // the client gave up
		if op.Kind == OpClaim {
			op.Key = ""
		}
	}
	b.ops = append(b.ops, op)
}

func (b *tinyBus) eligible(in *tinyIntent) bool {
	if in.deleted || in.attempts >= in.max {
		return false
	}
	switch in.phase {
	case phaseOpen:
		return in.runAt <= b.t
	case phaseClaimed:
		if b.t < in.expiry {
			return false
		}
		return !b.expiryBackoff || in.expiry+b.backoff<<in.attempts <= b.t
	}
	return false
}

func (b *tinyBus) expire(in *tinyIntent) {
	if in.phase == phaseClaimed && b.t >= in.expiry {
		in.token = ""
		if in.attempts >= in.max {
			in.phase = phaseDead
		} else {
			in.phase = phaseOpen
			in.runAt = in.expiry
			if b.expiryBackoff {
				in.runAt += b.backoff << in.attempts
			}
		}
	}
}

func (b *tinyBus) publish() {
	key := "k1"
	if b.rng.IntN(4) == 0 {
		key = "k2"
	}
	body := "b-" + key
	if b.rng.IntN(8) == 0 {
		body += "x"
	}
	max := b.maxes[key]
	op := checker.Operation{ClientID: b.rng.IntN(3), Kind: checker.OpPublish, Key: key, Input: checker.Input{Body: body, MaxAttempts: max}, Outcome: verdict.OutcomeOK}
	if b.rng.IntN(7) == 0 {
		op.KeyID = "a2" // another API key: another record
	}
	fate := b.fate()
	if fate != 2 {
		r := b.records[op.KeyID+"/"+key]
		switch {
		case r == nil:
			b.n++
			id := fmt.Sprintf("i%d", b.n)
			b.intents = append(b.intents, &tinyIntent{id: id, key: key, max: max, runAt: -1})
			r = &tinyRecord{body: body, intent: id, status: 201}
			b.records[op.KeyID+"/"+key] = r
			op.Output = checker.Output{Status: 201, ID: id, Body: "r-" + id}
		case r.body == body:
			op.Output = checker.Output{Status: 201, ID: r.intent, Body: "r-" + r.intent}
		default:
			op.Output = checker.Output{Status: 422}
		}
	}
	b.record(op, fate)
}

func (b *tinyBus) claim() {
	var in *tinyIntent
	for _, x := range b.intents {
		if b.eligible(x) {
			in = x
			break
		}
	}
	fate := b.fate()
	if in == nil || fate == 2 {
		if b.rng.IntN(3) == 0 {
			op := checker.Operation{ClientID: 5, Kind: OpClaim, Output: checker.Output{Status: 204}, Outcome: verdict.OutcomeOK}
			b.record(op, fate)
		}
		return
	}
	b.n++
	in.phase, in.attempts, in.expiry = phaseClaimed, in.attempts+1, b.t+b.lease
	in.token = fmt.Sprintf("t%d", b.n)
	b.record(checker.Operation{ClientID: 5, Kind: OpClaim, Key: in.id, Outcome: verdict.OutcomeOK,
		Output: checker.Output{Status: 200, ID: in.id, Token: in.token, Attempts: in.attempts, LeaseNs: b.lease}}, fate)
	if fate == 0 {
		b.held = append(b.held, [2]string{in.id, in.token})
		if b.rng.IntN(2) == 0 {
			b.effects = append(b.effects, checker.Effect{Key: in.key, Intent: in.id, Token: in.token, At: b.ops[len(b.ops)-1].Return + b.rng.Int64N(2)})
		}
	}
}

func (b *tinyBus) mutate() {
	if len(b.held) == 0 {
		b.claim()
		return
	}
	h := b.held[b.rng.IntN(len(b.held))]
	var in *tinyIntent
	for _, x := range b.intents {
		if x.id == h[0] {
			in = x
		}
	}
	kind := []checker.OpKind{OpExtend, OpFulfill, OpFail}[b.rng.IntN(3)]
	op := checker.Operation{ClientID: 6, Kind: kind, Key: in.id, Input: checker.Input{Token: h[1]}, Outcome: verdict.OutcomeOK, Output: checker.Output{Status: 404}}
	if kind == OpExtend {
		op.Input.ExtendNs = []int64{2, 4, 9}[b.rng.IntN(3)]
	}
	fate := b.fate()
	if fate != 2 && !in.deleted && in.phase == phaseClaimed && in.token == h[1] && b.t < in.expiry {
		op.Output.Status = 200
		switch kind {
		case OpExtend:
			if b.fromNow {
				in.expiry = b.t + op.Input.ExtendNs
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
				in.phase, in.runAt = phaseOpen, b.t+b.backoff<<in.attempts
			}
		}
	}
	b.record(op, fate)
}

func (b *tinyBus) status() {
	if len(b.intents) == 0 {
		return
	}
	in := b.intents[b.rng.IntN(len(b.intents))]
	if b.rng.IntN(2) == 0 {
		b.expire(in) // the lazy expiry was applied by now
	}
	state := phaseNames[in.phase]
	code := 200
	if in.deleted {
		state, code = checker.StateGone, 404
	}
	b.record(checker.Operation{ClientID: 7, Kind: checker.OpStatus, Key: in.id, Output: checker.Output{Status: code, State: state}, Outcome: verdict.OutcomeOK}, 0)
}

// tinyHistory is one history of a correct bus with up to n operations.
func tinyHistory(rng *rand.Rand, n int) (checker.History, checker.Ledger, string) {
	b := &tinyBus{rng: rng, lease: 4 + rng.Int64N(5), fromNow: rng.IntN(2) == 0, records: map[string]*tinyRecord{},
		maxes: map[string]int{"k1": 1 + rng.IntN(2), "k2": 1 + rng.IntN(3)}}
	if rng.IntN(3) == 0 {
		b.expiryBackoff, b.backoff = rng.IntN(2) == 0, 1+rng.Int64N(2)
	}
	b.publish()
	for len(b.ops) < n {
		b.t += rng.Int64N(3)
		switch p := rng.IntN(100); {
		case p < 20:
			b.publish()
		case p < 45:
			b.claim()
		case p < 70:
			b.mutate()
		case p < 88:
			b.status()
		case p < 92:
			for _, in := range b.intents {
				if in.phase != phaseClaimed {
					in.deleted = true // TTL or retention
					break
				}
			}
		default:
			b.t += b.lease
		}
	}
	desc := fmt.Sprintf("lease %d, extend from now %v, backoff %d (on expiry %v)", b.lease, b.fromNow, b.backoff, b.expiryBackoff)
	return checker.History{Ops: b.ops[:min(len(b.ops), n)]}, checker.Ledger{Effects: b.effects}, desc
}

// alter changes one answer (or one time, or one effect) of h and l.
func alter(rng *rand.Rand, h checker.History, l checker.Ledger) (checker.History, checker.Ledger, string) {
	h = checker.History{Ops: slices.Clone(h.Ops)}
	l = checker.Ledger{Effects: slices.Clone(l.Effects)}
	if len(l.Effects) > 0 && rng.IntN(6) == 0 {
		e := &l.Effects[rng.IntN(len(l.Effects))]
		switch rng.IntN(3) {
		case 0:
			e.At -= 1 + rng.Int64N(6)
			return h, l, "effect earlier"
		case 1:
			e.Key = []string{"k1", "k2", "k3"}[rng.IntN(3)]
			return h, l, "effect key " + e.Key
		default:
			e.Intent = fmt.Sprintf("i%d", 1+rng.IntN(4))
			return h, l, "effect intent " + e.Intent
		}
	}
	i := rng.IntN(len(h.Ops))
	op := &h.Ops[i]
	what := fmt.Sprintf("op %d (%s): ", i, op.Kind)
	switch r := rng.IntN(10); {
	case r < 2: // time
		d := 1 + rng.Int64N(5)
		if rng.IntN(2) == 0 {
			op.Call = max(op.Call-d, 0)
			op.Return = max(op.Return-d, op.Call)
			return h, l, what + "earlier"
		}
		op.Call += d
		op.Return += d
		return h, l, what + "later"
	case r < 3 && op.Outcome == verdict.OutcomeOK && op.Output.Status != 204 && op.Kind != checker.OpStatus:
		op.Outcome, op.Output, op.Return = verdict.OutcomeUnknown, checker.Output{}, op.Return+40
		if op.Kind == OpClaim {
			op.Key = ""
		}
		return h, l, what + "answer lost"
	}
	if op.Outcome != verdict.OutcomeOK {
		// an unknown outcome gets an answer
		switch op.Kind {
		case checker.OpPublish:
			op.Output = checker.Output{Status: 201, ID: "i1", Body: "r-i1"}
		case OpClaim:
			op.Key = "i1"
			op.Output = checker.Output{Status: 200, ID: "i1", Token: "t99", Attempts: 1 + rng.IntN(2), LeaseNs: 5}
		case OpExtend, OpFulfill, OpFail:
			op.Output = checker.Output{Status: []int{200, 404}[rng.IntN(2)]}
		default:
			return h, l, what + "unchanged"
		}
		op.Outcome = verdict.OutcomeOK
		op.Return = op.Call + rng.Int64N(3)
		return h, l, what + "answered"
	}
	switch op.Kind {
	case checker.OpPublish:
		switch rng.IntN(3) {
		case 0:
			op.Output.ID = []string{"i1", "i2", "i9"}[rng.IntN(3)]
			op.Output.Body = "r-" + op.Output.ID
			op.Output.Status = 201
			return h, l, what + "id " + op.Output.ID
		case 1:
			if op.Output.Status == 422 {
				op.Output = checker.Output{Status: 201, ID: "i1", Body: "r-i1"}
			} else {
				op.Output = checker.Output{Status: 422}
			}
			return h, l, what + "status " + fmt.Sprint(op.Output.Status)
		default:
			op.Input.Body += "y"
			return h, l, what + "body"
		}
	case OpClaim:
		if op.Output.Status == 204 {
			op.Key = "i1"
			op.Output = checker.Output{Status: 200, ID: "i1", Token: "t98", Attempts: 1 + rng.IntN(3), LeaseNs: 5}
			return h, l, what + "204 became a claim"
		}
		switch rng.IntN(3) {
		case 0:
			op.Output.Attempts += []int{-1, 1}[rng.IntN(2)]
			return h, l, what + fmt.Sprintf("attempts %d", op.Output.Attempts)
		case 1:
			op.Output.LeaseNs += []int64{-2, 3}[rng.IntN(2)]
			return h, l, what + fmt.Sprintf("lease %d", op.Output.LeaseNs)
		default:
			op.Key, op.Output.ID = "i2", "i2"
			return h, l, what + "intent i2"
		}
	case OpExtend, OpFulfill, OpFail:
		if op.Output.Status == 200 {
			op.Output.Status = 404
			op.Outcome = verdict.OutcomeFailed
		} else {
			op.Output.Status = 200
			op.Outcome = verdict.OutcomeOK
		}
		return h, l, what + fmt.Sprint(op.Output.Status)
	case checker.OpStatus:
		states := []string{StateOpen, StateClaimed, StateFulfilled, StateDead, checker.StateGone}
		op.Output.State = states[rng.IntN(len(states))]
		op.Output.Status = 200
		if op.Output.State == checker.StateGone {
			op.Output.Status = 404
		}
		return h, l, what + op.Output.State
	}
	return h, l, what + "unchanged"
}

// differentialOptions are the checker's options for the differential: the
// reference's clock (no slack), and no promise beyond the protocol (effects
// at least once, work may be left pending).
var differentialOptions = Options{MaxEffects: -1, Undrained: true, ClockSlack: -1}

// TestDifferential holds the checker to the brute-force reference: small
// random histories of a correct bus, and the same with one answer altered,
// judged by both; no disagreement. Bounded and seeded.
var (
	differentialN    = flag.Int("differential.n", 2500, "histories of TestDifferential (each judged as recorded and altered)")
	differentialSeed = flag.Uint64("differential.seed", 12, "seed of TestDifferential")
)

func TestDifferential(t *testing.T) {
	seed := *differentialSeed
	histories := *differentialN
	if testing.Short() {
		histories = min(histories, 300)
	}
	start := time.Now()
	rng := rand.New(rand.NewPCG(seed, 7))
	checked, illegal, skipped := 0, 0, 0
	for n := range histories {
		h, l, desc := tinyHistory(rng, 3+rng.IntN(4))
		// the history itself, then altered
		cases := []struct {
			h    checker.History
			l    checker.Ledger
			what string
		}{{h, l, "as recorded"}}
		h2, l2, what := alter(rng, h, l)
		cases = append(cases, struct {
			h    checker.History
			l    checker.Ledger
			what string
		}{h2, l2, what})
		for k, c := range cases {
			legal, ok := differentialRef(c.h, c.l)
			if !ok {
				skipped++
				continue
			}
			checked++
			r := Check(c.h, c.l, differentialOptions)
			if k == 0 && !legal {
				t.Fatalf("history %d (%s): the reference finds a correct bus's history illegal:\n%s", n, desc, dumpHistory(c.h, c.l))
			}
			if !legal {
				illegal++
			}
			if got := r.Verdict() == verdict.Pass; got != legal {
				t.Fatalf("history %d (%s), %s: checker %s, reference legal=%v\n%s\nanomalies:%s", n, desc, c.what, r.Verdict(), legal, dumpHistory(c.h, c.l), explain(r))
			}
			assertNamedAgreeWithModels(t, r)
		}
	}
	t.Logf("%d histories judged by both (%d of a correct bus, each as recorded and with one answer altered; %d illegal), %d too big for the reference, in %s",
		checked, histories, illegal, skipped, time.Since(start).Round(time.Millisecond))
	if illegal < checked/10 {
		t.Errorf("only %d of %d histories illegal: the alterations hardly test anything", illegal, checked)
	}
}

// differentialRef is the reference's verdict: legal under some reading, the
// backoff at its least (the checker does not know backoff_base). ok is
// false when the history is too big for it.
func differentialRef(h checker.History, l checker.Ledger) (legal, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, big := r.(errRefTooBig); !big {
				panic(r)
			}
			ok = false
		}
	}()
	legal, _ = refLegal(h, l, refAllReadings(0), 0, 400_000)
	return legal, true
}

func dumpHistory(h checker.History, l checker.Ledger) string {
	var b strings.Builder
	_ = h.WriteJSONL(&b)
	_ = l.WriteJSONL(&b)
	return b.String()
}
