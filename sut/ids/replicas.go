package ids

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// replicaState is what the replica mutants keep in the process: what a
// replica believes of keys when it should ask the shared store.
type replicaState struct {
	cacheMu sync.Mutex
	cache   map[string]bool // replica-local-cache: the keys (runKey) this process has seen

	checkMu sync.Mutex // check-then-insert: the process's lock around the check and the insert
}

// checkThenInsertGap is the round trip of a remote store between the
// check-then-insert mutant's lookup and its insert.
const checkThenInsertGap = 5 * time.Millisecond

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
		var scope, key string
		if rows.Scan(&scope, &key) == nil {
			s.rs.cache[runKey(scope, key)] = true
		}
	}
}

// decideCached is the replica-local-cache mutant: a key this process has
// seen (since its start, or in the store at its start) is decided the
// correct way; a key it has not seen is taken for a new one and reserved
// over whatever the store holds. One replica sees every key: correct. Of
// several, a retry on a replica that did not see the original executes it
// again.
func (s *Server) decideCached(ctx context.Context, d *delivery) (any, error) {
	k := runKey(d.scope, d.key)
	s.rs.cacheMu.Lock()
	if s.rs.cache[k] || d.clientKey {
		s.rs.cacheMu.Unlock()
		return s.decideNow(ctx, d)
	}
	s.rs.cache[k] = true
	d.blind = true
	v, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) { return s.decide(tx, d) })
	s.rs.cacheMu.Unlock()
	return v, err
}

// decideCheckThenInsert is the check-then-insert mutant: the key is looked
// up (one query), then reserved (another transaction) with an insert the
// primary key does not refuse, under a lock of the process. On one replica
// the lock makes the check and the insert one step: correct. Of several,
// duplicates on two replicas both find the key absent and both execute.
func (s *Server) decideCheckThenInsert(ctx context.Context, d *delivery) (any, error) {
	if d.clientKey {
		return s.decideNow(ctx, d)
	}
	s.rs.checkMu.Lock()
	defer s.rs.checkMu.Unlock()
	rec, err := scanRecord(s.st.rGetRecord.QueryRowContext(ctx, d.scope, d.key), d.scope, d.key)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.live(d.now.UnixNano()) {
		return s.decideNow(ctx, d)
	}
	time.Sleep(checkThenInsertGap)
	d.blind, d.over = true, rec
	return s.w.Submit(ctx, func(tx *sql.Tx) (any, error) { return s.decide(tx, d) })
}
