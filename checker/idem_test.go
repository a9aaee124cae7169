package checker

import (
	"github.com/idscheck/idscheck/verdict"
	"math/rand/v2"
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestIdemDecideMatchesPorcupine compares the linear-time decision of an
// idempotency partition with porcupine's search over the same model, on
// many small random partitions (legal and illegal ones).
func TestIdemDecideMatchesPorcupine(t *testing.T) {
	env := &modelEnv{slack: 0, conflictStatus: 422}
	model := env.porcupineModel()
	rng := rand.New(rand.NewPCG(7, 7))
	legal, illegal := 0, 0
	for iter := range 20000 {
		n := 1 + rng.IntN(6)
		ops := make([]Operation, n)
		idx := make([]int, n)
		for i := range ops {
			call := rng.Int64N(20)
			op := Operation{ClientID: i, Kind: OpPublish, Key: "k", Input: Input{Body: []string{"a", "b"}[rng.IntN(2)]},
				Call: call, Return: call + rng.Int64N(10)}
			switch p := rng.IntN(10); {
			case p < 5:
				id := []string{"x", "y"}[min(rng.IntN(8), 1)] // mostly x
				op.Outcome, op.Output = verdict.OutcomeOK, Output{Status: 201, ID: id, Body: "r" + id}
			case p < 7:
				op.Outcome, op.Output = verdict.OutcomeFailed, Output{Status: 422}
			case p < 8:
				op.Outcome, op.Output = verdict.OutcomeFailed, Output{Status: 400}
			default:
				op.Outcome = verdict.OutcomeUnknown
			}
			ops[i], idx[i] = op, i
		}
		got, why := env.idemDecide(ops, idx)
		want := porcupine.CheckOperations(model, PorcupineOps(nil, ops, idx, false))
		if got != want {
			t.Fatalf("iteration %d: idemDecide %v (%s), porcupine %v, ops:\n%s", iter, got, why, want, dumpOps(ops))
		}
		if want {
			legal++
		} else {
			illegal++
		}
	}
	if legal < 1000 || illegal < 1000 {
		t.Errorf("poor coverage: %d legal, %d illegal", legal, illegal)
	}
}

func dumpOps(ops []Operation) string {
	s := ""
	for _, op := range ops {
		s += DescribeOp(&op) + " [" + itoa(int(op.Call)) + ", " + itoa(int(op.Return)) + "] " + string(op.Outcome) + "\n"
	}
	return s
}
