package intent

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

const schema = `
CREATE TABLE IF NOT EXISTS intents(
  id TEXT PRIMARY KEY,
  namespace TEXT NOT NULL,
  goal TEXT NOT NULL,
  payload TEXT NOT NULL,
  visibility TEXT NOT NULL,
  priority INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  backoff_base REAL NOT NULL,
  target_worker TEXT,
  required_capability TEXT,
  publisher TEXT NOT NULL,
  status TEXT NOT NULL,
  claim_attempts INTEGER NOT NULL DEFAULT 0,
  claimed_by TEXT,
  claim_token TEXT,
  claimed_at REAL,
  claim_expires_at REAL,
  run_at REAL NOT NULL,
  created_at REAL NOT NULL,
  expires_at REAL NOT NULL,
  last_error TEXT,
  result TEXT,
  result_type TEXT,
  completed_at REAL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS intents_claim ON intents(namespace, priority DESC, run_at, claim_attempts, created_at, id) WHERE status IN ('open','claimed');
CREATE INDEX IF NOT EXISTS intents_open_by_publisher ON intents(publisher) WHERE status IN ('open','claimed');
CREATE INDEX IF NOT EXISTS intents_done ON intents(status, completed_at) WHERE status IN ('fulfilled','dead');
CREATE TABLE IF NOT EXISTS dead_letters(
  intent_id TEXT PRIMARY KEY,
  namespace TEXT NOT NULL,
  goal TEXT NOT NULL,
  payload TEXT NOT NULL,
  publisher TEXT NOT NULL,
  reason TEXT NOT NULL,
  claim_attempts INTEGER NOT NULL,
  last_error TEXT,
  died_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_died ON dead_letters(died_at);
CREATE TABLE IF NOT EXISTS idempotency(
  api_key TEXT NOT NULL,
  key TEXT NOT NULL,
  body_hash TEXT NOT NULL,
  status INTEGER NOT NULL,
  response TEXT NOT NULL,
  created_at REAL NOT NULL,
  PRIMARY KEY(api_key, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS nonces(
  api_key TEXT NOT NULL,
  nonce TEXT NOT NULL,
  ts REAL NOT NULL,
  PRIMARY KEY(api_key, nonce)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS store(
  api_key TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  expires_at REAL NOT NULL,
  PRIMARY KEY(api_key, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS api_keys(
  api_key TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  created_at REAL NOT NULL
);
`

// dsn returns the modernc sqlite DSN of path: WAL, synchronous FULL (an
// acknowledged commit survives power loss, unless synchronous is "OFF"),
// BEGIN IMMEDIATE for write transactions.
func dsn(path string, readOnly bool, synchronous string) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "synchronous("+synchronous+")")
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
// SAVEPOINT; its error rolls back only its own writes. done receives the
// outcome once the batch is durable (or failed).
type op struct {
	fn   func(tx *sql.Tx) (any, error)
	done chan opResult
}

type opResult struct {
	v   any
	err error
}

// earlyCommitDelay is how long the lost-on-crash mutant holds a batch it has
// already acknowledged before committing it.
const earlyCommitDelay = 30 * time.Millisecond

// errClosed is returned by submit after Close.
var errClosed = errors.New("server closed")

// errCommit wraps a failed batch commit: the outcome of every op in the batch
// is a failure (the transaction was rolled back).
var errCommit = errors.New("commit failed")

// writer owns the only write connection: it runs pending operations in
// batches, one BEGIN IMMEDIATE transaction and one commit (one fsync) per
// batch, and answers each operation only after the commit returned.
type writer struct {
	db       *sql.DB
	ch       chan op
	mu       sync.RWMutex // held for reading by submitters; Close takes it to close ch
	closed   bool
	done     chan struct{}
	log      *slog.Logger
	maxBatch int
	// early is the lost-on-crash mutant: answer before the commit.
	early bool
	// afterCommit runs after each durable commit, before any reply; it may
	// set softFail to answer the whole batch with an error (a failpoint).
	afterCommit func()
	softFail    bool

	savepoint, release, rollbackTo *sql.Stmt
}

func newWriter(db *sql.DB, log *slog.Logger, early bool, afterCommit func()) (*writer, error) {
	w := &writer{db: db, ch: make(chan op, 1024), done: make(chan struct{}), log: log, maxBatch: 256, early: early, afterCommit: afterCommit}
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

// submit runs fn in the next batch and waits for its durable outcome. It
// does not give up when ctx ends once the op is queued: the reply says
// whether the write landed.
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
	if w.early {
		// lost-on-crash mutant: acknowledge now, commit later.
		for i, o := range batch {
			o.done <- results[i]
			batch[i].done = make(chan opResult, 1)
		}
		time.Sleep(earlyCommitDelay)
		// Its crash point (the after-commit failpoint of the correct
		// server) sits between the replies and the commit: the moment this
		// bug loses acknowledged work.
		if w.afterCommit != nil {
			w.afterCommit()
			w.softFail = false
		}
	}
	if err := tx.Commit(); err != nil {
		w.log.Error("batch commit", "ops", len(batch), "err", err)
		for i := range results {
			results[i] = opResult{err: fmt.Errorf("%w: %w", errCommit, err)}
		}
		return results
	}
	if w.afterCommit != nil && !w.early {
		w.afterCommit()
		if w.softFail {
			w.softFail = false
			for i := range results {
				results[i] = opResult{err: fmt.Errorf("%w: failpoint after commit", errCommit)}
			}
		}
	}
	return results
}
