package checker

import (
	"github.com/idscheck/idscheck/verdict"
	"slices"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// part is one partition: the indices into History.Ops of one key's operations
// under one model.
type part struct {
	model string
	key   string // the intent id; the idempotency key, with its API key's identity when the history names one
	unit  string // idempotency partitions: the publish Key alone
	ops   []int
}

// partitions groups the history by model and key, in order of first
// appearance. Publishes are grouped by (KeyID, Key): an idempotency record
// is scoped per API key. Claims whose intent nobody learned belong to no
// partition.
func partitions(ops []Operation) []part {
	var parts []part
	idem, lease := make(map[[2]string]int32, len(ops)/8), make(map[string]int32, len(ops)/8)
	which := make([]int32, len(ops)) // partition of each op, -1 for none
	for i := range ops {
		op := &ops[i]
		var j int32
		var ok bool
		if op.Kind == OpPublish {
			k := [2]string{op.KeyID, op.Key}
			if j, ok = idem[k]; !ok {
				j = int32(len(parts))
				idem[k] = j
				key := op.Key
				if op.KeyID != "" {
					key = op.Key + " (API key " + op.KeyID + ")"
				}
				parts = append(parts, part{model: ModelIdempotency, key: key, unit: op.Key})
			}
		} else {
			key := op.Key
			if op.Kind == OpClaim && key == "" {
				key = op.Output.ID
			}
			if key == "" {
				which[i] = -1
				continue
			}
			if j, ok = lease[key]; !ok {
				j = int32(len(parts))
				lease[key] = j
				parts = append(parts, part{model: ModelLease, key: key})
			}
		}
		which[i] = j
	}
	// one backing array for every partition's indices
	count := make([]int, len(parts))
	for _, j := range which {
		if j >= 0 {
			count[j]++
		}
	}
	backing := make([]int, 0, len(ops))
	for j := range parts {
		parts[j].ops = backing[len(backing) : len(backing) : len(backing)+count[j]]
		backing = backing[:len(backing)+count[j]]
	}
	for i, j := range which {
		if j >= 0 {
			parts[j].ops = append(parts[j].ops, i)
		}
	}
	return parts
}

// PorcupineOps converts the operations idx of ops (one partition) for
// porcupine, with their descriptions as metadata when meta is set. An
// operation with an unknown outcome returns after everything else in its
// partition: it may take effect at any instant after its call, or never
// (the models always allow "never").
func PorcupineOps(out []porcupine.Operation, ops []Operation, idx []int, meta bool) []porcupine.Operation {
	var end int64
	for _, i := range idx {
		end = max(end, ops[i].Return)
	}
	if len(out) != len(idx) {
		out = make([]porcupine.Operation, len(idx))
	}
	for j, i := range idx {
		op := &ops[i]
		ret := op.Return
		if op.Effective() == verdict.OutcomeUnknown {
			ret = end + 1
		}
		out[j] = porcupine.Operation{ClientId: op.ClientID, Input: op, Call: op.Call, Return: ret}
		if meta {
			out[j].Metadata = describeMeta(op)
		}
	}
	return out
}

func describeMeta(op *Operation) string {
	s := "client " + strconv.Itoa(op.ClientID) + ", " + string(op.Effective())
	if op.Effective() == verdict.OutcomeUnknown {
		s += " (gave up at " + strconv.FormatInt(op.Return/1e6, 10) + " ms)"
	}
	return s
}

// What the models say of one partition.
const (
	partLegal     uint8 = iota
	partIllegal         // confirmed alone: no order of its operations is allowed
	partUndecided       // porcupine ran out of time
	partSkipped         // not asked
)

// decideParts runs the models over the partitions marked in todo and says
// what each found (confirmed one by one, so a partition cut short by the
// timeout is never called illegal). suspect marks the partitions a named
// check flagged: they are decided alone first, which spares a verbose run
// over the whole history.
func (c *check) decideParts(parts []part, todo, suspect []bool, env *modelEnv) []uint8 {
	model := env.porcupineModel()
	status := make([]uint8, len(parts))
	ops := c.h.Ops
	// An idempotency partition is decided exactly by idemDecide, in linear
	// time, whatever its size (porcupine's search is exponential in a storm
	// of concurrent identical requests that cannot linearize). A lease
	// partition whose operations do not overlap in time and all have a
	// known outcome has one possible order: stepping the model along it
	// decides it exactly, without porcupine.
	pending := make([]bool, len(parts))
	n := 0
	for i, p := range parts {
		switch {
		case !todo[i]:
			status[i] = partSkipped
		case p.model == ModelIdempotency:
			if ok, _ := env.idemDecide(ops, p.ops); !ok {
				status[i] = partIllegal
			}
		default:
			if decided, ok := sequentialDecide(ops, p.ops, model); decided {
				if !ok {
					status[i] = partIllegal
				}
				continue
			}
			pending[i] = true
			n += len(p.ops)
		}
	}
	backing := make([]porcupine.Operation, n)
	all := make([][]porcupine.Operation, len(parts))
	for i, p := range parts {
		if !pending[i] {
			continue
		}
		all[i] = PorcupineOps(backing[:len(p.ops):len(p.ops)], ops, p.ops, false)
		backing = backing[len(p.ops):]
	}
	// porcupine's Partition ignores the (empty) flat history it is given:
	// the partitions are made here. The work is bounded: at most three
	// porcupine runs of Options.Timeout each, plus the candidates decided
	// alone, which share one more Timeout between them.
	//  1. the suspects (partitions a named check already flagged), verbose;
	//  2. the rest, in one quick run; if illegal, verbose;
	//  3. every partition the verbose runs left without a complete
	//     linearization (failed, or cut short by the timeout) alone.
	run := func(idx []int, verbose bool) (porcupine.CheckResult, []int) {
		sub := make([][]porcupine.Operation, len(idx))
		for j, i := range idx {
			sub[j] = all[i]
		}
		model.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return sub }
		if !verbose {
			return porcupine.CheckOperationsTimeout(model, nil, c.opts.Timeout), nil
		}
		res, info := porcupine.CheckOperationsVerbose(model, nil, c.opts.Timeout)
		partials := info.PartialLinearizations()
		var incomplete []int
		for j, i := range idx {
			complete := false
			if j < len(partials) {
				for _, lin := range partials[j] {
					if len(lin) == len(parts[i].ops) {
						complete = true
						break
					}
				}
			}
			if !complete {
				incomplete = append(incomplete, i)
			}
		}
		return res, incomplete
	}
	var suspects, rest, candidates []int
	for i := range parts {
		switch {
		case !pending[i]:
		case suspect[i]:
			suspects = append(suspects, i)
		default:
			rest = append(rest, i)
		}
	}
	if len(suspects) > 0 {
		_, inc := run(suspects, true)
		candidates = append(candidates, inc...)
	}
	if len(rest) > 0 {
		switch res, _ := run(rest, false); res {
		case porcupine.Unknown:
			for _, i := range rest {
				status[i] = partUndecided
			}
		case porcupine.Illegal:
			_, inc := run(rest, true)
			candidates = append(candidates, inc...)
		}
	}
	slices.Sort(candidates)
	each := c.opts.Timeout
	if len(candidates) > 0 {
		each = c.opts.Timeout / time.Duration(min(len(candidates), maxRechecks))
		if c.opts.Timeout > 0 && each == 0 {
			each = 1 // 0 would mean no bound
		}
	}
	single := model
	single.Partition = nil
	for n, i := range candidates {
		if n >= maxRechecks {
			status[i] = partUndecided // not confirmed illegal, so never reported as such
			continue
		}
		switch porcupine.CheckOperationsTimeout(single, all[i], each) {
		case porcupine.Illegal:
			status[i] = partIllegal
		case porcupine.Unknown:
			status[i] = partUndecided
		}
	}
	return status
}

// sequentialDecide steps the model along the operations idx in the order of
// their calls (it sorts idx so). That order is one porcupine would try (it
// keeps every "a returned before b was called"), and the model places each
// operation at an instant of its own window, so if the model accepts it
// the partition is legal. If it does not, and the operations are totally
// ordered in time (each called after the previous returned) with known
// outcomes, that order was the only one: the partition is illegal. decided
// is false otherwise (porcupine must search).
func sequentialDecide(ops []Operation, idx []int, model porcupine.Model) (decided, ok bool) {
	slices.SortStableFunc(idx, func(a, b int) int { return cmpInt64(ops[a].Call, ops[b].Call) })
	state := model.Init()
	for _, i := range idx {
		ok, next := model.Step(state, &ops[i], nil)
		if !ok {
			return totallyOrdered(ops, idx), false
		}
		state = next
	}
	return true, true
}

// totallyOrdered reports whether the operations idx (sorted by call) each
// were called after the previous returned, all with a known outcome.
func totallyOrdered(ops []Operation, idx []int) bool {
	for k, i := range idx {
		if ops[i].Effective() == verdict.OutcomeUnknown || (k > 0 && ops[i].Call <= ops[idx[k-1]].Return) {
			return false
		}
	}
	return true
}

// maxRechecks bounds how many partitions are re-checked alone after an
// illegal verdict.
const maxRechecks = 200

func worse(a, b LinResult) LinResult {
	rank := map[LinResult]int{LinOk: 0, LinUnknown: 1, LinIllegal: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// visualizationTimeout bounds porcupine when it re-checks failing partitions
// for a visualization: one key each, small as a rule; a large illegal storm
// may not finish, and its view then shows the longest orders found.
const visualizationTimeout = 5 * time.Second
