package checker

import (
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// part is one partition: the indices into History.Ops of one key's operations
// under one model.
type part struct {
	model string
	key   string
	ops   []int
}

// partitions groups the history by model and key, in order of first
// appearance. Claims whose intent nobody learned belong to no partition.
func partitions(ops []Operation) []part {
	var parts []part
	idem, lease := make(map[string]int32, len(ops)/8), make(map[string]int32, len(ops)/8)
	which := make([]int32, len(ops)) // partition of each op, -1 for none
	for i := range ops {
		op := &ops[i]
		m, model, key := lease, ModelLease, op.Key
		if op.Kind == OpPublish {
			m, model = idem, ModelIdempotency
		} else if op.Kind == OpClaim && key == "" {
			key = op.Output.ID
		}
		if key == "" {
			which[i] = -1
			continue
		}
		j, ok := m[key]
		if !ok {
			j = int32(len(parts))
			m[key] = j
			parts = append(parts, part{model: model, key: key})
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

// porcupineOps converts one partition for porcupine. An operation with an
// unknown outcome returns after everything else in its partition: it may
// take effect at any instant after its call, or never (the models always
// allow "never").
func porcupineOps(out []porcupine.Operation, ops []Operation, idx []int, meta bool) []porcupine.Operation {
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
		if op.Outcome == OutcomeUnknown {
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
	s := "client " + strconv.Itoa(op.ClientID) + ", " + string(op.Outcome)
	if op.Outcome == OutcomeUnknown {
		s += " (gave up at " + strconv.FormatInt(op.Return/1e6, 10) + " ms)"
	}
	return s
}

// linearizability runs the models over every partition. It returns the result
// of each model and the partitions porcupine found illegal (confirmed one by
// one, so a partition cut short by the timeout is never called illegal).
// suspect marks the partitions a named check flagged: they are decided alone
// first, which spares a verbose run over the whole history.
func (c *check) linearizability(parts []part, suspect []bool, env *modelEnv) (map[string]LinResult, []part) {
	model := env.porcupineModel()
	results := map[string]LinResult{ModelIdempotency: LinOk, ModelLease: LinOk}
	if len(parts) == 0 {
		return results, nil
	}
	ops := c.h.Ops
	n := 0
	for _, p := range parts {
		n += len(p.ops)
	}
	backing := make([]porcupine.Operation, n)
	all := make([][]porcupine.Operation, len(parts))
	for i, p := range parts {
		all[i] = porcupineOps(backing[:len(p.ops):len(p.ops)], ops, p.ops, false)
		backing = backing[len(p.ops):]
	}
	// Suspects (partitions a named check already flagged) are decided
	// alone; the rest in one run; only if the rest is illegal does a
	// verbose run over it say which of its partitions did not linearize.
	// porcupine's Partition ignores the (empty) flat history it is given:
	// the partitions are made here.
	rechecks := 0
	verdict := make([]porcupine.CheckResult, len(parts)) // "" = not yet decided alone
	recheck := func(i int) {
		if rechecks >= maxRechecks {
			// undecided: not confirmed illegal, so never reported as such
			results[parts[i].model] = worse(results[parts[i].model], LinUnknown)
			verdict[i] = porcupine.Unknown
			return
		}
		rechecks++
		single := model
		single.Partition = nil
		verdict[i] = porcupine.CheckOperationsTimeout(single, all[i], c.opts.Timeout)
		switch verdict[i] {
		case porcupine.Illegal:
			results[parts[i].model] = LinIllegal
		case porcupine.Unknown:
			results[parts[i].model] = worse(results[parts[i].model], LinUnknown)
		}
	}
	for i := range parts {
		if suspect[i] {
			recheck(i)
		}
	}
	var rest [][]porcupine.Operation
	var restIdx []int
	for i := range parts {
		if verdict[i] == "" {
			rest = append(rest, all[i])
			restIdx = append(restIdx, i)
		}
	}
	if len(rest) > 0 {
		model.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return rest }
		switch porcupine.CheckOperationsTimeout(model, nil, c.opts.Timeout) {
		case porcupine.Unknown:
			for _, i := range restIdx {
				results[parts[i].model] = worse(results[parts[i].model], LinUnknown)
			}
		case porcupine.Illegal:
			// The verbose run reports, per partition, its longest partial
			// linearizations; a partition with none as long as itself
			// failed or was cut short by the timeout: decide it alone.
			_, info := porcupine.CheckOperationsVerbose(model, nil, c.opts.Timeout)
			partials := info.PartialLinearizations()
			for j, i := range restIdx {
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
					recheck(i)
				}
			}
		}
	}
	var failing []part
	for i, p := range parts {
		if verdict[i] == porcupine.Illegal {
			failing = append(failing, p)
		}
	}
	return results, failing
}

// maxRechecks bounds how many partitions are re-checked alone after an
// illegal verdict.
const maxRechecks = 1000

func worse(a, b LinResult) LinResult {
	rank := map[LinResult]int{LinOk: 0, LinUnknown: 1, LinIllegal: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// visualizationTimeout bounds porcupine when it re-checks failing partitions
// for a visualization (they are small: one key each).
const visualizationTimeout = 30 * time.Second
