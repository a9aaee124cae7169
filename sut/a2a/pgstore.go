package a2a

import (
	"context"
	"time"

	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// pgSchema is schema on PostgreSQL, where several replicas share the
// store. The database holds every guarantee the replicas rely on: a task
// id is the UNIQUE id (two replicas storing one enqueue: one commits, the
// other's rerun finds the task), a cache key is the cache's primary key
// (the first completed result under it is the one replayed), a lease takes
// its row FOR UPDATE SKIP LOCKED (two replicas never lease one task), and
// every other write is a SERIALIZABLE transaction whose conditions are
// read again when it reran (a stale lease is requeued once, whichever
// replicas' schedulers saw it). leased_by names the replica that wrote the
// lease (its connections' application_name): a record only, for no
// replica resolves leases at start (an in-flight task stays in flight
// until the retry gate or an operator queues it again, whichever replica
// leased it).
const pgSchema = `
CREATE TABLE IF NOT EXISTS tasks(
  seq BIGSERIAL PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  sender TEXT NOT NULL,
  recipient TEXT NOT NULL,
  task_kind TEXT NOT NULL,
  safety TEXT NOT NULL,
  idem_key TEXT,
  task TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('queued','in_flight','result_pending','resolved')),
  lease_id TEXT,
  leased_to TEXT,
  leased_at_ms BIGINT,
  attempt INTEGER NOT NULL DEFAULT 0,
  accepted_risk INTEGER NOT NULL DEFAULT 0,
  result TEXT,
  leased_by TEXT
);
CREATE INDEX IF NOT EXISTS tasks_queued ON tasks(recipient, seq) WHERE state = 'queued';
CREATE INDEX IF NOT EXISTS tasks_in_flight ON tasks(leased_at_ms, seq) WHERE state = 'in_flight';
CREATE INDEX IF NOT EXISTS tasks_pending ON tasks(sender, seq) WHERE state = 'result_pending';
CREATE TABLE IF NOT EXISTS cache(
  sender TEXT NOT NULL,
  recipient TEXT NOT NULL,
  task_kind TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  result TEXT NOT NULL,
  task_id TEXT NOT NULL,
  PRIMARY KEY(sender, recipient, task_kind, idem_key)
);
CREATE TABLE IF NOT EXISTS audit(
  seq BIGSERIAL PRIMARY KEY,
  action TEXT NOT NULL,
  task_id TEXT,
  row TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_task ON audit(task_id, seq);
CREATE INDEX IF NOT EXISTS audit_action ON audit(action, seq)
`

// openPostgres opens the shared store at s.cfg.Store: the schema, one
// pool for writes and reads.
func (s *Server) openPostgres(ctx context.Context) error {
	db, err := pgstore.Open(ctx, s.cfg.Store, s.cfg.ReplicaID, pgSchema)
	if err != nil {
		return err
	}
	s.pg, s.wdb, s.rdb = db, db, db
	s.w = &pgstore.Writer{DB: db}
	return nil
}

// q is query in the store's dialect: SQLite's ? parameters as $1, $2, …
// on PostgreSQL.
func (s *Server) q(query string) string {
	if s.pg != nil {
		return pgstore.DollarParams(query)
	}
	return query
}

// leasePG is the lease on PostgreSQL: one statement in its own READ
// COMMITTED transaction. The oldest queued task of the recipient is taken
// FOR UPDATE SKIP LOCKED, so a replica leasing at the same moment takes
// the next one (or none), never the same; the outer state condition is
// read again on the row as locked.
func (s *Server) leasePG(ctx context.Context, where, inc, leaseID, recipient string, now int64) (*Entry, error) {
	q := s.q(`UPDATE tasks SET state = 'in_flight', lease_id = ?, leased_to = ?, leased_at_ms = ?, attempt = ` + inc + `,
 leased_by = current_setting('application_name')
 WHERE seq = (SELECT seq FROM tasks WHERE recipient = ? AND ` + where + ` ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
 AND ` + where + `
 RETURNING ` + entryCols)
	var last error
	for i := range pgstore.Attempts {
		if i > 0 && ctx.Err() != nil {
			break
		}
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		e, err := scanEntry(s.pg.QueryRowContext(tctx, q, leaseID, recipient, now, recipient))
		cancel()
		if err == nil || !pgstore.Retryable(err) {
			return e, err
		}
		last = err
	}
	return nil, last
}
