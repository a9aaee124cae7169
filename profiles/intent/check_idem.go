package intent

import (
	"fmt"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// checkIdempotency runs the named idempotency-record checks over the publishes
// of one key (seed 004 §7.2; IDS outcome replay; ATP key uniqueness): the
// first accepted body fixes the response, the same body replays it, another
// body is a conflict. It reports whether it found anything.
func (c *check) checkIdempotency(key string, idx []int) bool {
	ops := c.h.Ops
	var first *checker.Operation // earliest accepted
	for _, i := range idx {
		op := &ops[i]
		if op.Effective() == verdict.OutcomeOK && (first == nil || op.Call < first.Call) {
			first = op
		}
	}
	if first != nil {
		for _, i := range idx {
			op := &ops[i]
			if op == first || op.Effective() != verdict.OutcomeOK {
				continue
			}
			if op.Input.Body != first.Input.Body {
				c.add(checker.Anomaly{
					Kind: checker.IdempotencyViolation, Key: key,
					Explanation: fmt.Sprintf("key %s was accepted with two different bodies (%s and %s): once a body is recorded under a key, a different body must be refused with %d (INTENT-7.2-idem-conflict)",
						key, short(first.Input.Body), short(op.Input.Body), c.opts.ConflictStatus),
					Ops: []checker.Operation{*first, *op},
				})
				return true
			}
			if op.Output.Status != first.Output.Status || op.Output.ID != first.Output.ID || op.Output.Body != first.Output.Body {
				c.add(checker.Anomaly{
					Kind: checker.IdempotencyViolation, Key: key,
					Explanation: fmt.Sprintf("key %s with the same body got two different responses (%s, then %s): a repeated request must replay the first response (INTENT-7.2-idem-replay)",
						key, describeResp(first), describeResp(op)),
					Ops: []checker.Operation{*first, *op},
				})
				return true
			}
		}
	}
	for _, i := range idx {
		op := &ops[i]
		if op.Effective() != verdict.OutcomeFailed || op.Output.Status != c.opts.ConflictStatus {
			continue
		}
		other := false
		for _, j := range idx {
			if ops[j].Input.Body != op.Input.Body && ops[j].Effective() != verdict.OutcomeFailed {
				other = true
				break
			}
		}
		if !other {
			ev := []checker.Operation{*op}
			if first != nil {
				ev = []checker.Operation{*first, *op}
			}
			c.add(checker.Anomaly{
				Kind: checker.IdempotencyViolation, Key: key,
				Explanation: fmt.Sprintf("key %s was refused as a conflict (%d), but no request with a different body under this key could have taken effect: a repeated identical request must be replayed, not refused (INTENT-7.2-idem-replay)",
					key, op.Output.Status),
				Ops: ev,
			})
			return true
		}
	}
	return false
}

func describeResp(op *checker.Operation) string {
	s := fmt.Sprintf("%d", op.Output.Status)
	if op.Output.ID != "" {
		s += " id " + op.Output.ID
	}
	if op.Output.Body != "" {
		s += " body " + short(op.Output.Body)
	}
	return s
}
