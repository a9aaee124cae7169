package ids

import (
	"database/sql"
	"encoding/json"
	"sync"
	"time"
)

// resumeLoop finishes the records left in_progress: by a request whose
// sink call did not answer, or by a previous process that crashed. It runs
// every s.interval, a bounded batch per pass.
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
	var keys [][2]string
	for rows.Next() {
		var scope, key string
		if err := rows.Scan(&scope, &key); err == nil {
			keys = append(keys, [2]string{scope, key})
		}
	}
	rows.Close()
	sem := make(chan struct{}, resumeWorkers)
	var wg sync.WaitGroup
	for _, k := range keys {
		rk := runKey(k[0], k[1])
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
			if err != nil || rec == nil || rec.status != statusInProgress {
				return
			}
			s.execute(s.ctx, jobOf(rec, true))
		}()
	}
	wg.Wait()
}

// dispatchLoop is the one dispatcher of the outbox (S2): woken by every
// S2 commit, and every s.interval to retry.
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

// dispatchPass delivers the undelivered outbox rows, oldest first. Rows
// still pending are marked dispatching (one commit) before any POST; a row
// found dispatching was maybe delivered already (its reply lost, or the
// process crashed after the POST): it is reconciled with GET
// {sink}/effects/{key} before any second POST. Delivered rows are marked
// sent in one commit at the end of the pass. The first failure ends the
// pass: the sink is likely down; the next tick retries.
func (s *Server) dispatchPass() {
	for s.ctx.Err() == nil {
		rows, err := s.outboxRows()
		if err != nil || len(rows) == 0 {
			return
		}
		now := s.clock().UnixNano()
		_, err = s.w.Submit(s.ctx, func(tx *sql.Tx) (any, error) {
			st := tx.Stmt(s.st.outboxDispatching)
			for _, r := range rows {
				if r.state == "pending" {
					if _, err := st.Exec(now, r.seq); err != nil {
						return nil, err
					}
				}
			}
			return nil, nil
		})
		if err != nil {
			return
		}
		var sent []sentRow
		failed := false
		for _, r := range rows {
			if s.ctx.Err() != nil {
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

func (s *Server) outboxRows() ([]outboxRow, error) {
	rows, err := s.st.rOutbox.QueryContext(s.ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.seq, &r.scope, &r.key, &r.tenantID, &r.commandID, &r.command, &r.args, &r.effectsBefore, &r.state); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
