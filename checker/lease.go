package checker

import (
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"math"
	"slices"
)

// The named lease checks of one intent (seed 004 §3.3, §7.3–7.6): they say
// in plain words what porcupine's lease model can only call illegal. All
// judge time conservatively: a server instant is only known to lie within
// the [Call, Return] of the operation that observed it, and leases are
// shortened (for "certainly live") or lengthened (for "certainly expired")
// by Options.ClockSlack.

// checkLease runs the named lease checks over the operations of one intent.
// It reports whether it found anything.
func (c *check) checkLease(key string, idx []int) bool {
	ops := c.h.Ops
	var claims, releases, extends, fulfills, mutations []*Operation
	for _, i := range idx {
		op := &ops[i]
		switch op.Kind {
		case OpClaim:
			if op.Effective() == verdict.OutcomeOK && op.Output.Token != "" {
				claims = append(claims, op)
			}
		case OpExtend, OpFulfill, OpFail:
			if op.Effective() == verdict.OutcomeOK {
				mutations = append(mutations, op)
			}
			if op.Kind == OpExtend && op.Effective() != verdict.OutcomeFailed {
				extends = append(extends, op)
			}
			if op.Kind != OpExtend && op.Effective() != verdict.OutcomeFailed {
				releases = append(releases, op)
			}
			if op.Kind == OpFulfill && op.Effective() == verdict.OutcomeOK {
				fulfills = append(fulfills, op)
			}
		}
	}
	byCall := func(a, b *Operation) int { return cmpInt64(a.Call, b.Call) }
	slices.SortStableFunc(claims, byCall)
	slices.SortStableFunc(extends, byCall)
	found := false
	if c.doubleLease(key, claims, releases, extends) {
		found = true
	}
	if c.staleToken(key, claims, extends, mutations) {
		found = true
	}
	if c.fulfilledTwice(key, claims, fulfills) {
		found = true
	}
	return found
}

// releasedBefore reports whether a fulfill or fail with token may have
// released the lease before instant t.
func releasedBefore(releases []*Operation, token string, t int64) bool {
	for _, r := range releases {
		if r.Input.Token == token && r.Call < t {
			return true
		}
	}
	return false
}

// doubleLease finds two claims of one intent whose leases certainly overlap:
// whichever took effect first, the second took effect before the first
// lease could have expired, and the first was not released in between.
func (c *check) doubleLease(key string, claims, releases, extends []*Operation) bool {
	slack := int64(c.opts.ClockSlack)
	for i, a := range claims {
		la := a.Output.LeaseNs
		if la <= 0 {
			continue
		}
		for _, b := range claims[i+1:] {
			if b.Call-a.Call >= la-slack {
				break // sorted by call: no later claim can certainly overlap a
			}
			if b.Output.Token == a.Output.Token {
				continue
			}
			// a took effect first: b did so before a's lease could end.
			aFirst := b.Return < liveUntil(a, extends, b.Return, slack) && !releasedBefore(releases, a.Output.Token, b.Return)
			// b first (possible only if b was called before a returned).
			bFirstPossible := b.Call < a.Return
			bFirst := a.Return < liveUntil(b, extends, a.Return, slack) && !releasedBefore(releases, b.Output.Token, a.Return)
			if aFirst && (!bFirstPossible || bFirst) {
				c.add(Anomaly{
					Kind: DoubleLease, Key: key,
					Explanation: fmt.Sprintf("intent %s was claimed twice with leases that certainly overlap: the first claim (token %s, lease %s) was called at %s, "+
						"the second (token %s) returned at %s, before the first lease could have expired, and nobody released the first lease: two workers held it at once",
						key, short(a.Output.Token), ms(la), ms(a.Call), short(b.Output.Token), ms(b.Return)),
					Ops: []Operation{*a, *b},
				})
				return true
			}
		}
	}
	return false
}

// liveUntil is the instant until which the lease granted by claim cl was
// certainly live, judged at instant `by`: every extend with its token that
// may have run before `by` may also have shortened it (an extend may set the
// expiry to now + seconds).
func liveUntil(cl *Operation, extends []*Operation, by, slack int64) int64 {
	if cl.Output.LeaseNs <= 0 {
		return math.MinInt64
	}
	live := cl.Call + cl.Output.LeaseNs - slack
	for _, e := range extends {
		if e.Input.Token != cl.Output.Token || e.Call >= by {
			continue
		}
		ext := max(e.Input.ExtendNs, 0)
		extended := min(e.Call, live) + ext - slack
		if e.Effective() == verdict.OutcomeOK && ext > 0 {
			live = extended
		} else {
			live = min(live, extended)
		}
	}
	return live
}

// staleToken finds a mutation that succeeded with a token that was certainly
// no longer valid: never granted, superseded by a later claim, or expired.
func (c *check) staleToken(key string, claims, extends, mutations []*Operation) bool {
	slack := int64(c.opts.ClockSlack)
	for _, m := range mutations {
		var a *Operation // the claim that granted m's token
		for _, cl := range claims {
			if cl.Output.Token == m.Input.Token {
				a = cl
				break
			}
		}
		if a == nil {
			c.add(Anomaly{
				Kind: StaleTokenAccepted, Key: key,
				Explanation: fmt.Sprintf("%s of intent %s succeeded with token %s, which no recorded claim of this intent granted", m.Kind, key, short(m.Input.Token)),
				Ops:         []Operation{*m},
			})
			return true
		}
		for _, b := range claims {
			if b.Output.Token != m.Input.Token && a.Return < b.Call && b.Return < m.Call {
				c.add(Anomaly{
					Kind: StaleTokenAccepted, Key: key,
					Explanation: fmt.Sprintf("%s of intent %s succeeded with token %s, but a later claim had already replaced it with token %s "+
						"(that claim returned at %s, the %s was called at %s): a superseded token must get 404",
						m.Kind, key, short(m.Input.Token), short(b.Output.Token), ms(b.Return), m.Kind, ms(m.Call)),
					Ops: []Operation{*a, *b, *m},
				})
				return true
			}
		}
		if a.Output.LeaseNs <= 0 {
			continue
		}
		// the latest instant the lease could have lasted until, through
		// every extension that may have happened before it ran out
		expiresBy := satAdd(a.Return, a.Output.LeaseNs+slack)
		evidence := []Operation{*a}
		for _, e := range extends {
			if e.Input.Token != m.Input.Token || e.Call > expiresBy || e.Call >= m.Call {
				continue
			}
			if e.Input.ExtendNs <= 0 {
				expiresBy = math.MaxInt64
				break
			}
			expiresBy = satAdd(max(e.Return, expiresBy), e.Input.ExtendNs+slack)
			evidence = append(evidence, *e)
		}
		if m.Call > expiresBy {
			c.add(Anomaly{
				Kind: StaleTokenAccepted, Key: key,
				Explanation: fmt.Sprintf("%s of intent %s succeeded with token %s at %s, after its lease had certainly expired (at %s at the latest): an expired token must get 404",
					m.Kind, key, short(m.Input.Token), ms(m.Call), ms(expiresBy)),
				Ops: append(evidence, *m),
			})
			return true
		}
	}
	return false
}

// fulfilledTwice finds a second successful fulfill, or a successful claim
// made after a fulfill had succeeded.
func (c *check) fulfilledTwice(key string, claims, fulfills []*Operation) bool {
	if len(fulfills) >= 2 {
		c.add(Anomaly{
			Kind: FulfilledTwice, Key: key,
			Explanation: fmt.Sprintf("intent %s was fulfilled %d times: after the first fulfill succeeds, the intent is terminal and every other fulfill must get 404", key, len(fulfills)),
			Ops:         []Operation{*fulfills[0], *fulfills[1]},
		})
		return true
	}
	for _, f := range fulfills {
		for _, cl := range claims {
			if cl.Call > f.Return {
				c.add(Anomaly{
					Kind: FulfilledTwice, Key: key,
					Explanation: fmt.Sprintf("intent %s was claimed again (at %s) after it had been fulfilled (at %s): a fulfilled intent is terminal, and claiming it runs its work again",
						key, ms(cl.Call), ms(f.Return)),
					Ops: []Operation{*f, *cl},
				})
				return true
			}
		}
	}
	return false
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ms renders nanoseconds of the run's clock as milliseconds.
func ms(ns int64) string {
	if ns == math.MaxInt64 {
		return "never"
	}
	return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
}

// attemptsExceeded finds a claim of an intent beyond the max_attempts its
// publisher set (seed 004 §3.3: at claim_attempts >= max_attempts the intent
// is dead, and a dead intent is not claimable).
func (c *check) attemptsExceeded(key string, idx []int, max int) bool {
	for _, i := range idx {
		op := &c.h.Ops[i]
		if op.Kind == OpClaim && op.Effective() == verdict.OutcomeOK && op.Output.Attempts > max {
			c.add(Anomaly{
				Kind: AttemptsExceeded, Key: key,
				Explanation: fmt.Sprintf("intent %s was claimed for attempt %d although its publisher allowed %d: after the last attempt it must be dead, not handed out again",
					key, op.Output.Attempts, max),
				Ops: []Operation{*op},
			})
			return true
		}
	}
	return false
}
