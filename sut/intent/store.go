package intent

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/idscheck/idscheck/sut/internal/groupcommit"
	"github.com/idscheck/idscheck/sut/internal/pgstore"
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

// earlyCommitDelay is how long the lost-on-crash mutant holds a batch it has
// already acknowledged before committing it.
const earlyCommitDelay = 30 * time.Millisecond

// errClosed is returned by submit after Close; errCommit wraps a failed batch
// commit (the outcome of every op in the batch is a failure).
var (
	errClosed = groupcommit.ErrClosed
	errCommit = groupcommit.ErrCommit
)

// writer runs the write operations: on SQLite the shared group-commit
// writer (sut/internal/groupcommit) owns the only write connection, one
// BEGIN IMMEDIATE transaction and one commit (one fsync) per batch, each
// operation answered once its batch is durable; on PostgreSQL
// (Config.Store) pgstore.Writer runs each operation in its own
// SERIALIZABLE transaction, again when it lost a race to another replica.
type writer struct {
	w interface {
		Submit(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error)
		Close()
	}
	// afterCommit is the after-commit failpoint on PostgreSQL (groupcommit
	// runs it itself on SQLite).
	afterCommit func() error
	// On PostgreSQL: closed refuses new operations, inflight counts those
	// under way (close waits for them, as groupcommit drains its queue).
	mu       sync.RWMutex
	closed   bool
	inflight sync.WaitGroup
}

// newWriter starts the writer; early is the lost-on-crash mutant (answer
// before the commit); afterCommit is the after-commit failpoint (an error:
// the batch answers with it although its writes landed).
func newWriter(db *sql.DB, log *slog.Logger, early bool, afterCommit func() error) (*writer, error) {
	opt := groupcommit.Options{AfterCommit: afterCommit}
	if early {
		opt.EarlyAck = earlyCommitDelay
	}
	gc, err := groupcommit.NewWithOptions(db, log, opt)
	if err != nil {
		return nil, err
	}
	return &writer{w: gc}, nil
}

// newPGWriter is the writer on PostgreSQL.
func newPGWriter(db *sql.DB, afterCommit func() error) *writer {
	return &writer{w: &pgstore.Writer{DB: db}, afterCommit: afterCommit}
}

// submit runs fn in the next batch and waits for its durable outcome. It
// does not give up when ctx ends once the op is queued: the reply says
// whether the write landed.
func (w *writer) submit(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error) {
	if w.afterCommit == nil { // SQLite: groupcommit
		return w.w.Submit(ctx, fn)
	}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return nil, errClosed
	}
	w.inflight.Add(1)
	w.mu.RUnlock()
	defer w.inflight.Done()
	v, err := w.w.Submit(ctx, fn)
	if err == nil {
		if ferr := w.afterCommit(); ferr != nil {
			return nil, fmt.Errorf("after commit: %w: %w", errCommit, ferr)
		}
	}
	return v, err
}

// close stops accepting operations, runs every queued one and waits for the
// last commit. Idempotent.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.inflight.Wait()
	w.w.Close()
}
