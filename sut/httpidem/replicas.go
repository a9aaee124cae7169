package httpidem

import (
	"context"
	"database/sql"
	"net/http"
	"sync"
	"time"
)

// replicaState is what the replica mutants keep in the process: what a
// replica believes of keys when it should ask the shared store.
type replicaState struct {
	cacheMu sync.Mutex
	cache   map[string]bool // replica-local-cache: the keys this process has seen (flightKey)

	checkMu sync.Mutex // check-then-insert: the process's lock around the check and the insert
}

// checkThenInsertGap is the round trip of a remote store between the
// check-then-insert mutant's SELECT and its INSERT.
const checkThenInsertGap = 5 * time.Millisecond

// pollFor (t0, a shared store) waits, bounded by InFlightWait, for the
// original in flight on another replica: it reads the key's row until it
// is no longer in_progress. done with a's payload: its stored response
// answers; gone, unknown or done with another payload: again (a is
// evaluated afresh).
func (s *Server) pollFor(w http.ResponseWriter, r *http.Request, a *attempt, timeout *problem) (again bool, err error) {
	if s.waitHook != nil {
		s.waitHook(a.who, a.key)
	}
	deadline := time.Now().Add(s.wait)
	for time.Now().Before(deadline) {
		select {
		case <-r.Context().Done():
			return false, timeout
		case <-time.After(20 * time.Millisecond):
		}
		x, err := scanRow(s.st.rGet.QueryRowContext(r.Context(), a.caller, a.key))
		if err != nil {
			return false, err
		}
		switch {
		case x == nil || x.state == stateUnknown:
			return true, nil
		case x.state == stateInProgress:
			continue
		case x.fp != a.fp:
			return true, nil
		}
		writeStored(w, x.status, x.body, true)
		return false, nil
	}
	return false, timeout
}

// warmCache fills the replica-local-cache mutant's cache with every key
// the store holds (its other branches leave it nil).
func (s *Server) warmCache(ctx context.Context) {
	if s.mutant != MutantReplicaLocalCache {
		return
	}
	s.rs.cache = map[string]bool{}
	rows, err := s.st.rKeys.QueryContext(ctx)
	if err != nil {
		s.log.Warn("replica-local-cache: warming the cache", "err", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var caller, key string
		if rows.Scan(&caller, &key) == nil {
			s.rs.cache[caller+"\x00"+key] = true
		}
	}
}

// executeCached is the replica-local-cache mutant: a key this process has
// seen (since its start, or in the store at its start) goes the correct
// way; a key it has not seen is taken for a new one and reserved over
// whatever the store holds. One replica sees every key: correct. Of
// several, a retry on a replica that did not see the original executes it
// again.
func (s *Server) executeCached(w http.ResponseWriter, r *http.Request, a *attempt) error {
	k := a.flightKey()
	s.rs.cacheMu.Lock()
	if s.rs.cache[k] {
		s.rs.cacheMu.Unlock()
		return s.execute(w, r, a)
	}
	s.rs.cache[k] = true
	f, err := s.reserveOver(r.Context(), a)
	s.rs.cacheMu.Unlock()
	if err != nil {
		return err
	}
	return s.run(w, a, f)
}

// executeCheckThenInsert is the check-then-insert mutant: the key is
// looked up (one transaction), then reserved (another) with an insert the
// unique key does not refuse, under a lock of the process. On one replica
// the lock makes check and insert one step: correct. Of several,
// duplicates on two replicas both find the key absent and both execute.
func (s *Server) executeCheckThenInsert(w http.ResponseWriter, r *http.Request, a *attempt) error {
	now := s.clock()
	s.rs.checkMu.Lock()
	x, err := scanRow(s.st.rGet.QueryRowContext(r.Context(), a.caller, a.key))
	if err != nil {
		s.rs.checkMu.Unlock()
		return err
	}
	if x != nil && !x.expired(now) {
		s.rs.checkMu.Unlock()
		again, err := s.answerExisting(w, r, a, x, s.lookup(a.flightKey()))
		if again {
			return changing()
		}
		return err
	}
	time.Sleep(checkThenInsertGap)
	f, err := s.reserveOver(r.Context(), a)
	s.rs.checkMu.Unlock()
	if err != nil {
		return err
	}
	return s.run(w, a, f)
}

// reserveOver reserves a's key for a over any row the store holds (the
// replica mutants' insert).
func (s *Server) reserveOver(ctx context.Context, a *attempt) (*flight, error) {
	now := s.clock()
	a.payID, a.createdAt = newPaymentID(), now
	reqJSON := string(encode(a.req))
	k := a.flightKey()
	f := newFlight(a.fp)
	_, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		s.unregister(k, f)
		if _, err := tx.Stmt(s.st.upsertReserve).Exec(a.caller, a.key, stateInProgress, a.fp, a.payID, reqJSON,
			now.UnixNano(), nil, nil, nil); err != nil {
			return nil, err
		}
		s.register(k, f)
		return nil, nil
	})
	if err != nil {
		s.finish(k, f, 503, problemf(503, codeUnavailable, "the database could not commit; retry").body())
		return nil, err
	}
	return f, nil
}
