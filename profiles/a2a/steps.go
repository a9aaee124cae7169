package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

// world is one scenario's state: its agents (fresh names, so scenarios
// share a target without meeting), the tasks it made and the last answers.
type world struct {
	env *features.Env
	c   *client.Client

	sender, recipient string
	body              map[string]any // the last task enqueued, as sent
	task, unsafe      string         // "the task"; the scheduler scenario's unsafe one
	fresh             map[string]any // the entry of the last enqueue of the same task
	leased            map[string]any // the entry of the last lease (nil: 204)
	last              *client.Response
	report            map[string]any
	result            map[string]any   // the result the receiver posts
	requeueSeq        int64            // the scheduler's auto_requeue row of the task
	requeuedBy        []map[string]any // the requeue rows of the task a lease found leased again
	schedulerWait     time.Duration    // how long a scheduler pass may take to come
}

func registerSteps(sc *godog.ScenarioContext, env *features.Env) {
	c, err := env.Client("a2a")
	if err != nil {
		panic(err)
	}
	w := &world{env: env, c: c}
	features.Register(sc, env, w.steps())
}

func (w *world) agents() {
	if w.sender == "" {
		n := w.env.Fresh().Uint64()
		w.sender, w.recipient = fmt.Sprintf("agent:idscheck-sender-%016x", n), fmt.Sprintf("agent:idscheck-receiver-%016x", n)
	}
}

func (w *world) call(ctx context.Context, method, path string, body any) (*client.Response, map[string]any, error) {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	h := http.Header{}
	if b != nil {
		h.Set("Content-Type", "application/json")
	}
	r, err := w.c.Do(ctx, client.Request{Method: method, Path: path, Body: b, Header: h})
	if err != nil {
		return nil, nil, err
	}
	w.last = r
	var m map[string]any
	json.Unmarshal(r.Body, &m)
	return r, m, nil
}

func entry(m map[string]any) map[string]any { e, _ := m["entry"].(map[string]any); return e }

func idOf(e map[string]any) string {
	t, _ := e["task"].(map[string]any)
	id, _ := t["id"].(string)
	return id
}

func num(v any) int { f, _ := v.(float64); return int(f) }

// taskBody builds a task of the scenario's agents: safety "" sends no
// metadata; keyMode "key" a fresh key, "empty" "", "none" no key.
func (w *world) taskBody(safety, keyMode string) map[string]any {
	w.agents()
	t := map[string]any{"sender": w.sender, "recipient": w.recipient, "intent_text": "idscheck work", "task_kind": "idscheck.work"}
	if safety != "" {
		m := map[string]any{"duplicate_safety": safety}
		switch keyMode {
		case "key":
			m["key"] = fmt.Sprintf("idscheck:%016x", w.env.Fresh().Uint64())
		case "empty":
			m["key"] = ""
		}
		t["idempotency"] = m
	}
	return t
}

func (w *world) enqueue(ctx context.Context, body map[string]any) (map[string]any, error) {
	r, m, err := w.call(ctx, "POST", "/a2a/tasks", body)
	if err != nil {
		return nil, err
	}
	if r.Status != 201 {
		return nil, features.Mismatch("201 with the entry", features.Describe(r))
	}
	return entry(m), nil
}

func (w *world) enqueueNew(ctx context.Context, safety, keyMode string) error {
	w.body = w.taskBody(safety, keyMode)
	e, err := w.enqueue(ctx, w.body)
	if err != nil {
		return err
	}
	if w.task == "" {
		w.task = idOf(e)
	}
	return nil
}

func (w *world) lease(ctx context.Context) error {
	r, m, err := w.call(ctx, "POST", "/a2a/lease", map[string]any{"recipient": w.recipient})
	if err != nil {
		return err
	}
	switch r.Status {
	case 200:
		w.leased = entry(m)
	case 204:
		w.leased = nil
	default:
		return features.Mismatch("200 or 204", features.Describe(r))
	}
	return nil
}

// leaseOwn enqueues a task and leases it: the precondition of the gate.
func (w *world) leaseOwn(ctx context.Context, safety, keyMode string) error {
	w.agents()
	if err := w.enqueueNew(ctx, safety, keyMode); err != nil {
		return err
	}
	if err := w.lease(ctx); err != nil {
		return err
	}
	if w.leased == nil {
		return features.Mismatch("the task leased", "204: nothing to lease")
	}
	return nil
}

func (w *world) status(ctx context.Context, id string) (map[string]any, *client.Response, error) {
	r, m, err := w.call(ctx, "GET", "/a2a/tasks/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, nil, err
	}
	return entry(m), r, nil
}

func (w *world) retry(ctx context.Context, policy map[string]any) error {
	r, m, err := w.call(ctx, "POST", "/a2a/retry-stale", policy)
	if err != nil {
		return err
	}
	if r.Status != 200 {
		return features.Mismatch("200 a2a_auto_retried", features.Describe(r))
	}
	w.report, _ = m["report"].(map[string]any)
	return nil
}

// enabled is the gate enabled on every stale lease, unbounded but for
// what a scenario sets.
func enabled() map[string]any {
	return map[string]any{"enabled": true, "min_lease_age_ms": 0, "max_attempts": 3, "max_requeues": 1000, "scan_limit": 1000}
}

func (w *world) listed(list, id string) (map[string]any, bool) {
	l, _ := w.report[list].([]any)
	for _, x := range l {
		if m, _ := x.(map[string]any); m != nil && m["task_id"] == id {
			return m, true
		}
	}
	return nil, false
}

func (w *world) postResult(ctx context.Context) error {
	if w.result == nil {
		w.result = map[string]any{"status": "completed", "content": map[string]any{"done": fmt.Sprintf("%016x", w.env.Rand.Uint64())}}
	}
	_, _, err := w.call(ctx, "POST", "/a2a/tasks/"+url.PathEscape(w.task)+"/result", w.result)
	return err
}

func (w *world) auditRows(ctx context.Context, query string) ([]map[string]any, error) {
	r, m, err := w.call(ctx, "GET", "/a2a/audit?"+query, nil)
	if err != nil {
		return nil, err
	}
	if r.Status != 200 {
		return nil, features.Mismatch("200 with rows", features.Describe(r))
	}
	var out []map[string]any
	l, _ := m["rows"].([]any)
	for _, x := range l {
		if row, _ := x.(map[string]any); row != nil {
			out = append(out, row)
		}
	}
	return out, nil
}

// refused: the text asks that the request be refused ("validates that a
// present key is non-empty"; repair "requires an explicit duplicate-risk
// posture"), not how: any 4xx holds, and a refusal other than the
// binding's status and code is said beside the PASS.
func (w *world) refused(status int, code string) error {
	var m map[string]any
	json.Unmarshal(w.last.Body, &m)
	if w.last.Status < 400 || w.last.Status > 499 {
		return features.Mismatch(fmt.Sprintf("a refusal, a 4xx (the binding's %d {\"error\":%q})", status, code), features.Describe(w.last))
	}
	if w.last.Status != status || m["error"] != code {
		return features.Passed(fmt.Sprintf("refused with %s, not the binding's %d %q: the text asks only that it be refused", features.Describe(w.last), status, code))
	}
	return nil
}

// repeatedPostAnswer: posting the same result twice "must not corrupt
// mailbox state"; the text asks nothing of the answer, whose effect on
// the mailbox the next checks read. A 2xx holds; a 4xx holds with a
// note (the binding answers 200); a 5xx decides nothing (BLOCKED).
func (w *world) repeatedPostAnswer(status int) error {
	switch {
	case w.last.Status >= 500:
		return &features.BlockedError{Blocker: "the target's 5xx answer",
			Reason: "the repeated post was answered " + features.Describe(w.last) + ": a server error, so what it did to the mailbox is read by the next checks alone"}
	case w.last.Status >= 400:
		return features.Passed(fmt.Sprintf("the repeated post was refused (%s), not answered the binding's %d: the text asks only that the mailbox stay as it was, which the next checks read", features.Describe(w.last), status))
	case w.last.Status != status:
		return features.Passed(fmt.Sprintf("answered %s, not the binding's %d", features.Describe(w.last), status))
	}
	return nil
}

// rowAttempt is the attempt of the first row, and whether it has one.
func rowAttempt(rows []map[string]any) (int, bool) {
	if len(rows) == 0 {
		return 0, false
	}
	v, ok := rows[0]["attempt"]
	return num(v), ok && v != nil
}

func (w *world) steps() []features.StepDef {
	return []features.StepDef{
		{Pattern: `^the sender enqueues an "(idempotent|unsafe)" task with a key$`, Kind: features.Action, Fn: func(ctx context.Context, safety string) error {
			return w.enqueueNew(ctx, safety, "key")
		}},
		{Pattern: `^the sender enqueues an "(idempotent|unsafe)" task with an empty key$`, Kind: features.Action, Fn: func(ctx context.Context, safety string) error {
			_, _, err := w.call(ctx, "POST", "/a2a/tasks", w.taskBody(safety, "empty"))
			return err
		}},
		{Pattern: `^the task's status shows its idempotency metadata$`, Kind: features.Probe, Fn: func(ctx context.Context) error {
			e, r, err := w.status(ctx, w.task)
			if err != nil {
				return err
			}
			t, _ := e["task"].(map[string]any)
			got, _ := json.Marshal(t["idempotency"])
			want, _ := json.Marshal(w.body["idempotency"])
			if string(got) != string(want) {
				return features.Mismatch("idempotency "+string(want), features.Describe(r))
			}
			return nil
		}},
		{Pattern: `^the answer refuses it \(the binding's (\d+) "([a-z_]+)"\)$`, Kind: features.Check, Fn: w.refused},
		{Pattern: `^the answer to the repeated post leaves the mailbox as it was \(the binding's (\d+)\)$`, Kind: features.Check, Fn: w.repeatedPostAnswer},
		{Pattern: `^(?:an|another) "(idempotent|unsafe)" task with a key is leased$`, Kind: features.Action, Fn: func(ctx context.Context, safety string) error {
			return w.leaseOwn(ctx, safety, "key")
		}},
		{Pattern: `^an "(idempotent|unsafe)" task without a key is leased$`, Kind: features.Action, Fn: func(ctx context.Context, safety string) error {
			return w.leaseOwn(ctx, safety, "none")
		}},
		{Pattern: `^a task without idempotency metadata is leased$`, Kind: features.Action, Fn: func(ctx context.Context) error {
			return w.leaseOwn(ctx, "", "")
		}},
		{Pattern: `^the task's attempt is (\d+)$`, Kind: features.Probe, Fn: func(ctx context.Context, n int) error {
			e, r, err := w.status(ctx, w.task)
			if err != nil {
				return err
			}
			if num(e["attempt"]) != n {
				return features.Mismatch(fmt.Sprintf("attempt %d", n), features.Describe(r))
			}
			return nil
		}},
		{Pattern: `^the receiver asks for work again after (\d+) seconds?$`, Kind: features.Action, Fn: func(ctx context.Context, s int) error {
			features.Sleep(ctx, time.Duration(s)*time.Second)
			if err := w.lease(ctx); err != nil {
				return err
			}
			// Leased again: a requeue on record (the target's scheduler,
			// an operator) made it queued explicitly. Read it; the check
			// judges.
			w.requeuedBy = nil
			if w.leased != nil && idOf(w.leased) == w.task && w.task != "" {
				last := w.last
				rows, err := w.auditRows(ctx, "task_id="+url.QueryEscape(w.task))
				if err != nil {
					return err
				}
				for _, row := range rows {
					if a := row["action"]; a == "auto_requeue" || a == "requeue" {
						w.requeuedBy = append(w.requeuedBy, row)
					}
				}
				w.last = last
			}
			return nil
		}},
		{Pattern: `^the receiver leases work$`, Kind: features.Action, Fn: func(ctx context.Context) error { return w.lease(ctx) }},
		{Pattern: `^there is nothing to lease$`, Kind: features.Check, Fn: func() error {
			if w.leased == nil {
				return nil
			}
			if len(w.requeuedBy) > 0 {
				// "Only a requeue makes it queued again": one is on record.
				return features.Passed(fmt.Sprintf("task %s was leased again after a requeue on record (audit %s row seq %v): explicit, as the text allows; no lease without a requeue was seen",
					w.task, w.requeuedBy[0]["action"], w.requeuedBy[0]["seq"]))
			}
			return features.Mismatch("204: nothing to lease (or a lease after a requeue on record)", features.Describe(w.last))
		}},
		{Pattern: `^the operator runs retry-stale without enabling it$`, Kind: features.Action, Fn: func(ctx context.Context) error {
			p := enabled()
			delete(p, "enabled")
			return w.retry(ctx, p)
		}},
		{Pattern: `^the operator runs retry-stale enabled$`, Kind: features.Action, Fn: func(ctx context.Context) error {
			return w.retry(ctx, enabled())
		}},
		{Pattern: `^the operator runs retry-stale enabled with "(max_attempts|max_requeues|scan_limit|min_lease_age_ms)" (\d+)$`, Kind: features.Action, Fn: func(ctx context.Context, field string, n int) error {
			p := enabled()
			p[field] = n
			return w.retry(ctx, p)
		}},
		{Pattern: `^the task is "(queued|in_flight|result_pending|resolved)"$`, Kind: features.Probe, Fn: func(ctx context.Context, state string) error {
			e, r, err := w.status(ctx, w.task)
			if err != nil {
				return err
			}
			if e["state"] != state || idOf(e) != w.task {
				return features.Mismatch("task "+w.task+" "+state, features.Describe(r))
			}
			return nil
		}},
		{Pattern: `^the report skips the task as "([a-z_]+)"$`, Kind: features.Check, Fn: func(reason string) error {
			s, ok := w.listed("skipped", w.task)
			if !ok || s["reason"] != reason {
				return features.Mismatch(fmt.Sprintf("task %s skipped as %q", w.task, reason), features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the report skips the task as "disabled" and would requeue it$`, Kind: features.Check, Fn: func() error {
			s, ok := w.listed("skipped", w.task)
			would := false
			l, _ := w.report["would_requeue"].([]any)
			for _, x := range l {
				would = would || x == w.task
			}
			if !ok || s["reason"] != "disabled" || !would {
				return features.Mismatch(fmt.Sprintf("task %s skipped as \"disabled\" and listed in would_requeue", w.task), features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the report requeues the task$`, Kind: features.Check, Fn: func() error {
			if _, ok := w.listed("requeued", w.task); !ok {
				return features.Mismatch("task "+w.task+" requeued", features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the audit log has one "auto_requeue" row for the task, at attempt (\d+) if it says one$`, Kind: features.Probe, Fn: func(ctx context.Context, n int) error {
			rows, err := w.auditRows(ctx, "action=auto_requeue&task_id="+url.QueryEscape(w.task))
			if err != nil {
				return err
			}
			// The text asks for the row; its attempt, when it carries one,
			// is the attempt requeued.
			if a, ok := rowAttempt(rows); len(rows) != 1 || (ok && a != n) {
				return features.Mismatch(fmt.Sprintf("one auto_requeue row of task %s (at attempt %d, if it says)", w.task, n), features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the lease is of the same task id$`, Kind: features.Check, Fn: func() error {
			if w.leased == nil || idOf(w.leased) != w.task {
				return features.Mismatch("a lease of task "+w.task, features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the leased attempt is (\d+)$`, Kind: features.Check, Fn: func(n int) error {
			if w.leased == nil || num(w.leased["attempt"]) != n {
				return features.Mismatch(fmt.Sprintf("attempt %d", n), features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the report requeues at most (\d+) tasks?$`, Kind: features.Check, Fn: func(n int) error {
			if l, _ := w.report["requeued"].([]any); len(l) > n {
				return features.Mismatch(fmt.Sprintf("at most %d requeued", n), features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the report considered at most (\d+) tasks?$`, Kind: features.Check, Fn: func(n int) error {
			l1, _ := w.report["requeued"].([]any)
			l2, _ := w.report["skipped"].([]any)
			if c := num(w.report["considered"]); c > n || len(l1)+len(l2) > n {
				return features.Mismatch(fmt.Sprintf("at most %d considered", n), features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the operator requeues the task without a posture$`, Kind: features.Action, Fn: func(ctx context.Context) error {
			_, _, err := w.call(ctx, "POST", "/a2a/repair", map[string]any{"task_id": w.task, "reason": "idscheck: stale lease", "command": map[string]any{"action": "requeue"}})
			return err
		}},
		{Pattern: `^the operator requeues the task with posture "(idempotent|operator_accepted)"$`, Kind: features.Action, Fn: func(ctx context.Context, posture string) error {
			r, _, err := w.call(ctx, "POST", "/a2a/repair", map[string]any{"task_id": w.task, "reason": "idscheck: stale lease",
				"command": map[string]any{"action": "requeue", "duplicate_risk": posture}})
			if err == nil && r.Status != 200 {
				return features.Mismatch("200", features.Describe(r))
			}
			return err
		}},
		{Pattern: `^an "idempotent" task with a key is completed$`, Kind: features.Action, Fn: func(ctx context.Context) error {
			if err := w.leaseOwn(ctx, "idempotent", "key"); err != nil {
				return err
			}
			if err := w.postResult(ctx); err != nil {
				return err
			}
			if w.last.Status != 200 {
				return features.Mismatch("200", features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the sender enqueues the same task again$`, Kind: features.Action, Fn: func(ctx context.Context) error {
			e, err := w.enqueue(ctx, w.body)
			w.fresh = e
			return err
		}},
		{Pattern: `^the sender enqueues the same task again with kind "([a-z.]+)"$`, Kind: features.Action, Fn: func(ctx context.Context, kind string) error {
			b := map[string]any{}
			for k, v := range w.body {
				b[k] = v
			}
			b["task_kind"] = kind
			e, err := w.enqueue(ctx, b)
			w.fresh = e
			return err
		}},
		{Pattern: `^the new task carries the replayed result$`, Kind: features.Check, Fn: func() error {
			res, _ := w.fresh["result"].(map[string]any)
			got, _ := json.Marshal(res["content"])
			want, _ := json.Marshal(w.result["content"])
			// "receives a replayed result immediately": a new task that
			// holds the result at once; a replayed flag, if it carries one,
			// says so.
			flag, flagged := res["replayed"]
			if w.fresh["state"] != "result_pending" || (flagged && flag != true) || string(got) != string(want) || idOf(w.fresh) == w.task {
				return features.Mismatch("a new task, result_pending, with the replayed result "+string(want), features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the new task is "(queued|result_pending)"$`, Kind: features.Check, Fn: func(state string) error {
			if w.fresh["state"] != state {
				return features.Mismatch("the new task "+state, features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the sender drains its results$`, Kind: features.Action, Fn: func(ctx context.Context) error {
			_, _, err := w.call(ctx, "POST", "/a2a/results/drain", map[string]any{"sender": w.sender})
			return err
		}},
		{Pattern: `^the operator compacts the queue$`, Kind: features.Action, Fn: func(ctx context.Context) error {
			r, _, err := w.call(ctx, "POST", "/a2a/compact", nil)
			if err == nil && r.Status != 200 {
				return features.Mismatch("200 a2a_compacted", features.Describe(r))
			}
			return err
		}},
		{Pattern: `^the first task is gone$`, Kind: features.Probe, Fn: func(ctx context.Context) error {
			_, r, err := w.status(ctx, w.task)
			if err != nil {
				return err
			}
			if r.Status != 404 {
				return features.Mismatch("404: compaction removed the resolved task", features.Describe(r))
			}
			return nil
		}},
		{Pattern: `^the receiver posts the result$`, Kind: features.Action, Fn: func(ctx context.Context) error {
			if err := w.postResult(ctx); err != nil {
				return err
			}
			if w.last.Status != 200 {
				return features.Mismatch("200", features.Describe(w.last))
			}
			return nil
		}},
		{Pattern: `^the receiver posts the same result again$`, Kind: features.Action, Fn: func(ctx context.Context) error { return w.postResult(ctx) }},
		{Pattern: `^the sender has no results left to drain$`, Kind: features.Probe, Fn: func(ctx context.Context) error {
			r, m, err := w.call(ctx, "POST", "/a2a/results/drain", map[string]any{"sender": w.sender})
			if err != nil {
				return err
			}
			if l, _ := m["results"].([]any); r.Status != 200 || len(l) != 0 {
				return features.Mismatch("200 with no results", features.Describe(r))
			}
			return nil
		}},
		{Pattern: `^the target runs the retry scheduler$`, Kind: features.Action, Fn: w.schedulerRuns},
		{Pattern: `^an "idempotent" and an "unsafe" stale lease meet a scheduler pass$`, Kind: features.Action, Fn: w.schedulerPass},
		{Pattern: `^the idempotent task has an "auto_requeue" row$`, Kind: features.Check, Fn: func() error {
			if w.requeueSeq == 0 {
				return features.Mismatch("an auto_requeue row of task "+w.task+" within the scheduler's bounds", "none")
			}
			return nil
		}},
		{Pattern: `^the unsafe task is still "in_flight"$`, Kind: features.Probe, Fn: func(ctx context.Context) error {
			e, r, err := w.status(ctx, w.unsafe)
			if err != nil {
				return err
			}
			rows, err := w.auditRows(ctx, "action=auto_requeue&task_id="+url.QueryEscape(w.unsafe))
			if err != nil {
				return err
			}
			if e["state"] != "in_flight" || num(e["attempt"]) != 1 || len(rows) != 0 {
				return features.Mismatch("task "+w.unsafe+" in_flight at attempt 1, no auto_requeue row", features.Describe(r))
			}
			return nil
		}},
		{Pattern: `^a scan summary was recorded after the requeue$`, Kind: features.Probe, Fn: func(ctx context.Context) error {
			deadline := time.Now().Add(w.schedulerWait)
			for {
				rows, err := w.auditRows(ctx, fmt.Sprintf("action=a2a_auto_retry_scheduler_scan&since_seq=%d", w.requeueSeq-1))
				if err != nil {
					return err
				}
				if len(rows) > 0 {
					return nil
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return features.Mismatch("an a2a_auto_retry_scheduler_scan row from the pass that requeued "+w.task, features.Describe(w.last))
				}
				features.Sleep(ctx, 100*time.Millisecond)
			}
		}},
	}
}
