package a2a

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// behaviours are the checks of the binding each mutant breaks: nil when
// the queue behaves, an error saying what it did otherwise.
var behaviours = map[string]func(e *testEnv) error{
	MutantUnsafeRequeued: func(e *testEnv) error {
		id, _ := e.staleLease("k", SafetyUnsafe, str("u-key"))
		rep := e.retry(enabled)
		if contains(ids(rep["requeued"]), id) || e.status(id)["state"] != StateInFlight {
			return errors.New("the gate requeued an unsafe task")
		}
		if r := reasonOf(rep, id); r != SkipUnsafe {
			return fmt.Errorf("skip reason %q", r)
		}
		return nil
	},
	MutantNewTaskIDOnRetry: func(e *testEnv) error {
		id, recv := e.staleLease("k", SafetyIdempotent, str("i-key"))
		e.retry(enabled)
		l, st := e.lease(recv)
		if st != 200 || taskID(l) != id {
			return fmt.Errorf("the retry leased %q, not task %s", taskID(l), id)
		}
		return nil
	},
	MutantEmptyKeyAccepted: func(e *testEnv) error {
		if r := e.do("POST", "/a2a/tasks", task("a", "b", "k", SafetyIdempotent, str(""))); r.status != 400 {
			return fmt.Errorf("an empty key: %s", r)
		}
		return nil
	},
	MutantCacheWithoutKind: func(e *testEnv) error {
		s, r := e.agent("s"), e.agent("r")
		id := taskID(e.enqueue(task(s, r, "invoice.create", SafetyIdempotent, str("k1"))))
		e.lease(r)
		e.do("POST", "/a2a/tasks/"+id+"/result", map[string]any{"status": "completed", "content": "inv"})
		other := e.enqueue(task(s, r, "invoice.void", SafetyIdempotent, str("k1")))
		if other["state"] != StateQueued {
			return fmt.Errorf("a task of another kind got %v", other["state"])
		}
		return nil
	},
	MutantCompactionDropsCache: func(e *testEnv) error {
		s, r := e.agent("s"), e.agent("r")
		id := taskID(e.enqueue(task(s, r, "k", SafetyIdempotent, str("c1"))))
		e.lease(r)
		e.do("POST", "/a2a/tasks/"+id+"/result", map[string]any{"status": "completed", "content": "x"})
		e.do("POST", "/a2a/results/drain", map[string]any{"sender": s})
		e.do("POST", "/a2a/compact", nil)
		if again := e.enqueue(task(s, r, "k", SafetyIdempotent, str("c1"))); again["state"] != StateResultPending {
			return fmt.Errorf("after compaction a duplicate is %v", again["state"])
		}
		return nil
	},
	MutantGateEnabledByDefault: func(e *testEnv) error {
		id, _ := e.staleLease("k", SafetyIdempotent, str("d1"))
		rep := e.retry(map[string]any{})
		if e.status(id)["state"] != StateInFlight || len(ids(rep["requeued"])) != 0 {
			return errors.New("retry-stale without enabled requeued")
		}
		if reasonOf(rep, id) != SkipDisabled || !contains(stringsOf(rep["would_requeue"]), id) {
			return fmt.Errorf("the dry run does not say what it would do: %v", rep)
		}
		return nil
	},
	MutantMaxAttemptsIgnored: func(e *testEnv) error {
		id, _ := e.staleLease("k", SafetyIdempotent, str("m1"))
		rep := e.retry(map[string]any{"enabled": true, "max_attempts": 1, "scan_limit": 1000, "max_requeues": 1000})
		if contains(ids(rep["requeued"]), id) || reasonOf(rep, id) != SkipMaxAttempts {
			return fmt.Errorf("attempt 1 of max 1 was requeued: %v", rep)
		}
		return nil
	},
	MutantNoAuditRow: func(e *testEnv) error {
		id, _ := e.staleLease("k", SafetyIdempotent, str("a1"))
		e.retry(enabled)
		rows := e.audit("task_id=" + id + "&action=auto_requeue")
		if len(rows) != 1 || num(rows[0]["attempt"]) != 1 {
			return fmt.Errorf("auto_requeue rows %v", rows)
		}
		return nil
	},
	MutantMissingKeyRequeued: func(e *testEnv) error {
		id, _ := e.staleLease("k", SafetyIdempotent, nil)
		rep := e.retry(enabled)
		if contains(ids(rep["requeued"]), id) || reasonOf(rep, id) != SkipMissingIdempotency {
			return fmt.Errorf("a task without key: %v", rep)
		}
		return nil
	},
	MutantAttemptNotIncremented: func(e *testEnv) error {
		id, recv := e.staleLease("k", SafetyIdempotent, str("n1"))
		e.retry(enabled)
		l, _ := e.lease(recv)
		if taskID(l) != id || num(l["attempt"]) != 2 {
			return fmt.Errorf("the lease after a requeue has attempt %v", l["attempt"])
		}
		return nil
	},
	MutantResultReposted: func(e *testEnv) error {
		s, r := e.agent("s"), e.agent("r")
		id := taskID(e.enqueue(task(s, r, "k", "", nil)))
		e.lease(r)
		res := map[string]any{"status": "completed", "content": "x"}
		e.do("POST", "/a2a/tasks/"+id+"/result", res)
		e.do("POST", "/a2a/results/drain", map[string]any{"sender": s})
		e.do("POST", "/a2a/tasks/"+id+"/result", res)
		if st := e.status(id)["state"]; st != StateResolved {
			return fmt.Errorf("the repeated post moved the task to %v", st)
		}
		return nil
	},
	MutantLeaseExpires: func(e *testEnv) error {
		r := e.agent("r")
		e.enqueue(task(e.agent("s"), r, "k", SafetyIdempotent, str("e1")))
		e.lease(r)
		e.clock.advance(time.Hour)
		if _, st := e.lease(r); st != 204 {
			return fmt.Errorf("a leased task was leased again (%d)", st)
		}
		return nil
	},
	MutantNoScanRow: func(e *testEnv) error {
		before := len(e.audit("action=" + ActionSchedulerRun))
		if _, err := e.srv.retryStale(e.t.(*testing.T).Context(), Policy{Enabled: true, MaxAttempts: 3, MaxRequeues: 1, ScanLimit: 100}, true); err != nil {
			return err
		}
		if n := len(e.audit("action=" + ActionSchedulerRun)); n != before+1 {
			return fmt.Errorf("a scheduler pass recorded %d summaries", n-before)
		}
		return nil
	},
	MutantMetadataDropped: func(e *testEnv) error {
		id := taskID(e.enqueue(task("a", "b", "k", SafetyIdempotent, str("md"))))
		t, _ := e.status(id)["task"].(map[string]any)
		if m, _ := t["idempotency"].(map[string]any); m == nil || m["key"] != "md" || m["duplicate_safety"] != SafetyIdempotent {
			return fmt.Errorf("status shows %v", t)
		}
		return nil
	},
	MutantRepairWithoutPosture: func(e *testEnv) error {
		id, _ := e.staleLease("k", SafetyUnsafe, nil)
		r := e.do("POST", "/a2a/repair", map[string]any{"task_id": id, "reason": "stale", "command": map[string]any{"action": "requeue"}})
		if r.status != 400 {
			return fmt.Errorf("a requeue without posture: %s", r)
		}
		return nil
	},
	MutantAcceptedRiskBypass: func(e *testEnv) error {
		id, recv := e.staleLease("k", SafetyUnsafe, str("b1"))
		if r := e.do("POST", "/a2a/repair", map[string]any{"task_id": id, "reason": "stale", "command": map[string]any{"action": "requeue", "duplicate_risk": RiskAccepted}}); r.status != 200 {
			return fmt.Errorf("repair: %s", r)
		}
		e.lease(recv)
		e.clock.advance(10 * time.Minute)
		if rep := e.retry(enabled); contains(ids(rep["requeued"]), id) {
			return errors.New("the gate requeued an unsafe task whose risk an operator once accepted")
		}
		return nil
	},
	MutantYoungLeaseRequeued: func(e *testEnv) error {
		r := e.agent("r")
		id := taskID(e.enqueue(task(e.agent("s"), r, "k", SafetyIdempotent, str("y1"))))
		e.lease(r)
		rep := e.retry(enabled)
		if contains(ids(rep["requeued"]), id) || reasonOf(rep, id) != SkipLeaseTooYoung {
			return fmt.Errorf("a young lease: %v", rep)
		}
		return nil
	},
	MutantNoCacheReplay: func(e *testEnv) error {
		s, r := e.agent("s"), e.agent("r")
		id := taskID(e.enqueue(task(s, r, "k", SafetyIdempotent, str("r1"))))
		e.lease(r)
		e.do("POST", "/a2a/tasks/"+id+"/result", map[string]any{"status": "completed", "content": "x"})
		again := e.enqueue(task(s, r, "k", SafetyIdempotent, str("r1")))
		res, _ := again["result"].(map[string]any)
		if again["state"] != StateResultPending || res["replayed"] != true || num(again["attempt"]) != 0 {
			return fmt.Errorf("a duplicate of finished work: %v", again)
		}
		if _, st := e.lease(r); st != 204 {
			return errors.New("the duplicate was leased")
		}
		return nil
	},
}

func stringsOf(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// TestMutants: the correct queue passes every behaviour; each mutant
// breaks its own.
func TestMutants(t *testing.T) {
	if len(Mutants()) < 10 {
		t.Fatalf("%d mutants", len(Mutants()))
	}
	for _, m := range Mutants() {
		check := behaviours[m.Name]
		if check == nil {
			t.Errorf("mutant %s has no behaviour test", m.Name)
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			if err := check(newEnv(t, "")); err != nil {
				t.Errorf("the correct queue: %v", err)
			}
			if err := check(newEnv(t, m.Name)); err == nil {
				t.Errorf("mutant %s behaves (it breaks %s)", m.Name, m.Breaks)
			}
		})
	}
}
