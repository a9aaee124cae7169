package checker

import (
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"math"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// The porcupine models. Both are nondeterministic (an operation with an
// unknown outcome may or may not have happened; a lease may or may not have
// expired; a failed intent may be requeued or dead), written as a set of
// possible states per step, like porcupine's NondeterministicModel.ToModel
// but without the interface boxing of each element. A partition holds the
// operations of one key of one model only; the model is chosen by the first
// operation's kind (publish: the idempotency record, anything else: the
// intent lease).

// idemState is one possible idempotency record of one key: the first accepted
// body fixes the response; the same body replays it; another body conflicts.
type idemState struct {
	has       bool   // a request with this key took effect
	body      string // digest of the body that took effect
	respKnown bool   // the response to that body has been seen
	status    int
	id        string
	rbody     string
}

// Lease phases of one intent (seed 004 §3.1).
const (
	phaseOpen uint8 = iota
	phaseClaimed
	phaseFulfilled
	phaseDead
)

var phaseNames = [...]string{"open", "claimed", "fulfilled", "dead"}

// unknownToken is the token of a claim whose response was lost: nobody holds
// it, so no operation can present it.
const unknownToken = "\x00unknown"

// leaseState is one possible state of one intent. liveUntil and expiresBy are
// on the harness's clock: the lease was certainly live before liveUntil and
// had certainly expired after expiresBy.
type leaseState struct {
	// now is the earliest instant the last operation linearized can have
	// taken effect: the order is also an order in time, so an operation
	// placed after it took effect no earlier.
	now       int64
	phase     uint8
	token     string
	attempts  int
	liveUntil int64
	expiresBy int64
}

// modelEnv is what the models know beyond one partition.
type modelEnv struct {
	slack          int64 // Options.ClockSlack in ns
	conflictStatus int
	// firstHiddenClaim is the call time of the earliest claim whose outcome
	// is unknown and whose intent nobody learned (math.MaxInt64 if none): it
	// may have claimed any intent.
	firstHiddenClaim int64
}

// lmState is the porcupine state of a partition: the set of possible states
// of the one model the partition belongs to (exactly one slice is used).
type lmState struct {
	idem  []idemState
	lease []leaseState
}

func (e *modelEnv) porcupineModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return lmState{} },
		Step: func(state, input, output any) (bool, any) {
			s := state.(lmState)
			op := input.(*Operation)
			if op.Kind == OpPublish {
				cur := s.idem
				if cur == nil {
					cur = []idemState{{}}
				}
				var next []idemState
				for _, st := range cur {
					next = e.idemStep(next, st, op)
				}
				return len(next) > 0, lmState{idem: next}
			}
			cur := s.lease
			if cur == nil {
				cur = []leaseState{{phase: phaseOpen, expiresBy: math.MaxInt64}}
			}
			var next []leaseState
			for _, st := range cur {
				next = e.leaseStep(next, st, op)
			}
			return len(next) > 0, lmState{lease: next}
		},
		Equal: func(a, b any) bool {
			x, y := a.(lmState), b.(lmState)
			return setEqual(x.idem, y.idem) && setEqual(x.lease, y.lease)
		},
		DescribeOperation: func(input, output any) string { return describeOp(input.(*Operation)) },
		DescribeState:     func(state any) string { return describeState(state.(lmState)) },
		DescribeOperationMetadata: func(info any) string {
			if s, ok := info.(string); ok {
				return s
			}
			return ""
		},
	}
}

func setEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if x == y {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// addState appends s to set unless it is already there.
func addState[T comparable](set []T, s T) []T {
	for _, x := range set {
		if x == s {
			return set
		}
	}
	return append(set, s)
}

// idemStep appends to next the states st can move to under op.
func (e *modelEnv) idemStep(next []idemState, st idemState, op *Operation) []idemState {
	switch op.Effective() {
	case verdict.OutcomeUnknown:
		next = addState(next, st) // it did not happen, or it replayed or conflicted
		if !st.has {
			next = addState(next, idemState{has: true, body: op.Input.Body})
		}
	case verdict.OutcomeOK:
		resp := idemState{has: true, body: op.Input.Body, respKnown: true, status: op.Output.Status, id: op.Output.ID, rbody: op.Output.Body}
		switch {
		case !st.has:
			next = addState(next, resp)
		case st.body != op.Input.Body:
			// a different body was accepted: illegal
		case !st.respKnown:
			next = addState(next, resp)
		case st == resp:
			next = addState(next, st)
		}
	case verdict.OutcomeFailed:
		if op.Output.Status == e.conflictStatus {
			if st.has && st.body != op.Input.Body {
				next = addState(next, st)
			}
		} else {
			next = addState(next, st) // rejected: the key is not consumed
		}
	}
	return next
}

// leaseStep appends to next the states st can move to under op.
func (e *modelEnv) leaseStep(next []leaseState, st leaseState, op *Operation) []leaseState {
	switch op.Kind {
	case OpClaim:
		return e.claimStep(next, st, op)
	case OpExtend, OpFulfill, OpFail:
		return e.mutateStep(next, st, op)
	case OpStatus:
		return e.statusStep(next, st, op)
	}
	return next
}

// at returns st as of instant t.
func (st leaseState) at(t int64) leaseState {
	st.now = t
	return st
}

// claimable reports whether a claim that took effect at some instant no later
// than by may have found st claimable.
func (st leaseState) claimable(by int64) bool {
	switch st.phase {
	case phaseOpen:
		return true
	case phaseClaimed:
		return by >= st.liveUntil
	}
	return false
}

func (e *modelEnv) claimStep(next []leaseState, st leaseState, op *Operation) []leaseState {
	tl := max(st.now, op.Call)
	switch op.Effective() {
	case verdict.OutcomeFailed:
		return addState(next, st.at(tl))
	case verdict.OutcomeUnknown:
		next = addState(next, st) // it never happened
		if st.phase == phaseOpen || st.phase == phaseClaimed {
			next = addState(next, leaseState{now: tl, phase: phaseClaimed, token: unknownToken, attempts: st.attempts + 1, liveUntil: tl, expiresBy: math.MaxInt64})
		}
		return next
	}
	if !st.claimable(op.Return) {
		return next
	}
	if op.Output.Attempts != 0 && op.Output.Attempts <= st.attempts {
		return next // claim_attempts must grow with every claim
	}
	n := leaseState{now: tl, phase: phaseClaimed, token: op.Output.Token, attempts: op.Output.Attempts, liveUntil: tl, expiresBy: math.MaxInt64}
	if op.Output.Attempts == 0 {
		n.attempts = st.attempts + 1
	}
	if l := op.Output.LeaseNs; l > 0 {
		n.liveUntil = tl + l - e.slack
		n.expiresBy = satAdd(op.Return, l+e.slack)
	}
	return addState(next, n)
}

// holds reports whether op presents the current token of a claimed intent.
func (st leaseState) holds(op *Operation) bool {
	return st.phase == phaseClaimed && st.token == op.Input.Token
}

func (e *modelEnv) mutateStep(next []leaseState, st leaseState, op *Operation) []leaseState {
	// may: the mutation may have found the lease valid at some instant.
	tl := max(st.now, op.Call)
	may := st.holds(op) && tl <= st.expiresBy
	var after []leaseState
	if may {
		switch op.Kind {
		case OpExtend:
			n := st.at(tl)
			if ext := op.Input.ExtendNs; ext > 0 {
				n.liveUntil = min(tl, st.liveUntil) + ext - e.slack
				n.expiresBy = satAdd(max(op.Return, st.expiresBy), ext+e.slack)
			}
			after = append(after, n)
		case OpFulfill:
			after = append(after, leaseState{now: tl, phase: phaseFulfilled, attempts: st.attempts, expiresBy: math.MaxInt64})
		case OpFail:
			after = append(after,
				leaseState{now: tl, phase: phaseOpen, attempts: st.attempts, expiresBy: math.MaxInt64},
				leaseState{now: tl, phase: phaseDead, attempts: st.attempts, expiresBy: math.MaxInt64})
		}
	}
	switch op.Effective() {
	case verdict.OutcomeOK:
		for _, n := range after {
			next = addState(next, n)
		}
	case verdict.OutcomeUnknown:
		next = addState(next, st)
		for _, n := range after {
			next = addState(next, n)
		}
	case verdict.OutcomeFailed:
		if op.Output.Status != 404 {
			return addState(next, st.at(tl)) // busy, rate limited, invalid: no effect
		}
		// 404: lease lost. Wrong only when the token was current and the
		// lease certainly live for the whole call.
		if !(st.holds(op) && op.Return < st.liveUntil) {
			next = addState(next, st.at(tl))
		}
	}
	return next
}

func (e *modelEnv) statusStep(next []leaseState, st leaseState, op *Operation) []leaseState {
	tl := max(st.now, op.Call)
	switch op.Effective() {
	case verdict.OutcomeUnknown:
		return addState(next, st)
	case verdict.OutcomeFailed:
		return addState(next, st.at(tl))
	}
	mayExpire := st.phase == phaseClaimed && op.Return >= st.liveUntil
	switch op.Output.State {
	case StateFulfilled:
		if st.phase == phaseFulfilled {
			next = addState(next, st.at(tl))
		}
	case StateClaimed:
		if st.phase == phaseClaimed {
			next = addState(next, st.at(tl))
		} else if st.phase == phaseOpen && op.Return >= e.firstHiddenClaim {
			// a claim whose answer was lost may hold it, since some time
			next = addState(next, leaseState{now: tl, phase: phaseClaimed, token: unknownToken, attempts: st.attempts + 1, liveUntil: math.MinInt64, expiresBy: math.MaxInt64})
		}
	case StateOpen:
		if st.phase == phaseOpen {
			next = addState(next, st.at(tl))
		} else if mayExpire {
			next = addState(next, leaseState{now: tl, phase: phaseOpen, attempts: st.attempts, expiresBy: math.MaxInt64})
		}
	case StateDead:
		if st.phase == phaseDead {
			next = addState(next, st.at(tl))
		} else if mayExpire || st.phase == phaseOpen {
			// expiry with attempts exhausted, or an admin cancel
			next = addState(next, leaseState{now: tl, phase: phaseDead, attempts: st.attempts, expiresBy: math.MaxInt64})
		}
	default: // gone or anything else: purged or expired; says nothing about the lease
		next = addState(next, st.at(tl))
	}
	return next
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func short(s string) string {
	if len(s) > 10 {
		return s[:8] + "…"
	}
	return s
}

// describeOp renders one operation for porcupine's visualization.
func describeOp(op *Operation) string {
	var b strings.Builder
	switch op.Kind {
	case OpPublish:
		fmt.Fprintf(&b, "publish(%s, body %s)", op.Key, short(op.Input.Body))
	case OpClaim:
		b.WriteString("claim()")
	case OpExtend:
		fmt.Fprintf(&b, "extend(%s, tok %s, +%dms)", short(op.Key), short(op.Input.Token), op.Input.ExtendNs/1e6)
	case OpFulfill, OpFail:
		fmt.Fprintf(&b, "%s(%s, tok %s)", op.Kind, short(op.Key), short(op.Input.Token))
	case OpStatus:
		fmt.Fprintf(&b, "status(%s)", short(op.Key))
	}
	b.WriteString(" → ")
	switch op.Effective() {
	case verdict.OutcomeUnknown:
		b.WriteString("unknown")
		return b.String()
	}
	fmt.Fprintf(&b, "%d", op.Output.Status)
	switch op.Kind {
	case OpPublish:
		if op.Output.ID != "" {
			fmt.Fprintf(&b, " id %s", short(op.Output.ID))
		}
	case OpClaim:
		if op.Effective() == verdict.OutcomeOK {
			fmt.Fprintf(&b, " %s tok %s attempt %d lease %dms", short(op.Output.ID), short(op.Output.Token), op.Output.Attempts, op.Output.LeaseNs/1e6)
		}
	case OpStatus:
		if op.Output.State != "" {
			b.WriteString(" " + op.Output.State)
		}
	}
	return b.String()
}

func describeState(s lmState) string {
	var parts []string
	for _, st := range s.idem {
		switch {
		case !st.has:
			parts = append(parts, "no record")
		case !st.respKnown:
			parts = append(parts, fmt.Sprintf("body %s, response unseen", short(st.body)))
		default:
			parts = append(parts, fmt.Sprintf("body %s → %d id %s", short(st.body), st.status, short(st.id)))
		}
	}
	for _, st := range s.lease {
		p := phaseNames[st.phase]
		if st.phase == phaseClaimed {
			tok := short(st.token)
			if st.token == unknownToken {
				tok = "(lost answer)"
			}
			p += fmt.Sprintf(" tok %s attempt %d", tok, st.attempts)
		}
		parts = append(parts, p)
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " | ") + "}"
}

// idemDecide decides one idempotency partition exactly, as porcupine would
// with the idempotency model, in linear time. The record is created by the
// first request that takes effect, X (accepted or unknown); accepted
// requests replay it and conflicts need it, so a linearization exists iff
// every accepted request has the same body and response, no conflict has
// that body, and some X with the accepted body (any body no conflict has,
// when none was accepted) was called no later than every other accepted or
// conflicting request returned. Refusals and unknown requests fit anywhere.
// When the partition cannot linearize, why says so in plain words.
func (e *modelEnv) idemDecide(ops []Operation, idx []int) (ok bool, why string) {
	var first *Operation // an accepted request
	conflictBodies := map[string]bool{}
	// the constrained requests (accepted or conflicting) with the two
	// earliest returns
	var min1, min2 *Operation
	for _, i := range idx {
		op := &ops[i]
		switch out := op.Effective(); {
		case out == verdict.OutcomeOK:
			if first == nil {
				first = op
			} else if op.Input.Body != first.Input.Body {
				return false, fmt.Sprintf("two different bodies were accepted (%s and %s)", short(first.Input.Body), short(op.Input.Body))
			} else if op.Output.Status != first.Output.Status || op.Output.ID != first.Output.ID || op.Output.Body != first.Output.Body {
				return false, fmt.Sprintf("the same body got two responses (%s and %s)", describeResp(first), describeResp(op))
			}
		case out == verdict.OutcomeFailed && op.Output.Status == e.conflictStatus:
			conflictBodies[op.Input.Body] = true
		default:
			continue
		}
		switch {
		case min1 == nil || op.Return < min1.Return:
			min1, min2 = op, min1
		case min2 == nil || op.Return < min2.Return:
			min2 = op
		}
	}
	if min1 == nil {
		return true, ""
	}
	if first != nil && conflictBodies[first.Input.Body] {
		return false, fmt.Sprintf("a request with the accepted body %s was refused as a conflict", short(first.Input.Body))
	}
	for _, i := range idx {
		x := &ops[i]
		out := x.Effective()
		if out == verdict.OutcomeFailed || conflictBodies[x.Input.Body] || (first != nil && x.Input.Body != first.Input.Body) {
			continue // x cannot have created the record
		}
		bound := min1
		if x == min1 {
			bound = min2
		}
		if bound == nil || x.Call <= bound.Return {
			return true, ""
		}
	}
	return false, fmt.Sprintf("%s returned at %s, before any request that could have created the record it answers from had been sent", describeOp(min1), ms(min1.Return))
}
