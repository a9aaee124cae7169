package atp

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// replicaState is what the replica mutants keep in the process: what a
// replica believes of rows when it should ask the shared store.
type replicaState struct {
	cacheMu sync.Mutex
	cache   map[string]bool // replica-local-cache: the rows (rowKey) this process has seen executed

	checkMu sync.Mutex // check-then-insert: the process's lock around the check and the write
}

// checkThenInsertGap is the round trip of a remote store between the
// check-then-insert mutant's read and its write.
const checkThenInsertGap = 5 * time.Millisecond

// warmCache fills the replica-local-cache mutant's cache with every row
// the store holds executing or past it (its other branches leave it nil).
func (s *Server) warmCache(ctx context.Context) error {
	if s.mutant != MutantReplicaLocalCache {
		return nil
	}
	s.rs.cache = map[string]bool{}
	rows, err := s.st.rCharged.QueryContext(ctx)
	if err != nil {
		return fmt.Errorf("replica-local-cache: warming the cache: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var intentID, key string
		if err := rows.Scan(&intentID, &key); err != nil {
			return err
		}
		s.rs.cache[rowKey(intentID, key)] = true
	}
	return rows.Err()
}

// chargeable says the correct execute would charge x now (it is
// authorized and not expired) or has charged it (executing or later).
func chargeable(x *row, now time.Time) bool {
	if x == nil {
		return false
	}
	switch x.state {
	case stateAuthorized:
		return !now.After(time.Unix(0, x.expiresAt))
	case stateExecuting, stateExecuted, stateSettled, stateCompensated:
		return true
	}
	return false
}

// executeCached is the replica-local-cache mutant: a row this process has
// seen executed (since its start, or in the store at its start) goes the
// correct way; a row it has not seen is taken for one nobody executed: it
// is moved to executing when it is authorized and charged, whatever the
// store says of it. One replica sees every execute: correct. Of several,
// an execute retried on a replica that did not see the first one charges
// again. done: it answered.
func (s *Server) executeCached(ctx context.Context, w http.ResponseWriter, req *execRequest) (bool, error) {
	k := rowKey(req.intentID, req.key)
	s.rs.cacheMu.Lock()
	if s.rs.cache[k] {
		s.rs.cacheMu.Unlock()
		return false, nil
	}
	x, err := s.readRow(ctx, req.intentID, req.key)
	if err != nil || !chargeable(x, req.now) {
		s.rs.cacheMu.Unlock()
		return err != nil, err // the correct path answers a row it would not charge
	}
	s.rs.cache[k] = true
	err = s.reserveOver(ctx, x, req)
	s.rs.cacheMu.Unlock()
	if err != nil {
		return true, err
	}
	return true, s.chargeOwn(ctx, w, x, req.claim)
}

// executeCheckThenInsert is the check-then-insert mutant: the row is read
// (one transaction), then moved to executing (another) with a write its
// state does not refuse, under a lock of the process. On one replica the
// lock makes the check and the write one step: correct. Of several,
// duplicates on two replicas both find the row authorized and both charge.
// done: it answered.
func (s *Server) executeCheckThenInsert(ctx context.Context, w http.ResponseWriter, req *execRequest) (bool, error) {
	s.rs.checkMu.Lock()
	x, err := s.readRow(ctx, req.intentID, req.key)
	if err != nil || x == nil || x.state != stateAuthorized || req.now.After(time.Unix(0, x.expiresAt)) {
		s.rs.checkMu.Unlock()
		return err != nil, err // the correct path answers a row that is not to be charged
	}
	time.Sleep(checkThenInsertGap)
	err = s.reserveOver(ctx, x, req)
	s.rs.checkMu.Unlock()
	if err != nil {
		return true, err
	}
	return true, s.chargeOwn(ctx, w, x, req.claim)
}

// reserveOver is the replica mutants' reservation: an authorized row
// moves to executing (a row already past it stays where it is: the write
// does not refuse it), claimed by this replica.
func (s *Server) reserveOver(ctx context.Context, x *row, req *execRequest) error {
	at := fmtTime(req.now)
	_, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		if _, err := tx.Stmt(s.st.advance).Exec(stateExecuting, nil, at, x.intentID, x.key, stateAuthorized,
			rank(stateExecuting)); err != nil {
			return nil, err
		}
		return nil, s.lease(tx, req.claim, x)
	})
	if err == nil && x.state == stateAuthorized {
		x.state, x.updatedAt = stateExecuting, at
	}
	return err
}

// chargeOwn charges x with a payment intent of this request's own (no
// Idempotency-Key: the replica mutants believe their reservation is the
// only one) and answers the row as committed.
func (s *Server) chargeOwn(ctx context.Context, w http.ResponseWriter, x *row, claim string) error {
	stop := s.keep(claim, x.intentID, x.key)
	y, ok := s.charge(ctx, x, "", claim)
	stop()
	s.unlease(ctx, claim, x.intentID, x.key)
	if ok {
		evalFailpoint(FailpointAfterCommitBeforeReply)
		writeRow(w, y)
		return nil
	}
	// The rail did not answer: the row as it is now.
	if cur, err := s.readRow(ctx, x.intentID, x.key); err == nil && cur != nil {
		x = cur
	}
	writeRow(w, x)
	return nil
}
