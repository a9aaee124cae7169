package httpidem

import (
	"context"

	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// pgSchema is schema on PostgreSQL, where several replicas share the
// store. owner is the replica that holds an in_progress reservation (its
// connections' application_name, Config.ReplicaID): a replica that
// restarts resolves its own reservations alone, never one another replica
// is executing.
const pgSchema = `
CREATE TABLE IF NOT EXISTS idempotency(
  caller TEXT NOT NULL,
  key TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('in_progress', 'done', 'unknown')),
  fingerprint TEXT NOT NULL,
  payment_id TEXT NOT NULL,
  request TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  status INTEGER,
  body BYTEA,
  expires_at BIGINT,
  owner TEXT NOT NULL DEFAULT current_setting('application_name'),
  PRIMARY KEY(caller, key)
);
CREATE INDEX IF NOT EXISTS idempotency_open ON idempotency(state) WHERE state <> 'done';
CREATE TABLE IF NOT EXISTS payments(
  seq BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  caller TEXT NOT NULL,
  idem_key TEXT,
  reference TEXT NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS payments_reference ON payments(caller, reference, seq);
`

// pgQueries are the statements whose PostgreSQL form is not the SQLite
// one with $n for ?.
var pgQueries = map[string]string{
	// Taking a key over (unknown → in_progress) makes this replica its owner.
	"setState": `UPDATE idempotency SET state = $1, owner = current_setting('application_name')
 WHERE caller = $2 AND key = $3 AND payment_id = $4 AND state = $5`,
	"upsertDone": `INSERT INTO idempotency(` + rowCols + `) VALUES($1,$2,'done',$3,$4,$5,$6,$7,$8,$9)
 ON CONFLICT (caller, key) DO UPDATE SET state = 'done', fingerprint = excluded.fingerprint, payment_id = excluded.payment_id,
 request = excluded.request, created_at = excluded.created_at, status = excluded.status, body = excluded.body,
 expires_at = excluded.expires_at`,
	"upsertReserve": `INSERT INTO idempotency(` + rowCols + `) VALUES($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)
 ON CONFLICT (caller, key) DO UPDATE SET state = excluded.state, fingerprint = excluded.fingerprint,
 payment_id = excluded.payment_id, request = excluded.request, created_at = excluded.created_at, status = NULL, body = NULL,
 expires_at = NULL, owner = current_setting('application_name')`,
	"insertPayment": `INSERT INTO payments(id, caller, idem_key, reference, body) VALUES($1,$2,$3,$4,$5) ON CONFLICT DO NOTHING`,
	// At Open: the keys this replica left in flight, and every unknown one.
	"rOpen": `SELECT ` + rowCols + ` FROM idempotency
 WHERE state = 'unknown' OR (state = 'in_progress' AND owner = current_setting('application_name')) ORDER BY created_at`,
}

// openPostgres opens the shared store at c.Store: the schema, one pool
// for writes and reads.
func (s *Server) openPostgres(ctx context.Context, c Config) error {
	db, err := pgstore.Open(ctx, c.Store, c.ReplicaID, pgSchema)
	if err != nil {
		return err
	}
	s.wdb, s.rdb, s.dialect = db, db, dialectPostgres
	s.w = &pgstore.Writer{DB: db}
	return nil
}
