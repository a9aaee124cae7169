package atp

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/idscheck/idscheck/sut/internal/pgstore"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// schema: transactions is the table of §2 (intent_id, idempotency_key,
// state, body, receipt, created_at, updated_at, UNIQUE(intent_id,
// idempotency_key)) with what the server needs besides: the agent, the
// nonce and the money of the intent, its expiry (Unix nanoseconds of the
// server's clock), and rail_pi, the id of the rail's payment intent (the
// idempotent reference of §6), committed before the payment intent is
// confirmed. created_at and updated_at are the RFC 3339 strings the row
// document carries. history records every state a row entered.
//
// owner and lease_until are the claim on an open row: who is charging or
// reconciling it ("ReplicaID/" and a token of that charge or sweep pass),
// until when (Unix nanoseconds of real time; 0: nobody). An execute that moves a row to
// executing claims it; a sweep claims only rows whose claim lapsed, in the
// store (several replicas share it), never in a process's memory.
//
// nonces holds every consumed nonce of an agent and when it was first
// consumed (it never changes); action_dedup the first authorize of each
// action_dedup_key of an agent (§7); agents the agents' public keys;
// site_keys every receipt key the site signed with (kid → public key), so
// that a receipt stored under an earlier key still verifies.
const schema = `
CREATE TABLE IF NOT EXISTS transactions(
  intent_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  state TEXT NOT NULL,
  body TEXT NOT NULL,
  receipt TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  nonce TEXT NOT NULL,
  amount INTEGER NOT NULL,
  currency TEXT NOT NULL,
  payee TEXT NOT NULL,
  expires_at INTEGER NOT NULL,
  rail_pi TEXT,
  owner TEXT NOT NULL DEFAULT '',
  lease_until INTEGER NOT NULL DEFAULT 0,
  UNIQUE(intent_id, idempotency_key)
);
CREATE INDEX IF NOT EXISTS transactions_open ON transactions(intent_id) WHERE state IN ('executing', 'executed');
CREATE INDEX IF NOT EXISTS transactions_rail_pi ON transactions(rail_pi) WHERE rail_pi IS NOT NULL;
CREATE TABLE IF NOT EXISTS history(
  seq INTEGER PRIMARY KEY,
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
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS action_dedup(
  agent_id TEXT NOT NULL,
  key TEXT NOT NULL,
  first_at INTEGER NOT NULL,
  intent_id TEXT NOT NULL,
  PRIMARY KEY(agent_id, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS agents(
  agent_id TEXT PRIMARY KEY,
  x TEXT NOT NULL,
  created_at TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS site_keys(
  kid TEXT PRIMARY KEY,
  x TEXT NOT NULL UNIQUE,
  created_at TEXT NOT NULL
);
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

// States of a row (§1, §4) and their rank: a row only moves to a higher
// rank. Settled, compensated and expired share the last one: none follows
// another.
const (
	stateCreated     = "created"
	stateAuthorized  = "authorized"
	stateExecuting   = "executing"
	stateExecuted    = "executed"
	stateSettled     = "settled"
	stateCompensated = "compensated"
	stateExpired     = "expired"
)

func rank(state string) int {
	switch state {
	case stateCreated:
		return 0
	case stateAuthorized:
		return 1
	case stateExecuting:
		return 2
	case stateExecuted:
		return 3
	}
	return 4
}

// rankSQL is rank(state) in SQL: the guard of every state write.
const rankSQL = `(CASE state WHEN 'created' THEN 0 WHEN 'authorized' THEN 1 WHEN 'executing' THEN 2 WHEN 'executed' THEN 3 ELSE 4 END)`

// stmts are prepared once at Open, on the write connection (outside any
// transaction: preparing inside one would deadlock with one connection;
// ops use them through tx.Stmt) or on the read pool.
type stmts struct {
	getRow, getRowByKey, insertRow, rewriteRow, advance, regress, setPI *sql.Stmt
	history1, history2                                                  *sql.Stmt
	getNonce, insertNonce, insertNonceOrIgnore                          *sql.Stmt
	getDedup, putDedup, settledOf                                       *sql.Stmt
	getAgent, insertAgent                                               *sql.Stmt
	lease, renew, unlease, unleaseOwn, claim, getClaim                  *sql.Stmt
	rGetRow, rGetRowByKey, rByPI, rAgent, rCharged                      *sql.Stmt
}

func (st *stmts) all() []**sql.Stmt {
	return []**sql.Stmt{&st.getRow, &st.getRowByKey, &st.insertRow, &st.rewriteRow, &st.advance, &st.regress, &st.setPI,
		&st.history1, &st.history2, &st.getNonce, &st.insertNonce, &st.insertNonceOrIgnore, &st.getDedup, &st.putDedup,
		&st.settledOf, &st.getAgent, &st.insertAgent, &st.lease, &st.renew, &st.unlease, &st.unleaseOwn, &st.claim, &st.getClaim, &st.rGetRow,
		&st.rGetRowByKey, &st.rByPI, &st.rAgent, &st.rCharged}
}

func (st *stmts) close() {
	for _, p := range st.all() {
		if *p != nil {
			(*p).Close()
			*p = nil
		}
	}
}

const rowCols = `intent_id, idempotency_key, state, body, receipt, created_at, updated_at, agent_id, nonce, amount, currency,
 payee, expires_at, rail_pi`

// Dialects of the store.
const (
	dialectSQLite   = "sqlite"
	dialectPostgres = "postgres"
)

// q is an ad hoc statement of SQLite's form in the store's dialect.
func (s *Server) q(query string) string {
	if s.dialect == dialectPostgres {
		return pgstore.DollarParams(query)
	}
	return query
}

// prepare prepares every statement, in its PostgreSQL form (pgQueries,
// else ? as $n) when dialect is dialectPostgres.
func (st *stmts) prepare(ctx context.Context, w, r *sql.DB, dialect string) error {
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		name string
		q    string
	}{
		{w, &st.getRow, "getRow", `SELECT ` + rowCols + ` FROM transactions WHERE intent_id = ? AND idempotency_key = ?`},
		{w, &st.getRowByKey, "getRowByKey", `SELECT ` + rowCols + ` FROM transactions WHERE idempotency_key = ? ORDER BY rowid LIMIT 1`},
		{w, &st.insertRow, "insertRow", `INSERT INTO transactions(` + rowCols + `) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,NULL)`},
		{w, &st.rewriteRow, "rewriteRow", `UPDATE transactions SET body = ?, created_at = ?, updated_at = ? WHERE intent_id = ? AND idempotency_key = ?`},
		// The only state write of the correct server: from one named state
		// to a state of a higher rank, never back. The receipt is set only
		// by a write that carries one.
		{w, &st.advance, "advance", `UPDATE transactions SET state = ?1, receipt = COALESCE(?2, receipt), updated_at = ?3
 WHERE intent_id = ?4 AND idempotency_key = ?5 AND state = ?6 AND ` + rankSQL + ` < ?7`},
		// The state-regression mutant's write (no rank check).
		{w, &st.regress, "regress", `UPDATE transactions SET state = 'authorized', updated_at = ? WHERE intent_id = ? AND idempotency_key = ?
 AND state = 'executing'`},
		{w, &st.setPI, "setPI", `UPDATE transactions SET rail_pi = ? WHERE intent_id = ? AND idempotency_key = ? AND rail_pi IS NULL`},
		{w, &st.history1, "history1", `INSERT INTO history(intent_id, idempotency_key, state, at, source) VALUES(?,?,?,?,?)`},
		{w, &st.history2, "history2", `INSERT INTO history(intent_id, idempotency_key, state, at, source) VALUES(?1,?2,?3,?5,?6),(?1,?2,?4,?5,?6)`},
		{w, &st.getNonce, "getNonce", `SELECT first_consumed_at FROM nonces WHERE agent_id = ? AND nonce = ?`},
		{w, &st.insertNonce, "insertNonce", `INSERT INTO nonces(agent_id, nonce, first_consumed_at, intent_id, idempotency_key) VALUES(?,?,?,?,?)`},
		{w, &st.insertNonceOrIgnore, "insertNonceOrIgnore", `INSERT OR IGNORE INTO nonces(agent_id, nonce, first_consumed_at, intent_id, idempotency_key)
 VALUES(?,?,?,?,?)`},
		{w, &st.getDedup, "getDedup", `SELECT first_at FROM action_dedup WHERE agent_id = ? AND key = ?`},
		{w, &st.putDedup, "putDedup", `INSERT OR REPLACE INTO action_dedup(agent_id, key, first_at, intent_id) VALUES(?,?,?,?)`},
		{w, &st.settledOf, "settledOf", `SELECT 1 FROM transactions WHERE intent_id = ? AND agent_id = ? AND state = 'settled' LIMIT 1`},
		{w, &st.getAgent, "getAgent", `SELECT x FROM agents WHERE agent_id = ?`},
		{w, &st.insertAgent, "insertAgent", `INSERT INTO agents(agent_id, x, created_at) VALUES(?,?,?)`},
		{r, &st.rGetRow, "rGetRow", `SELECT ` + rowCols + ` FROM transactions WHERE intent_id = ? AND idempotency_key = ?`},
		{r, &st.rGetRowByKey, "rGetRowByKey", `SELECT ` + rowCols + ` FROM transactions WHERE idempotency_key = ? ORDER BY rowid LIMIT 1`},
		{r, &st.rByPI, "rByPI", `SELECT intent_id, idempotency_key FROM transactions WHERE rail_pi = ?`},
		{r, &st.rAgent, "rAgent", `SELECT x FROM agents WHERE agent_id = ?`},
		// The claim an execute takes on the row it moved to executing.
		{w, &st.lease, "lease", `UPDATE transactions SET owner = ?, lease_until = ? WHERE intent_id = ? AND idempotency_key = ?`},
		// Its renewal while the charge goes on (only while the row is
		// still under that claim).
		{w, &st.renew, "renew", `UPDATE transactions SET lease_until = ? WHERE intent_id = ? AND idempotency_key = ? AND owner = ?
 AND lease_until > 0`},
		// Its end (only of that claim: another may have taken the row over
		// since).
		{w, &st.unlease, "unlease", `UPDATE transactions SET lease_until = 0 WHERE intent_id = ? AND idempotency_key = ? AND owner = ?`},
		// At Open: the claims this replica held when it stopped (a replica
		// resolves its own rows left in flight, never another's).
		{w, &st.unleaseOwn, "unleaseOwn", `UPDATE transactions SET lease_until = 0 WHERE substr(owner, 1, ?) = ? AND lease_until > 0`},
		// The sweep's claim: open rows nobody holds (or whose claim
		// lapsed), at most 256.
		{w, &st.claim, "claim", `UPDATE transactions SET owner = ?, lease_until = ? WHERE rowid IN (SELECT rowid FROM transactions
 WHERE state IN ('executing', 'executed') AND lease_until < ? ORDER BY intent_id LIMIT 256) RETURNING intent_id, idempotency_key`},
		// Who holds the row, read where its outcome is committed.
		{w, &st.getClaim, "getClaim", `SELECT owner, lease_until FROM transactions WHERE intent_id = ? AND idempotency_key = ?`},
		// The rows charged or being charged (the replica-local-cache
		// mutant warms its cache with them).
		{r, &st.rCharged, "rCharged", `SELECT intent_id, idempotency_key FROM transactions
 WHERE state IN ('executing', 'executed', 'settled', 'compensated')`},
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

// row is one row of transactions.
type row struct {
	intentID, key, state string
	body                 []byte // the signed intent as authorized (compact JSON)
	receipt              []byte // nil: none
	createdAt, updatedAt string
	agentID, nonce       string
	amount               int64
	currency, payee      string
	expiresAt            int64 // Unix ns
	railPI               sql.NullString
}

type scanner interface{ Scan(...any) error }

// scanRow reads a row of rowCols; nil, nil when there is none.
func scanRow(sc scanner) (*row, error) {
	var x row
	var body string
	var receipt sql.NullString
	err := sc.Scan(&x.intentID, &x.key, &x.state, &body, &receipt, &x.createdAt, &x.updatedAt, &x.agentID, &x.nonce,
		&x.amount, &x.currency, &x.payee, &x.expiresAt, &x.railPI)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	x.body = []byte(body)
	if receipt.Valid {
		x.receipt = []byte(receipt.String)
	}
	return &x, nil
}

func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// txDoc is the transaction document every answer that carries a row
// carries (the binding's "The transaction").
type txDoc struct {
	IntentID       string          `json:"intent_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	State          string          `json:"state"`
	Body           json.RawMessage `json:"body"`
	Receipt        json.RawMessage `json:"receipt"`
	CreatedAt      string          `json:"created_at"`
	UpdatedAt      string          `json:"updated_at"`
}

// doc renders the row; the same stored row renders the same bytes.
func (x *row) doc() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(txDoc{x.intentID, x.key, x.state, x.body, x.receipt, x.createdAt, x.updatedAt}); err != nil {
		// Only stored, valid JSON reaches here.
		return []byte(`{"error":"internal_error"}`)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

func (x *row) open() bool { return x.state == stateExecuting || x.state == stateExecuted }

// history records that a row entered state (source: who moved it).
func history(tx *sql.Tx, st *stmts, intentID, key, state, at, source string) error {
	_, err := tx.Stmt(st.history1).Exec(intentID, key, state, at, source)
	return err
}
