package intent

import (
	"math"
	"slices"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// Creation: which publish can have created each intent (seed 004 §7.2). A
// publish that takes effect on a scope (API key, Idempotency-Key) with no
// record creates one intent and the record; the others of the scope replay
// it (same body) or are refused (422). So an intent a publish was answered
// with was created by one of the publishes answered with it, or by one of
// the same scope and body whose answer was lost; an intent no answer names
// was created by a scope no answer names, one intent per scope, before it
// was first seen to exist (and by a publish of the key its effects name).
// The intents no answer names are matched to such scopes; an intent no
// complete matching can place is unexpected.

// creation is what newModelEnv could not explain.
type creation struct {
	id   string
	seen int64              // when it was first seen to exist
	op   *checker.Operation // what saw it (nil: an effect)
}

// maxMatched bounds the intents no answer names that are matched exactly
// (and their number times the scopes', 4096); beyond, each may use any scope
// that fits it.
const maxMatched = 64

// newModelEnv gathers what the lease model needs beyond one partition: the
// claims whose intent nobody learned, and for each intent when a publish can
// have created it, for which key, and its max_attempts.
func newModelEnv(h checker.History, l checker.Ledger, opts Options, parts []part) *modelEnv {
	env := &modelEnv{slack: max(int64(opts.ClockSlack), 0), conflictStatus: opts.ConflictStatus}
	env.hidden, env.hiddenTotal = sortedHidden(h.Ops)
	ops := h.Ops
	published := false
	for i := range ops {
		if ops[i].Kind == checker.OpPublish {
			published = true
			break
		}
	}
	if !published {
		return env // a lease-only history: every intent exists from the start
	}
	type scope = [2]string
	type scopeBody = [3]string
	// intent → publishes answered with it: the first, then a chain
	acked := make(map[string]int32, len(parts)/2)
	nextAck := make([]int32, len(ops))
	answered := map[scope]bool{}  // scopes answered with an intent
	lost := map[scopeBody][]int{} // publishes whose answer was lost, per scope and body
	// a 422 proves its scope's record, and so the intent it made, existed
	// by its return
	conflictBy := map[scope]int64{}
	// and that the record's body is not its own: a body refused as a
	// conflict did not create its scope's record
	refused := map[scopeBody]bool{}
	for i := range ops {
		op := &ops[i]
		if op.Kind != checker.OpPublish {
			continue
		}
		switch op.Effective() {
		case verdict.OutcomeFailed:
			if op.Output.Status == env.conflictStatus {
				refused[scopeBody{op.KeyID, op.Key, op.Input.Body}] = true
				sc := scope{op.KeyID, op.Key}
				if t, ok := conflictBy[sc]; !ok || op.Return < t {
					conflictBy[sc] = op.Return
				}
			}
		case verdict.OutcomeOK:
			if op.Output.ID != "" {
				nextAck[i] = -1
				if j, ok := acked[op.Output.ID]; ok {
					nextAck[i] = j
				}
				acked[op.Output.ID] = int32(i)
				answered[scope{op.KeyID, op.Key}] = true
			}
		case verdict.OutcomeUnknown:
			k := scopeBody{op.KeyID, op.Key, op.Input.Body}
			lost[k] = append(lost[k], i)
		}
	}
	// the scopes no answer names: each may have created one intent
	type slot struct {
		key          string
		call         int64
		maxLo, maxHi int
		by           int64     // a 422 of the scope returned by then
		groups       []Creator // one per body: the publishes of that body may have made it
	}
	var slots []slot
	var bodies [][]string // of each slot's groups
	slotOf := map[scope]int{}
	for i := range ops {
		op := &ops[i]
		sc := scope{op.KeyID, op.Key}
		if op.Kind != checker.OpPublish || answered[sc] || op.Effective() == verdict.OutcomeFailed || refused[scopeBody{op.KeyID, op.Key, op.Input.Body}] {
			continue
		}
		j, ok := slotOf[sc]
		if !ok {
			j = len(slots)
			slotOf[sc] = j
			bodies = append(bodies, nil)
			by, ok := conflictBy[sc]
			if !ok {
				by = math.MaxInt64
			}
			slots = append(slots, slot{key: op.Key, call: math.MaxInt64, maxLo: math.MaxInt, maxHi: 0, by: by})
		}
		s := &slots[j]
		s.call = min(s.call, op.Call)
		lo, hi := widen(op.Input.MaxAttempts)
		s.maxLo, s.maxHi = min(s.maxLo, lo), max(s.maxHi, hi)
		g := -1
		for k := range s.groups {
			if bodies[j][k] == op.Input.Body {
				g = k
			}
		}
		if g < 0 {
			g = len(s.groups)
			s.groups = append(s.groups, Creator{After: math.MaxInt64, By: s.by, MaxLo: math.MaxInt, MaxHi: 0})
			bodies[j] = append(bodies[j], op.Input.Body)
		}
		cr := &s.groups[g]
		cr.After = min(cr.After, op.Call)
		cr.MaxLo, cr.MaxHi = min(cr.MaxLo, lo), max(cr.MaxHi, hi)
	}
	// every intent the history names: one answered to a publish gets its
	// bounds from those publishes; for the others, when each was first seen
	// to exist and the key its effects name
	type intent struct {
		seen int64
		op   *checker.Operation
		keys []string
	}
	intents := map[string]*intent{}
	var order []string
	see := func(id string, at int64, op *checker.Operation, key string) {
		in := intents[id]
		if in == nil {
			in = &intent{seen: math.MaxInt64}
			intents[id] = in
			order = append(order, id)
		}
		if at < in.seen {
			in.seen, in.op = at, op
		}
		if key != "" && !slices.Contains(in.keys, key) {
			in.keys = append(in.keys, key)
		}
	}
	env.intents = make(map[string]*IntentBounds, len(parts)/2)
	bounds := make([]IntentBounds, 0, len(parts)/2)
	creators := make([]Creator, 0, len(parts)/2)
	var keys []string
	answeredTo := func(id string) {
		if _, done := env.intents[id]; done {
			return
		}
		if len(bounds) == cap(bounds) {
			bounds = make([]IntentBounds, 0, 64)
		}
		bounds = append(bounds, IntentBounds{BornAfter: math.MaxInt64, BornBy: math.MaxInt64, MaxLo: math.MaxInt, MaxHi: 0})
		b := &bounds[len(bounds)-1]
		env.intents[id] = b
		from := len(keys)
		for i := acked[id]; i >= 0; i = nextAck[i] {
			op := &ops[i]
			b.BornBy = min(b.BornBy, op.Return)
			if t, ok := conflictBy[scope{op.KeyID, op.Key}]; ok {
				b.BornBy = min(b.BornBy, t)
			}
			b.addOp(op)
			for _, j := range lost[scopeBody{op.KeyID, op.Key, op.Input.Body}] {
				b.addOp(&ops[j])
			}
			if !slices.Contains(keys[from:], op.Key) {
				keys = append(keys, op.Key)
			}
		}
		b.Keys = keys[from:len(keys):len(keys)]
		// one way: the bodies of an answered scope share max_attempts
		if len(creators) == cap(creators) {
			creators = make([]Creator, 0, 64)
		}
		creators = append(creators, Creator{After: b.BornAfter, By: b.BornBy, MaxLo: b.MaxLo, MaxHi: b.MaxHi})
		b.Creators = creators[len(creators)-1 : len(creators) : len(creators)]
	}
	for _, p := range parts {
		if p.model != ModelLease {
			continue
		}
		if _, ok := acked[p.key]; ok {
			answeredTo(p.key)
			continue
		}
		see(p.key, math.MaxInt64, nil, "")
		for _, i := range p.ops {
			if op := &ops[i]; op.Effective() == verdict.OutcomeOK && showsIntent(op) {
				see(p.key, op.Return, op, "")
			}
		}
	}
	for _, e := range l.Effects {
		if e.Intent == "" {
			continue
		}
		if _, ok := acked[e.Intent]; ok {
			answeredTo(e.Intent)
			continue
		}
		see(e.Intent, e.At, nil, e.Key)
	}
	var needs []string // intents no answer names, seen to exist
	for _, id := range order {
		env.intents[id] = &IntentBounds{BornAfter: math.MaxInt64, BornBy: math.MaxInt64, MaxLo: math.MaxInt, MaxHi: 0}
		if intents[id].seen < math.MaxInt64 {
			needs = append(needs, id)
		}
	}
	fits := func(id string, s slot) bool {
		in := intents[id]
		return s.call <= in.seen && (len(in.keys) == 0 || (len(in.keys) == 1 && in.keys[0] == s.key))
	}
	// which scopes each intent no answer names may have come from: those of
	// some matching that places them all
	match := func(forced, to int) ([]int, bool) {
		owner := make([]int, len(slots))
		for j := range owner {
			owner[j] = -1
		}
		if forced >= 0 {
			owner[to] = forced
		}
		var try func(n int, seen []bool) bool
		try = func(n int, seen []bool) bool {
			for j, s := range slots {
				if seen[j] || !fits(needs[n], s) || (forced >= 0 && j == to) {
					continue
				}
				seen[j] = true
				if owner[j] < 0 || try(owner[j], seen) {
					owner[j] = n
					return true
				}
			}
			return false
		}
		for n := range needs {
			if n != forced && !try(n, make([]bool, len(slots))) {
				return owner, false
			}
		}
		return owner, true
	}
	owner, ok := match(-1, -1)
	if !ok {
		// one intent is unexplained: the first the matching could not place
		placed := map[int]bool{}
		for _, n := range owner {
			placed[n] = true
		}
		for n, id := range needs {
			if !placed[n] {
				in := intents[id]
				env.unexplained = &creation{id: id, seen: in.seen, op: in.op}
				break
			}
		}
	}
	exact := ok && len(needs) <= maxMatched && len(needs)*len(slots) <= 4096
	for n, id := range needs {
		b := env.intents[id]
		by := int64(math.MinInt64) // created by then, whichever scope made it
		for j, s := range slots {
			if !fits(id, s) {
				continue
			}
			if exact && owner[j] != n {
				if _, alt := match(n, j); !alt {
					continue
				}
			}
			b.add(s.call, s.key, s.maxLo, s.maxHi)
			by = max(by, s.by)
			for _, g := range s.groups {
				if g.After <= intents[id].seen {
					b.Creators = append(b.Creators, g)
				}
			}
		}
		if by > math.MinInt64 {
			b.BornBy = by
		}
	}
	for _, b := range env.intents {
		if b.MaxHi == 0 {
			b.MaxLo, b.MaxHi = 1, maxMaxAttempts
		}
	}
	return env
}

// add counts a publish that may have created the intent: called at call,
// under key, with max_attempts within [lo, hi].
func (b *IntentBounds) add(call int64, key string, lo, hi int) {
	b.BornAfter = min(b.BornAfter, call)
	b.MaxLo, b.MaxHi = min(b.MaxLo, lo), max(b.MaxHi, hi)
	if !slices.Contains(b.Keys, key) {
		b.Keys = append(b.Keys, key)
	}
}

// addOp counts publish op, answered with the intent (or of the same scope
// and body), as one that may have created it; its key is counted apart.
func (b *IntentBounds) addOp(op *checker.Operation) {
	lo, hi := widen(op.Input.MaxAttempts)
	b.BornAfter = min(b.BornAfter, op.Call)
	b.MaxLo, b.MaxHi = min(b.MaxLo, lo), max(b.MaxHi, hi)
}

// widen is the range of max_attempts m allows (0: not recorded, any of 1–20).
func widen(m int) (lo, hi int) {
	if m <= 0 {
		return 1, maxMaxAttempts
	}
	return m, m
}

// showsIntent reports whether op, answered, shows its intent existed.
func showsIntent(op *checker.Operation) bool {
	switch op.Kind {
	case OpClaim:
		return op.Output.Token != ""
	case OpExtend, OpFulfill, OpFail:
		return true
	case checker.OpStatus:
		switch op.Output.State {
		case StateOpen, StateClaimed, StateFulfilled, StateDead:
			return true
		}
	}
	return false
}
