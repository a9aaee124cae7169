package intent

import (
	"math"
	"slices"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// The intent lease model (seed 004 §3.1–3.3, §7.3–7.8), one intent per
// partition. It reads the text as the brute-force reference of the tests
// does, and decides a partition exactly, up to what it cannot see from one
// intent (see modelEnv):
//
//   - every operation takes effect at one instant: within [Call, Return]
//     when it got an answer, at any instant from its Call on (or never) when
//     its outcome is unknown; an order of operations is an order of their
//     instants (equal instants allowed), and what an operation needs of the
//     lease is a bound on its instant (a zone: see zone.go), so every fact a
//     history proves about time is used, backwards too;
//   - a claim takes an intent that exists and is open, or claimed with its
//     lease expired (now >= expiry: expiry is lazy and an expired lease is
//     claimable at once, §7.3), below max_attempts; claim_attempts grows by
//     exactly one (a gap is claims whose answer was lost, see hidden);
//   - extend, fulfill and fail succeed iff the token is the current one and
//     now < expiry, and get 404 otherwise; an extension sets the expiry to
//     now + seconds or adds seconds to it (both readings of §7.4, one per
//     history); a fail requeues below max_attempts and dead-letters at it;
//   - a read sees the state; an expired lease reads claimed until the bus
//     applies the expiry, which makes the intent open, or dead at
//     max_attempts (§3.2); 404 is an intent not yet created, or deleted
//     (TTL, retention) and gone for good;
//   - nothing else moves an intent: no admin cancel, retry or purge, since a
//     history holds none.
//
// Backoff (§3.3) only delays when a requeued intent is claimable again; the
// publisher's backoff_base and the target's time scale are not recorded, so
// the delay is taken at its least (a claim right after a fail is allowed).
// Durations measured by the server (lease, extension) are taken within
// Options.ClockSlack of their length on the harness's clock.

// Lease phases of one intent (seed 004 §3.1), and before and after it exists.
const (
	phaseOpen uint8 = iota
	phaseClaimed
	phaseFulfilled
	phaseDead
	phaseUnborn // not created yet
	phaseGone   // deleted: reads 404 for good
)

var phaseNames = [...]string{"open", "claimed", "fulfilled", "dead", "not yet created", "gone"}

// Readings of extend (spec.DecisionExtend): the first extension that takes
// effect in a partition fixes one.
const (
	readingAny uint8 = iota
	readingFromNow
	readingAdded
)

// unknownToken is the token of a claim whose response was lost: nobody holds
// it, so no operation can present it.
const unknownToken = "\x00unknown"

// maxMaxAttempts is the largest max_attempts the text allows (§4.1): no
// intent is claimed more often, so no partition uses more hidden claims.
const maxMaxAttempts = 20

// IntentBounds is what a history says about one intent outside its lease
// operations: which publishes can have created it, when, and its
// max_attempts.
type IntentBounds struct {
	// BornAfter is the earliest call of a publish that could have created
	// the intent (math.MaxInt64: none could; math.MinInt64: the history
	// records no publish at all, and every intent exists from the start).
	BornAfter int64 `json:"born_after"`
	// BornBy is the latest it can have been created by: the earliest
	// return of a publish answered with its id, or of a 422 of the scope
	// that created it (math.MaxInt64: nothing says).
	BornBy int64 `json:"born_by"`
	// MaxLo and MaxHi bound its max_attempts (1 and 20 when unknown).
	MaxLo int `json:"max_lo"`
	MaxHi int `json:"max_hi"`
	// Keys are the publish keys whose work it may carry (nil: any).
	Keys []string `json:"keys,omitempty"`
	// Creators are the alternatives: each publish group (scope and body)
	// that may have created it, with its own bounds; the ones above are
	// their hull.
	Creators []Creator `json:"creators,omitempty"`
}

// Creator is one way an intent may have come to exist.
type Creator struct {
	After int64 `json:"after"` // created no earlier (math.MinInt64: from the start)
	By    int64 `json:"by"`    // created no later
	MaxLo int   `json:"max_lo"`
	MaxHi int   `json:"max_hi"`
}

var anyIntent = IntentBounds{BornAfter: math.MinInt64, BornBy: math.MaxInt64, MaxLo: 1, MaxHi: maxMaxAttempts,
	Creators: []Creator{{After: math.MinInt64, By: math.MaxInt64, MaxLo: 1, MaxHi: maxMaxAttempts}}}

var noCreator = Creator{After: math.MaxInt64, By: math.MaxInt64, MaxLo: 1, MaxHi: maxMaxAttempts}

// modelEnv is what the models know beyond one partition.
type modelEnv struct {
	slack          int64 // Options.ClockSlack in ns
	conflictStatus int
	// hidden are the calls, earliest first (at most maxMaxAttempts of them),
	// of the claims whose outcome is unknown and whose intent nobody
	// learned: each may have taken any intent. A partition uses them
	// earliest first, which is exact for one intent; that two intents
	// cannot both have been taken by one such claim is not seen.
	hidden      []int64
	hiddenTotal int // how many there are in all
	// intents holds the bounds of each intent id; an id not in it has
	// anyIntent's.
	intents map[string]*IntentBounds
	// reading, when not readingAny, is the only reading of extend allowed.
	reading uint8
	// unexplained is an intent no publish can have created (see creation.go).
	unexplained *creation
}

// leaseState is one possible state of one intent.
type leaseState struct {
	cr       *Creator // how it came to exist
	phase    uint8
	reading  uint8
	maxLo    uint8 // max_attempts, as far as the history so far allows
	maxHi    uint8
	attempts uint16
	hidden   uint16 // hidden claims used
	token    string
	z        zone
}

// initial returns the states of op's intent before its first operation: one
// per way it may have come to exist.
func (e *modelEnv) initial(op *checker.Operation) []leaseState {
	key := op.Key
	if key == "" {
		key = op.Output.ID
	}
	b := e.bounds(key)
	var out []leaseState
	for i := range b.Creators {
		cr := &b.Creators[i]
		st := leaseState{cr: cr, phase: phaseUnborn, maxLo: uint8(max(cr.MaxLo, 1)), maxHi: uint8(min(max(cr.MaxHi, 1), maxMaxAttempts)), z: zoneAny()}
		if cr.After == math.MinInt64 {
			st.phase = phaseOpen
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		out = append(out, leaseState{cr: &noCreator, phase: phaseUnborn, maxLo: 1, maxHi: maxMaxAttempts, z: zoneAny()})
	}
	return out
}

// addLease adds s to set unless a state of the set holds it (same state,
// wider zone); it replaces a state s holds.
func addLease(set []leaseState, s leaseState) []leaseState {
	for i := range set {
		x := set[i]
		z := x.z
		x.z = s.z
		if x != s {
			continue
		}
		if s.z.within(&z) {
			return set
		}
		if z.within(&s.z) {
			set[i] = s
			return set
		}
	}
	return append(set, s)
}

// window is where op may take effect: [Call, Return], or from Call on when
// its outcome is unknown.
func window(op *checker.Operation) (int64, int64) {
	if op.Effective() == verdict.OutcomeUnknown {
		return op.Call, zinf
	}
	return op.Call, op.Return
}

func clampTime(t int64) int64 { return max(min(t, zinf-1), -zinf+1) }

// born makes the intent exist at the current instant: created by then, by
// a publish called no earlier than its creator's After.
func (st *leaseState) born() bool {
	if st.phase != phaseUnborn {
		return true
	}
	st.phase = phaseOpen
	return st.z.bound(z0, zl, -clampTime(st.cr.After))
}

// unborn keeps the intent not created at the current instant: no later
// than its creator's By, when an answer proved it exists.
func (st *leaseState) unborn() bool {
	return st.phase == phaseUnborn && st.z.bound(zl, z0, clampTime(st.cr.By))
}

// live: the current instant is before the expiry.
func (st *leaseState) live() bool { return st.z.bound(zl, ze, -1) }

// expired: the current instant is at or after the expiry.
func (st *leaseState) expired() bool { return st.z.bound(ze, zl, 0) }

// belowMax: claim_attempts < max_attempts.
func (st *leaseState) belowMax() bool {
	if st.attempts >= uint16(st.maxHi) {
		return false
	}
	st.maxLo = max(st.maxLo, uint8(st.attempts+1))
	return true
}

// atMax: claim_attempts >= max_attempts.
func (st *leaseState) atMax() bool {
	if st.attempts < uint16(st.maxLo) {
		return false
	}
	st.maxHi = min(st.maxHi, uint8(st.attempts))
	return true
}

// release ends the current lease: no token, no expiry.
func (st *leaseState) release(phase uint8) {
	st.phase, st.token = phase, ""
	st.z.noLease()
}

// take: a claim at the current instant takes the intent (§7.3).
func (st *leaseState) take() bool {
	switch st.phase {
	case phaseUnborn:
		if !st.born() {
			return false
		}
	case phaseOpen:
	case phaseClaimed:
		if !st.expired() {
			return false
		}
	default:
		return false
	}
	if !st.belowMax() {
		return false
	}
	st.phase, st.attempts = phaseClaimed, st.attempts+1
	return true
}

// duration is a length measured by the server, on the harness's clock: d
// within the slack, or anything from 0 when unknown.
func (e *modelEnv) duration(d int64) (lo, hi int64) {
	if d <= 0 {
		return 0, zinf
	}
	return max(d-e.slack, 0), zadd(d, e.slack)
}

// hiddenClaim lets the next hidden claim take the intent before the next
// operation.
func (e *modelEnv) hiddenClaim(st leaseState) (leaseState, bool) {
	if int(st.hidden) >= len(e.hidden) {
		return st, false
	}
	n := st
	if !n.z.advance(e.hidden[st.hidden], zinf) || !n.take() {
		return st, false
	}
	n.hidden++
	n.token = unknownToken
	n.z.lease(0, zinf)
	return n, true
}

// leaseStep appends to next the states st can move to under op.
func (e *modelEnv) leaseStep(next []leaseState, st leaseState, op *checker.Operation) []leaseState {
	out := op.Effective()
	switch op.Kind {
	case OpClaim:
		switch {
		case out == verdict.OutcomeOK && op.Output.Token != "":
			return e.claimed(next, st, op)
		case out == verdict.OutcomeUnknown:
			next = addLease(next, st) // it never happened, or took nothing
			n := st
			if n.z.advance(op.Call, zinf) && n.take() {
				n.token = unknownToken
				n.z.lease(0, zinf)
				next = addLease(next, n)
			}
			return next
		}
		return addLease(next, st) // 204 or refused: says nothing of this intent
	case OpExtend, OpFulfill, OpFail:
		switch {
		case out == verdict.OutcomeOK:
			return e.mutate(next, st, op)
		case out == verdict.OutcomeUnknown:
			return e.mutate(addLease(next, st), st, op)
		case op.Output.Status == 404:
			return e.refused(next, st, op)
		}
		return addLease(next, st) // busy, rate limited, invalid: no effect
	case checker.OpStatus:
		if out != verdict.OutcomeOK {
			return addLease(next, st)
		}
		return e.read(next, st, op)
	}
	return next
}

// claimed: a claim answered with a token took effect.
func (e *modelEnv) claimed(next []leaseState, st leaseState, op *checker.Operation) []leaseState {
	if a := op.Output.Attempts; a > 0 {
		// claim_attempts grows by one per claim: a gap is claims whose
		// answer was lost
		for gap := a - 1 - int(st.attempts); gap > 0; gap-- {
			var ok bool
			if st, ok = e.hiddenClaim(st); !ok {
				return next
			}
		}
		if a != int(st.attempts)+1 {
			return next
		}
	}
	if !st.z.advance(op.Call, op.Return) || !st.take() {
		return next
	}
	st.token = op.Output.Token
	st.z.lease(e.duration(op.Output.LeaseNs))
	return addLease(next, st)
}

// mutate: extend, fulfill or fail took effect with a valid token.
func (e *modelEnv) mutate(next []leaseState, st leaseState, op *checker.Operation) []leaseState {
	if st.phase != phaseClaimed || st.token != op.Input.Token {
		return next
	}
	call, ret := window(op)
	if !st.z.advance(call, ret) || !st.live() {
		return next
	}
	switch op.Kind {
	case OpExtend:
		lo, hi := e.duration(op.Input.ExtendNs)
		for _, r := range []uint8{readingFromNow, readingAdded} {
			if (st.reading != readingAny && st.reading != r) || (e.reading != readingAny && e.reading != r) {
				continue
			}
			n := st
			n.reading = r
			if r == readingFromNow {
				n.z.lease(lo, hi)
			} else {
				n.z.shift(lo, hi)
			}
			next = addLease(next, n)
		}
	case OpFulfill:
		st.release(phaseFulfilled)
		next = addLease(next, st)
	case OpFail:
		st.release(phaseOpen)
		if o := st; o.belowMax() {
			next = addLease(next, o)
		}
		if d := st; d.atMax() {
			d.phase = phaseDead
			next = addLease(next, d)
		}
	}
	return next
}

// refused: extend, fulfill or fail got 404: the token was not valid then.
func (e *modelEnv) refused(next []leaseState, st leaseState, op *checker.Operation) []leaseState {
	if !st.z.advance(op.Call, op.Return) {
		return next
	}
	switch {
	case st.phase == phaseUnborn:
		if u := st; u.unborn() {
			next = addLease(next, u)
		}
		if st.born() {
			next = addLease(next, st)
		}
	case st.phase == phaseClaimed && st.token == op.Input.Token:
		if st.expired() {
			next = addLease(next, st)
		}
	default:
		next = addLease(next, st)
	}
	return next
}

// read: a status read answered.
func (e *modelEnv) read(next []leaseState, st leaseState, op *checker.Operation) []leaseState {
	state := op.Output.State
	switch state {
	case StateOpen, StateClaimed, StateFulfilled, StateDead, checker.StateGone:
	default:
		return addLease(next, st) // a state the model does not know: says nothing
	}
	n := st
	if !n.z.advance(op.Call, op.Return) {
		return next
	}
	switch state {
	case checker.StateGone:
		if u := n; u.unborn() {
			next = addLease(next, u) // not created yet
		}
		switch n.phase { // deleted (now or before)
		case phaseUnborn:
			if !n.born() {
				return next
			}
		case phaseClaimed:
			if !n.expired() {
				return next
			}
		}
		n.release(phaseGone)
		return addLease(next, n)
	case StateOpen:
		switch n.phase {
		case phaseUnborn:
			if n.born() {
				next = addLease(next, n)
			}
		case phaseOpen:
			next = addLease(next, n)
		case phaseClaimed:
			if n.expired() && n.belowMax() {
				n.release(phaseOpen)
				next = addLease(next, n)
			}
		}
	case StateFulfilled:
		if n.phase == phaseFulfilled {
			next = addLease(next, n)
		}
	case StateClaimed:
		if n.phase == phaseClaimed {
			return addLease(next, n) // lazy: also after its expiry
		}
		if h, ok := e.hiddenClaim(st); ok && h.z.advance(op.Call, op.Return) {
			next = addLease(next, h) // a claim whose answer was lost took it
		}
	case StateDead:
		switch n.phase {
		case phaseDead:
			return addLease(next, n)
		case phaseClaimed:
			if d := n; d.expired() && d.atMax() {
				d.release(phaseDead)
				next = addLease(next, d)
			}
		}
		// claims whose answer was lost used the attempts up, the last
		// lease expired
		cur := st
		for range maxMaxAttempts {
			h, ok := e.hiddenClaim(cur)
			if !ok {
				break
			}
			if d := h; d.z.advance(op.Call, op.Return) && d.expired() && d.atMax() {
				d.release(phaseDead)
				next = addLease(next, d)
			}
			cur = h
		}
	}
	return next
}

// leaseReadings returns which readings of extend the states allow.
func leaseReadings(states []leaseState) (fromNow, added bool) {
	for _, st := range states {
		fromNow = fromNow || st.reading != readingAdded
		added = added || st.reading != readingFromNow
	}
	return
}

// sortedHidden returns the calls of the hidden claims of ops, earliest first,
// at most maxMaxAttempts of them (the most one intent can use; the earliest
// serve any intent best), and how many there are.
func sortedHidden(ops []checker.Operation) ([]int64, int) {
	var calls []int64
	for i := range ops {
		op := &ops[i]
		if op.Kind == OpClaim && op.Effective() == verdict.OutcomeUnknown && op.Key == "" && op.Output.ID == "" {
			calls = append(calls, op.Call)
		}
	}
	slices.Sort(calls)
	n := len(calls)
	if n > maxMaxAttempts {
		calls = calls[:maxMaxAttempts:maxMaxAttempts]
	}
	return calls, n
}
