package atp

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/http"
	"time"
)

// execOutcome is what the reservation operation of an execute decided.
type execOutcome struct {
	outcome
	// reserved: the row moved authorized → executing in this operation:
	// this request charges it (it holds the row's claim).
	reserved bool
	// again is the double-charge-on-retry mutant's charge of a retry.
	again bool
}

// execRequest is one POST /api/atp/execute after its body was read.
type execRequest struct {
	intentID, key string
	now           time.Time
	claim         string // the claim the reservation takes (newClaim)
}

// postExecute is POST /api/atp/execute.
func (s *Server) postExecute(w http.ResponseWriter, r *http.Request) error {
	key, err := s.idempotencyKey(r)
	if err != nil {
		return err
	}
	b, err := readBody(w, r)
	if err != nil {
		return err
	}
	_, m, err := objectMembers(b)
	if err != nil {
		return errorf(400, codeInvalidRequest, `the body is {"intent_id": "…"}: %v`, err)
	}
	intentID, _, err := stringMember(m, "intent_id")
	if err != nil || !idChars.MatchString(intentID) {
		return errorf(400, codeInvalidRequest, "intent_id is required, a string of 1 to 128 characters from A-Z a-z 0-9 _ - . :")
	}
	// A client gone does not abort a charge under way.
	ctx := context.WithoutCancel(r.Context())
	req := &execRequest{intentID: intentID, key: key, now: s.clock(), claim: s.newClaim()}
	defer s.holding(req.claim, intentID, key)()
	switch s.mutant {
	case MutantNoReservation:
		if done, err := s.executeUnreserved(ctx, w, req); done || err != nil {
			return err
		}
	case MutantReplicaLocalCache:
		if done, err := s.executeCached(ctx, w, req); done || err != nil {
			return err
		}
	case MutantCheckThenInsert:
		if done, err := s.executeCheckThenInsert(ctx, w, req); done || err != nil {
			return err
		}
	}
	v, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) { return s.reserve(tx, req) })
	if err != nil {
		// Whether the reservation landed is unknown: if it did, its claim
		// is let go now (when the store answers) so that a sweep resolves
		// the row, rather than when it lapses.
		s.unlease(ctx, req.claim, req.intentID, req.key)
		return err
	}
	o := v.(execOutcome)
	if o.err != nil {
		return o.err
	}
	if !o.reserved {
		if o.again {
			s.chargeAgain(ctx, o.row)
		}
		writeRow(w, o.row)
		return nil
	}
	stop := s.keep(req.claim, o.row.intentID, o.row.key)
	x, ok := s.charge(ctx, o.row, createKey(o.row), req.claim)
	stop()
	s.unlease(ctx, req.claim, o.row.intentID, o.row.key)
	if !ok {
		// The rail did not answer: the row stays executing until the
		// rail's callback or the sweep resolves it (§6). Answer the row as
		// it is now.
		cur, err := s.readRow(ctx, o.row.intentID, o.row.key)
		if err != nil || cur == nil {
			cur = o.row
		}
		writeRow(w, cur)
		return nil
	}
	evalFailpoint(FailpointAfterCommitBeforeReply)
	writeRow(w, x)
	return nil
}

// writeRow answers a row: 202 while it is executing, else 200.
func writeRow(w http.ResponseWriter, x *row) {
	status := 200
	if x.state == stateExecuting {
		status = 202
	}
	writeRaw(w, status, x.doc())
}

// reserve is the operation of the writer that decides an execute: an
// authorized row moves to executing (exactly one request wins it), any
// other answers its row.
func (s *Server) reserve(tx *sql.Tx, req *execRequest) (execOutcome, error) {
	x, err := s.lookupRow(tx, req.intentID, req.key)
	if err != nil {
		return execOutcome{}, err
	}
	if x == nil || x.state == stateCreated {
		return execOutcome{outcome: outcome{err: errorf(404, codeNotAuthorized,
			"no authorized transaction for intent %s under this Idempotency-Key", req.intentID)}}, nil
	}
	at := fmtTime(req.now)
	switch x.state {
	case stateAuthorized:
		if req.now.After(time.Unix(0, x.expiresAt)) && s.mutant != MutantExpiredExecutable {
			if _, err := s.advance(tx, x, stateAuthorized, stateExpired, nil, at, "execute"); err != nil {
				return execOutcome{}, err
			}
			return execOutcome{outcome: outcome{err: expiredErr()}}, nil
		}
		var receipt []byte
		if s.mutant == MutantReceiptBeforeSettlement {
			// The bug: a settlement receipt before anything was charged.
			if receipt, err = s.sign(settlementBody(x, "pending", req.now)); err != nil {
				return execOutcome{}, err
			}
		}
		if ok, err := s.advance(tx, x, stateAuthorized, stateExecuting, receipt, at, "execute"); err != nil {
			return execOutcome{}, err
		} else if !ok {
			return execOutcome{outcome: outcome{row: x}}, nil // not reached: the row was read in this operation
		}
		if err := s.lease(tx, req.claim, x); err != nil {
			return execOutcome{}, err
		}
		return execOutcome{outcome: outcome{row: x}, reserved: true}, nil
	case stateExpired:
		return execOutcome{outcome: outcome{err: expiredErr()}}, nil
	}
	// executing, executed, settled, compensated: the row, never a second
	// charge (§2).
	return execOutcome{outcome: outcome{row: x}, again: s.mutant == MutantDoubleChargeOnRetry}, nil
}

// charge charges the executing row x at the rail: it creates the payment
// intent (Idempotency-Key idem), commits its id in the row, confirms it,
// and commits the outcome. It returns the row as committed, or false when
// the rail's answer is unknown (the row stays executing).
func (s *Server) charge(ctx context.Context, x *row, idem, claim string) (*row, bool) {
	pi, err := s.rail.create(ctx, x, idem)
	if err != nil {
		s.log.Debug("rail create", "intent_id", x.intentID, "err", err)
		return nil, false
	}
	if err := s.setPI(ctx, x, pi.ID); err != nil {
		s.log.Error("commit payment intent", "intent_id", x.intentID, "err", err)
		return nil, false
	}
	res, err := s.rail.confirm(ctx, pi.ID)
	if err != nil {
		s.log.Debug("rail confirm", "intent_id", x.intentID, "pi", pi.ID, "err", err)
		if s.mutant == MutantGuessOnRailLoss {
			// The bug: no answer is taken for a refusal.
			y, err := s.finish(ctx, x, stateCompensated, "rail_unavailable", "", "execute", claim)
			return y, err == nil
		}
		return nil, false
	}
	if res.ID == "" {
		res.ID = pi.ID
	}
	return s.resolve(ctx, x, res, "execute", claim)
}

// setPI commits the id of x's payment intent, before it is confirmed (the
// first one stays: a retried creation finds the same payment intent).
func (s *Server) setPI(ctx context.Context, x *row, pi string) error {
	_, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		_, err := tx.Stmt(s.st.setPI).Exec(pi, x.intentID, x.key)
		return nil, err
	})
	if err == nil && !x.railPI.Valid {
		x.railPI = sql.NullString{String: pi, Valid: true}
	}
	return err
}

// newClaim names one claim of this replica: "ReplicaID/" and 16 random
// hex digits (the owner column). Its holder alone renews it or lets it
// go; the replica takes back every claim of its name when it restarts.
func (s *Server) newClaim() string {
	var b [8]byte
	rand.Read(b[:])
	return s.replica + "/" + hex.EncodeToString(b[:])
}

// sweepClaimMark marks the claims of a sweep: "ReplicaID/sweep-" and 16
// random hex digits. A sweep may cancel the payment intent of a row it
// holds (refunding a charge that won the race): while one holds a row, a
// callback does not resolve it (see finish).
const sweepClaimMark = "/sweep-"

// newSweepClaim names one claim of this replica's sweep.
func (s *Server) newSweepClaim() string {
	var b [8]byte
	rand.Read(b[:])
	return s.replica + sweepClaimMark + hex.EncodeToString(b[:])
}

// lease claims the row x (claim) for s.leaseFor: no sweep, of any
// replica, takes it meanwhile.
func (s *Server) lease(tx *sql.Tx, claim string, x *row) error {
	_, err := tx.Stmt(s.st.lease).Exec(claim, time.Now().Add(s.leaseFor).UnixNano(), x.intentID, x.key)
	return err
}

// keep renews claim on a row every third of s.leaseFor until stop is
// called: a charge slower than a claim keeps it, a replica that died lets
// it lapse.
func (s *Server) keep(claim, intentID, key string) (stop func()) {
	ctx, cancel := context.WithCancel(s.ctx)
	go func() {
		t := time.NewTicker(s.leaseFor / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
					return tx.Stmt(s.st.renew).Exec(time.Now().Add(s.leaseFor).UnixNano(), intentID, key, claim)
				}); err != nil {
					s.log.Warn("renew the claim on a row", "intent_id", intentID, "err", err)
				}
			}
		}
	}()
	return cancel
}

// liveClaim is a claim of this process on a row.
type liveClaim struct{ claim, intentID, key string }

// holding notes that this process acts on the row (intentID, key) under
// claim until release: see Server.live.
func (s *Server) holding(claim, intentID, key string) (release func()) {
	c := liveClaim{claim, intentID, key}
	s.live.Store(c, struct{}{})
	return func() { s.live.Delete(c) }
}

// renewLive renews, in tx, every claim this process holds on a row.
func (s *Server) renewLive(tx *sql.Tx, until int64) error {
	var err error
	s.live.Range(func(k, _ any) bool {
		c := k.(liveClaim)
		_, err = tx.Stmt(s.st.renew).Exec(until, c.intentID, c.key, c.claim)
		return err == nil
	})
	return err
}

// unlease lets go of claim on a row, if the row is still under it (best
// effort: a claim not let go lapses).
func (s *Server) unlease(ctx context.Context, claim, intentID, key string) {
	if _, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		return tx.Stmt(s.st.unlease).Exec(intentID, key, claim)
	}); err != nil {
		s.log.Warn("let go of a row", "intent_id", intentID, "err", err)
	}
}

// chargeAgain is the double-charge-on-retry mutant: a fresh payment intent,
// confirmed, for a row that was charged already (or is being charged).
func (s *Server) chargeAgain(ctx context.Context, x *row) {
	pi, err := s.rail.create(ctx, x, "")
	if err == nil {
		s.rail.confirm(ctx, pi.ID)
	}
}

// executeUnreserved is the no-reservation mutant's execute: the row is read
// on the read pool, then charged, with no atomic authorized → executing
// move between the two. done: it answered.
func (s *Server) executeUnreserved(ctx context.Context, w http.ResponseWriter, req *execRequest) (bool, error) {
	x, err := s.readRow(ctx, req.intentID, req.key)
	if err != nil {
		return true, err
	}
	if x == nil || x.state != stateAuthorized || req.now.After(time.Unix(0, x.expiresAt)) {
		return false, nil // the correct path answers it
	}
	racyWindow(ctx, rowKey(x.intentID, x.key))
	at := fmtTime(req.now)
	if _, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		return s.advance(tx, x, stateAuthorized, stateExecuting, nil, at, "execute")
	}); err != nil {
		return true, err
	}
	x.state, x.updatedAt = stateExecuting, at
	y, ok := s.charge(ctx, x, "", "")
	if !ok {
		y = x
	}
	writeRow(w, y)
	return true, nil
}

// getIntent is GET /api/atp/intents/{intent_id} with the Idempotency-Key
// header: how an agent polls (§6).
func (s *Server) getIntent(w http.ResponseWriter, r *http.Request) error {
	key, err := s.idempotencyKey(r)
	if err != nil {
		return err
	}
	id := r.URL.Path[len(pathIntents):]
	if !idChars.MatchString(id) {
		return errorf(404, codeNotFound, "no transaction of intent %q under this Idempotency-Key", id)
	}
	x, err := s.readRow(r.Context(), id, key)
	if err != nil {
		return err
	}
	if x == nil {
		return errorf(404, codeNotFound, "no transaction of intent %s under this Idempotency-Key", id)
	}
	writeRaw(w, 200, x.doc())
	return nil
}
