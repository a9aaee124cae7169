package a2a

import (
	"context"
	"database/sql"
	"encoding/json"
	"sync"
	"time"
)

// replicaState is what the replica mutants keep in the process: what a
// replica believes when it should ask the shared store.
type replicaState struct {
	cacheMu sync.Mutex
	cache   map[string]string // replica-local-cache: cache key → the result this process saw accepted

	checkMu sync.Mutex // check-then-insert: the process's lock around a lease's look-up and its write
}

// checkThenInsertGap is the round trip of a remote store between the
// check-then-insert mutant's look-up and its write.
const checkThenInsertGap = 5 * time.Millisecond

func cacheMapKey(sender, recipient, kind, key string) string {
	return sender + "\x00" + recipient + "\x00" + kind + "\x00" + key
}

// warmCache fills the replica-local-cache mutant's cache with every entry
// the store's cache holds (its other branches leave it nil).
func (s *Server) warmCache(ctx context.Context) {
	if s.mutant != MutantReplicaLocalCache {
		return
	}
	s.rs.cache = map[string]string{}
	rows, err := s.rdb.QueryContext(ctx, `SELECT sender, recipient, task_kind, idem_key, result FROM cache`)
	if err != nil {
		s.log.Warn("replica-local-cache: warming the cache", "err", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var sender, recipient, kind, key, result string
		if rows.Scan(&sender, &recipient, &kind, &key, &result) == nil {
			s.rs.cache[cacheMapKey(sender, recipient, kind, key)] = result
		}
	}
}

// localCached is the replica-local-cache mutant's look-up at enqueue: the
// result this process saw accepted under t's cache key (since its start,
// or in the store at its start), else none (sql.ErrNoRows), the store not
// asked. One replica sees every result: correct. Of several, a task whose
// cache key's result was posted to another replica is queued and executed
// again.
func (s *Server) localCached(t Task, key string) (string, error) {
	s.rs.cacheMu.Lock()
	defer s.rs.cacheMu.Unlock()
	if r, ok := s.rs.cache[cacheMapKey(t.Sender, t.Recipient, s.cacheKind(t), key)]; ok {
		return r, nil
	}
	return "", sql.ErrNoRows
}

// remember puts a result just accepted for e into the replica-local-cache
// mutant's cache (the first under a cache key stays, as in the store).
func (s *Server) remember(e *Entry) {
	if s.mutant != MutantReplicaLocalCache || e == nil || e.Result == nil || e.Result.Status != "completed" ||
		e.safety() != SafetyIdempotent || e.key() == "" {
		return
	}
	b, _ := json.Marshal(e.Result)
	k := cacheMapKey(e.Task.Sender, e.Task.Recipient, s.cacheKind(e.Task), e.key())
	s.rs.cacheMu.Lock()
	if _, ok := s.rs.cache[k]; !ok {
		s.rs.cache[k] = string(b)
	}
	s.rs.cacheMu.Unlock()
}

// leaseCheckThenWrite is the check-then-insert mutant's lease: the oldest
// queued task of recipient is looked up (one read), then its lease is
// written (another transaction) whether or not a lease took it meanwhile,
// under a lock of the process. On one replica the lock makes look-up and
// write one step: correct. Of several, two replicas leasing for one
// recipient at once both find the same task queued and both lease it:
// two receivers execute it, with no requeue between.
func (s *Server) leaseCheckThenWrite(ctx context.Context, recipient, inc string, now int64) (*Entry, error) {
	s.rs.checkMu.Lock()
	defer s.rs.checkMu.Unlock()
	var seq int64
	err := s.rdb.QueryRowContext(ctx, s.q(`SELECT seq FROM tasks WHERE recipient = ? AND state = 'queued' ORDER BY seq LIMIT 1`), recipient).Scan(&seq)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	time.Sleep(checkThenInsertGap)
	return submit(ctx, s, func(tx *sql.Tx) (*Entry, error) {
		return scanEntry(tx.QueryRow(s.q(`UPDATE tasks SET state = 'in_flight', lease_id = ?, leased_to = ?, leased_at_ms = ?, attempt = `+inc+`
 WHERE seq = ? AND state IN ('queued', 'in_flight') RETURNING `+entryCols), newID(), recipient, now, seq))
	})
}
