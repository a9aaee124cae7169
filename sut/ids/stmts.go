package ids

import (
	"context"
	"database/sql"
	"fmt"
)

// stmts are prepared once at Open, on the write connection (outside any
// transaction: preparing inside one would deadlock with one connection;
// ops use them through tx.Stmt) or on the read pool.
type stmts struct {
	getRecord, putRecord, complete, insertEvidence, setEvidenceOutcome *sql.Stmt
	getToken, useToken, insertToken                                    *sql.Stmt
	insertOutbox, outboxDispatching, outboxSent                        *sql.Stmt
	rGetRecord, rInProgress, rOutbox, rCommand, rEvidence              *sql.Stmt
}

func (st *stmts) all() []**sql.Stmt {
	return []**sql.Stmt{&st.getRecord, &st.putRecord, &st.complete, &st.insertEvidence, &st.setEvidenceOutcome,
		&st.getToken, &st.useToken, &st.insertToken, &st.insertOutbox, &st.outboxDispatching, &st.outboxSent,
		&st.rGetRecord, &st.rInProgress, &st.rOutbox, &st.rCommand, &st.rEvidence}
}

func (st *stmts) close() {
	for _, p := range st.all() {
		if *p != nil {
			(*p).Close()
		}
	}
}

const recordCols = `res_id, command_id, tenant_id, actor_id, command, args, fingerprint, match, status, http_status,
 outcome_ref, body, body_public, effects_before, effect_made, first_evidence, created_at, ttl_expires_at`

func (st *stmts) prepare(ctx context.Context, w, r *sql.DB) error {
	for _, p := range []struct {
		db  *sql.DB
		dst **sql.Stmt
		q   string
	}{
		{w, &st.getRecord, `SELECT ` + recordCols + ` FROM records WHERE scope = ? AND key = ?`},
		{w, &st.putRecord, `INSERT OR REPLACE INTO records(scope, key, res_id, command_id, tenant_id, actor_id, command, args,
 fingerprint, match, status, http_status, outcome_ref, body, body_public, effects_before, effect_made, first_evidence,
 created_at, updated_at, ttl_expires_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`},
		{w, &st.complete, `UPDATE records SET status = 'executed', http_status = 201, outcome_ref = ?, body = ?, body_public = ?,
 effect_id = ?, effect_made = 1, updated_at = ? WHERE scope = ? AND key = ? AND res_id = ? AND status = 'in_progress'`},
		{w, &st.insertEvidence, `INSERT INTO evidence(evidence_id, scope, key, decision, executed, command_id, original_command_id,
 outcome_ref, at, fp_stored, fp_received) VALUES(?,?,?,?,?,?,?,?,?,?,?)`},
		{w, &st.setEvidenceOutcome, `UPDATE evidence SET outcome_ref = ? WHERE seq = ?`},
		{w, &st.getToken, `SELECT tenant_id, command_id, key, expires_at, used_at FROM confirmations WHERE token_hash = ?`},
		{w, &st.useToken, `UPDATE confirmations SET used_at = ? WHERE token_hash = ?`},
		{w, &st.insertToken, `INSERT INTO confirmations(token_hash, tenant_id, actor_id, command_id, key, created_at, expires_at)
 VALUES(?,?,?,?,?,?,?)`},
		{w, &st.insertOutbox, `INSERT INTO outbox(scope, key, tenant_id, command_id, command, args, effects_before, state,
 created_at, updated_at) VALUES(?,?,?,?,?,?,?,'pending',?,?)`},
		{w, &st.outboxDispatching, `UPDATE outbox SET state = 'dispatching', updated_at = ? WHERE seq = ? AND state = 'pending'`},
		{w, &st.outboxSent, `UPDATE outbox SET state = 'sent', effect_id = ?, updated_at = ? WHERE seq = ?`},
		{r, &st.rGetRecord, `SELECT ` + recordCols + ` FROM records WHERE scope = ? AND key = ?`},
		{r, &st.rInProgress, `SELECT scope, key FROM records WHERE status = 'in_progress' ORDER BY created_at LIMIT 64`},
		{r, &st.rOutbox, `SELECT seq, scope, key, tenant_id, command_id, command, args, effects_before, state
 FROM outbox WHERE state <> 'sent' ORDER BY seq LIMIT 128`},
		{r, &st.rCommand, `SELECT command_id, tenant_id, key, status, outcome_ref, created_at, updated_at, ttl_expires_at
 FROM records WHERE command_id = ?1 AND (?2 = '' OR tenant_id = ?2) ORDER BY created_at DESC LIMIT 1`},
		{r, &st.rEvidence, `SELECT evidence_id, decision, executed, command_id, original_command_id, key, outcome_ref, at,
 fp_stored, fp_received FROM evidence WHERE scope = ? AND key = ? ORDER BY seq`},
	} {
		s, err := p.db.PrepareContext(ctx, p.q)
		if err != nil {
			return fmt.Errorf("prepare %.60q: %w", p.q, err)
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
