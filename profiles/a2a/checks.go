package a2a

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// The a2a chaos checks over what the workload records (workload.go): the
// history (enqueues, leases, results, repairs, gate calls, status reads),
// the ledger (the sink's effects: Key the sink key, Worker the task id,
// Intent the effect id) and the Record (RecordFile). Each anomaly is named
// by the rule it breaks, with the task's id and the operations, audit rows
// and effects that show it.

// RecordFile is the name of the record in a run directory.
const RecordFile = "a2a-tasks.json"

// Model names of the a2a checks in Report.Models.
const (
	// ModelExecutions: no task that is not idempotent with a key is leased
	// or executed again unless an operator requeued it under
	// operator_accepted; automation never requeues one.
	ModelExecutions = "a2a-executions"
	// ModelRequeues: every automated requeue has its auto_requeue row; no
	// task is leased again without a requeue on record; a dry run requeues
	// nothing.
	ModelRequeues = "a2a-requeues"
	// ModelAttempts: a task's attempt counter only grows, lease after lease.
	ModelAttempts = "a2a-attempts"
	// ModelTaskIDs: every task leased is one a sender enqueued (a retry
	// keeps the task id).
	ModelTaskIDs = "a2a-task-ids"
	// ModelEffects: one external effect per idempotency key at the sink; a
	// task answered from the result cache is never leased nor executed, and
	// one enqueued after its cache key's result is answered from it.
	ModelEffects = "a2a-effects"
)

// Record is what the workload knows of a run besides history and ledger.
type Record struct {
	RunID         string `json:"run_id"`
	MinLeaseAgeMS int64  `json:"min_lease_age_ms"` // the gate's bound the operator runs it with
	MaxAttempts   int    `json:"max_attempts"`
	// Tasks are every task a sender made, in the order made.
	Tasks []TaskRecord `json:"tasks"`
	// Reports are the gate calls answered 200, with what each requeued.
	Reports []GateCall `json:"reports"`
	// Audit is the audit log read after the drain; AuditErr why it was not
	// read whole ("" when it was).
	Audit    []AuditRow `json:"audit"`
	AuditErr string     `json:"audit_err,omitempty"`
	// Statuses are every task's status read after the drain (HTTP 0: no
	// answer), in the order of Tasks.
	Statuses []Status `json:"statuses"`
	// Calls are the sink's calls of the run (replays included).
	Calls []SinkCall `json:"calls"`
}

// TaskRecord is one task a sender made.
type TaskRecord struct {
	ID        string  `json:"id"`
	Class     string  `json:"class"`
	Sender    string  `json:"sender"`
	Recipient string  `json:"recipient"`
	Kind      string  `json:"task_kind"`
	Safety    string  `json:"duplicate_safety,omitempty"` // "": no metadata
	Key       *string `json:"key,omitempty"`
	// SameKeyAs is the earlier task whose (sender, recipient, kind, key)
	// it shares (ClassCacheHit).
	SameKeyAs string `json:"same_key_as,omitempty"`
	// Abandon: its first receiver abandons it after its work, before its
	// result.
	Abandon bool `json:"abandon,omitempty"`
}

// Repeatable says automation may repeat the task: idempotent with a
// non-empty key.
func (t *TaskRecord) Repeatable() bool {
	return t != nil && t.Safety == SafetyIdempotentName && t.Key != nil && strings.TrimSpace(*t.Key) != ""
}

// cacheKey is the result cache's key of a repeatable task.
func (t *TaskRecord) cacheKey() string {
	return t.Sender + "\x00" + t.Recipient + "\x00" + t.Kind + "\x00" + *t.Key
}

func (t *TaskRecord) describe() string {
	k := "no key"
	if t.Key != nil {
		k = fmt.Sprintf("key %q", *t.Key)
	}
	s := t.Safety
	if s == "" {
		s = "no metadata"
	}
	kind := t.Kind
	if kind == "" {
		kind = `""`
	}
	return fmt.Sprintf("task %s (%s, %s; %s → %s, kind %s)", t.ID, s, k, t.Sender, t.Recipient, kind)
}

// AuditRow is one row of GET /a2a/audit.
type AuditRow struct {
	Seq            int64  `json:"seq"`
	Kind           string `json:"kind"`
	Action         string `json:"action"`
	TaskID         string `json:"task_id,omitempty"`
	LeaseID        string `json:"lease_id,omitempty"`
	Attempt        int    `json:"attempt,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	DuplicateRisk  string `json:"duplicate_risk,omitempty"`
	Reason         string `json:"reason,omitempty"`
	Requeued       *int   `json:"requeued,omitempty"`
	AtMS           int64  `json:"at_ms"`
}

// Status is a task's status read after the drain.
type Status struct {
	TaskID  string `json:"task_id"`
	HTTP    int    `json:"http"`
	State   string `json:"state,omitempty"`
	Attempt int    `json:"attempt"`
}

// SinkCall is one call the sink received.
type SinkCall struct {
	Key      string `json:"key"`
	Command  string `json:"command"`
	TaskID   string `json:"task_id"`
	New      bool   `json:"new"`
	EffectID string `json:"effect_id"`
	At       int64  `json:"at"`
}

// WriteRecord writes the record as JSON.
func WriteRecord(w io.Writer, rec Record) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return fmt.Errorf("write a2a record: %w", err)
	}
	return nil
}

// ReadRecord parses what WriteRecord wrote.
func ReadRecord(r io.Reader) (Record, error) {
	var rec Record
	if err := json.NewDecoder(r).Decode(&rec); err != nil {
		return Record{}, fmt.Errorf("read a2a record: %w", err)
	}
	for i, t := range rec.Tasks {
		if t.ID == "" {
			return Record{}, fmt.Errorf("read a2a record: task %d has no id", i)
		}
	}
	return rec, nil
}

// CheckOptions bound what the checks keep.
type CheckOptions struct {
	// MaxExamples bounds the anomalies each check keeps with evidence
	// (default 20); Counts hold the totals.
	MaxExamples int `json:"max_examples,omitempty"`
}

// maxEvidenceOps bounds the operations one anomaly carries.
const maxEvidenceOps = 12

type a2aRun struct {
	h      checker.History
	l      checker.Ledger
	rec    Record
	opts   CheckOptions
	tasks  map[string]*TaskRecord
	ops    map[string][]int // task id -> its operations (enqueue, lease, result, repair, status), by call
	leases map[string][]int // task id -> its leases answered 200, by call
	audit  map[string][]AuditRow
	status map[string]Status
	calls  map[string][]SinkCall       // task id -> sink calls
	effs   map[string][]checker.Effect // task id -> effects
	byKey  map[string][]checker.Effect // sink key -> effects of CommandIdempotent keys
	add    func(model string, a checker.Anomaly)
	detail CheckDetail
	dup    int // tasks executed or leased more than allowed
}

// CheckDetail is what the checks found besides anomalies.
type CheckDetail struct {
	Undecided []string `json:"undecided,omitempty"`
	// Requeued counts the automated requeues on record (auto_requeue
	// rows), Manual the manual ones, Replayed the enqueues answered from
	// the cache, Abandoned the tasks marked to be abandoned.
	Requeued, Manual, Replayed, Abandoned int
}

// Notes sums up what the run exercised, for the chaos summary.
func (d *CheckDetail) Notes() []string {
	if d == nil {
		return nil
	}
	out := []string{fmt.Sprintf("%d automated requeue(s) (auto_requeue rows), %d manual requeue(s), %d enqueue(s) answered from the result cache, %d task(s) abandoned by their receiver",
		d.Requeued, d.Manual, d.Replayed, d.Abandoned)}
	for _, u := range d.Undecided {
		out = append(out, "undecided: "+u)
	}
	return out
}

// Check runs the a2a checks over a run (pure). Queue: Attempted tasks
// made, Acknowledged those whose enqueue was answered, Effected those
// executed at the sink, Fulfilled those with a result accepted,
// Duplicated those executed or leased more than allowed, Unexpected the
// tasks leased that no sender enqueued.
func Check(h checker.History, l checker.Ledger, rec Record, opts CheckOptions) checker.Report {
	if opts.MaxExamples <= 0 {
		opts.MaxExamples = 20
	}
	rep := checker.Report{Ops: len(h.Ops), Effects: len(l.Effects), Counts: map[checker.AnomalyKind]int{}}
	r := &a2aRun{h: h, l: l, rec: rec, opts: opts, tasks: map[string]*TaskRecord{}, ops: map[string][]int{}, leases: map[string][]int{},
		audit: map[string][]AuditRow{}, status: map[string]Status{}, calls: map[string][]SinkCall{}, effs: map[string][]checker.Effect{}, byKey: map[string][]checker.Effect{}}
	kept := map[string]int{}
	r.add = func(model string, a checker.Anomaly) {
		rep.Counts[a.Kind]++
		if kept[model]++; kept[model] <= opts.MaxExamples {
			rep.Anomalies = append(rep.Anomalies, a)
		}
	}
	for i := range rec.Tasks {
		r.tasks[rec.Tasks[i].ID] = &rec.Tasks[i]
		if rec.Tasks[i].Abandon {
			r.detail.Abandoned++
		}
	}
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Key == "" {
			continue
		}
		switch op.Kind {
		case OpEnqueue, OpLease, OpResult, OpRepair, checker.OpStatus:
			r.ops[op.Key] = append(r.ops[op.Key], i)
		}
		if op.Kind == OpLease && leased(op) {
			r.leases[op.Key] = append(r.leases[op.Key], i)
		}
		if op.Kind == OpEnqueue && op.Output.Ref == "replayed" && op.Effective() == verdict.OutcomeOK {
			r.detail.Replayed++
		}
	}
	for _, m := range []map[string][]int{r.ops, r.leases} {
		for _, idx := range m {
			sort.SliceStable(idx, func(a, b int) bool { return h.Ops[idx[a]].Call < h.Ops[idx[b]].Call })
		}
	}
	for _, row := range rec.Audit {
		if row.TaskID != "" {
			r.audit[row.TaskID] = append(r.audit[row.TaskID], row)
		}
		switch row.Action {
		case "auto_requeue":
			r.detail.Requeued++
		case "requeue":
			r.detail.Manual++
		}
	}
	for _, s := range rec.Statuses {
		r.status[s.TaskID] = s
	}
	for _, c := range rec.Calls {
		r.calls[c.TaskID] = append(r.calls[c.TaskID], c)
	}
	for _, e := range l.Effects {
		r.effs[e.Worker] = append(r.effs[e.Worker], e)
	}
	for _, c := range rec.Calls {
		if c.Command == CommandIdempotent && c.New {
			for _, e := range r.effs[c.TaskID] {
				if e.Intent == c.EffectID {
					r.byKey[c.Key] = append(r.byKey[c.Key], e)
				}
			}
		}
	}
	undecided := func(mc *checker.ModelCheck, why string) {
		if mc.Result == checker.LinOk {
			mc.Result = checker.LinUnknown
		}
		r.detail.Undecided = append(r.detail.Undecided, mc.Model+": "+why)
	}
	execs, requeues := r.checkExecutions(), r.checkRequeues()
	if rec.AuditErr != "" {
		undecided(&execs, "the audit log was not read whole: "+rec.AuditErr)
		undecided(&requeues, "the audit log was not read whole: "+rec.AuditErr)
	}
	if len(rec.Tasks) == 0 {
		undecided(&execs, "no task was made")
	}
	rep.Models = []checker.ModelCheck{execs, requeues, r.checkAttempts(), r.checkTaskIDs(), r.checkEffects()}
	rep.Queue = r.queueStats()
	rep.Detail = &r.detail
	return rep
}

// leased reports whether op is a lease answered 200 with a task.
func leased(op *checker.Operation) bool {
	return op.Kind == OpLease && op.Effective() == verdict.OutcomeOK && op.Output.Status == 200 && op.Output.ID != ""
}

func fail(mc *checker.ModelCheck) { mc.Result = checker.LinIllegal }

// evidence is at most maxEvidenceOps operations of task id: its leases
// first, then the rest, in call order.
func (r *a2aRun) evidence(id string) []checker.Operation {
	var out, rest []checker.Operation
	for _, i := range r.ops[id] {
		if op := r.h.Ops[i]; op.Kind == OpLease {
			out = append(out, op)
		} else if op.Kind != checker.OpStatus {
			rest = append(rest, op)
		}
	}
	out = append(out, rest...)
	if len(out) > maxEvidenceOps {
		out = out[:maxEvidenceOps]
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Call < out[b].Call })
	return out
}

// leaseCount is how many times the queue leased task id, as far as the
// run saw: its final attempt counter, the highest attempt a lease
// answered, the distinct leases answered.
func (r *a2aRun) leaseCount(id string) int {
	n := 0
	if s, ok := r.status[id]; ok && s.HTTP == 200 {
		n = s.Attempt
	}
	tokens := map[string]bool{}
	for _, i := range r.leases[id] {
		op := &r.h.Ops[i]
		n = max(n, op.Output.Attempts)
		tokens[op.Output.Token] = true
	}
	return max(n, len(tokens))
}

func describeRows(rows []AuditRow) string {
	var parts []string
	for _, row := range rows {
		p := fmt.Sprintf("seq %d %s (lease %s, attempt %d", row.Seq, row.Action, row.LeaseID, row.Attempt)
		if row.DuplicateRisk != "" {
			p += ", " + row.DuplicateRisk
		}
		parts = append(parts, p+")")
	}
	if len(parts) > 6 {
		parts = append(parts[:6], fmt.Sprintf("and %d more", len(parts)-6))
	}
	return strings.Join(parts, "; ")
}

func describeEffects(es []checker.Effect) string {
	var parts []string
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("effect %s at %s", e.Intent, checker.FormatNs(e.At)))
	}
	if len(parts) > 6 {
		parts = append(parts[:6], fmt.Sprintf("and %d more", len(parts)-6))
	}
	return strings.Join(parts, ", ")
}

// unsafeRule is the rule an automated requeue of t breaks.
func unsafeRule(t *TaskRecord, accepted bool) string {
	switch {
	case accepted:
		return RuleRepairNoBypass
	case t.Safety == "":
		return RuleGateIdempotentOnly
	case t.Safety == SafetyIdempotentName:
		return RuleGateSkipNoKey
	}
	return RuleUnsafeNotRequeued
}

// checkExecutions: a task that is not idempotent with a key is leased and
// executed at most once, plus once per manual requeue under
// operator_accepted; automation requeues it never.
func (r *a2aRun) checkExecutions() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelExecutions, Result: checker.LinOk}
	for _, t := range r.rec.Tasks {
		if t.Repeatable() {
			continue
		}
		mc.Partitions++
		mc.Ops += len(r.ops[t.ID])
		var auto, accepted []AuditRow
		firstAccepted := int64(-1)
		for _, row := range r.audit[t.ID] {
			switch {
			case row.Action == "auto_requeue":
				auto = append(auto, row)
			case row.Action == "requeue" && row.DuplicateRisk == "operator_accepted":
				accepted = append(accepted, row)
				if firstAccepted < 0 {
					firstAccepted = row.Seq
				}
			}
		}
		allowed := 1 + len(accepted)
		leases, effects := r.leaseCount(t.ID), r.effs[t.ID]
		if len(auto) == 0 && leases <= allowed && len(effects) <= allowed {
			continue
		}
		fail(&mc)
		r.dup++
		rule := RuleExplicitLease
		why := "it was leased again with no requeue on record (no auto_requeue row, no manual repair): the lease was not explicit"
		if len(auto) > 0 {
			rule = unsafeRule(&t, firstAccepted >= 0 && firstAccepted < auto[0].Seq)
			why = fmt.Sprintf("automation requeued it (%s)", describeRows(auto))
			if rule == RuleRepairNoBypass {
				why += ", after an operator had once requeued it under operator_accepted: the gate bypassed the classification"
			}
		}
		r.add(ModelExecutions, checker.Anomaly{Kind: checker.AnomalyKind(rule), Key: t.ID, Ops: r.evidence(t.ID), Effects: effects,
			Explanation: fmt.Sprintf("%s: %s: %s was executed %d time(s) at the sink (%s) and leased %d time(s), with %d manual requeue(s) under operator_accepted (at most %d execution(s) allowed): %s",
				rule, ModelExecutions, t.describe(), len(effects), describeEffects(effects), leases, len(accepted), allowed, why)})
	}
	return mc
}

// checkRequeues: every requeue a gate report lists has its auto_requeue
// row; a repeatable task is leased no more than once plus once per
// requeue on record; a dry run requeues nothing.
func (r *a2aRun) checkRequeues() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelRequeues, Result: checker.LinOk}
	rows := map[string]bool{}
	for _, row := range r.rec.Audit {
		if row.Action == "auto_requeue" {
			rows[row.TaskID+"\x00"+row.LeaseID] = true
		}
	}
	for _, g := range r.rec.Reports {
		mc.Partitions++
		mc.Ops++
		if !g.Enabled && len(g.Requeued) > 0 {
			fail(&mc)
			r.add(ModelRequeues, checker.Anomaly{Kind: checker.AnomalyKind(RuleGateDisabledDefault), Key: g.Requeued[0].TaskID,
				Explanation: fmt.Sprintf("%s: %s: a retry-stale call without \"enabled\": true (a dry run, sent at %s) requeued %d task(s), the first %s: the gate is disabled by default",
					RuleGateDisabledDefault, ModelRequeues, checker.FormatNs(g.Call), len(g.Requeued), g.Requeued[0].TaskID)})
		}
		for _, q := range g.Requeued {
			if rows[q.TaskID+"\x00"+q.LeaseID] {
				continue
			}
			fail(&mc)
			r.add(ModelRequeues, checker.Anomaly{Kind: checker.AnomalyKind(RuleGateObservable), Key: q.TaskID, Ops: r.evidence(q.TaskID),
				Explanation: fmt.Sprintf("%s: %s: the retry-stale call sent at %s reports task %s requeued (lease %s, attempt %d), and the audit log holds no auto_requeue row of that task and lease",
					RuleGateObservable, ModelRequeues, checker.FormatNs(g.Call), q.TaskID, q.LeaseID, q.Attempt)})
		}
	}
	for _, t := range r.rec.Tasks {
		if !t.Repeatable() {
			continue // checkExecutions
		}
		requeues := 0
		for _, row := range r.audit[t.ID] {
			if row.Action == "auto_requeue" || row.Action == "requeue" {
				requeues++
			}
		}
		if n := r.leaseCount(t.ID); n > 1+requeues {
			fail(&mc)
			r.add(ModelRequeues, checker.Anomaly{Kind: checker.AnomalyKind(RuleExplicitLease), Key: t.ID, Ops: r.evidence(t.ID),
				Explanation: fmt.Sprintf("%s: %s: %s was leased %d time(s) with %d requeue(s) on record (%s): a lease came with no requeue before it (a lease that was not explicit, or a requeue with no audit row)",
					RuleExplicitLease, ModelRequeues, t.describe(), n, requeues, describeRows(r.audit[t.ID]))})
		}
	}
	return mc
}

// checkAttempts: a lease sent after another lease of the same task
// returned shows a greater attempt; the final status shows no less than
// any lease.
func (r *a2aRun) checkAttempts() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelAttempts, Result: checker.LinOk}
	for _, id := range checker.SortedKeys(r.leases) {
		idx := r.leases[id]
		mc.Partitions++
		mc.Ops += len(idx)
		var bad []checker.Operation
		for j, b := range idx {
			for _, a := range idx[:j] {
				if A, B := &r.h.Ops[a], &r.h.Ops[b]; B.Call > A.Return && B.Output.Attempts <= A.Output.Attempts {
					bad = []checker.Operation{*A, *B}
				}
			}
		}
		why := ""
		if len(bad) == 2 {
			why = fmt.Sprintf("a lease answered at %s showed attempt %d, and a later lease (sent at %s) attempt %d: the counter did not grow",
				checker.FormatNs(bad[0].Return), bad[0].Output.Attempts, checker.FormatNs(bad[1].Call), bad[1].Output.Attempts)
		}
		if s, ok := r.status[id]; ok && s.HTTP == 200 && why == "" {
			for _, i := range idx {
				if op := &r.h.Ops[i]; op.Output.Attempts > s.Attempt {
					why = fmt.Sprintf("a lease showed attempt %d and the status read after the drain attempt %d: the counter went back", op.Output.Attempts, s.Attempt)
					bad = []checker.Operation{*op}
				}
			}
		}
		if why == "" {
			continue
		}
		fail(&mc)
		name := "task " + id
		if t := r.tasks[id]; t != nil {
			name = t.describe()
		}
		r.add(ModelAttempts, checker.Anomaly{Kind: checker.AnomalyKind(RuleGateAttemptCounter), Key: id, Ops: bad,
			Explanation: fmt.Sprintf("%s: %s: %s: %s", RuleGateAttemptCounter, ModelAttempts, name, why)})
	}
	return mc
}

// checkTaskIDs: every task leased is one a sender made.
func (r *a2aRun) checkTaskIDs() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelTaskIDs, Result: checker.LinOk}
	byKey := map[string]string{}
	for _, t := range r.rec.Tasks {
		if t.Key != nil {
			byKey[*t.Key] = t.ID
		}
	}
	for _, id := range checker.SortedKeys(r.leases) {
		mc.Partitions++
		mc.Ops += len(r.leases[id])
		if r.tasks[id] != nil {
			continue
		}
		fail(&mc)
		op := r.h.Ops[r.leases[id][0]]
		of := ""
		if orig, ok := byKey[op.Input.Body]; ok && op.Input.Body != "" {
			of = fmt.Sprintf("; it carries key %q of task %s (%s)", op.Input.Body, orig, describeRows(r.audit[orig]))
		}
		r.add(ModelTaskIDs, checker.Anomaly{Kind: checker.AnomalyKind(RuleGateSameTaskID), Key: id, Ops: []checker.Operation{op},
			Explanation: fmt.Sprintf("%s: %s: a receiver of %s leased task %s (attempt %d), which no sender enqueued%s: a retry synthesized a new task id",
				RuleGateSameTaskID, ModelTaskIDs, op.Input.Worker, id, op.Output.Attempts, of)})
	}
	return mc
}

// checkEffects: one effect per idempotency key; a task answered from the
// cache is never leased nor executed; a task enqueued after its cache
// key's completed result was accepted is answered from the cache.
func (r *a2aRun) checkEffects() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelEffects, Result: checker.LinOk}
	for _, k := range checker.SortedKeys(r.byKey) {
		mc.Partitions++
		if es := r.byKey[k]; len(es) > 1 {
			fail(&mc)
			r.add(ModelEffects, checker.Anomaly{Kind: checker.AnomalyKind(RuleKeyedEffects), Key: k, Effects: es,
				Explanation: fmt.Sprintf("%s: %s: idempotency key %q had %d external effects at the sink (%s): a keyed execution repeated its effect",
					RuleKeyedEffects, ModelEffects, k, len(es), describeEffects(es))})
		}
	}
	// The first accepted completed result of each cache key.
	completedAt := map[string]int64{}
	for _, t := range r.rec.Tasks {
		if !t.Repeatable() {
			continue
		}
		for _, i := range r.ops[t.ID] {
			op := &r.h.Ops[i]
			if op.Kind == OpResult && op.Input.Body == "completed" && op.Effective() == verdict.OutcomeOK && op.Output.Status == 200 {
				if at, ok := completedAt[t.cacheKey()]; !ok || op.Return < at {
					completedAt[t.cacheKey()] = op.Return
				}
			}
		}
	}
	for _, t := range r.rec.Tasks {
		if !t.Repeatable() {
			continue
		}
		mc.Partitions++
		first, replayed := int64(-1), false
		var queued *checker.Operation
		for _, i := range r.ops[t.ID] {
			op := &r.h.Ops[i]
			if op.Kind != OpEnqueue {
				continue
			}
			mc.Ops++
			if first < 0 || op.Call < first {
				first = op.Call
			}
			if op.Effective() == verdict.OutcomeOK && op.Output.Status == 201 {
				if op.Output.Ref == "replayed" {
					replayed = true
				} else if op.Output.State == "queued" {
					queued = op
				}
			}
		}
		calls := r.calls[t.ID]
		if replayed && (len(r.leases[t.ID]) > 0 || len(calls) > 0) {
			fail(&mc)
			r.add(ModelEffects, checker.Anomaly{Kind: checker.AnomalyKind(RuleCacheReplay), Key: t.ID, Ops: r.evidence(t.ID), Effects: r.effs[t.ID],
				Explanation: fmt.Sprintf("%s: %s: %s was answered from the result cache at its enqueue, yet it was leased %d time(s) and executed %d time(s) at the sink: a cache replay makes no execution",
					RuleCacheReplay, ModelEffects, t.describe(), len(r.leases[t.ID]), len(calls))})
			continue
		}
		if at, ok := completedAt[t.cacheKey()]; ok && queued != nil && first > at {
			fail(&mc)
			r.add(ModelEffects, checker.Anomaly{Kind: checker.AnomalyKind(RuleCacheReplay), Key: t.ID, Ops: r.evidence(t.ID),
				Explanation: fmt.Sprintf("%s: %s: %s was first sent at %s, after a completed result under the same sender, recipient, kind and key had been accepted (at %s), and was queued instead of answered from the cache (leased %d time(s) since)",
					RuleCacheReplay, ModelEffects, t.describe(), checker.FormatNs(first), checker.FormatNs(at), len(r.leases[t.ID]))})
		}
	}
	return mc
}

func (r *a2aRun) queueStats() checker.QueueStats {
	q := checker.QueueStats{Duplicated: r.dup}
	for _, t := range r.rec.Tasks {
		q.Attempted++
		acked, done := false, false
		for _, i := range r.ops[t.ID] {
			op := &r.h.Ops[i]
			ok := op.Effective() == verdict.OutcomeOK || (op.Outcome == verdict.OutcomeOK && op.Output.Status == 409)
			switch {
			case op.Kind == OpEnqueue && ok && (op.Output.Status == 201 || op.Output.Status == 409):
				acked = true
			case op.Kind == OpResult && op.Effective() == verdict.OutcomeOK && op.Output.Status == 200:
				done = true
			}
		}
		if acked {
			q.Acknowledged++
		}
		if done {
			q.Fulfilled++
		}
		if len(r.calls[t.ID]) > 0 {
			q.Effected++
		}
	}
	for _, id := range checker.SortedKeys(r.leases) {
		if r.tasks[id] == nil {
			q.Unexpected++
		}
	}
	return q
}

// Tally words the a2a counts in one line of chaos's output.
func Tally(q checker.QueueStats) string {
	return fmt.Sprintf("tasks: %d made, %d enqueues answered, %d executed at the sink, %d with a result accepted; executed or leased more than allowed %d; leased without being enqueued %d",
		q.Attempted, q.Acknowledged, q.Effected, q.Fulfilled, q.Duplicated, q.Unexpected)
}
