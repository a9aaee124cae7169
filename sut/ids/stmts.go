package ids

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// stmts are prepared once at Open, on the write connection (outside any
// transaction: preparing inside one would deadlock with one connection;
// ops use them through tx.Stmt) or on the read pool.
type stmts struct {
	getRecord, putRecord, complete, insertEvidence, setEvidenceOutcome *sql.Stmt
	getToken, useToken, insertToken                                    *sql.Stmt
	insertOutbox, claimOutbox, outboxDispatching, outboxSent           *sql.Stmt
	getRate, putRate, bumpRate                                         *sql.Stmt
	rGetRecord, rInProgress, rCommand, rEvidence, rKeys                *sql.Stmt
}

func (st *stmts) all() []**sql.Stmt {
	return []**sql.Stmt{&st.getRecord, &st.putRecord, &st.complete, &st.insertEvidence, &st.setEvidenceOutcome,
		&st.getToken, &st.useToken, &st.insertToken, &st.insertOutbox, &st.claimOutbox, &st.outboxDispatching, &st.outboxSent,
		&st.getRate, &st.putRate, &st.bumpRate, &st.rGetRecord, &st.rInProgress, &st.rCommand, &st.rEvidence, &st.rKeys}
}

func (st *stmts) close() {
	for _, p := range st.all() {
		if *p != nil {
			(*p).Close()
			*p = nil
		}
	}
}

const recordCols = `res_id, command_id, tenant_id, actor_id, command, args, fingerprint, match, status, http_status,
 outcome_ref, body, body_public, effects_before, effect_made, first_evidence, created_at, ttl_expires_at`

// prepare prepares every statement, in its PostgreSQL form (pgQueries,
// else ? as $n) when dialect is dialectPostgres. A statement with no
// form in the dialect (bumpRate on SQLite) is left nil.
func (st *stmts) prepare(ctx context.Context, w, r *sql.DB, dialect string) error {
	for _, p := range []struct {
		db   *sql.DB
		dst  **sql.Stmt
		name string
		q    string
	}{
		{w, &st.getRecord, "getRecord", `SELECT ` + recordCols + ` FROM records WHERE scope = ? AND key = ?`},
		{w, &st.putRecord, "putRecord", `INSERT OR REPLACE INTO records(scope, key, res_id, command_id, tenant_id, actor_id, command, args,
 fingerprint, match, status, http_status, outcome_ref, body, body_public, effects_before, effect_made, first_evidence,
 created_at, updated_at, ttl_expires_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`},
		{w, &st.complete, "complete", `UPDATE records SET status = 'executed', http_status = 201, outcome_ref = ?, body = ?, body_public = ?,
 effect_id = ?, effect_made = 1, updated_at = ? WHERE scope = ? AND key = ? AND res_id = ? AND status = 'in_progress'`},
		{w, &st.insertEvidence, "insertEvidence", `INSERT INTO evidence(evidence_id, scope, key, decision, executed, command_id, original_command_id,
 outcome_ref, at, fp_stored, fp_received) VALUES(?,?,?,?,?,?,?,?,?,?,?) RETURNING seq`},
		{w, &st.setEvidenceOutcome, "setEvidenceOutcome", `UPDATE evidence SET outcome_ref = ? WHERE seq = ?`},
		{w, &st.getToken, "getToken", `SELECT tenant_id, command_id, key, expires_at, used_at FROM confirmations WHERE token_hash = ?`},
		{w, &st.useToken, "useToken", `UPDATE confirmations SET used_at = ? WHERE token_hash = ?`},
		{w, &st.insertToken, "insertToken", `INSERT INTO confirmations(token_hash, tenant_id, actor_id, command_id, key, created_at, expires_at)
 VALUES(?,?,?,?,?,?,?)`},
		{w, &st.insertOutbox, "insertOutbox", `INSERT INTO outbox(scope, key, tenant_id, command_id, command, args, effects_before, state,
 created_at, updated_at) VALUES(?,?,?,?,?,?,?,'pending',?,?)`},
		// One process, one dispatcher: every row not sent is its own.
		{w, &st.claimOutbox, "claimOutbox", `SELECT seq, scope, key, tenant_id, command_id, command, args, effects_before, state
 FROM outbox WHERE state <> 'sent' ORDER BY seq LIMIT 128`},
		{w, &st.outboxDispatching, "outboxDispatching", `UPDATE outbox SET state = 'dispatching', updated_at = ?, owner = ?, lease_until = ?
 WHERE seq = ? AND state <> 'sent'`},
		{w, &st.outboxSent, "outboxSent", `UPDATE outbox SET state = 'sent', effect_id = ?, updated_at = ? WHERE seq = ?`},
		{w, &st.getRate, "getRate", `SELECT start, n FROM rate_windows WHERE scope = ? AND key = ?`},
		{w, &st.putRate, "putRate", `INSERT OR REPLACE INTO rate_windows(scope, key, start, n) VALUES(?,?,?,?)`},
		{w, &st.bumpRate, "bumpRate", ""},
		{r, &st.rGetRecord, "rGetRecord", `SELECT ` + recordCols + ` FROM records WHERE scope = ? AND key = ?`},
		{r, &st.rInProgress, "rInProgress", `SELECT scope, key, res_id FROM records WHERE status = 'in_progress' ORDER BY created_at LIMIT 64`},
		{r, &st.rCommand, "rCommand", `SELECT command_id, tenant_id, key, status, outcome_ref, created_at, updated_at, ttl_expires_at
 FROM records WHERE command_id = ?1 AND (?2 = '' OR tenant_id = ?2) ORDER BY created_at DESC LIMIT 1`},
		{r, &st.rEvidence, "rEvidence", `SELECT evidence_id, decision, executed, command_id, original_command_id, key, outcome_ref, at,
 fp_stored, fp_received FROM evidence WHERE scope = ? AND key = ? ORDER BY seq`},
		// The keys the store holds (the replica-local-cache mutant warms its cache with them).
		{r, &st.rKeys, "rKeys", `SELECT scope, key FROM records`},
	} {
		q := p.q
		if dialect == dialectPostgres {
			q = pgstore.DollarParams(q)
			if pq, ok := pgQueries[p.name]; ok {
				q = pq
			}
		}
		if q == "" {
			continue
		}
		s, err := p.db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare %.60q: %w", q, err)
		}
		*p.dst = s
	}
	return nil
}

// record is one row of records.
type record struct {
	scope, key                                   string
	resID, commandID, tenantID, actorID, command string
	args, fingerprint, match, status             string
	httpStatus                                   int
	outcomeRef                                   sql.NullString
	body, bodyPublic                             []byte
	effectsBefore, effectMade, firstEvidence     int64
	createdAt                                    int64
	ttlExpiresAt                                 sql.NullInt64
}

type scanner interface{ Scan(...any) error }

// scanRecord reads a row of recordCols; nil, nil when there is none.
func scanRecord(row scanner, scope, key string) (*record, error) {
	x := record{scope: scope, key: key}
	err := row.Scan(&x.resID, &x.commandID, &x.tenantID, &x.actorID, &x.command, &x.args, &x.fingerprint, &x.match, &x.status,
		&x.httpStatus, &x.outcomeRef, &x.body, &x.bodyPublic, &x.effectsBefore, &x.effectMade, &x.firstEvidence, &x.createdAt,
		&x.ttlExpiresAt)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &x, nil
}

// Record statuses (IDS §VIII.B); this server never fails nor compensates
// a command.
const (
	statusInProgress = "in_progress"
	statusExecuted   = "executed"
	statusRejected   = "rejected"
)

// live reports whether the record still counts at now: a terminal record
// past ttl_expires_at is treated as absent (IDS §VIII.C: the command may
// execute again); an in-progress record never expires (its execution is
// still under way).
func (x *record) live(now int64) bool {
	return x.status == statusInProgress || !x.ttlExpiresAt.Valid || x.ttlExpiresAt.Int64 > now
}
