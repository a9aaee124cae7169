// Package pgstore is what a bundled server needs to keep its state in
// PostgreSQL, shared by several replicas of it: the store URL's checks, a
// pool opened with the replica's name, the schema created once by
// replicas racing to start, and Writer, which runs each write in its own
// SERIALIZABLE transaction and runs it again when it lost a race.
//
// The database's own guarantees (primary keys, unique constraints,
// serializable transactions, FOR UPDATE SKIP LOCKED) are what make the
// replicas one server: never a lock in the process.
package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// IsPostgres says store names a PostgreSQL database.
func IsPostgres(store string) bool {
	return strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://")
}

// Redacted is store as logs and errors may show it: without its password,
// and nothing of it when it does not parse (its raw text may hold one).
func Redacted(store string) string {
	if store == "" {
		return ""
	}
	u, err := url.Parse(store)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// DollarParams rewrites SQLite's ? parameters as PostgreSQL's $1, $2, …
// (for statements without a ? inside a literal).
func DollarParams(q string) string {
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

// DSN is store with application_name set to replica, over any the URL
// sets (current_setting('application_name') names the replica in SQL: the
// owner of what it reserves, which no two replicas may share), a connect
// timeout, and
// idle_in_transaction_session_timeout (IdleInTransaction): a replica cut
// from the store mid-transaction does not hold its locks, and every other
// replica's writes behind them, for as long as TCP takes to notice.
func DSN(store, replica string) (string, error) {
	u, err := url.Parse(store)
	if err != nil {
		return "", errors.New("the store URL does not parse as a URL") // url.Error quotes it, password and all
	}
	q := u.Query()
	if replica != "" {
		q.Set("application_name", replica)
	}
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", "5")
	}
	if q.Get("idle_in_transaction_session_timeout") == "" {
		q.Set("idle_in_transaction_session_timeout", IdleInTransaction)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Retryable says err is a transaction that lost a race to another one and
// changed nothing: running it again reads the winner's writes.
func Retryable(err error) bool {
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

// IdleInTransaction is how long the store keeps a transaction whose
// client has gone silent.
const IdleInTransaction = "5s"

// schemaObjects are the tables and indexes a schema creates.
var schemaObjects = regexp.MustCompile(`(?i)CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX)\s+IF\s+NOT\s+EXISTS\s+([A-Za-z_][A-Za-z0-9_]*)`)

// Open opens the pool of replica at store and creates schema (statements
// separated by semicolons, each idempotent: CREATE … IF NOT EXISTS) under
// an advisory lock, so that replicas starting together do not race on the
// catalog. When every table and index schema names exists already, it
// runs nothing: CREATE INDEX IF NOT EXISTS on a table that has it still
// waits for a lock on the table, and a replica restarting while another
// one's transaction hangs (cut from the store) would wait on it, and every
// write of the others behind it.
func Open(ctx context.Context, store, replica, schema string) (*sql.DB, error) {
	dsn, err := DSN(store, replica)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db.SetMaxOpenConns(16)
	db.SetMaxIdleConns(16)
	db.SetConnMaxIdleTime(time.Minute)
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var names []string
	for _, m := range schemaObjects.FindAllStringSubmatch(schema, -1) {
		names = append(names, m[1])
	}
	if len(names) > 0 {
		var all bool
		// A replica restarted while it is cut from the store (a partition
		// the chaos run injected: its packets dropped) waits for the store,
		// up to cctx: a connection that timed out is tried again; a refused
		// connection or an answer of the server (a refused password, a
		// missing database) is final at once.
		for {
			err = db.QueryRowContext(cctx, `SELECT bool_and(to_regclass(n) IS NOT NULL) FROM unnest($1::text[]) AS n`, names).Scan(&all)
			var pe *pgconn.PgError
			var ne net.Error
			timedOut := errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
			if err == nil || errors.As(err, &pe) || !timedOut || cctx.Err() != nil {
				break
			}
			select {
			case <-cctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if all {
			return db, nil
		}
	}
	for i := 0; ; i++ {
		_, err = db.ExecContext(cctx, "SELECT pg_advisory_lock(4242); "+schema+"; SELECT pg_advisory_unlock(4242)")
		if err == nil || i == 2 || !Retryable(err) {
			break
		}
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres schema: %w", err)
	}
	return db, nil
}

// Refused says PostgreSQL refused a value SQLite stores as given (class
// 22, data exception: a NUL character, or bytes that are not UTF-8, in a
// text): the request that carried it is malformed, a 400, never a 500 nor
// a 503 that asks for a retry that can never succeed.
func Refused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && strings.HasPrefix(pe.Code, "22")
}

// Attempts is how many times Writer runs an operation that keeps losing
// races before it gives up.
const Attempts = 20

// Writer runs each operation in its own SERIALIZABLE transaction on db.
// Of two replicas that both read a row absent and insert it, one commits
// and the other fails (unique violation, or a serialization failure);
// Writer runs that one's operation again, and it reads the row the winner
// wrote. An operation may therefore run more than once: write it to be
// rerun (undo its side effects outside the database at its start).
//
// Its Submit has groupcommit.Writer's signature: a server written for one
// runs on the other.
type Writer struct {
	DB *sql.DB
}

// Submit runs fn in a transaction, again while it loses races (bounded by
// Attempts). Like groupcommit, an operation begun does not give up when
// its caller leaves: its answer says whether the write landed.
func (w *Writer) Submit(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error) {
	ctx = context.WithoutCancel(ctx)
	var last error
	for i := range Attempts {
		if i > 0 {
			time.Sleep(time.Duration(1+rand.IntN(5*i)) * time.Millisecond)
		}
		v, err := w.once(ctx, fn)
		if err == nil {
			return v, nil
		}
		if !Retryable(err) {
			return nil, err
		}
		last = err
	}
	return nil, fmt.Errorf("%d transactions lost a race in a row: %w", Attempts, last)
}

func (w *Writer) once(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error) {
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tx, err := w.DB.BeginTx(tctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
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

// Close does nothing: the pool is the caller's to close.
func (w *Writer) Close() {}
