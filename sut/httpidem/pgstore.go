package httpidem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
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

// dollarParams rewrites SQLite's ? parameters as PostgreSQL's $1, $2, …
// (no statement here has a ? inside a literal).
func dollarParams(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isPostgres says a Config.Store names a PostgreSQL database.
func isPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// pgDSN is store with application_name set to the replica's id (the owner
// of the reservations it makes) unless the URL sets one.
func pgDSN(store, replica string) (string, error) {
	u, err := url.Parse(store)
	if err != nil {
		return "", fmt.Errorf("store URL: %w", err)
	}
	q := u.Query()
	if q.Get("application_name") == "" {
		q.Set("application_name", replica)
	}
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", "5")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// pgWriter runs each operation in its own SERIALIZABLE transaction on a
// pool shared with the reads. The key's primary key is the reservation:
// of two replicas that both read a key absent and insert it, one commits
// and the other fails (unique violation, or a serialization failure);
// that one runs its operation again and reads the key reserved. An
// operation may therefore run more than once: it is written to be rerun
// (its side effects outside the database are undone at its start).
type pgWriter struct {
	db *sql.DB
}

// retryable: the transaction lost a race to another one and changed
// nothing; running it again reads the winner's writes.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", "23505": // serialization_failure, deadlock_detected, unique_violation
		return true
	}
	return false
}

const pgAttempts = 20

func (w *pgWriter) Submit(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error) {
	// Like groupcommit, an operation begun does not give up when the
	// client leaves: its answer says whether the write landed.
	ctx = context.WithoutCancel(ctx)
	var last error
	for i := range pgAttempts {
		if i > 0 {
			time.Sleep(time.Duration(1+rand.IntN(5*i)) * time.Millisecond)
		}
		v, err := w.once(ctx, fn)
		if err == nil {
			return v, nil
		}
		if !retryable(err) {
			return nil, err
		}
		last = err
	}
	return nil, fmt.Errorf("%d transactions lost a race in a row: %w", pgAttempts, last)
}

func (w *pgWriter) once(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := w.db.BeginTx(tctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
	if err != nil {
		return nil, err
	}
	v, err := fn(tx)
	if err != nil {
		tx.Rollback()
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return v, nil
}

func (w *pgWriter) Close() {}

// openPostgres opens the shared store at c.Store: the schema, one pool
// for writes and reads.
func (s *Server) openPostgres(ctx context.Context, c Config) error {
	dsn, err := pgDSN(c.Store, c.ReplicaID)
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(time.Minute)
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// Replicas starting together race to create the schema: a lost race
	// is a unique violation on the catalog, and the next try finds it.
	for i := 0; ; i++ {
		_, err = db.ExecContext(cctx, "SELECT pg_advisory_lock(4242); "+pgSchema+"; SELECT pg_advisory_unlock(4242)")
		if err == nil || i == 2 || !retryable(err) {
			break
		}
	}
	if err != nil {
		db.Close()
		return fmt.Errorf("postgres schema: %w", err)
	}
	s.wdb, s.rdb, s.dialect = db, db, dialectPostgres
	s.w = &pgWriter{db: db}
	return nil
}
