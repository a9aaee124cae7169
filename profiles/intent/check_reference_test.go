package intent

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// The brute-force reference: an exact, deliberately naive reading of the
// Intent Protocol (seed 004 §3.2, §3.3, §7.2–7.8) against which the checker
// is held on tiny histories (a handful of operations, times of a few dozen
// ticks). It shares no code with the checker's models.
//
// Time is discrete: integer ticks, the history's own numbers. A bus is
// simulated tick by tick; at every tick any pending operation may take
// effect (several per tick, in any order), and so may the bus's own events
// (lazy expiry applied, a lease of unknown length ending, an intent deleted).
// An operation that got an answer takes effect at one tick of [Call,
// Return] and must match its answer there; one whose outcome is unknown
// takes effect at any tick from its Call on, or never. The history is legal
// iff some such run exists under some reading of the text.
//
// What the text fixes, as read here:
//   - §7.2: per (API key, Idempotency-Key) the first publish that takes
//     effect creates the intent and the record (body, response); the same
//     body replays the response, another body gets 422; refusals (other
//     4xx) do nothing. A new intent gets a fresh id: an id answered for one
//     record is never created again.
//   - §7.3: a claim takes an intent that exists and is open with run_at <=
//     now, or claimed with its lease expired (now >= expiry), and has
//     claim_attempts < max_attempts; claim_attempts grows by one; the lease
//     ends lease ticks after the claim (unknown when nobody learned it).
//   - §3.3, §7.4–7.6: extend, fulfill and fail succeed iff the intent is
//     claimed, the token is its current one and now < expiry; otherwise 404.
//     Extend: expiry = now + seconds (reading from-now) or expiry + seconds
//     (reading added). Fulfill: fulfilled. Fail: dead if claim_attempts >=
//     max_attempts, else open with run_at = now + backoff·2^attempts (jitter
//     at its least, 0: a later run_at only forbids more).
//   - Lease expiry is lazy: an expired lease is claimable at once (reading
//     immediate) or from expiry + backoff·2^attempts (reading backoff); a
//     read shows it claimed until the bus applies the expiry (any tick from
//     the expiry on), which makes it open, or dead at claim_attempts >=
//     max_attempts.
//   - §7.8: a read shows the state; 404 (gone) when the intent does not
//     exist: not created yet, or deleted (TTL, retention: at any tick, from
//     open, fulfilled or dead; the history holds no admin operation, so no
//     cancel, retry or purge).
//   - An effect (Key k, Intent X) at tick a: X was created with payload key
//     k (by a publish with Idempotency-Key k) at a tick <= a.
//   - A history that records no publish at all (lease-only) starts with
//     every intent it names open, with any max_attempts of 1–20.
//   - Claims answered 204, and refusals other than 404 on lease operations
//     and 422 on publishes, say nothing and constrain nothing.
type refReadings struct {
	extendAdded   bool  // §7.4 read as "added" (else "from-now")
	expiryBackoff bool  // §3.3 read as "backoff" for an expired lease (else §7.3 "immediate")
	backoff       int64 // backoff_base in ticks (0: no backoff)
}

func (r refReadings) String() string {
	ext, exp := "from-now", "immediate"
	if r.extendAdded {
		ext = "added"
	}
	if r.expiryBackoff {
		exp = "backoff"
	}
	return fmt.Sprintf("extend %s, expiry %s, backoff %d", ext, exp, r.backoff)
}

// refAllReadings are the readings a history may follow when the backoff
// base is b.
func refAllReadings(b int64) []refReadings {
	rs := []refReadings{{false, false, b}, {true, false, b}}
	if b > 0 {
		rs = append(rs, refReadings{false, true, b}, refReadings{true, true, b})
	}
	return rs
}

const refUnknown = math.MaxInt64 // an expiry nobody learned (a lease of unknown length)

type refIntent struct {
	id, key  string // key: the payload key (the Idempotency-Key of the publish that created it)
	exists   bool
	phase    uint8 // phaseOpen, phaseClaimed, phaseFulfilled, phaseDead
	token    string
	attempts int
	max      int
	expiry   int64 // refUnknown: ends at some tick >= expLo, not decided yet
	expLo    int64
	runAt    int64
}

type refRecord struct {
	scope, body string
	known       bool // the response is known (an answer has been seen)
	status      int
	id, rbody   string
	intent      string // the intent the record created
}

type refBus struct {
	intents []refIntent
	records []refRecord
}

func (b *refBus) clone() *refBus {
	return &refBus{intents: slices.Clone(b.intents), records: slices.Clone(b.records)}
}

func (b *refBus) intent(id string) *refIntent {
	for i := range b.intents {
		if b.intents[i].id == id {
			return &b.intents[i]
		}
	}
	return nil
}

func (b *refBus) record(scope string) *refRecord {
	for i := range b.records {
		if b.records[i].scope == scope {
			return &b.records[i]
		}
	}
	return nil
}

func (b *refBus) encode(sb *strings.Builder) {
	for _, in := range b.intents {
		fmt.Fprintf(sb, "|%s,%s,%t,%d,%s,%d,%d,%d,%d,%d", in.id, in.key, in.exists, in.phase, in.token, in.attempts, in.max, in.expiry, in.expLo, in.runAt)
	}
	sb.WriteByte('#')
	recs := slices.Clone(b.records)
	sort.Slice(recs, func(i, j int) bool { return recs[i].scope < recs[j].scope })
	for _, r := range recs {
		fmt.Fprintf(sb, "|%s,%s,%t,%d,%s,%s,%s", r.scope, r.body, r.known, r.status, r.id, r.rbody, r.intent)
	}
}

// refEligible reports whether a claim at t may take in.
func (rd refReadings) eligible(in *refIntent, t int64) bool {
	if !in.exists || in.attempts >= in.max {
		return false
	}
	switch in.phase {
	case phaseOpen:
		return in.runAt <= t
	case phaseClaimed:
		if in.expiry == refUnknown || t < in.expiry {
			return false
		}
		if rd.expiryBackoff {
			return in.expiry+rd.backoff<<in.attempts <= t
		}
		return true
	}
	return false
}

// refStep is one operation of the history as the reference sees it.
type refStep struct {
	op       *checker.Operation
	must     bool   // it got an answer that constrains: it took effect in [Call, Return]
	optional bool   // unknown outcome: it may take effect at any tick >= Call, or never
	intent   string // lease operations: the intent
	scope    string // publishes: API key identity + Idempotency-Key
}

type refSearch struct {
	rd      refReadings
	steps   []refStep
	effects []checker.Effect
	ids     []string // intent ids the history names: an unknown publish may have created any
	end     int64
	memo    map[string]bool
	nodes   int
	limit   int
}

// errRefTooBig is returned (as a panic value inside the search) when a
// history is too big for the reference.
type errRefTooBig struct{}

// refLegal reports whether some run of a correct bus, under one of the
// readings, produces h and l. It panics if the search exceeds limit nodes.
func refLegal(h checker.History, l checker.Ledger, readings []refReadings, conflictStatus int, limit int) (legal bool, under refReadings) {
	if conflictStatus == 0 {
		conflictStatus = 422
	}
	for _, rd := range readings {
		s := newRefSearch(h, l, rd, conflictStatus, limit)
		for _, b := range s.initial(h) {
			if s.dfs(s.start(), 0, b) {
				return true, rd
			}
		}
	}
	return false, refReadings{}
}

// initial returns the buses a run may start from: empty, or, when the
// history records no publish at all (a lease-only history), with every
// intent it names already open, for every max_attempts the text allows.
func (s *refSearch) initial(h checker.History) []*refBus {
	for _, op := range h.Ops {
		if op.Kind == checker.OpPublish {
			return []*refBus{{}}
		}
	}
	buses := []*refBus{{}}
	for _, id := range s.ids {
		var next []*refBus
		for _, b := range buses {
			for _, m := range s.maxChoices() {
				nb := b.clone()
				nb.intents = append(nb.intents, refIntent{id: id, exists: true, phase: phaseOpen, max: m, runAt: math.MinInt64})
				next = append(next, nb)
			}
		}
		buses = next
	}
	return buses
}

func newRefSearch(h checker.History, l checker.Ledger, rd refReadings, conflictStatus int, limit int) *refSearch {
	s := &refSearch{rd: rd, effects: l.Effects, memo: map[string]bool{}, limit: limit, end: math.MinInt64}
	seen := map[string]bool{}
	name := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			s.ids = append(s.ids, id)
		}
	}
	for i := range h.Ops {
		op := &h.Ops[i]
		st := refStep{op: op}
		out := op.Effective()
		switch op.Kind {
		case checker.OpPublish:
			st.scope = op.KeyID + "\x00" + op.Key
			switch {
			case out == verdict.OutcomeOK:
				st.must = true
				name(op.Output.ID)
			case out == verdict.OutcomeFailed && op.Output.Status == conflictStatus:
				st.must = true
			case out == verdict.OutcomeUnknown:
				st.optional = true
			}
		case OpClaim:
			st.intent = op.Key
			if st.intent == "" {
				st.intent = op.Output.ID
			}
			switch {
			case out == verdict.OutcomeOK && op.Output.Token != "":
				st.must = true
			case out == verdict.OutcomeUnknown:
				st.optional = true
			}
			name(st.intent)
		case OpExtend, OpFulfill, OpFail:
			st.intent = op.Key
			switch {
			case out == verdict.OutcomeOK, out == verdict.OutcomeFailed && op.Output.Status == 404:
				st.must = true
			case out == verdict.OutcomeUnknown:
				st.optional = true
			}
			name(st.intent)
		case checker.OpStatus:
			st.intent = op.Key
			st.must = out == verdict.OutcomeOK
			name(st.intent)
		}
		if st.must {
			s.end = max(s.end, op.Return)
		}
		if st.must || st.optional {
			s.steps = append(s.steps, st)
		}
	}
	for _, e := range l.Effects {
		s.end = max(s.end, e.At)
		name(e.Intent)
	}
	if len(s.steps) > 62 {
		panic(errRefTooBig{})
	}
	return s
}

func (s *refSearch) start() int64 {
	t := s.end
	for _, st := range s.steps {
		t = min(t, st.op.Call)
	}
	for _, e := range s.effects {
		t = min(t, e.At)
	}
	return t
}

func (s *refSearch) dfs(t int64, done uint64, b *refBus) bool {
	if t > s.end {
		return true // every operation that had to take effect did (checked when leaving each tick)
	}
	var sb strings.Builder
	sb.WriteString(strconv.FormatInt(t, 10))
	sb.WriteByte('/')
	sb.WriteString(strconv.FormatUint(done, 16))
	b.encode(&sb)
	key := sb.String()
	if v, ok := s.memo[key]; ok {
		return v
	}
	s.nodes++
	if s.limit > 0 && s.nodes > s.limit {
		panic(errRefTooBig{})
	}
	s.memo[key] = false // a state is never its own successor; cycles cannot happen
	ok := s.moves(t, done, b)
	s.memo[key] = ok
	return ok
}

func (s *refSearch) moves(t int64, done uint64, b *refBus) bool {
	// an operation takes effect now
	for i, st := range s.steps {
		if done&(1<<i) != 0 || st.op.Call > t || (st.must && t > st.op.Return) {
			continue
		}
		for _, nb := range s.apply(st, t, b) {
			if s.dfs(t, done|1<<i, nb) {
				return true
			}
		}
	}
	// the bus's own events
	for i := range b.intents {
		in := &b.intents[i]
		if !in.exists {
			continue
		}
		if in.phase == phaseClaimed && in.expiry == refUnknown && t >= in.expLo {
			nb := b.clone() // the lease nobody learned ends now
			nb.intents[i].expiry = t
			if s.dfs(t, done, nb) {
				return true
			}
		}
		if in.phase == phaseClaimed && in.expiry != refUnknown && t >= in.expiry {
			nb := b.clone() // lazy expiry applied now
			x := &nb.intents[i]
			x.token = ""
			if x.attempts >= x.max {
				x.phase = phaseDead
			} else {
				x.phase = phaseOpen
				x.runAt = x.expiry
				if s.rd.expiryBackoff {
					x.runAt += s.rd.backoff << x.attempts
				}
			}
			if s.dfs(t, done, nb) {
				return true
			}
		}
		if in.phase != phaseClaimed && s.goneRead(done, in.id) {
			nb := b.clone() // deleted now (TTL, retention)
			nb.intents[i].exists = false
			if s.dfs(t, done, nb) {
				return true
			}
		}
	}
	// time moves on: only if nothing that had to happen by now is left, and
	// every effect seen now is explained
	for i, st := range s.steps {
		if done&(1<<i) == 0 && st.must && st.op.Return <= t {
			return false
		}
	}
	for _, e := range s.effects {
		if e.At == t && !s.explains(b, e) {
			return false
		}
	}
	return s.dfs(t+1, done, b)
}

// maxChoices are the max_attempts an intent may have when the history does
// not say (1–20, §4.1): beyond the number of claims in the history they
// all behave alike, so one stands for them.
func (s *refSearch) maxChoices() []int {
	claims := 0
	for _, st := range s.steps {
		if st.op.Kind == OpClaim {
			claims++
		}
	}
	var out []int
	for m := 1; m <= min(20, claims+1); m++ {
		out = append(out, m)
	}
	return out
}

// goneRead reports whether a read of intent id answered 404 is still to
// take effect: deleting an intent can explain nothing else (only open,
// fulfilled or dead intents are deleted, and those refuse every lease
// operation anyway), so the search deletes only then.
func (s *refSearch) goneRead(done uint64, id string) bool {
	for i, st := range s.steps {
		if done&(1<<i) == 0 && st.op.Kind == checker.OpStatus && st.intent == id && st.op.Output.State == checker.StateGone {
			return true
		}
	}
	return false
}

// explains reports whether an intent created with e's key explains effect e.
func (s *refSearch) explains(b *refBus, e checker.Effect) bool {
	for _, in := range b.intents {
		if in.key == e.Key && (e.Intent == "" || in.id == e.Intent) {
			return true
		}
	}
	return false
}

// apply returns the buses st can leave behind if it takes effect at t with
// the answer it got (none: it cannot).
func (s *refSearch) apply(st refStep, t int64, b *refBus) []*refBus {
	op := st.op
	switch op.Kind {
	case checker.OpPublish:
		return s.publish(st, t, b)
	case OpClaim:
		return s.claim(st, t, b)
	case OpExtend, OpFulfill, OpFail:
		in := b.intent(st.intent)
		valid := in != nil && in.exists && in.phase == phaseClaimed && in.token == op.Input.Token && (in.expiry == refUnknown || t < in.expiry)
		if st.must && op.Effective() == verdict.OutcomeFailed { // 404
			if valid {
				return nil
			}
			return []*refBus{b}
		}
		if !valid {
			if st.optional {
				return []*refBus{b} // it took effect as a 404 nobody saw
			}
			return nil
		}
		nb := b.clone()
		x := nb.intent(st.intent)
		switch op.Kind {
		case OpExtend:
			ext := max(op.Input.ExtendNs, 0)
			switch {
			case !s.rd.extendAdded:
				x.expiry = t + ext
			case x.expiry == refUnknown:
				x.expLo = max(x.expLo, t+1) + ext // still unknown: it was live at t, so it ends later
			default:
				x.expiry += ext
			}
		case OpFulfill:
			x.phase, x.token = phaseFulfilled, ""
		case OpFail:
			x.token = ""
			if x.attempts >= x.max {
				x.phase = phaseDead
			} else {
				x.phase = phaseOpen
				x.runAt = t + s.rd.backoff<<x.attempts
			}
		}
		return []*refBus{nb}
	case checker.OpStatus:
		in := b.intent(st.intent)
		if op.Output.State == checker.StateGone {
			if in == nil || !in.exists {
				return []*refBus{b}
			}
			return nil
		}
		if in != nil && in.exists && phaseNames[in.phase] == op.Output.State {
			return []*refBus{b}
		}
		return nil
	}
	return nil
}

func (s *refSearch) publish(st refStep, t int64, b *refBus) []*refBus {
	op := st.op
	rec := b.record(st.scope)
	out := op.Effective()
	if out == verdict.OutcomeFailed { // 422
		if rec != nil && rec.body != op.Input.Body {
			return []*refBus{b}
		}
		return nil
	}
	if rec != nil {
		if rec.body != op.Input.Body {
			if st.optional {
				return []*refBus{b} // a 422 nobody saw
			}
			return nil
		}
		if st.optional {
			return []*refBus{b} // a replay nobody saw
		}
		if rec.known {
			if rec.status == op.Output.Status && rec.id == op.Output.ID && rec.rbody == op.Output.Body {
				return []*refBus{b}
			}
			return nil
		}
		if op.Output.ID != rec.intent && !(op.Output.ID == "" && strings.HasPrefix(rec.intent, "\x00")) {
			return nil
		}
		nb := b.clone()
		r := nb.record(st.scope)
		r.known, r.status, r.id, r.rbody = true, op.Output.Status, op.Output.ID, op.Output.Body
		return []*refBus{nb}
	}
	// no record: this request creates the intent and the record
	var choices []string
	if st.optional {
		for _, id := range s.ids {
			if b.intent(id) == nil {
				choices = append(choices, id)
			}
		}
		choices = append(choices, "\x00"+strconv.Itoa(len(b.intents))) // an id the history never names
	} else {
		id := op.Output.ID
		if id == "" {
			id = "\x00" + strconv.Itoa(len(b.intents))
		}
		if b.intent(id) != nil {
			return nil // ids are fresh
		}
		choices = []string{id}
	}
	maxes := []int{op.Input.MaxAttempts}
	if op.Input.MaxAttempts <= 0 {
		maxes = s.maxChoices()
	}
	var outs []*refBus
	for _, id := range choices {
		for _, m := range maxes {
			nb := b.clone()
			nb.intents = append(nb.intents, refIntent{id: id, key: op.Key, exists: true, phase: phaseOpen, max: m, runAt: math.MinInt64})
			r := refRecord{scope: st.scope, body: op.Input.Body, intent: id}
			if !st.optional {
				r.known, r.status, r.id, r.rbody = true, op.Output.Status, op.Output.ID, op.Output.Body
			}
			nb.records = append(nb.records, r)
			outs = append(outs, nb)
		}
	}
	return outs
}

func (s *refSearch) claim(st refStep, t int64, b *refBus) []*refBus {
	op := st.op
	var outs []*refBus
	for i := range b.intents {
		in := &b.intents[i]
		if (st.intent != "" && in.id != st.intent) || !s.rd.eligible(in, t) {
			continue
		}
		if st.must && op.Output.Attempts != 0 && op.Output.Attempts != in.attempts+1 {
			continue
		}
		nb := b.clone()
		x := &nb.intents[i]
		x.phase, x.attempts = phaseClaimed, x.attempts+1
		if st.must {
			x.token = op.Output.Token
		} else {
			x.token = "\x00lost" + strconv.Itoa(int(op.Call)) // nobody holds it
		}
		if l := op.Output.LeaseNs; st.must && l > 0 {
			x.expiry = t + l
		} else {
			x.expiry, x.expLo = refUnknown, t
		}
		outs = append(outs, nb)
	}
	if st.optional {
		outs = append(outs, b) // it found nothing (204) or took an intent of no interest
	}
	return outs
}

// refScale divides every time and duration of h and l by their greatest
// common divisor, so that saved runs written in milliseconds become small
// tick counts. Strictness is kept only where the history's times are not on
// the edge (a saved run's margins are milliseconds).
func refScale(h checker.History, l checker.Ledger) (checker.History, checker.Ledger) {
	g := int64(0)
	gcd := func(a, b int64) int64 {
		if a < 0 {
			a = -a
		}
		for b != 0 {
			a, b = b, a%b
		}
		return a
	}
	for _, op := range h.Ops {
		g = gcd(gcd(gcd(gcd(g, op.Call), op.Return), op.Output.LeaseNs), op.Input.ExtendNs)
	}
	for _, e := range l.Effects {
		g = gcd(g, e.At)
	}
	if g <= 1 {
		return h, l
	}
	h2 := checker.History{Ops: slices.Clone(h.Ops)}
	for i := range h2.Ops {
		op := &h2.Ops[i]
		op.Call, op.Return, op.Output.LeaseNs, op.Input.ExtendNs = op.Call/g, op.Return/g, op.Output.LeaseNs/g, op.Input.ExtendNs/g
	}
	l2 := checker.Ledger{Effects: slices.Clone(l.Effects)}
	for i := range l2.Effects {
		l2.Effects[i].At /= g
	}
	return h2, l2
}
