package ids

import (
	"net/url"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/idscheck/idscheck/sut/internal/groupcommit"
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
//
// An outbox row is claimed by a dispatcher (owner, the replica, until
// lease_until) when it is marked dispatching. rate_windows counts the
// duplicates of a key in its current rate-limit window (IDS §XV): in the
// store, so that replicas sharing it count them together.
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
  updated_at INTEGER NOT NULL,
  owner TEXT NOT NULL DEFAULT '',
  lease_until INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS outbox_open ON outbox(seq) WHERE state <> 'sent';
CREATE TABLE IF NOT EXISTS rate_windows(
  scope TEXT NOT NULL,
  key TEXT NOT NULL,
  start INTEGER NOT NULL,
  n INTEGER NOT NULL,
  PRIMARY KEY(scope, key)
) WITHOUT ROWID;
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

// The writer is the shared one (sut/internal/groupcommit): one goroutine
// owns the only write connection and commits pending operations in batches
// (group commit), answering each only after the commit returned. Every op
// runs on the writer goroutine, one after the other: an op is atomic with
// respect to every other op, which is what makes the check-and-set of a
// reservation atomic (IDS §VIII.A).
var (
	// errClosed is returned by Submit after Close.
	errClosed = groupcommit.ErrClosed
	// errCommit wraps a failed batch commit: every op of the batch failed.
	errCommit = groupcommit.ErrCommit
)
