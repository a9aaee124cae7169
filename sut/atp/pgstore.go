package atp

import (
	"context"
	"database/sql"

	"github.com/idscheck/idscheck/sut/internal/pgstore"
	"github.com/idscheck/idscheck/sut/internal/sqlitecols"
)

// pgSchema is schema on PostgreSQL, where several replicas share the
// store. The uniqueness the protocol rests on is the database's: a nonce
// of an agent is a primary key (two replicas cannot both consume it), an
// (intent_id, idempotency_key) a unique key (one row), an action_dedup_key
// of an agent a primary key; the authorized → executing move is a
// conditional UPDATE in a SERIALIZABLE transaction (one replica wins it).
// seq orders rows as SQLite's rowid does.
const pgSchema = `
CREATE TABLE IF NOT EXISTS transactions(
  seq BIGSERIAL PRIMARY KEY,
  intent_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  state TEXT NOT NULL,
  body TEXT NOT NULL,
  receipt TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  nonce TEXT NOT NULL,
  amount BIGINT NOT NULL,
  currency TEXT NOT NULL,
  payee TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  rail_pi TEXT,
  owner TEXT NOT NULL DEFAULT '',
  lease_until BIGINT NOT NULL DEFAULT 0,
  UNIQUE(intent_id, idempotency_key)
);
CREATE INDEX IF NOT EXISTS transactions_open ON transactions(intent_id) WHERE state IN ('executing', 'executed');
CREATE INDEX IF NOT EXISTS transactions_rail_pi ON transactions(rail_pi) WHERE rail_pi IS NOT NULL;
CREATE INDEX IF NOT EXISTS transactions_key ON transactions(idempotency_key, seq);
CREATE TABLE IF NOT EXISTS history(
  seq BIGSERIAL PRIMARY KEY,
  intent_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  state TEXT NOT NULL,
  at TEXT NOT NULL,
  source TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS nonces(
  agent_id TEXT NOT NULL,
  nonce TEXT NOT NULL,
  first_consumed_at TEXT NOT NULL,
  intent_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  PRIMARY KEY(agent_id, nonce)
);
CREATE TABLE IF NOT EXISTS action_dedup(
  agent_id TEXT NOT NULL,
  key TEXT NOT NULL,
  first_at BIGINT NOT NULL,
  intent_id TEXT NOT NULL,
  PRIMARY KEY(agent_id, key)
);
CREATE TABLE IF NOT EXISTS agents(
  agent_id TEXT PRIMARY KEY,
  x TEXT NOT NULL,
  created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS site_keys(
  seq BIGSERIAL,
  kid TEXT PRIMARY KEY,
  x TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL
)
`

// pgQueries are the statements whose PostgreSQL form is not the SQLite
// one with $n for ?.
var pgQueries = map[string]string{
	"getRowByKey":  `SELECT ` + rowCols + ` FROM transactions WHERE idempotency_key = $1 ORDER BY seq LIMIT 1`,
	"rGetRowByKey": `SELECT ` + rowCols + ` FROM transactions WHERE idempotency_key = $1 ORDER BY seq LIMIT 1`,
	"advance": `UPDATE transactions SET state = $1, receipt = COALESCE($2, receipt), updated_at = $3
 WHERE intent_id = $4 AND idempotency_key = $5 AND state = $6 AND ` + rankSQL + ` < $7`,
	"history2": `INSERT INTO history(intent_id, idempotency_key, state, at, source) VALUES($1,$2,$3,$5,$6),($1,$2,$4,$5,$6)`,
	"insertNonceOrIgnore": `INSERT INTO nonces(agent_id, nonce, first_consumed_at, intent_id, idempotency_key)
 VALUES($1,$2,$3,$4,$5) ON CONFLICT DO NOTHING`,
	"putDedup": `INSERT INTO action_dedup(agent_id, key, first_at, intent_id) VALUES($1,$2,$3,$4)
 ON CONFLICT (agent_id, key) DO UPDATE SET first_at = excluded.first_at, intent_id = excluded.intent_id`,
	// The sweep's claim: rows another replica's sweep is claiming at the
	// same moment are skipped, not waited for.
	"claim": `UPDATE transactions SET owner = $1, lease_until = $2 WHERE seq IN (SELECT seq FROM transactions
 WHERE state IN ('executing', 'executed') AND lease_until < $3 ORDER BY intent_id LIMIT 256 FOR UPDATE SKIP LOCKED)
 RETURNING intent_id, idempotency_key`,
}

// openPostgres opens the shared store at c.Store: the schema, one pool
// for writes and reads, the SERIALIZABLE writer.
func (s *Server) openPostgres(ctx context.Context, c Config) error {
	db, err := pgstore.Open(ctx, c.Store, c.ReplicaID, pgSchema)
	if err != nil {
		return err
	}
	s.wdb, s.rdb, s.dialect = db, db, dialectPostgres
	s.w = &pgstore.Writer{DB: db}
	return nil
}

// migrateSQLite adds the claim columns to a transactions table made
// before they were.
func migrateSQLite(ctx context.Context, db *sql.DB) error {
	return sqlitecols.Ensure(ctx, db, "transactions",
		sqlitecols.Column{Name: "owner", Def: `TEXT NOT NULL DEFAULT ''`}, sqlitecols.Column{Name: "lease_until", Def: `INTEGER NOT NULL DEFAULT 0`})
}
