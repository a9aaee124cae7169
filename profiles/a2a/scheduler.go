package a2a

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/idscheck/idscheck/features"
)

// schedulerRuns reads GET /a2a/scheduler: a target without a running
// scheduler, or whose pass would not come within the budget, makes the
// scenario N/A.
func (w *world) schedulerRuns(ctx context.Context) error {
	r, m, err := w.call(ctx, "GET", "/a2a/scheduler", nil)
	if err != nil {
		return err
	}
	if r.Status != 200 {
		return features.Mismatch("200 with the scheduler's settings", features.Describe(r))
	}
	if m["enabled"] != true {
		return features.NotApplicable("the target runs no retry scheduler (GET /a2a/scheduler: enabled false); it is opt-in")
	}
	p, _ := m["policy"].(map[string]any)
	interval := time.Duration(num(m["interval_ms"])) * time.Millisecond
	age := time.Duration(num(p["min_lease_age_ms"])) * time.Millisecond
	w.schedulerWait = age + 3*interval + time.Second
	if w.schedulerWait > w.env.Budget {
		return features.NotApplicable(fmt.Sprintf("the scheduler's minimum lease age and interval need %v, over the budget %v", w.schedulerWait, w.env.Budget))
	}
	return nil
}

// schedulerPass leases an idempotent task (the task) and an unsafe one,
// then waits (bounded by the scheduler's own settings) for the
// auto_requeue row of the idempotent one.
func (w *world) schedulerPass(ctx context.Context) error {
	if err := w.leaseOwn(ctx, "idempotent", "key"); err != nil {
		return err
	}
	idem := w.task
	w.task = ""
	if err := w.leaseOwn(ctx, "unsafe", "key"); err != nil {
		return err
	}
	w.unsafe, w.task = w.task, idem
	deadline := time.Now().Add(w.schedulerWait)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		rows, err := w.auditRows(ctx, "action=auto_requeue&task_id="+url.QueryEscape(w.task))
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			w.requeueSeq = int64(num(rows[0]["seq"]))
			return nil
		}
		features.Sleep(ctx, 100*time.Millisecond)
	}
	return nil
}
