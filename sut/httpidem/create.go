package httpidem

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// attempt is one POST /v1/payments with a valid or refused body.
type attempt struct {
	who    string // the authenticated caller id: the payment's owner, the sink's tenant
	caller string // the scope of the key in the store (who; "" under key-not-scoped)
	key    string
	fp     string
	req    paymentRequest

	payID     string    // drawn at the reservation
	createdAt time.Time // the reservation's time: the payment's created_at
}

// flightKey names (caller, key) in s.flights.
func (a *attempt) flightKey() string { return a.caller + "\x00" + a.key }

// sinkKey is the idempotency_key of the attempt's sink call: the caller id
// and the key.
func (a *attempt) sinkKey() string { return a.who + ":" + a.key }

// postPayment answers POST /v1/payments.
func (s *Server) postPayment(w http.ResponseWriter, r *http.Request, who string) error {
	var key string
	var hasKey bool
	if s.variant != VariantT0 {
		k, present, p := s.headerKey(r)
		if p != nil {
			return p
		}
		key, hasKey = k, present
		if !present && s.variant == VariantIETF && s.mutant != MutantMissingKeyExecutes {
			return problemf(400, codeKeyMissing, `POST %s requires an Idempotency-Key header, an sf-string such as "8e03978e-40d5-43e8-bc93-6894a57f9324"`, pathPayments)
		}
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	req, ref, perr := parsePayment(body, s.variant == VariantT0)
	if s.variant == VariantT0 && ref != "" {
		key, hasKey = ref, true
	}
	a := &attempt{who: who, caller: who, key: key, fp: fingerprint(body), req: req}
	if s.mutant == MutantKeyNotScoped {
		a.caller = ""
	}
	if s.mutant == MutantBodyDedup && hasKey {
		a.key = "body:" + a.fp
	}
	switch {
	case perr != nil && hasKey && s.storesRejections():
		return s.storeRejection(w, r, a, perr)
	case perr != nil:
		return perr
	case !hasKey:
		return s.executeWithoutRow(w, r, a, "")
	case s.mutant == MutantNoReservation:
		return s.executeUnreserved(w, r, a)
	case s.mutant == MutantReplicaLocalCache:
		return s.executeCached(w, r, a)
	case s.mutant == MutantCheckThenInsert:
		return s.executeCheckThenInsert(w, r, a)
	}
	return s.execute(w, r, a)
}

// storesRejections: a validation error under a key is stored and replayed
// (ietf: "success or an error"). t0 ("it never consumes the key") and
// stripe ("we don't save the idempotent result") do not store it.
func (s *Server) storesRejections() bool {
	switch s.variant {
	case VariantT0:
		return s.mutant == MutantRejectionConsumesKey
	case VariantStripe:
		return s.mutant == MutantStripeValidationSaved
	}
	return true
}

// storesFailures: a processor failure (502) is stored and replayed (ietf:
// "success or an error"; stripe: "including 500 errors"); t0: a failure is
// no acceptance, the retry is evaluated afresh.
func (s *Server) storesFailures() bool {
	switch s.variant {
	case VariantT0:
		return false
	case VariantStripe:
		return s.mutant != MutantStripe500NotSaved
	}
	return true
}

func (s *Server) mismatch() *problem {
	if s.variant == VariantStripe {
		return problemf(400, codeKeyMismatch, "this idempotency key was used with other parameters; use a new key for a new request")
	}
	return problemf(422, codeKeyMismatch, "this idempotency key was used with another request payload; use a new key for a new request")
}

func (s *Server) inUse() *problem {
	return problemf(409, codeKeyInUse, "the original request with this idempotency key is still being processed; retry later")
}

func (s *Server) expiresAt(now time.Time) int64 {
	ttl := s.ttl
	if s.mutant == MutantExpiresEarly {
		ttl /= 10
	}
	return now.Add(ttl).UnixNano()
}

// storeRejection stores a validation error under a's key, unless the key
// already has a row: that row answers.
func (s *Server) storeRejection(w http.ResponseWriter, r *http.Request, a *attempt, p *problem) error {
	body, now := p.body(), s.clock()
	v, err := s.w.Submit(r.Context(), func(tx *sql.Tx) (any, error) {
		x, err := scanRow(tx.Stmt(s.st.get).QueryRow(a.caller, a.key))
		if err != nil {
			return nil, err
		}
		if x != nil && x.expired(now) {
			if _, err := tx.Stmt(s.st.del).Exec(a.caller, a.key, x.paymentID, stateDone); err != nil {
				return nil, err
			}
			x = nil
		}
		if x != nil {
			return reservation{existing: x, flight: s.lookup(a.flightKey())}, nil
		}
		_, err = tx.Stmt(s.st.insert).Exec(a.caller, a.key, stateDone, a.fp, "", "{}", now.UnixNano(), p.Status, body,
			s.expiresAt(now))
		return reservation{}, err
	})
	if err != nil {
		return err
	}
	res := v.(reservation)
	if res.existing == nil {
		writeProblem(w, p)
		return nil
	}
	again, err := s.answerExisting(w, r, a, res.existing, res.flight)
	if again {
		return changing()
	}
	return err
}

// changing: a wait ended on an original that turned out to execute
// another payload, again and again.
func changing() *problem {
	p := problemf(503, codeInFlightTimeout, "the requests with this idempotency key keep changing; retry")
	p.retryAfter = "1"
	return p
}

// reservation is the outcome of reserving a key.
type reservation struct {
	fresh     bool    // reserved: execute
	resolving *row    // an unknown row, now in_progress: resolve it against the sink first
	existing  *row    // the key's row answers
	flight    *flight // fresh, resolving: this request's; existing in_progress: the original's
}

// reserve is the atomic check-and-set of a key: absent (or expired), the
// key is reserved for a (in_progress, with a fresh payment id); unknown,
// it is taken over to be resolved; otherwise its row is returned.
func (s *Server) reserve(ctx context.Context, a *attempt) (reservation, error) {
	now := s.clock()
	a.payID, a.createdAt = newPaymentID(), now
	reqJSON := string(encode(a.req))
	k := a.flightKey()
	f := newFlight(a.fp)
	v, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		s.unregister(k, f) // a rerun (PostgreSQL): the last run's registration did not commit
		x, err := scanRow(tx.Stmt(s.st.get).QueryRow(a.caller, a.key))
		if err != nil {
			return nil, err
		}
		if x != nil && x.expired(now) {
			if _, err := tx.Stmt(s.st.del).Exec(a.caller, a.key, x.paymentID, stateDone); err != nil {
				return nil, err
			}
			x = nil
		}
		switch {
		case x == nil:
			if _, err := tx.Stmt(s.st.insert).Exec(a.caller, a.key, stateInProgress, a.fp, a.payID, reqJSON,
				now.UnixNano(), nil, nil, nil); err != nil {
				return nil, err
			}
			s.register(k, f)
			return reservation{fresh: true, flight: f}, nil
		case x.state == stateUnknown:
			if _, err := tx.Stmt(s.st.setState).Exec(stateInProgress, a.caller, a.key, x.paymentID, stateUnknown); err != nil {
				return nil, err
			}
			x.state = stateInProgress
			f.fp = x.fp
			s.register(k, f)
			return reservation{resolving: x, flight: f}, nil
		case x.state == stateInProgress:
			return reservation{existing: x, flight: s.lookup(k)}, nil
		}
		return reservation{existing: x}, nil
	})
	if err != nil {
		// The op may have registered f before its batch failed to commit.
		s.finish(k, f, 503, problemf(503, codeUnavailable, "the database could not commit; retry").body())
		return reservation{}, err
	}
	return v.(reservation), nil
}

// execute runs a keyed, valid request: reserve, then execute, resolve or
// answer from the key's row.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, a *attempt) error {
	for range 3 {
		res, err := s.reserve(r.Context(), a)
		if err != nil {
			return err
		}
		switch {
		case res.fresh:
			return s.run(w, a, res.flight)
		case res.resolving != nil:
			return s.resolveThenRun(w, a, res.resolving, res.flight)
		}
		again, err := s.answerExisting(w, r, a, res.existing, res.flight)
		if !again {
			return err
		}
	}
	return changing()
}

// answerExisting answers a from the key's row x. again: the original a
// waited for ended with another payload; evaluate a again.
func (s *Server) answerExisting(w http.ResponseWriter, r *http.Request, a *attempt, x *row, f *flight) (again bool, err error) {
	switch x.state {
	case stateDone:
		if a.fp != x.fp && s.mutant != MutantFingerprintIgnored &&
			!(s.mutant == MutantRejectionConsumesKey && s.variant == VariantT0 && x.status == 400) {
			return false, s.mismatch()
		}
		s.replay(w, r, a, x)
		return false, nil
	case stateInProgress:
		if a.fp != x.fp {
			return false, s.mismatch()
		}
		if s.mutant == MutantInFlightExecuted {
			return false, s.executeWithoutRow(w, r, a, a.sinkKey())
		}
		if s.variant != VariantT0 || s.mutant == MutantConflict409InT0 {
			return false, s.inUse()
		}
		return s.waitFor(w, r, a, f)
	}
	// unknown (only the no-reservation mutant reads one): being resolved.
	return false, s.inUse()
}

// replay answers the stored result of x, byte for byte.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, a *attempt, x *row) {
	body := x.body
	if x.status == 201 {
		switch s.mutant {
		case MutantReplayFreshID:
			body = paymentDoc(newPaymentID(), x.request, time.Unix(0, x.createdAt))
		case MutantEffectOnReplay:
			s.sink.post(context.WithoutCancel(r.Context()), s.effectRequest(a.who, a.sinkKey(), x.paymentID, x.request))
		}
	}
	writeStored(w, x.status, body, true)
}

// waitFor (t0) waits, bounded, for the original in flight f and answers
// its response.
func (s *Server) waitFor(w http.ResponseWriter, r *http.Request, a *attempt, f *flight) (again bool, err error) {
	timeout := problemf(503, codeInFlightTimeout, "the original request with this key did not complete within %v; retry", s.wait)
	timeout.retryAfter = "1"
	if f == nil && s.dialect == dialectPostgres {
		// The original runs on another replica: its outcome is in the store.
		return s.pollFor(w, r, a, timeout)
	}
	if f == nil {
		return false, timeout
	}
	if s.waitHook != nil {
		s.waitHook(a.who, a.key)
	}
	t := time.NewTimer(s.wait)
	defer t.Stop()
	select {
	case <-f.done:
	case <-t.C:
		return false, timeout
	case <-r.Context().Done():
		return false, timeout
	}
	if f.result().fp != a.fp {
		return true, nil
	}
	res := f.result()
	writeStored(w, res.status, res.body, true)
	return false, nil
}

// run executes a reserved request: the sink's effect, then the commit of
// the payment and of the key's result. It goes on when the client leaves.
func (s *Server) run(w http.ResponseWriter, a *attempt, f *flight) error {
	ctx := context.Background()
	o := s.effect(ctx, a.who, a.sinkKey(), a.payID, a.req)
	if o == outcomeEffect {
		evalFailpoint(FailpointAfterEffectBeforeCommit)
	}
	return s.conclude(ctx, w, a, f, o)
}

// conclude commits the outcome of a's sink call and answers it.
func (s *Server) conclude(ctx context.Context, w http.ResponseWriter, a *attempt, f *flight, o outcome) error {
	k := a.flightKey()
	if o == outcomeEffect {
		body := paymentDoc(a.payID, a.req, a.createdAt)
		if err := s.complete(ctx, a.caller, a.key, a.payID, a.who, a.req.Reference, 201, body, true); err != nil {
			// The payment happened and is not recorded: the next request
			// with the key resolves it against the sink.
			s.setState(ctx, a.caller, a.key, a.payID, stateInProgress, stateUnknown)
			s.finish(k, f, 503, problemf(503, codeUnavailable, "the database could not commit; retry").body())
			return err
		}
		s.finish(k, f, 201, body)
		evalFailpoint(FailpointAfterCommitBeforeReply)
		writeStored(w, 201, body, false)
		return nil
	}
	p := problemf(502, codeProcessorFailed, "the payment processor did not confirm the payment")
	if o == outcomeUnknown {
		p.Detail = "the payment processor did not answer"
	}
	body := p.body()
	var err error
	switch {
	case s.storesFailures():
		err = s.complete(ctx, a.caller, a.key, a.payID, a.who, "", 502, body, false)
	case o == outcomeUnknown:
		err = s.setState(ctx, a.caller, a.key, a.payID, stateInProgress, stateUnknown)
	default:
		err = s.release(ctx, a.caller, a.key, a.payID)
	}
	if err != nil {
		s.finish(k, f, 503, problemf(503, codeUnavailable, "the database could not commit; retry").body())
		return err
	}
	s.finish(k, f, 502, body)
	writeProblem(w, p)
	return nil
}

// resolveThenRun resolves an unknown key (x, now in_progress for a)
// against the sink: the payment happened → commit it, then answer a from
// it; it did not → a executes under the key; still no answer → 502, the
// key stays unknown.
func (s *Server) resolveThenRun(w http.ResponseWriter, a *attempt, x *row, f *flight) error {
	ctx := context.Background()
	k := a.flightKey()
	found, err := s.sink.get(ctx, a.sinkKey())
	switch {
	case err != nil:
		p := problemf(502, codeProcessorFailed, "the payment processor did not answer")
		if err := s.setState(ctx, a.caller, a.key, x.paymentID, stateInProgress, stateUnknown); err != nil {
			s.finish(k, f, 503, problemf(503, codeUnavailable, "the database could not commit; retry").body())
			return err
		}
		s.finish(k, f, 502, p.body())
		return p
	case found:
		body := x.doc()
		if err := s.complete(ctx, a.caller, a.key, x.paymentID, a.who, x.request.Reference, 201, body, true); err != nil {
			s.setState(ctx, a.caller, a.key, x.paymentID, stateInProgress, stateUnknown)
			s.finish(k, f, 503, problemf(503, codeUnavailable, "the database could not commit; retry").body())
			return err
		}
		s.finish(k, f, 201, body)
		if a.fp != x.fp {
			return s.mismatch()
		}
		writeStored(w, 201, body, true)
		return nil
	}
	// Nothing happened: the key is a's now.
	now := s.clock()
	payID := newPaymentID()
	if _, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		return nil, affected1(tx.Stmt(s.st.restart).Exec(a.fp, payID, string(encode(a.req)), now.UnixNano(), a.caller, a.key,
			x.paymentID))
	}); err != nil {
		s.finish(k, f, 503, problemf(503, codeUnavailable, "the database could not commit; retry").body())
		return err
	}
	a.payID, a.createdAt = payID, now
	f.setFP(a.fp)
	return s.run(w, a, f)
}

// executeWithoutRow executes a without touching any key: a request without
// a key (stripe; ietf under missing-key-executes), or an in-flight
// duplicate under in-flight-executed. sinkKey "" is the caller id, # and
// the payment id (a key cannot produce it: caller ids hold no #).
func (s *Server) executeWithoutRow(w http.ResponseWriter, r *http.Request, a *attempt, sinkKey string) error {
	ctx := context.Background()
	a.payID, a.createdAt = newPaymentID(), s.clock()
	var idemKey any
	if sinkKey == "" {
		sinkKey = a.who + "#" + a.payID
	} else {
		idemKey = a.key
	}
	if s.effect(ctx, a.who, sinkKey, a.payID, a.req) != outcomeEffect {
		return problemf(502, codeProcessorFailed, "the payment processor did not confirm the payment")
	}
	body := paymentDoc(a.payID, a.req, a.createdAt)
	if _, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		_, err := tx.Stmt(s.st.insertPayment).Exec(a.payID, a.who, idemKey, a.req.Reference, string(body))
		return nil, err
	}); err != nil {
		return err
	}
	writeStored(w, 201, body, false)
	return nil
}

// executeUnreserved is the no-reservation mutant: the key is looked up on
// the read pool, and a request that found nothing executes, with no
// atomic reservation; its result is written over whatever row is there.
func (s *Server) executeUnreserved(w http.ResponseWriter, r *http.Request, a *attempt) error {
	ctx := context.Background()
	now := s.clock()
	x, err := scanRow(s.st.rGet.QueryRowContext(r.Context(), a.caller, a.key))
	if err != nil {
		return err
	}
	if x != nil && !x.expired(now) {
		again, err := s.answerExisting(w, r, a, x, s.lookup(a.flightKey()))
		if again {
			return changing()
		}
		return err
	}
	racyWindow(r.Context(), a.flightKey())
	a.payID, a.createdAt = newPaymentID(), now
	o := s.effect(ctx, a.who, a.sinkKey(), a.payID, a.req)
	status, body := 201, paymentDoc(a.payID, a.req, a.createdAt)
	if o != outcomeEffect {
		p := problemf(502, codeProcessorFailed, "the payment processor did not confirm the payment")
		if !s.storesFailures() {
			writeProblem(w, p)
			return nil
		}
		status, body = 502, p.body()
	}
	if _, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		if _, err := tx.Stmt(s.st.upsertDone).Exec(a.caller, a.key, a.fp, a.payID, string(encode(a.req)), now.UnixNano(),
			status, body, s.expiresAt(s.clock())); err != nil {
			return nil, err
		}
		if status != 201 {
			return nil, nil
		}
		_, err := tx.Stmt(s.st.insertPayment).Exec(a.payID, a.who, a.key, a.req.Reference, string(body))
		return nil, err
	}); err != nil {
		return err
	}
	writeStored(w, status, body, false)
	return nil
}

// complete stores the key's result (in_progress or unknown → done) and,
// withPayment, commits the payment, in one operation.
func (s *Server) complete(ctx context.Context, caller, key, payID, who, reference string, status int, body []byte, withPayment bool) error {
	expires := s.expiresAt(s.clock())
	_, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		if err := affected1(tx.Stmt(s.st.done).Exec(status, body, expires, caller, key, payID)); err != nil {
			return nil, err
		}
		if !withPayment {
			return nil, nil
		}
		var idemKey any = key
		_, err := tx.Stmt(s.st.insertPayment).Exec(payID, who, idemKey, reference, string(body))
		return nil, err
	})
	return err
}

// setState moves the key's row from one state to another.
func (s *Server) setState(ctx context.Context, caller, key, payID, from, to string) error {
	_, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		return nil, affected1(tx.Stmt(s.st.setState).Exec(to, caller, key, payID, from))
	})
	return err
}

// release deletes the key's reservation: the key is not consumed.
func (s *Server) release(ctx context.Context, caller, key, payID string) error {
	_, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		return nil, affected1(tx.Stmt(s.st.del).Exec(caller, key, payID, stateInProgress))
	})
	return err
}

// errLostReservation: a reservation this request held is gone (a bug).
var errLostReservation = errors.New("the reservation of the key is gone")

func affected1(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("%w (%d rows)", errLostReservation, n)
	}
	return nil
}
