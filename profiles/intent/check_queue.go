package intent

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// The queue checks, in the manner of Jepsen's total-queue: every unit of work
// (one publish Key) that was acknowledged must take effect (or be fulfilled)
// and no more often than allowed; every effect must be asked for. They are
// kept per acknowledged intent and per key both: every intent a publish was
// answered with must end (one intent finishing a key does not excuse
// another of the same key that was lost), a key yields one intent (per API
// key, seed 004 §7.2), and one intent serves one key. An operation with an
// unknown outcome is never an anomaly by itself: it explains effects
// (recovered), it does not owe one; but only from its call on.

// intentFacts is what the history says about one intent id.
type intentFacts struct {
	fulfilled *checker.Operation   // a fulfill OK, or a status read "fulfilled"
	reads     []*checker.Operation // status reads answered
}

// final is the read that shows where the intent ended: among the reads no
// other read certainly follows (called after it returned), one of an end
// (fulfilled, dead, gone: an end comes after whatever it overlaps), the
// latest to return.
func (f *intentFacts) final() *checker.Operation {
	var best *checker.Operation
	end := func(op *checker.Operation) bool {
		switch op.Output.State {
		case StateFulfilled, StateDead, checker.StateGone:
			return true
		}
		return false
	}
	for _, r := range f.reads {
		followed := false
		for _, o := range f.reads {
			if o.Call > r.Return {
				followed = true
				break
			}
		}
		if followed {
			continue
		}
		if best == nil || (end(r) && !end(best)) || (end(r) == end(best) && r.Return > best.Return) {
			best = r
		}
	}
	return best
}

// unit is one publish Key: its publishes (of every API key) and effects.
type unit struct {
	key     string
	ops     []int // publishes
	effects []int
}

func (c *check) queue(parts []part) {
	ops := c.h.Ops
	effects := c.l.Effects

	facts := make(map[string]*intentFacts, len(parts)/2)
	for _, p := range parts {
		if p.model != ModelLease {
			continue
		}
		for _, i := range p.ops {
			op := &ops[i]
			if op.Effective() != verdict.OutcomeOK {
				continue
			}
			switch op.Kind {
			case OpFulfill, checker.OpStatus:
				f := facts[p.key]
				if f == nil {
					f = &intentFacts{}
					facts[p.key] = f
				}
				if op.Kind == checker.OpStatus {
					f.reads = append(f.reads, op)
				}
				if (op.Kind == OpFulfill || op.Output.State == StateFulfilled) && f.fulfilled == nil {
					f.fulfilled = op
				}
			}
		}
	}

	var units []*unit
	byKey := make(map[string]*unit, len(parts)/2)
	for _, p := range parts {
		if p.model != checker.ModelIdempotency {
			continue
		}
		u := byKey[p.unit]
		if u == nil {
			u = &unit{key: p.unit}
			byKey[p.unit] = u
			units = append(units, u)
		}
		u.ops = append(u.ops, p.ops...)
	}
	var strays []string // effect keys nobody published
	strayEffects := map[string][]int{}
	for i := range effects {
		k := effects[i].Key
		if u := byKey[k]; u != nil {
			u.effects = append(u.effects, i)
			continue
		}
		if _, ok := strayEffects[k]; !ok {
			strays = append(strays, k)
		}
		strayEffects[k] = append(strayEffects[k], i)
	}
	// the units each intent was acknowledged for
	ackedFor := map[string][]string{}
	for _, u := range units {
		for _, i := range u.ops {
			op := &ops[i]
			if id := op.Output.ID; id != "" && op.Effective() == verdict.OutcomeOK && !slices.Contains(ackedFor[id], u.key) {
				ackedFor[id] = append(ackedFor[id], u.key)
			}
		}
	}
	// the unit whose work each intent carries: the key its effects name,
	// else the first it was acknowledged for
	ranFor := map[string]string{}
	for _, e := range effects {
		if _, ok := ranFor[e.Intent]; e.Intent != "" && !ok {
			ranFor[e.Intent] = e.Key
		}
	}
	owner := func(id string) string {
		if k, ok := ranFor[id]; ok {
			return k
		}
		return ackedFor[id][0]
	}

	named := c.unexpectedIntents // intents an anomaly already names
	for _, u := range units {
		c.judgeUnit(u, facts, ackedFor, owner, named)
	}
	for _, k := range strays {
		for _, i := range strayEffects[k] {
			named[effects[i].Intent] = true
		}
		c.report.Queue.Unexpected++
		c.add(checker.Anomaly{
			Kind: checker.Unexpected, Key: k,
			Explanation: fmt.Sprintf("an effect for key %s landed, but nobody ever published with that key", k),
			Effects:     pick(effects, strayEffects[k], 2),
		})
	}
	if x := c.env.unexplained; x != nil && !named[x.id] {
		a := checker.Anomaly{Kind: checker.Unexpected, Key: x.id,
			Explanation: fmt.Sprintf("intent %s existed at %s, yet no publish can have created it: none was answered with it, and no publish whose answer named no intent can have made it (each makes one intent at most, of its own key, before it is seen)",
				x.id, ms(x.seen))}
		if x.op != nil {
			a.Ops = []checker.Operation{*x.op}
		}
		for _, e := range effects {
			if e.Intent == x.id {
				a.Effects = append(a.Effects, e)
				break
			}
		}
		c.report.Queue.Unexpected++
		c.add(a)
	}
}

// judgeUnit runs the queue checks of one unit of work.
func (c *check) judgeUnit(u *unit, facts map[string]*intentFacts, ackedFor map[string][]string, owner func(string) string, named map[string]bool) {
	ops := c.h.Ops
	effects := c.l.Effects
	q := &c.report.Queue
	q.Attempted++

	var acked, unknown *checker.Operation
	var ackedIDs []string       // intents the publishes of this key were answered with
	scopes := map[string]bool{} // API keys whose publishes may have created an intent
	creators := int64(math.MaxInt64)
	for _, i := range u.ops {
		op := &ops[i]
		switch op.Effective() {
		case verdict.OutcomeOK:
			if acked == nil {
				acked = op
			}
			if id := op.Output.ID; id != "" && !slices.Contains(ackedIDs, id) {
				ackedIDs = append(ackedIDs, id)
			}
		case verdict.OutcomeUnknown:
			if unknown == nil || op.Call < unknown.Call {
				unknown = op
			}
		default:
			continue
		}
		scopes[op.KeyID] = true
		creators = min(creators, op.Call)
	}
	intents := slices.Clone(ackedIDs)
	for _, i := range u.effects {
		if id := effects[i].Intent; id != "" && !slices.Contains(intents, id) {
			intents = append(intents, id)
		}
	}
	if acked != nil {
		q.Acknowledged++
	}
	if len(u.effects) > 0 {
		q.Effected++
	}
	for _, id := range intents {
		if f := facts[id]; f != nil && f.fulfilled != nil {
			q.Fulfilled++
			break
		}
	}

	// duplicated: more intents than the key's API keys could have made, or
	// more effects than allowed
	allowed := c.opts.MaxEffects
	if allowed == 0 {
		allowed = 1
	}
	switch {
	case len(intents) > max(len(scopes), 1):
		q.Duplicated++
		for _, id := range intents {
			named[id] = true
		}
		c.add(checker.Anomaly{
			Kind: checker.Duplicated, Key: u.key,
			Explanation: fmt.Sprintf("key %s was given %d different intents (%s): one idempotency key yields one intent (per API key), so its work was queued more than once",
				u.key, len(intents), strings.Join(intents, ", ")),
			Ops:     firstOps(ops, u.ops, 4),
			Effects: pick(effects, u.effects, 4),
		})
	case allowed > 0 && len(u.effects) > allowed:
		q.Duplicated++
		c.add(checker.Anomaly{
			Kind: checker.Duplicated, Key: u.key,
			Explanation: fmt.Sprintf("key %s took effect %d times where at most %d is allowed", u.key, len(u.effects), allowed),
			Ops:         firstOps(ops, u.ops, 4),
			Effects:     pick(effects, u.effects, allowed+1),
		})
	}

	// unexpected: an effect no publish of this key could have asked for,
	// or before the first that could was called
	if len(u.effects) > 0 {
		if c.unexpected(u, creators, len(intents) > max(len(scopes), 1)) {
			q.Unexpected++
			for _, i := range u.effects {
				named[effects[i].Intent] = true
			}
		} else if acked == nil && unknown != nil {
			q.Recovered++
			c.add(checker.Anomaly{
				Kind: checker.Recovered, Key: u.key,
				Explanation: fmt.Sprintf("no publish with key %s was acknowledged (the answers were lost), yet its work took effect: not a violation, the request had reached the bus", u.key),
				Ops:         []checker.Operation{*unknown},
				Effects:     pick(effects, u.effects, 1),
			})
		}
	}

	// lost, per acknowledged intent (per key when the answers name none)
	if acked == nil {
		return
	}
	ran := func(id string) bool {
		for _, i := range u.effects {
			if id == "" || effects[i].Intent == id {
				return true
			}
		}
		return false
	}
	if len(ackedIDs) == 0 {
		var fulfilled bool
		var last *checker.Operation
		for _, id := range intents {
			if f := facts[id]; f != nil {
				fulfilled = fulfilled || f.fulfilled != nil
				if r := f.final(); r != nil && (last == nil || r.Return > last.Return) {
					last = r
				}
			}
		}
		if !fulfilled && (len(u.effects) == 0 || c.opts.MustFinish) {
			c.lostOrNot(u.key, "", acked, last, len(u.effects) > 0)
		}
		return
	}
	// one intent for two API keys' records of this key: each makes its own
	scopes2 := map[string][]string{}
	for _, i := range u.ops {
		op := &ops[i]
		name := op.KeyID
		if name == "" {
			name = "the run's key"
		}
		if id := op.Output.ID; id != "" && op.Effective() == verdict.OutcomeOK && !slices.Contains(scopes2[id], name) {
			scopes2[id] = append(scopes2[id], name)
		}
	}
	for _, id := range ackedIDs {
		if len(scopes2[id]) > 1 {
			q.Lost++
			c.add(checker.Anomaly{
				Kind: checker.Lost, Key: u.key,
				Explanation: fmt.Sprintf("publishes with key %s under %d API keys (%s) were all acknowledged with intent %s: the record is kept per API key, each makes its own intent, so the work of all but one is lost",
					u.key, len(scopes2[id]), strings.Join(scopes2[id], ", "), id),
				Ops: firstOps(ops, u.ops, 4),
			})
			return
		}
	}
	for _, id := range ackedIDs {
		if o := owner(id); o != u.key && len(ackedFor[id]) > 1 {
			q.Lost++
			c.add(checker.Anomaly{
				Kind: checker.Lost, Key: u.key,
				Explanation: fmt.Sprintf("the publish with key %s was acknowledged with intent %s, which was also given to key %s and carries the work of %s: one intent runs one payload, so the work of %s is lost",
					u.key, id, strings.Join(slices.DeleteFunc(slices.Clone(ackedFor[id]), func(k string) bool { return k == u.key }), ", "), o, u.key),
				Ops: firstOps(ops, u.ops, 4),
			})
			return
		}
	}
	for _, id := range ackedIDs {
		f := facts[id]
		if f != nil && f.fulfilled != nil {
			continue
		}
		if ran(id) && !c.opts.MustFinish {
			continue
		}
		var last *checker.Operation
		if f != nil {
			last = f.final()
		}
		if c.lostOrNot(u.key, id, acked, last, ran(id)) {
			return // one lost intent makes the unit lost
		}
	}
}

// unexpected reports (and adds) the first effect of u that no publish of
// its key could have asked for when it landed: its intent carries another
// key's work, or was created later (see creation.go); with no intent named,
// it landed before any publish of the key was called. An intent no publish
// can have made is the key's duplicate when dup says so, not told twice.
func (c *check) unexpected(u *unit, creators int64, dup bool) bool {
	ops := c.h.Ops
	effects := c.l.Effects
	if creators == math.MaxInt64 {
		c.add(checker.Anomaly{
			Kind: checker.Unexpected, Key: u.key,
			Explanation: fmt.Sprintf("key %s took effect although every publish with it was refused: a refused request must have no effect", u.key),
			Ops:         firstOps(ops, u.ops, 4),
			Effects:     pick(effects, u.effects, 2),
		})
		return true
	}
	for _, i := range u.effects {
		e := effects[i]
		var why string
		if e.Intent == "" {
			if e.At < creators {
				why = fmt.Sprintf("it landed at %s, before any publish of the key was called (the first at %s)", ms(e.At), ms(creators))
			}
		} else if b := c.env.bounds(e.Intent); len(b.Keys) > 0 && !slices.Contains(b.Keys, u.key) {
			if dup && b.BornAfter == math.MaxInt64 {
				continue
			}
			why = fmt.Sprintf("it ran intent %s, which carries the work of key %s", e.Intent, strings.Join(b.Keys, ", "))
		} else if e.At < b.BornAfter {
			if dup && b.BornAfter == math.MaxInt64 {
				continue
			}
			why = fmt.Sprintf("it ran intent %s at %s, before any publish that could have created it was called (the first at %s)", e.Intent, ms(e.At), ms(b.BornAfter))
			if b.BornAfter == math.MaxInt64 {
				why = fmt.Sprintf("it ran intent %s, which no publish of this key can have created", e.Intent)
			}
		}
		if why == "" {
			continue
		}
		c.add(checker.Anomaly{
			Kind: checker.Unexpected, Key: u.key,
			Explanation: fmt.Sprintf("an effect of key %s is unexpected: %s; work exists only once a publish asked for it", u.key, why),
			Ops:         firstOps(ops, u.ops, 4),
			Effects:     []checker.Effect{e},
		})
		return true
	}
	return false
}

// lostOrNot decides what became of an acknowledged intent (id; "" when the
// answers name none) that never took effect, or never finished when it must;
// last is the read that shows where it ended. It reports whether it was lost.
func (c *check) lostOrNot(key, id string, acked, last *checker.Operation, ran bool) bool {
	q := &c.report.Queue
	state := ""
	if last != nil {
		state = last.Output.State
	}
	ev := []checker.Operation{*acked}
	if last != nil {
		ev = append(ev, *last)
	}
	why := ""
	switch state {
	case StateDead:
		if ran {
			return false // ran, then failed to its end: a legitimate outcome
		}
		q.Dead++
		if !c.opts.DeadIsLost {
			return false
		}
		why = "it ended dead without ever running"
	case checker.StateGone:
		q.Expired++
		if !c.opts.ExpiredIsLost {
			return false
		}
		why = "it vanished (404) without ever running"
		if ran {
			why = "it vanished (404) without ever finishing"
		}
	default:
		if c.opts.Undrained {
			q.Pending++
			return false
		}
		why = "it never ran and was never fulfilled"
		if ran {
			why = "its work ran, yet its intent never finished (never fulfilled, never dead)"
		}
		if state != "" {
			why += fmt.Sprintf(" (last seen %s)", state)
		}
	}
	what := fmt.Sprintf("the publish with key %s was acknowledged (%d)", key, acked.Output.Status)
	if id != "" {
		what = fmt.Sprintf("the publish with key %s was acknowledged with intent %s", key, id)
	}
	q.Lost++
	c.add(checker.Anomaly{
		Kind: checker.Lost, Key: key,
		Explanation: fmt.Sprintf("%s but %s: acknowledged work must not be lost", what, why),
		Ops:         ev,
	})
	return true
}

func firstOps(ops []checker.Operation, idx []int, n int) []checker.Operation {
	var out []checker.Operation
	for _, i := range idx {
		if len(out) == n {
			break
		}
		out = append(out, ops[i])
	}
	return out
}

func pick(effects []checker.Effect, idx []int, n int) []checker.Effect {
	var out []checker.Effect
	for _, i := range idx {
		if len(out) == n {
			break
		}
		out = append(out, effects[i])
	}
	return out
}
