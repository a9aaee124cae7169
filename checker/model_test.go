package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idscheck/idscheck/verdict"
)

// registerModel is a toy model: a write-once register per key (OpPublish
// writes Input.Body, OpStatus reads Output.State).
type registerModel struct{}

func (registerModel) Name() string { return "register" }
func (registerModel) Partition(op *Operation) (string, bool) {
	return op.Key, op.Key != ""
}
func (registerModel) Porcupine() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return "" },
		Step: func(state, in, _ any) (bool, any) {
			op := in.(*Operation)
			s := state.(string)
			if op.Effective() == verdict.OutcomeUnknown {
				return true, s // may have done nothing
			}
			if op.Kind == OpPublish {
				return true, op.Input.Body
			}
			return op.Output.State == s, s
		},
		Equal: func(a, b any) bool { return a == b },
	}
}
func (registerModel) Checks() []NamedCheck {
	return []NamedCheck{{Rule: "T-reads-something", Check: func(ops []Operation) (bool, string) {
		for _, op := range ops {
			if op.Kind == OpStatus && op.Output.State == "" {
				return false, "a read returned nothing"
			}
		}
		return true, ""
	}}}
}

func TestCheckModels(t *testing.T) {
	op := func(kind OpKind, key, body, state string, call, ret int64) Operation {
		return Operation{Kind: kind, Key: key, Input: Input{Body: body}, Output: Output{State: state, Status: 200},
			Call: call, Return: ret, Outcome: verdict.OutcomeOK}
	}
	cases := []struct {
		name   string
		ops    []Operation
		result LinResult
		failed string
	}{
		{"reads what was written", []Operation{op(OpPublish, "a", "x", "", 0, 1), op(OpStatus, "a", "", "x", 2, 3)}, LinOk, ""},
		{"a read of a value never written", []Operation{op(OpPublish, "a", "x", "", 0, 1), op(OpStatus, "a", "", "y", 2, 3)}, LinIllegal, ""},
		{"a named check fails alone", []Operation{op(OpStatus, "b", "", "", 0, 1)}, LinOk, "T-reads-something"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckModels(History{Ops: tc.ops}, []Model{registerModel{}}, time.Second)
			if len(got) != 1 || got[0].Result != tc.result || got[0].Partitions != 1 {
				t.Fatalf("got %+v, want result %s over 1 partition", got, tc.result)
			}
			if tc.failed == "" && len(got[0].Failed) > 0 || tc.failed != "" && (len(got[0].Failed) != 1 || !strings.Contains(got[0].Failed[0].Rule, tc.failed)) {
				t.Errorf("failed checks %+v, want %q", got[0].Failed, tc.failed)
			}
		})
	}
}
