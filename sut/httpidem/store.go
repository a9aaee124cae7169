package httpidem

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/idscheck/idscheck/sut/internal/pgstore"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// schema: idempotency holds one row per (caller, key): its state
// (in_progress: reserved, a request of this process executes it; done: a
// stored result, replayed until expires_at; unknown: the sink's outcome is
// not known yet, the next request with the key resolves it first), the
// fingerprint of the request that reserved it, the payment id drawn at the
// reservation (the sink call's command_id), the validated request and the
// reservation time (what a recovery needs to commit the payment), and the
// stored status and body. Times are Unix nanoseconds of the server's
// clock. payments holds every created payment and its document.
const schema = `
CREATE TABLE IF NOT EXISTS idempotency(
  caller TEXT NOT NULL,
  key TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('in_progress', 'done', 'unknown')),
  fingerprint TEXT NOT NULL,
  payment_id TEXT NOT NULL,
  request TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  status INTEGER,
  body BLOB,
  expires_at INTEGER,
  PRIMARY KEY(caller, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS idempotency_open ON idempotency(state) WHERE state <> 'done';
CREATE TABLE IF NOT EXISTS payments(
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  caller TEXT NOT NULL,
  idem_key TEXT,
  reference TEXT NOT NULL,
  body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS payments_reference ON payments(caller, reference, seq);
`

// dsn returns the modernc sqlite DSN of path: WAL, synchronous FULL (an
// acknowledged commit survives power loss), BEGIN IMMEDIATE for writes.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "synchronous(FULL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// States of a key.
const (
	stateInProgress = "in_progress"
	stateDone       = "done"
	stateUnknown    = "unknown"
)

// stmts are prepared once at Open, on the write connection (outside any
// transaction: ops use them through tx.Stmt) or on the read pool.
type stmts struct {
	get, insert, del, done, setState, restart, upsertDone, upsertReserve, insertPayment, purge *sql.Stmt
	rGet, rList, rListAll, rOpen, rKeys                                                        *sql.Stmt
}

func (st *stmts) all() []**sql.Stmt {
	return []**sql.Stmt{&st.get, &st.insert, &st.del, &st.done, &st.setState, &st.restart, &st.upsertDone,
		&st.upsertReserve, &st.insertPayment, &st.purge, &st.rGet, &st.rList, &st.rListAll, &st.rOpen, &st.rKeys}
}

func (st *stmts) close() {
	for _, p := range st.all() {
		if *p != nil {
			(*p).Close()
			*p = nil
		}
	}
}

const rowCols = `caller, key, state, fingerprint, payment_id, request, created_at, status, body, expires_at`

// prepare prepares every statement, in its PostgreSQL form (pgQueries,
// else ? as $n) when dialect is dialectPostgres.
func (st *stmts) prepare(ctx context.Context, w, r *sql.DB, dialect string) error {
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		name string
		q    string
	}{
		{w, &st.get, "get", `SELECT ` + rowCols + ` FROM idempotency WHERE caller = ? AND key = ?`},
		{w, &st.insert, "insert", `INSERT INTO idempotency(` + rowCols + `) VALUES(?,?,?,?,?,?,?,?,?,?)`},
		{w, &st.del, "del", `DELETE FROM idempotency WHERE caller = ? AND key = ? AND payment_id = ? AND state = ?`},
		{w, &st.done, "done", `UPDATE idempotency SET state = 'done', status = ?, body = ?, expires_at = ?
 WHERE caller = ? AND key = ? AND payment_id = ? AND state <> 'done'`},
		{w, &st.setState, "setState", `UPDATE idempotency SET state = ? WHERE caller = ? AND key = ? AND payment_id = ? AND state = ?`},
		{w, &st.restart, "restart", `UPDATE idempotency SET fingerprint = ?, payment_id = ?, request = ?, created_at = ?
 WHERE caller = ? AND key = ? AND payment_id = ? AND state = 'in_progress'`},
		// The no-reservation mutant's write: no reservation before, so
		// whoever commits last wins the row.
		{w, &st.upsertDone, "upsertDone", `INSERT OR REPLACE INTO idempotency(` + rowCols + `) VALUES(?,?,'done',?,?,?,?,?,?,?)`},
		// The replica mutants' reservation: over whatever row is there.
		{w, &st.upsertReserve, "upsertReserve", `INSERT OR REPLACE INTO idempotency(` + rowCols + `) VALUES(?,?,?,?,?,?,?,?,?,?)`},
		{w, &st.insertPayment, "insertPayment", `INSERT OR IGNORE INTO payments(id, caller, idem_key, reference, body) VALUES(?,?,?,?,?)`},
		{w, &st.purge, "purge", `DELETE FROM idempotency WHERE state = 'done' AND expires_at <= ?`},
		{r, &st.rGet, "rGet", `SELECT ` + rowCols + ` FROM idempotency WHERE caller = ? AND key = ?`},
		{r, &st.rList, "rList", `SELECT body FROM payments WHERE caller = ? AND reference = ? ORDER BY seq LIMIT 1000`},
		{r, &st.rListAll, "rListAll", `SELECT body FROM payments WHERE caller = ? ORDER BY seq LIMIT 1000`},
		{r, &st.rOpen, "rOpen", `SELECT ` + rowCols + ` FROM idempotency WHERE state <> 'done' ORDER BY created_at`},
		// The keys the store holds (the replica-local-cache mutant warms its cache with them).
		{r, &st.rKeys, "rKeys", `SELECT caller, key FROM idempotency`},
	} {
		q := p.q
		if dialect == dialectPostgres {
			q = pgstore.DollarParams(q)
			if pq, ok := pgQueries[p.name]; ok {
				q = pq
			}
		}
		s, err := p.db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %.60q: %w", p.q, err)
		}
		*p.dst = s
	}
	return nil
}

// row is one row of idempotency.
type row struct {
	caller, key, state, fp, paymentID string
	request                           paymentRequest
	createdAt                         int64 // Unix ns
	status                            int
	body                              []byte
	expiresAt                         int64 // Unix ns; 0 until done
}

type scanner interface{ Scan(...any) error }

// scanRow reads a row of rowCols; nil, nil when there is none.
func scanRow(sc scanner) (*row, error) {
	var x row
	var req string
	var status, expires sql.NullInt64
	var body []byte
	err := sc.Scan(&x.caller, &x.key, &x.state, &x.fp, &x.paymentID, &req, &x.createdAt, &status, &body, &expires)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(req), &x.request); err != nil {
		return nil, fmt.Errorf("stored request of %s: %w", x.key, err)
	}
	x.status, x.body, x.expiresAt = int(status.Int64), body, expires.Int64
	return &x, nil
}

// expired: a stored result past its expiry (only a done row expires).
func (x *row) expired(now time.Time) bool {
	return x.state == stateDone && x.expiresAt <= now.UnixNano()
}

// doc is the 201 body of the row's payment.
func (x *row) doc() []byte { return paymentDoc(x.paymentID, x.request, time.Unix(0, x.createdAt)) }
