package a2a

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// schema: tasks holds every task not compacted, its envelope as received
// (task), the columns the queue selects on, its lease and attempt, the
// accepted_risk mark of a manual requeue under operator_accepted, and its
// result (JSON) once posted. cache holds the receiver-side result cache;
// audit the repair and scheduler rows (row: the JSON the binding shows).
// Compaction deletes resolved tasks only.
const schema = `
CREATE TABLE IF NOT EXISTS tasks(
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  sender TEXT NOT NULL,
  recipient TEXT NOT NULL,
  task_kind TEXT NOT NULL,
  safety TEXT NOT NULL,
  idem_key TEXT,
  task TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued','in_flight','result_pending','resolved')),
  lease_id TEXT,
  leased_to TEXT,
  leased_at_ms INTEGER,
  attempt INTEGER NOT NULL DEFAULT 0,
  accepted_risk INTEGER NOT NULL DEFAULT 0,
  result TEXT
);
CREATE INDEX IF NOT EXISTS tasks_queued ON tasks(recipient, seq) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS tasks_in_flight ON tasks(leased_at_ms, seq) WHERE state = 'in_flight';
CREATE INDEX IF NOT EXISTS tasks_pending ON tasks(sender, seq) WHERE state = 'result_pending';
CREATE TABLE IF NOT EXISTS cache(
  sender TEXT NOT NULL,
  recipient TEXT NOT NULL,
  task_kind TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  result TEXT NOT NULL,
  task_id TEXT NOT NULL,
  PRIMARY KEY(sender, recipient, task_kind, idem_key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit(
  seq INTEGER PRIMARY KEY,
  action TEXT NOT NULL,
  task_id TEXT,
  row TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_task ON audit(task_id, seq);
CREATE INDEX IF NOT EXISTS audit_action ON audit(action, seq);
`

// dsn returns the modernc sqlite DSN of path: WAL, synchronous FULL (an
// acknowledged commit survives power loss), BEGIN IMMEDIATE for writes.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "synchronous(FULL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Task states.
const (
	StateQueued        = "queued"
	StateInFlight      = "in_flight"
	StateResultPending = "result_pending"
	StateResolved      = "resolved"
)

// Duplicate safety classes and repair postures.
const (
	SafetyIdempotent = "idempotent"
	SafetyUnsafe     = "unsafe"
	RiskAccepted     = "operator_accepted"
)

// Task is the A2ATask envelope.
type Task struct {
	ID          string       `json:"id"`
	Sender      string       `json:"sender"`
	Recipient   string       `json:"recipient"`
	IntentText  string       `json:"intent_text"`
	TaskKind    string       `json:"task_kind,omitempty"`
	Idempotency *Idempotency `json:"idempotency,omitempty"`
}

// Idempotency is the task's idempotency metadata.
type Idempotency struct {
	DuplicateSafety string  `json:"duplicate_safety"`
	Key             *string `json:"key,omitempty"`
}

// Result is a posted (or replayed) result.
type Result struct {
	TaskID       string          `json:"task_id"`
	Status       string          `json:"status"`
	Content      json.RawMessage `json:"content"`
	ErrorMessage string          `json:"error_message,omitempty"`
	Replayed     bool            `json:"replayed"`
}

// Entry is the A2ATaskQueueEntry the surfaces return.
type Entry struct {
	State      string  `json:"state"`
	Task       Task    `json:"task"`
	LeaseID    string  `json:"lease_id,omitempty"`
	LeasedTo   string  `json:"leased_to,omitempty"`
	LeasedAtMS int64   `json:"leased_at_ms,omitempty"`
	Attempt    int     `json:"attempt"`
	Result     *Result `json:"result"`

	seq          int64
	acceptedRisk bool
}

// key is the task's non-empty idempotency key, "" when it has none.
func (e *Entry) key() string {
	if m := e.Task.Idempotency; m != nil && m.Key != nil {
		return *m.Key
	}
	return ""
}

// safety is the task's duplicate safety: unsafe without metadata.
func (e *Entry) safety() string {
	if m := e.Task.Idempotency; m != nil {
		return m.DuplicateSafety
	}
	return SafetyUnsafe
}

const entryCols = `seq, task, state, lease_id, leased_to, leased_at_ms, attempt, accepted_risk, result`

type scanner interface{ Scan(...any) error }

// scanEntry reads a row of entryCols; nil, nil when there is none.
func scanEntry(sc scanner) (*Entry, error) {
	var e Entry
	var task string
	var lease, to, result sql.NullString
	var at sql.NullInt64
	err := sc.Scan(&e.seq, &task, &e.State, &lease, &to, &at, &e.Attempt, &e.acceptedRisk, &result)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(task), &e.Task); err != nil {
		return nil, fmt.Errorf("stored task %d: %w", e.seq, err)
	}
	e.LeaseID, e.LeasedTo, e.LeasedAtMS = lease.String, to.String, at.Int64
	if result.Valid {
		e.Result = new(Result)
		if err := json.Unmarshal([]byte(result.String), e.Result); err != nil {
			return nil, fmt.Errorf("stored result of %s: %w", e.Task.ID, err)
		}
	}
	return &e, nil
}

// entryBy reads one task by id through q (a transaction or the read pool).
func (s *Server) entryBy(q interface {
	QueryRow(string, ...any) *sql.Row
}, id string) (*Entry, error) {
	return scanEntry(q.QueryRow(s.q(`SELECT `+entryCols+` FROM tasks WHERE id = ?`), id))
}

// cachedResult is the result cached under t's cache key with key ("" and
// sql.ErrNoRows when there is none).
func (s *Server) cachedResult(tx *sql.Tx, t Task, key string) (string, error) {
	if s.mutant == MutantReplicaLocalCache {
		return s.localCached(t, key)
	}
	var cached string
	err := tx.QueryRow(s.q(`SELECT result FROM cache WHERE sender = ? AND recipient = ? AND task_kind = ? AND idem_key = ?`),
		t.Sender, t.Recipient, s.cacheKind(t), key).Scan(&cached)
	return cached, err
}

// AuditRow is one row of the audit log (the binding's fields; the empty
// ones are left out).
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
	Considered     *int   `json:"considered,omitempty"`
	Requeued       *int   `json:"requeued,omitempty"`
	Skipped        *int   `json:"skipped,omitempty"`
	AtMS           int64  `json:"at_ms"`
}

// Audit actions.
const (
	ActionRequeue      = "requeue"
	ActionForceError   = "force_error"
	ActionAutoRequeue  = "auto_requeue"
	ActionSchedulerRun = "a2a_auto_retry_scheduler_scan"
)

// appendAudit writes row in tx and returns it with its seq.
func (s *Server) appendAudit(tx *sql.Tx, row AuditRow) (AuditRow, error) {
	if row.Kind == "" {
		row.Kind = "a2a_repair"
	}
	if err := tx.QueryRow(s.q(`INSERT INTO audit(action, task_id, row) VALUES(?, ?, '{}') RETURNING seq`), row.Action, nullable(row.TaskID)).Scan(&row.Seq); err != nil {
		return row, err
	}
	b, _ := json.Marshal(row)
	if _, err := tx.Exec(s.q(`UPDATE audit SET row = ? WHERE seq = ?`), string(b), row.Seq); err != nil {
		return row, err
	}
	return row, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
