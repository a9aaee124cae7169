package checker

import (
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"slices"
)

// The queue checks, in the manner of Jepsen's total-queue: every unit of work
// (one publish Key) that was acknowledged must take effect (or be fulfilled)
// and no more often than allowed; every effect must be asked for. An
// operation with an unknown outcome is never an anomaly by itself: it
// explains effects (recovered), it does not owe one.

// intentFacts is what the history says about one intent id.
type intentFacts struct {
	fulfilled *Operation // a fulfill OK, or a status read "fulfilled"
	last      *Operation // the status read (OK) that returned last
}

func (c *check) queue(parts []part) {
	ops := c.h.Ops
	effects := c.l.Effects

	facts := make(map[string]*intentFacts, len(parts)/2)
	fact := func(id string) *intentFacts {
		f := facts[id]
		if f == nil {
			f = &intentFacts{}
			facts[id] = f
		}
		return f
	}
	for _, p := range parts {
		if p.model != ModelLease {
			continue
		}
		for _, i := range p.ops {
			op := &ops[i]
			if op.Effective() != verdict.OutcomeOK {
				continue
			}
			switch {
			case op.Kind == OpFulfill:
				f := fact(p.key)
				if f.fulfilled == nil {
					f.fulfilled = op
				}
			case op.Kind == OpStatus:
				f := fact(p.key)
				if f.last == nil || op.Return > f.last.Return {
					f.last = op
				}
				if op.Output.State == StateFulfilled && f.fulfilled == nil {
					f.fulfilled = op
				}
			}
		}
	}

	effByKey := make(map[string][]int, len(effects))
	var effKeys []string
	for i := range effects {
		k := effects[i].Key
		if _, ok := effByKey[k]; !ok {
			effKeys = append(effKeys, k)
		}
		effByKey[k] = append(effByKey[k], i)
	}

	allowed := c.opts.MaxEffects
	if allowed == 0 {
		allowed = 1
	}
	q := &c.report.Queue
	published := make(map[string]bool, len(parts)/2)
	for _, p := range parts {
		if p.model != ModelIdempotency {
			continue
		}
		published[p.key] = true
		q.Attempted++
		var acked, unknown *Operation
		var intents []string
		for _, i := range p.ops {
			op := &ops[i]
			switch op.Effective() {
			case verdict.OutcomeOK:
				if acked == nil {
					acked = op
				}
				if op.Output.ID != "" && !slices.Contains(intents, op.Output.ID) {
					intents = append(intents, op.Output.ID)
				}
			case verdict.OutcomeUnknown:
				if unknown == nil {
					unknown = op
				}
			}
		}
		effs := effByKey[p.key]
		var executed []string // intents of this key that ran or were fulfilled
		for _, i := range effs {
			if id := effects[i].Intent; id != "" && !slices.Contains(executed, id) {
				executed = append(executed, id)
			}
			if id := effects[i].Intent; id != "" && !slices.Contains(intents, id) {
				intents = append(intents, id)
			}
		}
		var fulfilled *Operation
		for _, id := range intents {
			if f := facts[id]; f != nil && f.fulfilled != nil {
				if fulfilled == nil {
					fulfilled = f.fulfilled
				}
				if !slices.Contains(executed, id) {
					executed = append(executed, id)
				}
			}
		}
		if acked != nil {
			q.Acknowledged++
		}
		if len(effs) > 0 {
			q.Effected++
		}
		if fulfilled != nil {
			q.Fulfilled++
		}
		switch {
		case len(executed) > 1:
			q.Duplicated++
			c.add(Anomaly{
				Kind: Duplicated, Key: p.key,
				Explanation: fmt.Sprintf("key %s was served by %d different intents (%v): one idempotency key must yield one intent, so its work ran more than once",
					p.key, len(executed), executed),
				Ops:     firstOps(ops, p.ops, 4),
				Effects: pick(effects, effs, 4),
			})
		case allowed > 0 && len(effs) > allowed:
			q.Duplicated++
			c.add(Anomaly{
				Kind: Duplicated, Key: p.key,
				Explanation: fmt.Sprintf("key %s took effect %d times where at most %d is allowed", p.key, len(effs), allowed),
				Ops:         firstOps(ops, p.ops, 4),
				Effects:     pick(effects, effs, allowed+1),
			})
		}
		if acked != nil && fulfilled == nil && (len(effs) == 0 || c.opts.MustFinish) {
			c.lostOrNot(p.key, acked, intents, facts, len(effs) > 0)
		}
		if acked == nil && len(effs) > 0 {
			if unknown != nil {
				q.Recovered++
				c.add(Anomaly{
					Kind: Recovered, Key: p.key,
					Explanation: fmt.Sprintf("no publish with key %s was acknowledged (the answers were lost), yet its work took effect: not a violation, the request had reached the bus", p.key),
					Ops:         []Operation{*unknown},
					Effects:     pick(effects, effs, 1),
				})
			} else {
				q.Unexpected++
				c.add(Anomaly{
					Kind: Unexpected, Key: p.key,
					Explanation: fmt.Sprintf("key %s took effect although every publish with it was refused: a refused request must have no effect", p.key),
					Ops:         firstOps(ops, p.ops, 4),
					Effects:     pick(effects, effs, 2),
				})
			}
		}
	}
	for _, k := range effKeys {
		if published[k] {
			continue
		}
		q.Unexpected++
		c.add(Anomaly{
			Kind: Unexpected, Key: k,
			Explanation: fmt.Sprintf("an effect for key %s landed, but nobody ever published with that key", k),
			Effects:     pick(effects, effByKey[k], 2),
		})
	}
}

// lostOrNot decides what became of an acknowledged unit of work that never
// took effect.
func (c *check) lostOrNot(key string, acked *Operation, intents []string, facts map[string]*intentFacts, ran bool) {
	q := &c.report.Queue
	var last *Operation
	for _, id := range intents {
		if f := facts[id]; f != nil && f.last != nil && (last == nil || f.last.Return > last.Return) {
			last = f.last
		}
	}
	state := ""
	if last != nil {
		state = last.Output.State
	}
	ev := []Operation{*acked}
	if last != nil {
		ev = append(ev, *last)
	}
	why := ""
	switch state {
	case StateDead:
		if ran {
			return // ran, then failed to its end: a legitimate outcome
		}
		q.Dead++
		if !c.opts.DeadIsLost {
			return
		}
		why = "it ended dead without ever running"
	case StateGone:
		q.Expired++
		if !c.opts.ExpiredIsLost {
			return
		}
		why = "it vanished (404) without ever running"
	default:
		if c.opts.Undrained {
			q.Pending++
			return
		}
		why = "it never ran and was never fulfilled"
		if ran {
			why = "its work ran, yet its intent never finished (never fulfilled, never dead)"
		}
		if state != "" {
			why += fmt.Sprintf(" (last seen %s)", state)
		}
	}
	q.Lost++
	c.add(Anomaly{
		Kind: Lost, Key: key,
		Explanation: fmt.Sprintf("the publish with key %s was acknowledged (%d) but %s: acknowledged work must not be lost",
			key, acked.Output.Status, why),
		Ops: ev,
	})
}

func firstOps(ops []Operation, idx []int, n int) []Operation {
	var out []Operation
	for _, i := range idx {
		if len(out) == n {
			break
		}
		out = append(out, ops[i])
	}
	return out
}

func pick(effects []Effect, idx []int, n int) []Effect {
	var out []Effect
	for _, i := range idx {
		if len(out) == n {
			break
		}
		out = append(out, effects[i])
	}
	return out
}
