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
	idx := map[[2]string]int{}
	for i := range ops {
		op := &ops[i]
		model, key := ModelLease, op.Key
		if op.Kind == OpPublish {
			model = ModelIdempotency
		} else if op.Kind == OpClaim && key == "" {
			key = op.Output.ID
		}
		if key == "" {
			continue
		}
		k := [2]string{model, key}
		j, ok := idx[k]
		if !ok {
			j = len(parts)
			idx[k] = j
			parts = append(parts, part{model: model, key: key})
		}
		parts[j].ops = append(parts[j].ops, i)
	}
	return parts
}

// porcupineOps converts one partition for porcupine. An operation with an
// unknown outcome returns after everything else in its partition: it may
// take effect at any instant after its call, or never (the models always
// allow "never").
func porcupineOps(ops []Operation, idx []int, meta bool) []porcupine.Operation {
	var end int64
	for _, i := range idx {
		end = max(end, ops[i].Return)
	}
	out := make([]porcupine.Operation, len(idx))
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
func (c *check) linearizability(parts []part, env *modelEnv) (map[string]LinResult, []part) {
	model := env.porcupineModel()
	results := map[string]LinResult{ModelIdempotency: LinOk, ModelLease: LinOk}
	if len(parts) == 0 {
		return results, nil
	}
	ops := c.h.Ops
	all := make([][]porcupine.Operation, len(parts))
	n := 0
	for i, p := range parts {
		all[i] = porcupineOps(ops, p.ops, false)
		n += len(p.ops)
	}
	flat := make([]porcupine.Operation, 0, n)
	for _, a := range all {
		flat = append(flat, a...)
	}
	model.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return all }
	res := porcupine.CheckOperationsTimeout(model, flat, c.opts.Timeout)
	switch res {
	case porcupine.Ok:
		return results, nil
	case porcupine.Unknown:
		results[ModelIdempotency], results[ModelLease] = LinUnknown, LinUnknown
		return results, nil
	}
	// Illegal: find which partitions. The verbose run reports, per
	// partition, its longest partial linearizations; a partition with none
	// as long as itself failed or was cut short.
	_, info := porcupine.CheckOperationsVerbose(model, flat, c.opts.Timeout)
	partials := info.PartialLinearizations()
	var failing []part
	rechecks := 0
	for i, p := range parts {
		complete := false
		if i < len(partials) {
			for _, lin := range partials[i] {
				if len(lin) == len(p.ops) {
					complete = true
					break
				}
			}
		}
		if complete {
			continue
		}
		if rechecks >= maxRechecks {
			// undecided: not confirmed illegal, so never reported as such
			results[p.model] = worse(results[p.model], LinUnknown)
			continue
		}
		rechecks++
		single := model
		single.Partition = nil
		switch porcupine.CheckOperationsTimeout(single, all[i], c.opts.Timeout) {
		case porcupine.Illegal:
			results[p.model] = LinIllegal
			failing = append(failing, p)
		case porcupine.Unknown:
			results[p.model] = worse(results[p.model], LinUnknown)
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
