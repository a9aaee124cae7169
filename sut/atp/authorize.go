package atp

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"time"
)

// outcome is the answer an operation of the writer decided: a row (200,
// or 202 when it is executing) or an error answer. A refusal is an
// outcome, not an error of the operation: the operation then wrote
// nothing.
type outcome struct {
	row *row
	err *apiError
}

// lookupRow is the row of (intentID, key) on the write connection; under
// the key-not-bound mutant, the first row of key, whatever its intent.
func (s *Server) lookupRow(tx *sql.Tx, intentID, key string) (*row, error) {
	if s.mutant == MutantKeyNotBound {
		return scanRow(tx.Stmt(s.st.getRowByKey).QueryRow(key))
	}
	return scanRow(tx.Stmt(s.st.getRow).QueryRow(intentID, key))
}

// readRow is lookupRow on the read pool.
func (s *Server) readRow(ctx context.Context, intentID, key string) (*row, error) {
	if s.mutant == MutantKeyNotBound {
		return scanRow(s.st.rGetRowByKey.QueryRowContext(ctx, key))
	}
	return scanRow(s.st.rGetRow.QueryRowContext(ctx, intentID, key))
}

// advance moves the row from state from to state to (a higher rank) and
// records it; false when the row was not in from.
func (s *Server) advance(tx *sql.Tx, x *row, from, to string, receipt []byte, at, source string) (bool, error) {
	res, err := tx.Stmt(s.st.advance).Exec(to, nullBytes(receipt), at, x.intentID, x.key, from, rank(to))
	if err != nil {
		return false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	if err := history(tx, &s.st, x.intentID, x.key, to, at, source); err != nil {
		return false, err
	}
	x.state, x.updatedAt = to, at
	if receipt != nil {
		x.receipt = receipt
	}
	return true, nil
}

func expiredErr() *apiError {
	return errorf(410, codeIntentExpired, "the intent is past its expires_at")
}

// postAuthorize is POST /api/atp/authorize.
func (s *Server) postAuthorize(w http.ResponseWriter, r *http.Request) error {
	key, err := s.idempotencyKey(r)
	if err != nil {
		return err
	}
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	in, err := parseIntent(b)
	if err != nil {
		return err
	}
	ctx := context.WithoutCancel(r.Context())
	pub, err := s.agentKey(ctx, in.AgentID)
	if err != nil {
		return err
	}
	if pub == nil {
		return errorf(403, codeUnknownAgent, "agent %s has no registered key (PUT /api/atp/agents/%s)", in.AgentID, in.AgentID)
	}
	if !in.verify(pub) {
		return errorf(403, codeInvalidSignature, "the signature does not verify with agent %s's key over the JCS form of the intent", in.AgentID)
	}
	now := s.clock()
	v, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) { return s.authorize(tx, in, key, now) })
	if err != nil {
		return err
	}
	o := v.(outcome)
	if o.err != nil {
		return o.err
	}
	writeRaw(w, 200, o.row.doc())
	return nil
}

// authorize is one operation of the writer: the nonce, the row, the
// expiry, the precondition and the action_dedup_key are checked and
// written in one transaction.
func (s *Server) authorize(tx *sql.Tx, in *intent, key string, now time.Time) (outcome, error) {
	existing, err := s.lookupRow(tx, in.IntentID, key)
	if err != nil {
		return outcome{}, err
	}
	var first string
	err = tx.Stmt(s.st.getNonce).QueryRow(in.AgentID, in.Nonce).Scan(&first)
	consumed := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return outcome{}, err
	}
	if consumed && s.mutant == MutantNoncePerIntent {
		// The bug: a nonce is looked up with its intent, so another
		// intent may consume it again.
		var of string
		if err := tx.QueryRow(s.q(`SELECT intent_id FROM nonces WHERE agent_id = ? AND nonce = ?`), in.AgentID, in.Nonce).Scan(&of); err != nil {
			return outcome{}, err
		}
		consumed = of == in.IntentID
	}
	same := existing != nil && existing.intentID == in.IntentID && in.sameIntent(existing.body)
	if consumed && s.mutant != MutantNonceReusable {
		// A replay of the signed intent (§7, §9). Under the key it was
		// authorized with, reading "row" answers it as a retry (§2).
		if same && s.nonceReading == ReadingRow {
			return s.retryAuthorize(tx, existing, in, now)
		}
		if s.mutant == MutantNonceFirstConsumedNow {
			first = fmtTime(now)
		}
		e := errorf(409, codeNonceConsumed, "nonce %s of agent %s was consumed", in.Nonce, in.AgentID)
		e.FirstConsumedAt = first
		return outcome{err: e}, nil
	}
	if existing != nil {
		switch {
		case same:
			return s.retryAuthorize(tx, existing, in, now)
		case existing.intentID != in.IntentID:
			return outcome{row: existing}, nil // key-not-bound mutant: another intent's row
		}
		return outcome{err: errorf(409, codeKeyConflict, "intent %s holds another signed intent under this Idempotency-Key", in.IntentID)}, nil
	}
	if now.After(in.ExpiresAt) || (s.mutant == MutantExpiryMargin && now.Add(time.Minute).After(in.ExpiresAt)) {
		return outcome{err: expiredErr()}, nil
	}
	if in.Precondition != "" && s.mutant != MutantPreconditionIgnored {
		var one int
		err := tx.Stmt(s.st.settledOf).QueryRow(in.Precondition, in.AgentID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return outcome{err: errorf(409, codePreconditionFailed, "intent %s of agent %s is not settled", in.Precondition, in.AgentID)}, nil
		}
		if err != nil {
			return outcome{}, err
		}
	}
	if in.ActionDedupKey != "" && s.dedupWindow > 0 {
		var firstAt int64
		err := tx.Stmt(s.st.getDedup).QueryRow(in.AgentID, in.ActionDedupKey).Scan(&firstAt)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return outcome{}, err
		}
		inWindow := err == nil && now.UnixNano()-firstAt < int64(s.dedupWindow)
		if inWindow && s.mutant != MutantActionDedupIgnored {
			return outcome{err: errorf(409, codeActionDedupConflict, "action_dedup_key %q was authorized within the window", in.ActionDedupKey)}, nil
		}
		if !inWindow {
			if _, err := tx.Stmt(s.st.putDedup).Exec(in.AgentID, in.ActionDedupKey, now.UnixNano(), in.IntentID); err != nil {
				return outcome{}, err
			}
		}
	}
	at := fmtTime(now)
	insertNonce := s.st.insertNonce
	if s.mutant == MutantNonceReusable || s.mutant == MutantNoncePerIntent {
		insertNonce = s.st.insertNonceOrIgnore
	}
	if _, err := tx.Stmt(insertNonce).Exec(in.AgentID, in.Nonce, at, in.IntentID, key); err != nil {
		return outcome{}, err
	}
	x := &row{intentID: in.IntentID, key: key, state: stateAuthorized, body: in.compact, createdAt: at, updatedAt: at,
		agentID: in.AgentID, nonce: in.Nonce, amount: in.Amount, currency: in.Currency, payee: in.Payee,
		expiresAt: in.ExpiresAt.UnixNano()}
	if _, err := tx.Stmt(s.st.insertRow).Exec(x.intentID, x.key, x.state, string(x.body), nil, x.createdAt, x.updatedAt,
		x.agentID, x.nonce, x.amount, x.currency, x.payee, x.expiresAt); err != nil {
		return outcome{}, err
	}
	if _, err := tx.Stmt(s.st.history2).Exec(x.intentID, x.key, stateCreated, stateAuthorized, at, "authorize"); err != nil {
		return outcome{}, err
	}
	return outcome{row: x}, nil
}

// retryAuthorize answers a retry of the authorize of x: the row verbatim
// (§2), unless the intent expired before it was executed (§5: 410, the row
// moves to expired).
func (s *Server) retryAuthorize(tx *sql.Tx, x *row, in *intent, now time.Time) (outcome, error) {
	if x.state == stateAuthorized && now.After(time.Unix(0, x.expiresAt)) {
		if _, err := s.advance(tx, x, stateAuthorized, stateExpired, nil, fmtTime(now), "authorize"); err != nil {
			return outcome{}, err
		}
		return outcome{err: expiredErr()}, nil
	}
	if x.state == stateExpired {
		return outcome{err: expiredErr()}, nil
	}
	if s.mutant == MutantFreshRowOnRetry {
		// The bug: the retry writes the row again, as if it were new.
		body, err := canonicalBytes(in.compact)
		if err != nil {
			body = in.compact
		}
		at := fmtTime(now)
		if _, err := tx.Stmt(s.st.rewriteRow).Exec(string(body), at, at, x.intentID, x.key); err != nil {
			return outcome{}, err
		}
		x.body, x.createdAt, x.updatedAt = body, at, at
	}
	return outcome{row: x}, nil
}
