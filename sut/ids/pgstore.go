package ids

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// pgSchema is schema on PostgreSQL, where several replicas share the
// store. owner is the replica (its connections' application_name,
// Config.ReplicaID) that reserved an in_progress record: its request, else
// its resumer, executes it; a replica resumes its own records only, never
// one another replica is executing. An outbox row marked dispatching is
// claimed by owner until lease_until (the server's clock, Unix ns): another
// replica takes it over (reconciling first) only once the lease is over.
//
// The statements run only when an object is missing: CREATE INDEX IF NOT
// EXISTS on a table that has it still waits for a SHARE lock on the table,
// so a replica starting while another one's transaction hangs (cut from
// the store mid-transaction) would wait on it, and every write of the
// other replicas would queue behind that wait.
const pgSchema = `
DO $schema$ BEGIN
IF to_regclass('records') IS NULL OR
   to_regclass('records_command') IS NULL OR
   to_regclass('records_in_progress') IS NULL OR
   to_regclass('evidence') IS NULL OR
   to_regclass('evidence_key') IS NULL OR
   to_regclass('confirmations') IS NULL OR
   to_regclass('outbox') IS NULL OR
   to_regclass('outbox_open') IS NULL OR
   to_regclass('rate_windows') IS NULL THEN
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
    body BYTEA,
    body_public BYTEA,
    effect_id TEXT,
    effects_before BIGINT NOT NULL DEFAULT 0,
    effect_made BIGINT NOT NULL DEFAULT 0,
    first_evidence BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    ttl_expires_at BIGINT,
    owner TEXT NOT NULL DEFAULT current_setting('application_name'),
    PRIMARY KEY(scope, key)
  );
  CREATE INDEX IF NOT EXISTS records_command ON records(command_id, created_at);
  CREATE INDEX IF NOT EXISTS records_in_progress ON records(owner, created_at) WHERE status = 'in_progress';
  CREATE TABLE IF NOT EXISTS evidence(
    seq BIGSERIAL PRIMARY KEY,
    evidence_id TEXT NOT NULL,
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    decision TEXT NOT NULL,
    executed INTEGER NOT NULL,
    command_id TEXT NOT NULL,
    original_command_id TEXT NOT NULL,
    outcome_ref TEXT,
    at BIGINT NOT NULL,
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
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT
  );
  CREATE TABLE IF NOT EXISTS outbox(
    seq BIGSERIAL PRIMARY KEY,
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    command_id TEXT NOT NULL,
    command TEXT NOT NULL,
    args TEXT NOT NULL,
    effects_before BIGINT NOT NULL,
    state TEXT NOT NULL,
    effect_id TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    owner TEXT NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0
  );
  CREATE INDEX IF NOT EXISTS outbox_open ON outbox(seq) WHERE state <> 'sent';
  CREATE TABLE IF NOT EXISTS rate_windows(
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    start BIGINT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY(scope, key)
  );
END IF;
END $schema$`

// pgQueries are the statements whose PostgreSQL form is not the SQLite
// one with $n for ?.
var pgQueries = map[string]string{
	// Reserving a key over an expired record (or, under a replica mutant,
	// over any record) makes this replica its owner.
	"putRecord": `INSERT INTO records(scope, key, res_id, command_id, tenant_id, actor_id, command, args,
 fingerprint, match, status, http_status, outcome_ref, body, body_public, effects_before, effect_made, first_evidence,
 created_at, updated_at, ttl_expires_at) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21)
 ON CONFLICT (scope, key) DO UPDATE SET res_id = excluded.res_id, command_id = excluded.command_id,
 tenant_id = excluded.tenant_id, actor_id = excluded.actor_id, command = excluded.command, args = excluded.args,
 fingerprint = excluded.fingerprint, match = excluded.match, status = excluded.status, http_status = excluded.http_status,
 outcome_ref = excluded.outcome_ref, body = excluded.body, body_public = excluded.body_public, effect_id = NULL,
 effects_before = excluded.effects_before, effect_made = excluded.effect_made, first_evidence = excluded.first_evidence,
 created_at = excluded.created_at, updated_at = excluded.updated_at, ttl_expires_at = excluded.ttl_expires_at,
 owner = current_setting('application_name')`,
	// A duplicate counted in its key's window in one statement, outside
	// any serializable transaction: the duplicates of a storm, on every
	// replica, wait for the row's lock in turn instead of failing each
	// other's transactions. $3 is now, $4 the start of a window that ends
	// now.
	"bumpRate": `INSERT INTO rate_windows(scope, key, start, n) VALUES($1,$2,$3,1)
 ON CONFLICT (scope, key) DO UPDATE SET
 start = CASE WHEN rate_windows.start <= $4 OR rate_windows.start > $3 THEN $3 ELSE rate_windows.start END,
 n = CASE WHEN rate_windows.start <= $4 OR rate_windows.start > $3 THEN 1 ELSE rate_windows.n + 1 END
 RETURNING start, n`,
	"putRate": `INSERT INTO rate_windows(scope, key, start, n) VALUES($1,$2,$3,$4)
 ON CONFLICT (scope, key) DO UPDATE SET start = excluded.start, n = excluded.n`,
	// The resumer's: the records this replica reserved and left in progress.
	"rInProgress": `SELECT scope, key, res_id FROM records WHERE status = 'in_progress'
 AND owner = current_setting('application_name') ORDER BY created_at LIMIT 64`,
	// The dispatcher's claim: pending rows, and rows marked dispatching by
	// this replica (a pass that ended early, a process that crashed) or
	// whose claim lapsed; rows another dispatcher is claiming are skipped.
	"claimOutbox": `SELECT seq, scope, key, tenant_id, command_id, command, args, effects_before, state
 FROM outbox WHERE state <> 'sent' AND (state = 'pending' OR owner = $2 OR lease_until < $1)
 ORDER BY seq LIMIT 128 FOR UPDATE SKIP LOCKED`,
	"rCommand": `SELECT command_id, tenant_id, key, status, outcome_ref, created_at, updated_at, ttl_expires_at
 FROM records WHERE command_id = $1 AND ($2 = '' OR tenant_id = $2) ORDER BY created_at DESC LIMIT 1`,
}

// openPostgres opens the shared store at c.Store: the schema, one pool
// for writes and reads.
func (s *Server) openPostgres(ctx context.Context, c Config) error {
	db, err := pgstore.Open(ctx, c.Store, c.ReplicaID, pgSchema) // idle transactions bounded: pgstore.IdleInTransaction
	if err != nil {
		return err
	}
	s.wdb, s.rdb, s.dialect = db, db, dialectPostgres
	s.w = &pgstore.Writer{DB: db}
	return nil
}

// storeUnavailable says err is the store not answering (a lost
// connection, a timeout, a server shutting down, races lost again and
// again), not a fault of the statement: the request may be retried.
func storeUnavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", "40", "53", "57", "58": // connection, transaction rollback, resources, operator intervention, system
			return true
		}
		return false
	}
	return true // no answer from the server at all: a dial, a read, a deadline
}
