package a2a

import (
	"testing"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

func ckLease(id, token string, attempt int, call, ret int64) checker.Operation {
	return checker.Operation{Kind: OpLease, Key: id, Call: call, Return: ret, Outcome: verdict.OutcomeOK,
		Output: checker.Output{Status: 200, ID: id, Token: token, Attempts: attempt}}
}

func ckEnqueue(id, state, ref string, call, ret int64) checker.Operation {
	return checker.Operation{Kind: OpEnqueue, Key: id, Call: call, Return: ret, Outcome: verdict.OutcomeOK,
		Output: checker.Output{Status: 201, ID: id, State: state, Ref: ref}}
}

// TestCheckNamesEachRule: each broken promise is named by its rule, with
// the task it is about; a run that keeps them all passes.
func TestCheckNamesEachRule(t *testing.T) {
	key := "k1"
	idem := TaskRecord{ID: "t1", Class: ClassIdempotent, Sender: "s", Recipient: "r", Kind: "k", Safety: SafetyIdempotentName, Key: &key}
	same := idem
	same.ID, same.Class, same.SameKeyAs = "t2", ClassCacheHit, "t1"
	unsafe := TaskRecord{ID: "u1", Class: ClassUnsafe, Sender: "s", Recipient: "r", Safety: SafetyUnsafeName}
	result := checker.Operation{Kind: OpResult, Key: "t1", Call: 30, Return: 40, Outcome: verdict.OutcomeOK, Input: checker.Input{Body: "completed"}, Output: checker.Output{Status: 200}}
	cases := []struct {
		name  string
		ops   []checker.Operation
		audit []AuditRow
		effs  []checker.Effect
		gate  []GateCall
		want  string
	}{
		{name: "clean", ops: []checker.Operation{ckEnqueue("t1", "queued", "", 0, 10), ckLease("t1", "l1", 1, 20, 25), result, ckEnqueue("t2", "result_pending", "replayed", 50, 60),
			ckLease("u1", "l2", 1, 20, 25)}, effs: []checker.Effect{{Key: "u1", Worker: "u1", Intent: "e1"}}},
		{name: "unsafe requeued", ops: []checker.Operation{ckLease("u1", "l1", 1, 0, 5), ckLease("u1", "l2", 2, 10, 15)},
			audit: []AuditRow{{Seq: 1, Action: "auto_requeue", TaskID: "u1", LeaseID: "l1", Attempt: 1}},
			effs:  []checker.Effect{{Key: "u1", Worker: "u1", Intent: "e1"}, {Key: "u1", Worker: "u1", Intent: "e2"}}, want: RuleUnsafeNotRequeued},
		{name: "accepted then automated", ops: []checker.Operation{ckLease("u1", "l1", 1, 0, 5), ckLease("u1", "l2", 2, 10, 15), ckLease("u1", "l3", 3, 20, 25)},
			audit: []AuditRow{{Seq: 1, Action: "requeue", TaskID: "u1", DuplicateRisk: "operator_accepted"}, {Seq: 2, Action: "auto_requeue", TaskID: "u1"}}, want: RuleRepairNoBypass},
		{name: "leased twice", ops: []checker.Operation{ckLease("t1", "l1", 1, 0, 5), ckLease("t1", "l2", 2, 10, 15)}, want: RuleExplicitLease},
		{name: "attempt stays", ops: []checker.Operation{ckLease("t1", "l1", 1, 0, 5), ckLease("t1", "l2", 1, 10, 15)},
			audit: []AuditRow{{Seq: 1, Action: "auto_requeue", TaskID: "t1", LeaseID: "l1"}}, want: RuleGateAttemptCounter},
		{name: "new task id", ops: []checker.Operation{ckLease("copy", "l1", 2, 0, 5)}, want: RuleGateSameTaskID},
		{name: "no row", gate: []GateCall{{Enabled: true, Requeued: []Requeued{{TaskID: "t1", LeaseID: "l1"}}}}, want: RuleGateObservable},
		{name: "dry run requeues", gate: []GateCall{{Enabled: false, Requeued: []Requeued{{TaskID: "t1", LeaseID: "l1"}}}},
			audit: []AuditRow{{Seq: 1, Action: "auto_requeue", TaskID: "t1", LeaseID: "l1"}}, want: RuleGateDisabledDefault},
		{name: "no cache replay", ops: []checker.Operation{result, ckEnqueue("t2", "queued", "", 50, 60)}, want: RuleCacheReplay},
		{name: "replay leased", ops: []checker.Operation{ckEnqueue("t2", "result_pending", "replayed", 50, 60), ckLease("t2", "l9", 1, 70, 75)}, want: RuleCacheReplay},
	}
	for _, c := range cases {
		rec := Record{Tasks: []TaskRecord{idem, same, unsafe}, Audit: c.audit, Reports: c.gate}
		rep := Check(checker.History{Ops: c.ops}, checker.Ledger{Effects: c.effs}, rec, CheckOptions{})
		if c.want == "" {
			if rep.Verdict() != verdict.Pass {
				t.Errorf("%s: %s %+v", c.name, rep.Verdict(), rep.Anomalies)
			}
			continue
		}
		if rep.Counts[checker.AnomalyKind(c.want)] == 0 {
			t.Errorf("%s: want %s, got %v %+v", c.name, c.want, rep.Counts, rep.Anomalies)
		}
	}
}
