package intent

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// pgSchema is schema on PostgreSQL, where several replicas share the
// store: the same tables (times in DOUBLE PRECISION seconds, as SQLite's
// REAL), and rate_windows, the tester rate limit that a process keeps in
// memory on SQLite and every replica must share here.
//
// There is no owner column: nothing of the bus is in flight inside one
// process. A claim is a lease in the row (claimed_by, claim_token,
// claim_expires_at) that ends by time whichever replica reads it, and
// every other write is one transaction; a replica that restarts has
// nothing of its own to resolve.
const pgSchema = `
CREATE TABLE IF NOT EXISTS intents(
  id TEXT PRIMARY KEY,
  namespace TEXT NOT NULL,
  goal TEXT NOT NULL,
  payload TEXT NOT NULL,
  visibility TEXT NOT NULL,
  priority INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  backoff_base DOUBLE PRECISION NOT NULL,
  target_worker TEXT,
  required_capability TEXT,
  publisher TEXT NOT NULL,
  status TEXT NOT NULL,
  claim_attempts INTEGER NOT NULL DEFAULT 0,
  claimed_by TEXT,
  claim_token TEXT,
  claimed_at DOUBLE PRECISION,
  claim_expires_at DOUBLE PRECISION,
  run_at DOUBLE PRECISION NOT NULL,
  created_at DOUBLE PRECISION NOT NULL,
  expires_at DOUBLE PRECISION NOT NULL,
  last_error TEXT,
  result TEXT,
  result_type TEXT,
  completed_at DOUBLE PRECISION
);
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
  died_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS dead_letters_died ON dead_letters(died_at);
CREATE TABLE IF NOT EXISTS idempotency(
  api_key TEXT NOT NULL,
  key TEXT NOT NULL,
  body_hash TEXT NOT NULL,
  status INTEGER NOT NULL,
  response TEXT NOT NULL,
  created_at DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(api_key, key)
);
CREATE TABLE IF NOT EXISTS nonces(
  api_key TEXT NOT NULL,
  nonce TEXT NOT NULL,
  ts DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(api_key, nonce)
);
CREATE TABLE IF NOT EXISTS store(
  api_key TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  expires_at DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(api_key, key)
);
CREATE TABLE IF NOT EXISTS api_keys(
  api_key TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  created_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS rate_windows(
  api_key TEXT PRIMARY KEY,
  start_ns BIGINT NOT NULL,
  n INTEGER NOT NULL
)`

// pgSQL is q in PostgreSQL's form: ?N as $N, each bare ? as the next $n
// (no statement of the bus has a ? inside a literal, nor mixes the two).
func pgSQL(q string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		if c != '?' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(q) && q[j] >= '0' && q[j] <= '9' {
			j++
		}
		if j > i+1 {
			b.WriteString("$" + q[i+1:j])
			i = j - 1
			continue
		}
		n++
		b.WriteString("$" + strconv.Itoa(n))
	}
	return b.String()
}

// sql is q in the store's dialect.
func (s *Server) sql(q string) string {
	if s.pg {
		return pgSQL(q)
	}
	return q
}

// openPostgres opens the shared store at cfg.Store: the schema (created
// under an advisory lock by replicas starting together), one pool for
// writes and reads, the SERIALIZABLE writer.
func (s *Server) openPostgres(ctx context.Context, cfg Config) error {
	db, err := pgstore.Open(ctx, cfg.Store, cfg.ReplicaID, pgSchema)
	if err != nil {
		return err
	}
	s.wdb, s.rdb = db, db
	return nil
}

// storeUnavailable says err is the store failing (a lost connection, a
// store that does not answer, a transaction that kept losing races), not
// a fault of the server's own statements nor data the store refused: the
// request is answered 503, retryable, never 500 and never a success.
func storeUnavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// 42: a statement the server got wrong; 22: data (storeRefused).
		return !strings.HasPrefix(pe.Code, "42") && !strings.HasPrefix(pe.Code, "22")
	}
	return !errors.Is(err, sql.ErrNoRows)
}
