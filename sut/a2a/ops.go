package a2a

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"

	"github.com/idscheck/idscheck/sut/internal/failpoints"
)

// apiError is an answer other than success: its status and slug.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errf(status int, code, message string) error { return &apiError{status, code, message} }

var errUnknownTask = errf(404, "unknown_task", "no task has this id")

// submit runs fn in the group-commit writer and returns its entry.
func submit[T any](ctx context.Context, s *Server, fn func(tx *sql.Tx) (T, error)) (T, error) {
	v, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) { return fn(tx) })
	if err != nil {
		var zero T
		return zero, err
	}
	return v.(T), nil
}

// cacheKind is the task kind the cache is keyed by ("" for every task
// under the cache-without-kind mutant).
func (s *Server) cacheKind(t Task) string {
	if s.mutant == MutantCacheWithoutKind {
		return ""
	}
	return t.TaskKind
}

// enqueue stores a validated task: queued, or result_pending with the
// cached result when an idempotent task with a key matches a cache entry.
func (s *Server) enqueue(ctx context.Context, t Task) (*Entry, error) {
	if t.ID == "" {
		t.ID = newID()
	}
	raw, _ := json.Marshal(t)
	e := &Entry{Task: t, State: StateQueued}
	return submit(ctx, s, func(tx *sql.Tx) (*Entry, error) {
		e.Result = nil // a rerun (a race lost on PostgreSQL) reads the cache afresh
		var exists int
		if err := tx.QueryRow(s.q(`SELECT count(*) FROM tasks WHERE id = ?`), t.ID).Scan(&exists); err != nil {
			return nil, err
		}
		if exists > 0 {
			return nil, errf(409, "task_exists", "a task with this id exists")
		}
		var result sql.NullString
		state := StateQueued
		if e.safety() == SafetyIdempotent && e.key() != "" && s.mutant != MutantNoCacheReplay {
			cached, err := s.cachedResult(tx, t, e.key())
			switch {
			case err == nil:
				var r Result
				if err := json.Unmarshal([]byte(cached), &r); err != nil {
					return nil, err
				}
				r.TaskID, r.Replayed = t.ID, true
				b, _ := json.Marshal(r)
				result, state, e.Result = sql.NullString{String: string(b), Valid: true}, StateResultPending, &r
			case !errors.Is(err, sql.ErrNoRows):
				return nil, err
			}
		}
		var key any
		if m := t.Idempotency; m != nil && m.Key != nil {
			key = *m.Key
		}
		if err := tx.QueryRow(s.q(`INSERT INTO tasks(id, sender, recipient, task_kind, safety, idem_key, task, state, result) VALUES(?,?,?,?,?,?,?,?,?) RETURNING seq`),
			t.ID, t.Sender, t.Recipient, t.TaskKind, e.safety(), key, string(raw), state, result).Scan(&e.seq); err != nil {
			return nil, err
		}
		e.State = state
		return e, nil
	})
}

// lease leases the oldest queued task of recipient (nil: none).
func (s *Server) lease(ctx context.Context, recipient string) (*Entry, error) {
	now := s.nowMS()
	where := `state = 'queued'`
	if s.mutant == MutantLeaseExpires {
		where = `(state = 'queued' OR (state = 'in_flight' AND leased_at_ms <= ` + itoa(now-200) + `))`
	}
	inc := `attempt + 1`
	if s.mutant == MutantAttemptNotIncremented {
		inc = `CASE WHEN attempt = 0 THEN 1 ELSE attempt END`
	}
	var e *Entry
	var err error
	switch {
	case s.mutant == MutantCheckThenInsert:
		e, err = s.leaseCheckThenWrite(ctx, recipient, inc, now)
	case s.pg != nil:
		e, err = s.leasePG(ctx, where, inc, newID(), recipient, now)
	default:
		e, err = submit(ctx, s, func(tx *sql.Tx) (*Entry, error) {
			return scanEntry(tx.QueryRow(`UPDATE tasks SET state = 'in_flight', lease_id = ?, leased_to = ?, leased_at_ms = ?, attempt = `+inc+`
 WHERE seq = (SELECT seq FROM tasks WHERE recipient = ? AND `+where+` ORDER BY seq LIMIT 1)
 RETURNING `+entryCols, newID(), recipient, now, recipient))
		})
	}
	if err == nil && e != nil {
		failpoints.Eval(FailpointAfterLeaseCommit)
	}
	return e, err
}

// postResult posts r for task id (see the binding: a repeat of the same
// result is a no-op; another result is a conflict).
func (s *Server) postResult(ctx context.Context, id, leaseID string, r Result) (*Entry, bool, error) {
	type out struct {
		e   *Entry
		dup bool
	}
	o, err := submit(ctx, s, func(tx *sql.Tx) (out, error) {
		e, err := s.entryBy(tx, id)
		if err != nil {
			return out{}, err
		}
		if e == nil {
			return out{}, errUnknownTask
		}
		r.TaskID = id
		if e.Result != nil {
			if sameResult(*e.Result, r) {
				if s.mutant == MutantResultReposted && e.State == StateResolved {
					if _, err := tx.Exec(s.q(`UPDATE tasks SET state = 'result_pending' WHERE seq = ?`), e.seq); err != nil {
						return out{}, err
					}
					e.State = StateResultPending
				}
				return out{e, true}, nil
			}
			return out{}, errf(409, "result_conflict", "the task has another result")
		}
		if leaseID != "" && leaseID != e.LeaseID {
			return out{}, errf(409, "lease_mismatch", "the lease_id is not the task's current lease")
		}
		b, _ := json.Marshal(r)
		if _, err := tx.Exec(s.q(`UPDATE tasks SET state = 'result_pending', result = ? WHERE seq = ?`), string(b), e.seq); err != nil {
			return out{}, err
		}
		if e.safety() == SafetyIdempotent && e.key() != "" && r.Status == "completed" {
			// The cache key is the cache's primary key: of two results
			// under one key, the first committed is kept.
			if _, err := tx.Exec(s.q(`INSERT INTO cache(sender, recipient, task_kind, idem_key, result, task_id) VALUES(?,?,?,?,?,?) ON CONFLICT DO NOTHING`),
				e.Task.Sender, e.Task.Recipient, s.cacheKind(e.Task), e.key(), string(b), id); err != nil {
				return out{}, err
			}
		}
		e.State, e.Result = StateResultPending, &r
		return out{e, false}, nil
	})
	if err == nil && !o.dup {
		s.remember(o.e)
	}
	return o.e, o.dup, err
}

// sameResult: the same status, content (as JSON) and error message.
func sameResult(a, b Result) bool {
	if a.Status != b.Status || a.ErrorMessage != b.ErrorMessage {
		return false
	}
	var x, y bytes.Buffer
	if json.Compact(&x, a.Content) != nil || json.Compact(&y, b.Content) != nil {
		return bytes.Equal(a.Content, b.Content)
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// drain returns the sender's pending results and resolves their tasks.
func (s *Server) drain(ctx context.Context, sender string) ([]*Entry, error) {
	return submit(ctx, s, func(tx *sql.Tx) ([]*Entry, error) {
		rows, err := tx.Query(s.q(`UPDATE tasks SET state = 'resolved' WHERE sender = ? AND state = 'result_pending' RETURNING `+entryCols), sender)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := []*Entry{}
		for rows.Next() {
			e, err := scanEntry(rows)
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, rows.Err()
	})
}

// compact drops resolved tasks (and, under its mutant, their cache
// entries).
func (s *Server) compact(ctx context.Context) (int64, error) {
	return submit(ctx, s, func(tx *sql.Tx) (int64, error) {
		if s.mutant == MutantCompactionDropsCache {
			if _, err := tx.Exec(`DELETE FROM cache WHERE task_id IN (SELECT id FROM tasks WHERE state = 'resolved')`); err != nil {
				return 0, err
			}
		}
		res, err := tx.Exec(`DELETE FROM tasks WHERE state = 'resolved'`)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	})
}

// RepairRequest is A2ARepairRequest.
type RepairRequest struct {
	TaskID  string `json:"task_id"`
	Reason  string `json:"reason"`
	Command struct {
		Action        string `json:"action"`
		LeaseID       string `json:"lease_id"`
		DuplicateRisk string `json:"duplicate_risk"`
		Message       string `json:"message"`
	} `json:"command"`
}

// repair runs a manual repair and returns the entry and its audit row.
func (s *Server) repair(ctx context.Context, rq RepairRequest) (*Entry, AuditRow, error) {
	c := rq.Command
	switch {
	case strings.TrimSpace(rq.TaskID) == "":
		return nil, AuditRow{}, errf(400, "invalid_request", "task_id is required")
	case strings.TrimSpace(rq.Reason) == "":
		return nil, AuditRow{}, errf(400, "invalid_request", "reason must be non-empty")
	case c.Action != ActionRequeue && c.Action != ActionForceError:
		return nil, AuditRow{}, errf(400, "invalid_request", "command.action must be requeue or force_error")
	case c.Action == ActionRequeue && c.DuplicateRisk != SafetyIdempotent && c.DuplicateRisk != RiskAccepted && s.mutant != MutantRepairWithoutPosture:
		return nil, AuditRow{}, errf(400, "duplicate_risk_required", "a requeue states its duplicate_risk: idempotent or operator_accepted")
	}
	type out struct {
		e   *Entry
		row AuditRow
	}
	now := s.nowMS()
	o, err := submit(ctx, s, func(tx *sql.Tx) (out, error) {
		if !textOK(rq.TaskID) {
			return out{}, errUnknownTask
		}
		e, err := s.entryBy(tx, rq.TaskID)
		if err != nil {
			return out{}, err
		}
		switch {
		case e == nil:
			return out{}, errUnknownTask
		case e.State != StateInFlight:
			return out{}, errf(409, "not_in_flight", "only an in_flight task can be repaired; it is "+e.State)
		case c.LeaseID != "" && c.LeaseID != e.LeaseID:
			return out{}, errf(409, "lease_mismatch", "the lease_id is not the task's current lease")
		}
		row := AuditRow{Action: c.Action, TaskID: e.Task.ID, LeaseID: e.LeaseID, Attempt: e.Attempt, IdempotencyKey: e.key(),
			DuplicateRisk: c.DuplicateRisk, Reason: rq.Reason, AtMS: now}
		if c.Action == ActionRequeue {
			accepted := 0
			if c.DuplicateRisk == RiskAccepted {
				accepted = 1
			}
			if _, err := tx.Exec(s.q(`UPDATE tasks SET state = 'queued', accepted_risk = CASE WHEN ? = 1 THEN 1 ELSE accepted_risk END WHERE seq = ?`), accepted, e.seq); err != nil {
				return out{}, err
			}
			e.State = StateQueued
		} else {
			msg := c.Message
			if msg == "" {
				msg = rq.Reason
			}
			r := Result{TaskID: e.Task.ID, Status: "failed", Content: json.RawMessage("null"), ErrorMessage: msg}
			b, _ := json.Marshal(r)
			if _, err := tx.Exec(s.q(`UPDATE tasks SET state = 'result_pending', result = ? WHERE seq = ?`), string(b), e.seq); err != nil {
				return out{}, err
			}
			e.State, e.Result = StateResultPending, &r
		}
		row, err = s.appendAudit(tx, row)
		return out{e, row}, err
	})
	return o.e, o.row, err
}

// Skip reasons of the gate (Covenant's A2AAutoRetrySkipReason slugs).
const (
	SkipDisabled           = "disabled"
	SkipLeaseTooYoung      = "lease_too_young"
	SkipMissingIdempotency = "missing_idempotency"
	SkipUnsafe             = "unsafe_duplicate_safety"
	SkipMaxAttempts        = "max_attempts_reached"
	SkipLimitReached       = "limit_reached"
)

// Requeued is A2AAutoRetryRequeued.
type Requeued struct {
	TaskID         string `json:"task_id"`
	LeaseID        string `json:"lease_id"`
	Attempt        int    `json:"attempt"`
	IdempotencyKey string `json:"idempotency_key"`
	LeaseAgeMS     int64  `json:"lease_age_ms"`
}

// Skipped is A2AAutoRetrySkipped.
type Skipped struct {
	TaskID     string `json:"task_id"`
	Reason     string `json:"reason"`
	Attempt    int    `json:"attempt"`
	LeaseAgeMS int64  `json:"lease_age_ms"`
}

// Report is A2AAutoRetryReport, with would_requeue (the binding's).
type Report struct {
	Policy       Policy     `json:"policy"`
	Considered   int        `json:"considered"`
	Requeued     []Requeued `json:"requeued"`
	Skipped      []Skipped  `json:"skipped"`
	WouldRequeue []string   `json:"would_requeue"`
}

// retryStale runs the gate once in one transaction; scheduler passes also
// record their scan summary.
func (s *Server) retryStale(ctx context.Context, p Policy, scheduler bool) (*Report, error) {
	now := s.nowMS()
	return submit(ctx, s, func(tx *sql.Tx) (*Report, error) {
		rep := &Report{Policy: p, Requeued: []Requeued{}, Skipped: []Skipped{}, WouldRequeue: []string{}}
		rows, err := tx.Query(s.q(`SELECT `+entryCols+` FROM tasks WHERE state = 'in_flight' ORDER BY leased_at_ms, seq LIMIT ?`), p.ScanLimit)
		if err != nil {
			return nil, err
		}
		var entries []*Entry
		for rows.Next() {
			e, err := scanEntry(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			entries = append(entries, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		for _, e := range entries {
			rep.Considered++
			age := max(0, now-e.LeasedAtMS)
			reason := s.skipReason(e, p, age)
			switch {
			case !p.Enabled:
				if reason == "" && len(rep.WouldRequeue) < p.MaxRequeues {
					rep.WouldRequeue = append(rep.WouldRequeue, e.Task.ID)
				}
				reason = SkipDisabled
			case reason == "" && len(rep.Requeued) >= p.MaxRequeues:
				reason = SkipLimitReached
			}
			if reason != "" {
				rep.Skipped = append(rep.Skipped, Skipped{TaskID: e.Task.ID, Reason: reason, Attempt: e.Attempt, LeaseAgeMS: age})
				continue
			}
			if ok, err := s.autoRequeue(tx, e, age, now); err != nil {
				return nil, err
			} else if !ok {
				continue // no longer in flight: another transaction moved it
			}
			rep.Requeued = append(rep.Requeued, Requeued{TaskID: e.Task.ID, LeaseID: e.LeaseID, Attempt: e.Attempt, IdempotencyKey: e.key(), LeaseAgeMS: age})
		}
		if scheduler && s.mutant != MutantNoScanRow {
			c, r, k := rep.Considered, len(rep.Requeued), len(rep.Skipped)
			if _, err := s.appendAudit(tx, AuditRow{Kind: ActionSchedulerRun, Action: ActionSchedulerRun, Considered: &c, Requeued: &r, Skipped: &k, AtMS: now}); err != nil {
				return nil, err
			}
		}
		return rep, nil
	})
}

// skipReason is why the gate leaves e alone ("" when it may requeue it),
// disabled aside.
func (s *Server) skipReason(e *Entry, p Policy, age int64) string {
	switch {
	case age < p.MinLeaseAgeMS && s.mutant != MutantYoungLeaseRequeued:
		return SkipLeaseTooYoung
	case e.Task.Idempotency == nil:
		return SkipMissingIdempotency
	case e.safety() != SafetyIdempotent && s.mutant != MutantUnsafeRequeued && !(s.mutant == MutantAcceptedRiskBypass && e.acceptedRisk):
		return SkipUnsafe
	case e.key() == "" && s.mutant != MutantMissingKeyRequeued:
		return SkipMissingIdempotency
	case e.Attempt >= p.MaxAttempts && s.mutant != MutantMaxAttemptsIgnored:
		return SkipMaxAttempts
	}
	return ""
}

// autoRequeue requeues e (same id, same attempt) with its auto_requeue
// row; false when e is no longer in flight (then nothing is written).
func (s *Server) autoRequeue(tx *sql.Tx, e *Entry, age, now int64) (bool, error) {
	if s.mutant == MutantNewTaskIDOnRetry {
		t := e.Task
		t.ID = newID()
		raw, _ := json.Marshal(t)
		var key any
		if k := e.key(); k != "" {
			key = k
		}
		if _, err := tx.Exec(s.q(`INSERT INTO tasks(id, sender, recipient, task_kind, safety, idem_key, task, state, attempt) VALUES(?,?,?,?,?,?,?,'queued',?)`),
			t.ID, t.Sender, t.Recipient, t.TaskKind, e.safety(), key, string(raw), e.Attempt); err != nil {
			return false, err
		}
		r, _ := json.Marshal(Result{TaskID: e.Task.ID, Status: "failed", Content: json.RawMessage("null"), ErrorMessage: "retried as " + t.ID})
		if _, err := tx.Exec(s.q(`UPDATE tasks SET state = 'result_pending', result = ? WHERE seq = ?`), string(r), e.seq); err != nil {
			return false, err
		}
	} else {
		res, err := tx.Exec(s.q(`UPDATE tasks SET state = 'queued' WHERE seq = ? AND state = 'in_flight' AND lease_id = ?`), e.seq, e.LeaseID)
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return false, err
		}
	}
	if s.mutant == MutantNoAuditRow {
		return true, nil
	}
	_, err := s.appendAudit(tx, AuditRow{Action: ActionAutoRequeue, TaskID: e.Task.ID, LeaseID: e.LeaseID, Attempt: e.Attempt,
		IdempotencyKey: e.key(), DuplicateRisk: SafetyIdempotent, Reason: "retry-stale: lease age " + itoa(age) + " ms", AtMS: now})
	return err == nil, err
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
