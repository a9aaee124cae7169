package intent

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// The replica mutants: correct on one replica, wrong over several sharing
// a PostgreSQL store (Config.Store). Each keeps in the process what it
// should ask the store, or trusts a lock of the process where only the
// database's guarantees hold across processes.
const (
	MutantReplicaLocalCache = "replica-local-cache"
	MutantCheckThenInsert   = "check-then-insert"
)

// ReplicaMutants lists the replica mutants (not in Mutants: the one-replica
// mutants matrix leaves them out; idscheck chaos --replicas N kills them).
func ReplicaMutants() []Mutant {
	return []Mutant{
		{MutantReplicaLocalCache, "POST /intent consults a per-process cache of the Idempotency-Keys it has seen (warmed from the store at start) before the store: a key it has not seen is created without a lookup; a retry on another replica creates a second intent", "INTENT-7.2-idem-replay"},
		{MutantCheckThenInsert, "claim selects an intent, then claims it by id in another transaction, under a lock of the process: two replicas claim the same intent", "INTENT-7.3-atomic-claim"},
	}
}

// replicaState is what the replica mutants keep in the process.
type replicaState struct {
	cacheMu sync.Mutex
	cache   map[string]bool // replica-local-cache: API key + Idempotency-Key seen by this process

	checkMu sync.Mutex // check-then-insert: the process's lock around the claim's read and write
}

// checkThenInsertGap is the round trip of a remote store between the
// check-then-insert mutant's read and its write.
const checkThenInsertGap = 5 * time.Millisecond

// warmCache fills the replica-local-cache mutant's cache with every key
// the store holds (nothing for any other server).
func (s *Server) warmCache(ctx context.Context) error {
	if s.mutant != MutantReplicaLocalCache {
		return nil
	}
	s.rs.cache = map[string]bool{}
	rows, err := s.rdb.QueryContext(ctx, `SELECT api_key, key FROM idempotency`)
	if err != nil {
		return fmt.Errorf("replica-local-cache: warming the cache: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var apiKey, key string
		if err := rows.Scan(&apiKey, &key); err != nil {
			return err
		}
		s.rs.cache[apiKey+"\x00"+key] = true
	}
	return rows.Err()
}

// unseenKey is the replica-local-cache mutant's cache: for a key this
// process has seen it returns nil (the request goes the correct way); for
// one it has not, it records it and returns the unlock of the cache, held
// until the request's write is done, so that on one replica a concurrent
// duplicate finds the key seen and then the store's record.
func (s *Server) unseenKey(apiKey, idemKey string) (unlock func()) {
	k := apiKey + "\x00" + idemKey
	s.rs.cacheMu.Lock()
	if s.rs.cache[k] {
		s.rs.cacheMu.Unlock()
		return nil
	}
	s.rs.cache[k] = true
	return s.rs.cacheMu.Unlock
}
