package intent

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// The named lease checks of one intent (seed 004 §3.2, §3.3, §7.3–7.6): they
// say in plain words what the lease model can only call illegal. Each is
// proven with the model's own semantics: it fires only on a pattern that no
// order of the operations explains, whatever instant within its [Call,
// Return] each took effect at (an unknown outcome: from its Call on), under
// either reading of extend, with server durations within Options.ClockSlack.
// And each stands only where the model found the partition illegal (or
// could not decide it): a named finding never contradicts its model.
//
// Bounds on instants: a claim's instant is no earlier than its call, nor
// than the end of every lease its attempt number puts before it; no later
// than its return, nor than the return of an operation that needs it
// first (a mutation with its token, a read of claimed it alone explains).
// A lease lasts its length less the slack at the least, through every
// extension at the most.

// checkLease runs the named lease checks over the operations of one intent.
func (c *check) checkLease(key string, idx []int, b *IntentBounds, hidden []int64) {
	l := c.leaseOps(key, idx, hidden)
	c.beforeCreation(key, l, b)
	c.doubleLease(key, l)
	c.staleToken(key, l, hidden)
	c.fulfilledTwice(key, l)
	c.attemptsExceeded(key, l, b)
	c.deadTooEarly(key, l, b, hidden)
}

// leaseOps is one intent's operations, sorted for the named checks.
type leaseOps struct {
	claims    []*checker.Operation // answered with a token, by call
	lost      []*checker.Operation // claims of this intent whose outcome is unknown
	extends   []*checker.Operation // may have taken effect, by call
	releases  []*checker.Operation // fail or fulfill that may have taken effect
	mutations []*checker.Operation // extend, fulfill or fail answered 200
	fulfills  []*checker.Operation // fulfill answered 200
	reads     []*checker.Operation // status reads answered
	// tLo and tHi bound the instant of each claim (by index in claims).
	tLo, tHi []int64
	slack    int64
	hidden   []int64 // calls of the claims whose intent nobody learned
}

func (c *check) leaseOps(key string, idx []int, hidden []int64) *leaseOps {
	l := &leaseOps{slack: max(int64(c.opts.ClockSlack), 0), hidden: hidden}
	for _, i := range idx {
		op := &c.h.Ops[i]
		out := op.Effective()
		switch op.Kind {
		case OpClaim:
			if out == verdict.OutcomeOK && op.Output.Token != "" {
				l.claims = append(l.claims, op)
			} else if out == verdict.OutcomeUnknown {
				l.lost = append(l.lost, op)
			}
		case OpExtend, OpFulfill, OpFail:
			if out == verdict.OutcomeOK {
				l.mutations = append(l.mutations, op)
			}
			if out != verdict.OutcomeFailed {
				if op.Kind == OpExtend {
					l.extends = append(l.extends, op)
				} else {
					l.releases = append(l.releases, op)
				}
			}
			if op.Kind == OpFulfill && out == verdict.OutcomeOK {
				l.fulfills = append(l.fulfills, op)
			}
		case checker.OpStatus:
			if out == verdict.OutcomeOK {
				l.reads = append(l.reads, op)
			}
		}
	}
	byCall := func(a, b *checker.Operation) int { return cmp.Compare(a.Call, b.Call) }
	slices.SortStableFunc(l.claims, byCall)
	slices.SortStableFunc(l.extends, byCall)
	l.bounds()
	return l
}

// before reports whether claim i certainly took effect before claim j: its
// attempt number is lower, or it returned before j was called.
func (l *leaseOps) before(i, j int) bool {
	a, b := l.claims[i], l.claims[j]
	if a.Output.Attempts > 0 && b.Output.Attempts > 0 {
		return a.Output.Attempts < b.Output.Attempts
	}
	return a.Return < b.Call
}

// bounds fills tLo and tHi.
func (l *leaseOps) bounds() {
	n := len(l.claims)
	l.tLo, l.tHi = make([]int64, n), make([]int64, n)
	order := make([]int, n)
	for i, cl := range l.claims {
		order[i] = i
		l.tLo[i], l.tHi[i] = cl.Call, cl.Return
	}
	// a claim follows the end of every lease before it: lower bounds in
	// attempt order
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(l.claims[a].Output.Attempts, l.claims[b].Output.Attempts)
	})
	for _, k := range order {
		for _, j := range order {
			if j != k && l.claims[j].Output.Attempts > 0 && l.claims[k].Output.Attempts > l.claims[j].Output.Attempts {
				l.tLo[k] = max(l.tLo[k], l.endsFrom(j))
			}
		}
	}
	// a mutation answered 200 with a claim's token follows that claim
	for _, m := range l.mutations {
		for i, cl := range l.claims {
			if cl.Output.Token == m.Input.Token {
				l.tHi[i] = min(l.tHi[i], m.Return)
			}
		}
	}
	// a read of claimed that this claim alone can explain follows it
	for _, r := range l.reads {
		if r.Output.State != StateClaimed || len(l.lost) > 0 || (len(l.hidden) > 0 && l.hidden[0] <= r.Return) {
			continue
		}
		only := -1
		for i, cl := range l.claims {
			if cl.Call <= r.Return {
				if only >= 0 {
					only = -2
					break
				}
				only = i
			}
		}
		if only >= 0 {
			l.tHi[only] = min(l.tHi[only], r.Return)
		}
	}
}

// endsFrom is the earliest instant the lease of claim i can have ended: its
// expiry at the soonest (whichever of its claim and extensions came last),
// or a release with its token.
func (l *leaseOps) endsFrom(i int) int64 {
	cl := l.claims[i]
	end := int64(math.MaxInt64)
	if cl.Output.LeaseNs <= 0 {
		end = l.tLo[i] // unknown length: it may end at once
	}
	okExtend := false
	for _, e := range l.extends {
		if e.Input.Token == cl.Output.Token && e.Effective() == verdict.OutcomeOK {
			okExtend = true
		}
	}
	if !okExtend {
		end = min(end, l.tLo[i]+cl.Output.LeaseNs-l.slack)
	}
	for _, e := range l.extends {
		if e.Input.Token == cl.Output.Token {
			end = min(end, e.Call+max(e.Input.ExtendNs-l.slack, 0))
		}
	}
	for _, r := range l.releases {
		if r.Input.Token == cl.Output.Token {
			end = min(end, r.Call)
		}
	}
	return end
}

// beforeCreation finds an operation that saw the intent before any publish
// that could have created it was called (or when none could).
func (c *check) beforeCreation(key string, l *leaseOps, b *IntentBounds) {
	if b.BornAfter == math.MinInt64 {
		return
	}
	var first *checker.Operation
	see := func(op *checker.Operation) {
		if op.Return < b.BornAfter && (first == nil || op.Return < first.Return) {
			first = op
		}
	}
	for _, op := range l.claims {
		see(op)
	}
	for _, op := range l.mutations {
		see(op)
	}
	for _, op := range l.reads {
		switch op.Output.State {
		case StateOpen, StateClaimed, StateFulfilled, StateDead:
			see(op)
		}
	}
	if first == nil {
		return
	}
	why := fmt.Sprintf("before any publish that could have created it was called (the earliest at %s)", ms(b.BornAfter))
	if b.BornAfter == math.MaxInt64 {
		why = "yet no publish of the history could have created it (none answered its id, none of its key was left without an answer)"
	}
	c.add(checker.Anomaly{
		Kind: checker.Unexpected, Key: key,
		Explanation: fmt.Sprintf("intent %s existed at %s (%s), %s: an intent exists only once a publish created it",
			key, ms(first.Return), describeOp(first), why),
		Ops: []checker.Operation{*first},
	})
}

// doubleLease finds two claims of one intent whose leases certainly
// overlap: one took effect before the other's lease could have ended.
func (c *check) doubleLease(key string, l *leaseOps) {
	for i := range l.claims {
		for j := range l.claims {
			a, b := l.claims[i], l.claims[j]
			if i == j || a.Output.Token == b.Output.Token {
				continue
			}
			// a first: certainly (by attempts or time), or possibly, in
			// which case b first must be a double lease too
			if !l.before(i, j) && (l.before(j, i) || j < i) {
				continue
			}
			if end := l.endsFrom(i); b.Return >= end {
				continue
			}
			if !l.before(i, j) && a.Return >= l.endsFrom(j) {
				continue
			}
			c.add(checker.Anomaly{
				Kind: DoubleLease, Key: key,
				Explanation: fmt.Sprintf("intent %s was claimed twice with leases that certainly overlap: the claim of token %s (lease %s) took effect no earlier than %s, "+
					"so its lease could not end before %s, yet the claim of token %s took effect by %s: two workers held it at once (INTENT-7.3-atomic-claim)",
					key, short(a.Output.Token), ms(a.Output.LeaseNs), ms(l.tLo[i]), ms(l.endsFrom(i)), short(b.Output.Token), ms(b.Return)),
				Ops: []checker.Operation{*a, *b},
			})
			return
		}
	}
}

// staleToken finds a mutation that succeeded with a token that was certainly
// no longer valid: never granted, superseded by a later claim, or expired;
// or a read of fulfilled when every fulfill that may have done it was sent
// with such a token.
func (c *check) staleToken(key string, l *leaseOps, hidden []int64) {
	for _, m := range l.mutations {
		if why, ev := l.stale(m); why != "" {
			c.add(checker.Anomaly{
				Kind: StaleTokenAccepted, Key: key,
				Explanation: fmt.Sprintf("%s of intent %s succeeded with token %s, %s", m.Kind, key, short(m.Input.Token), why),
				Ops:         append(ev, *m),
			})
			return
		}
	}
	for _, r := range l.reads {
		if r.Output.State != StateFulfilled {
			continue
		}
		sent := func(f *checker.Operation) bool { return f.Kind == OpFulfill && f.Call <= r.Return } // may have done it
		some, fresh := false, false
		for _, f := range l.releases {
			if sent(f) {
				some = true
				if why, _ := l.stale(f); why == "" {
					fresh = true
					break
				}
			}
		}
		if !some || fresh {
			continue // no fulfill at all (the model says so), or one may have been valid
		}
		var whys []string
		var ev []checker.Operation
		for _, f := range l.releases {
			if !sent(f) {
				continue
			}
			why, e := l.stale(f)
			if why == "" {
				whys = nil
				break
			}
			whys = append(whys, fmt.Sprintf("the fulfill with token %s (%s) %s", short(f.Input.Token), f.Effective(), why))
			ev = append(append(ev, e...), *f)
		}
		if whys == nil {
			continue
		}
		c.add(checker.Anomaly{
			Kind: StaleTokenAccepted, Key: key,
			Explanation: fmt.Sprintf("intent %s read fulfilled at %s, but every fulfill that may have done it was refusable: %s; so one was accepted with a token that must have got 404",
				key, ms(r.Return), strings.Join(whys, "; ")),
			Ops: append(ev, *r),
		})
		return
	}
}

// stale says why m's token was certainly not valid when m took effect, with
// the operations that show it ("" when it may have been valid).
func (l *leaseOps) stale(m *checker.Operation) (string, []checker.Operation) {
	ai := -1 // the claim that granted m's token
	for i, cl := range l.claims {
		if cl.Output.Token == m.Input.Token {
			ai = i
			break
		}
	}
	if ai < 0 {
		return "which no recorded claim of this intent granted", nil
	}
	a := l.claims[ai]
	for bi, b := range l.claims {
		if bi != ai && b.Output.Token != a.Output.Token && l.before(ai, bi) && b.Return < m.Call {
			return fmt.Sprintf("but a later claim had already replaced it with token %s (that claim returned at %s, the %s was called at %s): a superseded token must get 404",
				short(b.Output.Token), ms(b.Return), m.Kind, ms(m.Call)), []checker.Operation{*a, *b}
		}
	}
	if a.Output.LeaseNs <= 0 {
		return "", nil
	}
	// the latest the lease can have lasted, through every extension that
	// may have found it live before m
	extended := func(see func(*checker.Operation)) int64 {
		until := satAdd(l.tHi[ai], a.Output.LeaseNs+l.slack)
		for _, e := range l.extends {
			if e.Input.Token != m.Input.Token || e.Call >= until || e.Call > m.Return {
				continue
			}
			if e.Input.ExtendNs <= 0 {
				return math.MaxInt64
			}
			until = satAdd(until, e.Input.ExtendNs+l.slack)
			see(e)
		}
		return until
	}
	until := extended(func(*checker.Operation) {})
	if m.Call < until {
		return "", nil
	}
	evidence := []checker.Operation{*a}
	extended(func(e *checker.Operation) { evidence = append(evidence, *e) })
	if l.tHi[ai] < a.Return {
		evidence = append(evidence, l.boundingOp(ai)...)
	}
	return fmt.Sprintf("sent at %s, after its lease had certainly expired (the claim took effect by %s, the lease ended by %s at the latest): an expired token must get 404",
		ms(m.Call), ms(l.tHi[ai]), ms(until)), evidence
}

// boundingOp is the operation that bounds claim i's instant from above.
func (l *leaseOps) boundingOp(i int) []checker.Operation {
	for _, op := range l.mutations {
		if op.Input.Token == l.claims[i].Output.Token && op.Return == l.tHi[i] {
			return []checker.Operation{*op}
		}
	}
	for _, op := range l.reads {
		if op.Return == l.tHi[i] {
			return []checker.Operation{*op}
		}
	}
	return nil
}

// fulfilledTwice finds a second successful fulfill, or a successful claim
// made after a fulfill had succeeded.
func (c *check) fulfilledTwice(key string, l *leaseOps) {
	if len(l.fulfills) >= 2 {
		c.add(checker.Anomaly{
			Kind: FulfilledTwice, Key: key,
			Explanation: fmt.Sprintf("intent %s was fulfilled %d times: after the first fulfill succeeds, the intent is terminal and every other fulfill must get 404", key, len(l.fulfills)),
			Ops:         []checker.Operation{*l.fulfills[0], *l.fulfills[1]},
		})
		return
	}
	for _, f := range l.fulfills {
		for _, cl := range l.claims {
			if cl.Call > f.Return {
				c.add(checker.Anomaly{
					Kind: FulfilledTwice, Key: key,
					Explanation: fmt.Sprintf("intent %s was claimed again (at %s) after it had been fulfilled (at %s): a fulfilled intent is terminal, and claiming it runs its work again (INTENT-7.3-eligible-status)",
						key, ms(cl.Call), ms(f.Return)),
					Ops: []checker.Operation{*f, *cl},
				})
				return
			}
		}
	}
}

// attemptsExceeded finds a claim of an intent beyond the max_attempts its
// publisher set (seed 004 §3.3: at claim_attempts >= max_attempts the intent
// is dead, and a dead intent is not claimable).
func (c *check) attemptsExceeded(key string, l *leaseOps, b *IntentBounds) {
	for _, op := range l.claims {
		if op.Output.Attempts > b.MaxHi {
			c.add(checker.Anomaly{
				Kind: AttemptsExceeded, Key: key,
				Explanation: fmt.Sprintf("intent %s was claimed for attempt %d although its publisher allowed %d: after the last attempt it must be dead, not handed out again (INTENT-7.3-eligible-attempts)",
					key, op.Output.Attempts, b.MaxHi),
				Ops: []checker.Operation{*op},
			})
			return
		}
	}
}

// deadTooEarly finds a read of dead before max_attempts claims could have
// been made (seed 004 §3.2, §3.3: only a fail or a lease expiry at
// claim_attempts >= max_attempts makes an intent dead, or an admin cancel,
// which the history does not hold).
func (c *check) deadTooEarly(key string, l *leaseOps, b *IntentBounds, hidden []int64) {
	for _, r := range l.reads {
		if r.Output.State != StateDead {
			continue
		}
		n := 0 // claims that may have taken effect before r
		for _, cl := range l.claims {
			if cl.Call <= r.Return {
				n++
			}
		}
		for _, cl := range l.lost {
			if cl.Call <= r.Return {
				n++
			}
		}
		for _, h := range hidden {
			if h <= r.Return {
				n++
			}
		}
		if n >= b.MaxLo {
			continue
		}
		why := fmt.Sprintf("only %d claim(s) could have been made by then", n)
		if n == 0 {
			why = "it was never claimed"
		}
		c.add(checker.Anomaly{
			Kind: DeadTooEarly, Key: key,
			Explanation: fmt.Sprintf("intent %s read dead at %s with max_attempts %d, but %s: an intent is dead-lettered only when a fail or a lease expiry finds claim_attempts >= max_attempts (an admin cancel would do it, and the history holds none)",
				key, ms(r.Return), b.MaxLo, why),
			Ops: append(derefOps(l.claims), *r),
		})
		return
	}
}

func derefOps(ops []*checker.Operation) []checker.Operation {
	out := make([]checker.Operation, 0, len(ops)+1)
	for _, op := range ops {
		out = append(out, *op)
	}
	return out
}

func cmpInt64(a, b int64) int { return cmp.Compare(a, b) }

// ms renders nanoseconds of the run's clock as milliseconds.
func ms(ns int64) string {
	if ns >= zinf {
		return "never"
	}
	if ns <= math.MinInt64/2 {
		return "the start"
	}
	return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
}
