package checker

import (
	"time"

	"github.com/anishathalye/porcupine"
)

// Model is one profile's consistency model of its histories, behind one
// interface: which object an operation acts on (its partition key), the
// porcupine model that judges the operations of one object, and named
// checks over them, each evidence against one rule. A profile brings its
// own models (a lease model, a state machine, …); the idempotency
// model is everyone's.
//
// The porcupine model receives *Operation as both input and output: the
// operation carries what was sent and what came back (see porcupineOps: an
// operation whose outcome is unknown returns after every other operation of
// its partition and may take effect at any point after its call, or never).
type Model interface {
	Name() string
	// Partition returns the key of the object op acts on; ok is false for
	// an operation this model does not judge.
	Partition(op *Operation) (key string, ok bool)
	Porcupine() porcupine.Model
	// Checks are the model's named checks over one partition's operations
	// (in call order); nil when it has none.
	Checks() []NamedCheck
}

// NamedCheck is one check of a model over one partition: a failure is
// evidence against Rule alone.
type NamedCheck struct {
	Rule  string
	Check func(ops []Operation) (ok bool, why string)
}

// ModelResult is what one model found over a history.
type ModelResult struct {
	Model      string    `json:"model"`
	Result     LinResult `json:"result"` // Unknown when a partition ran out of time: never read as Ok
	Partitions int       `json:"partitions"`
	// Illegal are the keys of the partitions porcupine found not
	// linearizable.
	Illegal []string `json:"illegal,omitempty"`
	// Failed are the named checks that failed: rule, key and why.
	Failed []CheckFailure `json:"failed,omitempty"`
}

// CheckFailure is one named check that failed on one partition.
type CheckFailure struct {
	Rule string `json:"rule"`
	Key  string `json:"key"`
	Why  string `json:"why"`
}

// CheckModels judges a history under each model: it partitions the
// operations by the model's key, runs its porcupine model on each partition
// (bounded by timeout per partition; a partition cut short makes the result
// Unknown, never Ok) and its named checks.
func CheckModels(h History, models []Model, timeout time.Duration) []ModelResult {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	var out []ModelResult
	for _, m := range models {
		res := ModelResult{Model: m.Name(), Result: LinOk}
		byKey := map[string][]int{}
		var keys []string
		for i := range h.Ops {
			k, ok := m.Partition(&h.Ops[i])
			if !ok {
				continue
			}
			if _, seen := byKey[k]; !seen {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], i)
		}
		res.Partitions = len(keys)
		pm := m.Porcupine()
		for _, k := range keys {
			idx := byKey[k]
			switch porcupine.CheckOperationsTimeout(pm, PorcupineOps(nil, h.Ops, idx, false), timeout) {
			case porcupine.Illegal:
				res.Result = LinIllegal
				res.Illegal = append(res.Illegal, k)
			case porcupine.Unknown:
				if res.Result == LinOk {
					res.Result = LinUnknown
				}
			}
			ops := make([]Operation, len(idx))
			for j, i := range idx {
				ops[j] = h.Ops[i]
			}
			for _, c := range m.Checks() {
				if ok, why := c.Check(ops); !ok {
					res.Failed = append(res.Failed, CheckFailure{Rule: c.Rule, Key: k, Why: why})
				}
			}
		}
		out = append(out, res)
	}
	return out
}
