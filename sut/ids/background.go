package ids

import (
	"database/sql"
	"encoding/json"
	"sync"
	"time"
)

// resumeLoop finishes the records left in_progress: by a request whose
// sink call did not answer, or by a previous process that crashed. It runs
// every s.interval, a bounded batch per pass. On a shared store it takes
// the records this replica reserved only (their owner): one another
// replica reserved is that replica's to execute, and to resume when it
// restarts.
func (s *Server) resumeLoop() {
	defer s.bg.Done()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.resumePass()
		}
	}
}

// resumeWorkers bounds the sink calls of one resumer pass.
const resumeWorkers = 8

func (s *Server) resumePass() {
	rows, err := s.st.rInProgress.QueryContext(s.ctx)
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Error("resumer: list", "err", err)
		}
		return
	}
	var keys [][3]string
	for rows.Next() {
		var scope, key, resID string
		if err := rows.Scan(&scope, &key, &resID); err == nil {
			keys = append(keys, [3]string{scope, key, resID})
		}
	}
	rows.Close()
	sem := make(chan struct{}, resumeWorkers)
	var wg sync.WaitGroup
	for _, k := range keys {
		rk := k[2]
		if !s.claim(rk) {
			continue // its request (or an earlier pass) is executing it
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { s.release(rk); <-sem; wg.Done() }()
			// Read it again now that it is ours: the request that held it
			// may have committed its outcome meanwhile.
			rec, err := scanRecord(s.st.rGetRecord.QueryRowContext(s.ctx, k[0], k[1]), k[0], k[1])
			if err != nil || rec == nil || rec.status != statusInProgress || rec.resID != rk {
				return
			}
			s.execute(s.ctx, jobOf(rec, true))
		}()
	}
	wg.Wait()
}

// dispatchLoop is the dispatcher of the outbox (S2) of this process:
// woken by every S2 commit, and every s.interval to retry. Replicas sharing
// a store each run one: a row is claimed (dispatching, with this replica as
// its owner and a lease) before any POST, and a claim skips rows another
// dispatcher holds.
func (s *Server) dispatchLoop() {
	defer s.bg.Done()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
		s.dispatchPass()
	}
}

type outboxRow struct {
	seq                                                   int64
	scope, key, tenantID, commandID, command, args, state string
	effectsBefore                                         int64
}

type sentRow struct {
	seq      int64
	effectID string
}

const outboxBatch = 128

// postWindow is how long after its claim a dispatcher may POST the rows
// it claimed (the server's clock); the claim lasts postWindow, a sink
// call and leaseMargin more (lease), and another replica takes a row over
// (reconciling first) only once it is over: a POST sent under the claim
// has arrived, or failed, by then.
const (
	postWindow  = 30 * time.Second
	leaseMargin = 2 * time.Second
)

func (s *Server) lease() time.Duration { return postWindow + s.cfg.SinkTimeout + leaseMargin }

// dispatchPass delivers the undelivered outbox rows, oldest first. Rows
// are claimed (marked dispatching, one commit) before any POST; a row
// found dispatching was maybe delivered already (its reply lost, or the
// process crashed after the POST): it is reconciled with GET
// {sink}/effects/{key} before any second POST. Delivered rows are marked
// sent in one commit at the end of the pass. The first failure ends the
// pass: the sink is likely down; the next tick retries.
func (s *Server) dispatchPass() {
	for s.ctx.Err() == nil {
		claimed := s.clock()
		v, err := s.w.Submit(s.ctx, func(tx *sql.Tx) (any, error) { return s.claimOutbox(tx, claimed) })
		if err != nil {
			return
		}
		rows := v.([]outboxRow)
		if len(rows) == 0 {
			return
		}
		// The last moment a POST may leave under this claim.
		postBy := claimed.Add(postWindow)
		var sent []sentRow
		failed := false
		for _, r := range rows {
			if s.ctx.Err() != nil || s.clock().After(postBy) {
				failed = true
				break
			}
			if r.state == "dispatching" && s.mutant != MutantOutboxDoubleDispatch {
				found, id, count, err := s.sink.get(s.ctx, r.key)
				if err != nil {
					failed = true
					break
				}
				if found && count > r.effectsBefore {
					sent = append(sent, sentRow{r.seq, id})
					continue
				}
			}
			id, err := s.sink.post(s.ctx, effectRequest{TenantID: r.tenantID, IdempotencyKey: r.key, CommandID: r.commandID,
				Command: r.command, Args: json.RawMessage(r.args)}, false)
			if err != nil {
				failed = true
				break
			}
			if evalFailpoint(FailpointAfterEffectBeforeCommit) == "error" {
				failed = true
				break
			}
			sent = append(sent, sentRow{r.seq, id})
		}
		if len(sent) > 0 {
			now := s.clock().UnixNano()
			if _, err := s.w.Submit(s.ctx, func(tx *sql.Tx) (any, error) {
				st := tx.Stmt(s.st.outboxSent)
				for _, x := range sent {
					if _, err := st.Exec(x.effectID, now, x.seq); err != nil {
						return nil, err
					}
				}
				return nil, nil
			}); err != nil {
				return
			}
		}
		if failed || len(rows) < outboxBatch {
			return
		}
	}
}

// claimOutbox claims a batch of outbox rows for this replica (one op):
// on PostgreSQL the rows pending, its own rows dispatching and rows whose
// lease is over, skipping those another dispatcher holds locked (FOR
// UPDATE SKIP LOCKED); on SQLite every row not sent. Each is marked
// dispatching with this replica as its owner until now+lease; the
// rows keep the state they had (dispatching: to reconcile).
func (s *Server) claimOutbox(tx *sql.Tx, now time.Time) ([]outboxRow, error) {
	var args []any
	if s.dialect == dialectPostgres {
		args = append(args, now.UnixNano(), s.cfg.ReplicaID)
	}
	rows, err := tx.Stmt(s.st.claimOutbox).Query(args...)
	if err != nil {
		return nil, err
	}
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.seq, &r.scope, &r.key, &r.tenantID, &r.commandID, &r.command, &r.args, &r.effectsBefore, &r.state); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	st := tx.Stmt(s.st.outboxDispatching)
	for _, r := range out {
		if _, err := st.Exec(now.UnixNano(), s.cfg.ReplicaID, now.Add(s.lease()).UnixNano(), r.seq); err != nil {
			return nil, err
		}
	}
	return out, nil
}
