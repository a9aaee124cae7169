package atp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// resolve commits what the rail says of x's payment intent pi: succeeded
// → settled; declined or canceled → compensated (nothing was charged);
// refunded → compensated (charged and refunded). Any other status leaves
// the row executing (false).
func (s *Server) resolve(ctx context.Context, x *row, pi railPI, source, claim string) (*row, bool) {
	switch pi.Status {
	case railSucceeded, railDeclined, railCanceled, railRefunded:
	default:
		return nil, false
	}
	if evalFailpoint(FailpointAfterChargeBeforeCommit) == "error" {
		return nil, false
	}
	var y *row
	var err error
	switch pi.Status {
	case railSucceeded:
		y, err = s.finish(ctx, x, stateSettled, "", pi.ID, source, claim)
	case railRefunded:
		y, err = s.finish(ctx, x, stateCompensated, railRefunded, pi.ID, source, claim)
	default:
		y, err = s.finish(ctx, x, stateCompensated, pi.Status, "", source, claim)
	}
	if err != nil {
		s.log.Error("commit outcome", "intent_id", x.intentID, "err", err)
		return nil, false
	}
	return y, true
}

// finish moves the open row x to settled (the payment intent pi charged
// it) or compensated (reason; pi names a refunded charge, else ""), with
// its receipt, issued once: when the row was resolved meanwhile (by the
// request, the callback or the sweep), the stored row is kept and
// returned.
//
// Only the holder of the row's claim resolves it (claim: an execute's or a
// sweep's), and a resolution without a claim (a callback's, which read the
// rail's answer back) only a row no sweep holds, live or lapsed: when
// another took the row over (a claim lapses when its holder is cut from
// the store or starved), the open row is returned unchanged and its holder
// resolves it. So whatever the timing, a sweep that canceled the payment
// intent, refunding a charge that won the race, is never overtaken by the
// settlement of the charge it refunded.
func (s *Server) finish(ctx context.Context, x *row, to, reason, pi, source, claim string) (*row, error) {
	now := s.clock()
	var receipt []byte
	var err error
	switch {
	case to == stateSettled:
		receipt, err = s.sign(settlementBody(x, pi, now))
	case s.mutant != MutantCompensationUnsigned:
		receipt, err = s.sign(compensationBody(x, reason, pi, now))
	}
	if err != nil {
		return nil, err
	}
	at := fmtTime(now)
	v, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		cur, err := scanRow(tx.Stmt(s.st.getRow).QueryRow(x.intentID, x.key))
		if err != nil {
			return nil, err
		}
		if cur == nil {
			return nil, fmt.Errorf("atp: the row of intent %s is gone", x.intentID)
		}
		if !cur.open() {
			return cur, nil
		}
		var owner string
		var until int64
		if err := tx.Stmt(s.st.getClaim).QueryRow(x.intentID, x.key).Scan(&owner, &until); err != nil {
			return nil, err
		}
		if (claim != "" && owner != claim) || (claim == "" && until != 0 && strings.Contains(owner, sweepClaimMark)) {
			return cur, nil // another holds the row: it resolves it
		}
		if to == stateSettled {
			// executed: the rail charged; settled: the receipt is issued.
			// One operation: the row is never seen executed.
			if cur.state == stateExecuting {
				if _, err := s.advance(tx, cur, stateExecuting, stateExecuted, nil, at, source); err != nil {
					return nil, err
				}
			}
		}
		if _, err := s.advance(tx, cur, cur.state, to, receipt, at, source); err != nil {
			return nil, err
		}
		return cur, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*row), nil
}

func (s *Server) sweepLoop() {
	defer s.bg.Done()
	s.sweep(s.ctx)
	close(s.swept)
	t := time.NewTicker(s.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.sweep(s.ctx)
		}
	}
}

// ReconcileNow runs one reconciliation sweep and returns when it is done:
// the error says which rows it could not resolve (the rail did not
// answer). Under the no-reconciliation mutant it does nothing.
func (s *Server) ReconcileNow(ctx context.Context) error {
	if s.mutant == MutantNoReconciliation {
		return nil
	}
	return s.sweep(ctx)
}

// sweepWorkers bounds the rail calls of one sweep.
const sweepWorkers = 4

// sweep reconciles the open rows against the rail (§6): it claims, in
// the store, at most 256 that no one holds (an execute charging them, or
// the sweep of another replica), reconciles each, and lets go of them.
func (s *Server) sweep(ctx context.Context) error {
	s.sweepMu.Lock()
	defer s.sweepMu.Unlock()
	now, claim := time.Now(), s.newSweepClaim()
	v, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		// This process's own charges and reconciliations keep their rows,
		// however late their renewals: only another's lapsed claim is
		// taken over.
		if err := s.renewLive(tx, now.Add(s.leaseFor).UnixNano()); err != nil {
			return nil, err
		}
		rows, err := tx.Stmt(s.st.claim).Query(claim, now.Add(s.leaseFor).UnixNano(), now.UnixNano())
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var keys [][2]string
		for rows.Next() {
			var intentID, key string
			if err := rows.Scan(&intentID, &key); err != nil {
				return nil, err
			}
			keys = append(keys, [2]string{intentID, key})
		}
		return keys, rows.Err()
	})
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("sweep: claim", "err", err)
		}
		return err
	}
	keys := v.([][2]string)
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, sweepWorkers)
	var wg sync.WaitGroup
	for _, k := range keys {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			defer s.unlease(context.WithoutCancel(ctx), claim, k[0], k[1])
			// Read it again now that it is ours: its request may have
			// resolved it meanwhile.
			x, err := scanRow(s.st.rGetRow.QueryRowContext(ctx, k[0], k[1]))
			if err == nil && x != nil && x.open() {
				release := s.holding(claim, k[0], k[1])
				stop := s.keep(claim, k[0], k[1])
				err = s.reconcileRow(ctx, x, claim)
				stop()
				release()
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("intent %s: %w", k[0], err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// reconcileRow resolves the open row x against the rail's payment intent,
// its idempotent reference (§6). With no payment intent id committed, the
// creation may have happened with its answer lost: it is created again
// under the same Idempotency-Key, which finds it. A payment intent that
// was never confirmed is canceled (a confirm racing it then charges
// nothing, or a charge that won is refunded) and the row compensated; the
// server does not confirm for the agent what it did not see confirmed.
func (s *Server) reconcileRow(ctx context.Context, x *row, claim string) error {
	var pi railPI
	var err error
	if !x.railPI.Valid {
		if pi, err = s.rail.create(ctx, x, createKey(x)); err != nil {
			return err
		}
		if err := s.setPI(ctx, x, pi.ID); err != nil {
			return err
		}
	} else if pi, err = s.rail.get(ctx, x.railPI.String); err != nil {
		return err
	}
	id := x.railPI.String
	if pi.Status == railRequiresConfirmation {
		if s.mutant == MutantStateRegression {
			// The bug: nothing charged, so the row "goes back" to authorized.
			_, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
				_, err := tx.Stmt(s.st.regress).Exec(fmtTime(s.clock()), x.intentID, x.key)
				return nil, err
			})
			return err
		}
		if pi, err = s.rail.cancel(ctx, id); err != nil {
			return err
		}
	}
	if pi.ID == "" {
		pi.ID = id
	}
	if _, ok := s.resolve(ctx, x, pi, "sweep", claim); !ok {
		return fmt.Errorf("%w: payment intent %s is %q", errRail, id, pi.Status)
	}
	return nil
}

// railEvent is a callback of the rail.
type railEvent struct {
	Type          string `json:"type"`
	PaymentIntent struct {
		ID string `json:"id"`
	} `json:"payment_intent"`
}

type eventAnswer struct {
	Received bool   `json:"received"`
	Resolved bool   `json:"resolved"`
	State    string `json:"state,omitempty"`
}

// postRailEvent is POST /api/atp/rail/events, the rail's callback. It is a
// notice, not a proof (nothing authenticates it): the payment intent is
// read back from the rail (GET) before the row is resolved.
func (s *Server) postRailEvent(w http.ResponseWriter, r *http.Request) error {
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	var ev railEvent
	if err := json.Unmarshal(b, &ev); err != nil || ev.PaymentIntent.ID == "" {
		return errorf(400, codeInvalidRequest, `the body is {"type": "…", "payment_intent": {"id": "…", …}}`)
	}
	ctx := context.WithoutCancel(r.Context())
	var intentID, key string
	err = s.st.rByPI.QueryRowContext(ctx, ev.PaymentIntent.ID).Scan(&intentID, &key)
	if errors.Is(err, sql.ErrNoRows) {
		writeJSON(w, 200, eventAnswer{Received: true})
		return nil
	}
	if err != nil {
		return err
	}
	x, err := scanRow(s.st.rGetRow.QueryRowContext(ctx, intentID, key))
	if err != nil {
		return err
	}
	if x == nil || !x.open() {
		ans := eventAnswer{Received: true}
		if x != nil {
			ans.State = x.state
		}
		writeJSON(w, 200, ans)
		return nil
	}
	if s.mutant == MutantCallbackTrusted {
		// The bug: the callback is taken at its word.
		var said struct {
			PaymentIntent railPI `json:"payment_intent"`
		}
		if json.Unmarshal(b, &said) == nil {
			if y, ok := s.resolve(ctx, x, said.PaymentIntent, "callback", ""); ok && !y.open() {
				writeJSON(w, 200, eventAnswer{Received: true, Resolved: true, State: y.state})
				return nil
			}
		}
	}
	pi, err := s.rail.get(ctx, ev.PaymentIntent.ID)
	if err != nil || pi.IntentID != x.intentID {
		// Not confirmed by the rail: the sweep will ask again.
		writeJSON(w, 202, eventAnswer{Received: true, State: x.state})
		return nil
	}
	if pi.ID == "" {
		pi.ID = ev.PaymentIntent.ID
	}
	y, ok := s.resolve(ctx, x, pi, "callback", "")
	if !ok || y.open() {
		// Not resolved: the rail's answer was not final, or a sweep holds
		// the row: it resolves it.
		writeJSON(w, 202, eventAnswer{Received: true, State: x.state})
		return nil
	}
	writeJSON(w, 200, eventAnswer{Received: true, Resolved: true, State: y.state})
	return nil
}
