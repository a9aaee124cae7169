package ids

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// schema is the dedupe store (IDS §VIII.B), the evidence of every decision
// (§XII), the confirmation tokens (§X) and the outbox of S2 commands (§XI).
// Times are Unix nanoseconds of the server's clock.
//
// records is keyed by (scope, key): scope is the tenant (§XV), key the
// idempotency key. status is in_progress until the outcome is committed;
// http_status, body and body_public are then the reply of the outcome,
// byte for byte (body_public is the same document without result.private,
// for a replay to another actor). fingerprint is the binding's envelope
// fingerprint (kept for the evidence of a conflict); match is what a
// duplicate is compared with (see delivery.match). effects_before counts
// the effects the sink already made for this key before this reservation
// (an earlier execution whose window expired): a reconciliation against
// GET {sink}/effects/{key} looks for a count above it.
const schema = `
CREATE TABLE IF NOT EXISTS records(
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  res_id TEXT NOT NULL,
  command_id TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  command TEXT NOT NULL,
  args TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  match TEXT NOT NULL,
  status TEXT NOT NULL,
  http_status INTEGER NOT NULL DEFAULT 0,
  outcome_ref TEXT,
  body BLOB,
  body_public BLOB,
  effect_id TEXT,
  effects_before INTEGER NOT NULL DEFAULT 0,
  effect_made INTEGER NOT NULL DEFAULT 0,
  first_evidence INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  ttl_expires_at INTEGER,
  PRIMARY KEY(scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_command ON records(command_id, created_at);
CREATE INDEX IF NOT EXISTS records_in_progress ON records(created_at) WHERE status = 'in_progress';
CREATE TABLE IF NOT EXISTS evidence(
  seq INTEGER PRIMARY KEY,
  evidence_id TEXT NOT NULL,
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  decision TEXT NOT NULL,
  executed INTEGER NOT NULL,
  command_id TEXT NOT NULL,
  original_command_id TEXT NOT NULL,
  outcome_ref TEXT,
  at INTEGER NOT NULL,
  fp_stored TEXT,
  fp_received TEXT
);
CREATE INDEX IF NOT EXISTS evidence_key ON evidence(scope, key, seq);
CREATE TABLE IF NOT EXISTS confirmations(
  token_hash TEXT PRIMARY KEY,
  tenant_id TEXT NOT NULL,
  actor_id TEXT NOT NULL,
  command_id TEXT NOT NULL,
  key TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  used_at INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS outbox(
  seq INTEGER PRIMARY KEY,
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  tenant_id TEXT NOT NULL,
  command_id TEXT NOT NULL,
  command TEXT NOT NULL,
  args TEXT NOT NULL,
  effects_before INTEGER NOT NULL,
  state TEXT NOT NULL,
  effect_id TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS outbox_open ON outbox(seq) WHERE state <> 'sent';
`

// dsn returns the modernc sqlite DSN of path: WAL, synchronous FULL (an
// acknowledged commit survives power loss), BEGIN IMMEDIATE for writes.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(0)")
	q.Add("_pragma", "cache_size(-32000)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// op is one write operation: fn runs inside the batch transaction, in its own
// SAVEPOINT when the batch has several; its error rolls back only its own
// writes. done receives the outcome once the batch is durable (or failed).
type op struct {
	fn   func(tx *sql.Tx) (any, error)
	done chan opResult
}

type opResult struct {
	v   any
	err error
}

// errClosed is returned by submit after Close.
var errClosed = errors.New("server closed")

// errCommit wraps a failed batch commit: every op of the batch failed.
var errCommit = errors.New("commit failed")

// writer owns the only write connection: it runs pending operations in
// batches, one BEGIN IMMEDIATE transaction and one commit (one fsync) per
// batch (group commit), and answers each operation only after the commit
// returned. Every op runs on the writer goroutine, one after the other: an
// op is atomic with respect to every other op, which is what makes the
// check-and-set of a reservation atomic (IDS §VIII.A).
type writer struct {
	db       *sql.DB
	ch       chan op
	mu       sync.RWMutex // held for reading by submitters; close takes it to close ch
	closed   bool
	done     chan struct{}
	log      *slog.Logger
	maxBatch int

	savepoint, release, rollbackTo *sql.Stmt
}

func newWriter(db *sql.DB, log *slog.Logger) (*writer, error) {
	w := &writer{db: db, ch: make(chan op, 1024), done: make(chan struct{}), log: log, maxBatch: 256}
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{{&w.savepoint, "SAVEPOINT op"}, {&w.release, "RELEASE op"}, {&w.rollbackTo, "ROLLBACK TO op"}} {
		st, err := db.Prepare(p.q)
		if err != nil {
			return nil, fmt.Errorf("prepare %s: %w", p.q, err)
		}
		*p.dst = st
	}
	go w.loop()
	return w, nil
}

// submit runs fn in the next batch and waits for its durable outcome. Once
// the op is queued it does not give up when ctx ends: the reply says whether
// the write landed.
func (w *writer) submit(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error) {
	o := op{fn: fn, done: make(chan opResult, 1)}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return nil, errClosed
	}
	select {
	case w.ch <- o:
	case <-ctx.Done():
		w.mu.RUnlock()
		return nil, ctx.Err()
	}
	w.mu.RUnlock()
	r := <-o.done
	return r.v, r.err
}

// close stops accepting operations, runs every queued one and waits for the
// last commit. Idempotent.
func (w *writer) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
	w.mu.Unlock()
	<-w.done
	w.savepoint.Close()
	w.release.Close()
	w.rollbackTo.Close()
}

func (w *writer) loop() {
	defer close(w.done)
	batch := make([]op, 0, w.maxBatch)
	results := make([]opResult, 0, w.maxBatch)
	for {
		first, ok := <-w.ch
		if !ok {
			return
		}
		batch = append(batch[:0], first)
	drain:
		for len(batch) < w.maxBatch {
			select {
			case o, ok := <-w.ch:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		results = w.run(batch, results[:0])
		for i, o := range batch {
			o.done <- results[i]
		}
	}
}

// run executes one batch in one transaction and returns the per-op outcome.
// A batch of one op needs no savepoint: its error rolls back the whole
// transaction.
func (w *writer) run(batch []op, results []opResult) []opResult {
	tx, err := w.db.Begin()
	if err != nil {
		for range batch {
			results = append(results, opResult{err: fmt.Errorf("begin: %w: %w", errCommit, err)})
		}
		return results
	}
	if len(batch) == 1 {
		v, err := batch[0].fn(tx)
		if err != nil {
			if rerr := tx.Rollback(); rerr != nil {
				w.log.Error("rollback", "err", rerr)
			}
			return append(results, opResult{v: v, err: err})
		}
		results = append(results, opResult{v: v})
	} else {
		sp, rel, rb := tx.Stmt(w.savepoint), tx.Stmt(w.release), tx.Stmt(w.rollbackTo)
		for _, o := range batch {
			if _, err := sp.Exec(); err != nil {
				results = append(results, opResult{err: fmt.Errorf("savepoint: %w", err)})
				continue
			}
			v, err := o.fn(tx)
			if err != nil {
				if _, rerr := rb.Exec(); rerr != nil {
					w.log.Error("rollback to savepoint", "err", rerr)
				}
			}
			if _, rerr := rel.Exec(); rerr != nil {
				w.log.Error("release savepoint", "err", rerr)
			}
			results = append(results, opResult{v: v, err: err})
		}
	}
	if err := tx.Commit(); err != nil {
		w.log.Error("batch commit", "ops", len(batch), "err", err)
		for i := range results {
			results[i] = opResult{err: fmt.Errorf("%w: %w", errCommit, err)}
		}
	}
	return results
}
