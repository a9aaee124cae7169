package checker

import (
	"github.com/idscheck/idscheck/verdict"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"
)

// PorcupineOps converts the operations idx of ops (one partition) into
// porcupine's operations, appending to out (reused when it has len(idx)):
// an operation with an unknown outcome returns after every other operation
// of the partition, so it may take effect at any instant after its call, or
// never (a model must always allow "never"). With meta, each carries a line
// saying its client and outcome, for a visualization.
func PorcupineOps(out []porcupine.Operation, ops []Operation, idx []int, meta bool) []porcupine.Operation {
	return porcupineOps(out, ops, idx, meta)
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

// visualizationTimeout bounds porcupine when it re-checks failing partitions
// for a visualization: one key each, small as a rule; a large illegal storm
// may not finish, and its view then shows the longest orders found.
const visualizationTimeout = 5 * time.Second
