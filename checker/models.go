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
				cur = e.initial(op)
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
		DescribeOperation: func(input, output any) string { return DescribeOp(input.(*Operation)) },
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

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Abbreviate shortens an ID or a digest to its first 8 characters (and an
// ellipsis) for a one-line rendering.
func Abbreviate(s string) string {
	if len(s) > 10 {
		return s[:8] + "…"
	}
	return s
}

// DescribeOp renders one operation for porcupine's visualization.
func DescribeOp(op *Operation) string {
	var b strings.Builder
	switch op.Kind {
	case OpPublish:
		fmt.Fprintf(&b, "publish(%s, body %s)", op.Key, Abbreviate(op.Input.Body))
	case OpClaim:
		b.WriteString("claim()")
	case OpExtend:
		fmt.Fprintf(&b, "extend(%s, tok %s, +%dms)", Abbreviate(op.Key), Abbreviate(op.Input.Token), op.Input.ExtendNs/1e6)
	case OpFulfill, OpFail:
		fmt.Fprintf(&b, "%s(%s, tok %s)", op.Kind, Abbreviate(op.Key), Abbreviate(op.Input.Token))
	case OpStatus:
		fmt.Fprintf(&b, "status(%s)", Abbreviate(op.Key))
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
			fmt.Fprintf(&b, " id %s", Abbreviate(op.Output.ID))
		}
	case OpClaim:
		if op.Effective() == verdict.OutcomeOK {
			fmt.Fprintf(&b, " %s tok %s attempt %d lease %dms", Abbreviate(op.Output.ID), Abbreviate(op.Output.Token), op.Output.Attempts, op.Output.LeaseNs/1e6)
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
			parts = append(parts, fmt.Sprintf("body %s, response unseen", Abbreviate(st.body)))
		default:
			parts = append(parts, fmt.Sprintf("body %s → %d id %s", Abbreviate(st.body), st.status, Abbreviate(st.id)))
		}
	}
	for _, st := range s.lease {
		p := phaseNames[st.phase]
		if st.phase == phaseClaimed {
			tok := Abbreviate(st.token)
			if st.token == unknownToken {
				tok = "(lost answer)"
			}
			p += fmt.Sprintf(" tok %s attempt %d", tok, st.attempts)
			if lo, hi := st.z.expiry(); hi < zinf {
				p += fmt.Sprintf(" expiring in [%s, %s]", ms(lo), ms(hi))
			} else if lo > -zinf {
				p += fmt.Sprintf(" expiring from %s", ms(lo))
			}
		} else if st.attempts > 0 {
			p += fmt.Sprintf(" after %d attempts", st.attempts)
		}
		if st.phase != phaseUnborn {
			p += fmt.Sprintf(", last step at [%s, %s]", ms(st.z.earliest()), ms(st.z.latest()))
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
				return false, fmt.Sprintf("two different bodies were accepted (%s and %s)", Abbreviate(first.Input.Body), Abbreviate(op.Input.Body))
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
		return false, fmt.Sprintf("a request with the accepted body %s was refused as a conflict", Abbreviate(first.Input.Body))
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
	return false, fmt.Sprintf("%s returned at %s, before any request that could have created the record it answers from had been sent", DescribeOp(min1), ms(min1.Return))
}
