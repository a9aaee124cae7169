package ids

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Dedupe decisions (IDS §XII) and the headers that carry them.
const (
	decFirstSeen = "first_seen"
	decReplayed  = "duplicate_replayed"
	decConflict  = "conflict_rejected"

	hdrDecision = "IDS-Decision"
	hdrEvidence = "IDS-Evidence"
)

// delivery is one POST /commands after its envelope was read.
type delivery struct {
	env  *envelope
	cmd  *command
	args string // the args, compact, as the sink receives them
	// key is the key the store is asked about: the client's idempotency_key
	// when it sent one, else the derived one; clientKey reports a client key
	// that is not this envelope's (a collision if stored, else 400).
	key       string
	clientKey bool
	scope     string // the dedupe scope: the tenant (IDS §XV)
	fp        string // the binding's fingerprint
	match     string // see envelope.match
	now       time.Time
	reject    string // the args' refusal: a terminal 422 rejected outcome
	// blind is the write of the no-reservation mutant and of the replica
	// mutants: no lookup in the op (over, when set, is the expired record
	// their own lookup found).
	blind bool
	over  *record
	// registered is the reservation (res_id) the op put in s.running (set
	// in the op, read after submit returned); "" when none.
	registered string
}

// Kinds of decide's answer.
const (
	kMismatch = iota
	kRateLimited
	kConfirmRequired
	kConfirmInvalid
	kConflict
	kReplay
	kProcessing
	kTerminal // a first delivery whose outcome committed with its reservation
	kReserved // a first delivery reserved: its effect is to be executed
)

type decision struct {
	kind       int
	rec        *record // the stored record, or the new one
	status     int     // kReplay, kTerminal: the reply
	body       []byte
	detail     string
	retryAfter string
	parallel   bool // in-flight-executes mutant
	reexecute  bool // replay-reexecutes mutant
}

// outcomeDoc is the outcome document, stored and replayed byte for byte.
type outcomeDoc struct {
	CommandID      string          `json:"command_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	Status         string          `json:"status"`
	OutcomeRef     string          `json:"outcome_ref"`
	Result         json.RawMessage `json:"result"`
	StatusURL      string          `json:"status_url"`
}

// referenceDoc is a replay by reference (IDS §IX.A: "a reference to the
// same terminal evidence chain"): the original's identifiers and
// outcome_ref, where to read its status and its evidence; no result.
type referenceDoc struct {
	CommandID      string `json:"command_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
	OutcomeRef     string `json:"outcome_ref"`
	StatusURL      string `json:"status_url"`
	EvidenceURL    string `json:"evidence_url"`
}

type processingDoc struct {
	CommandID      string `json:"command_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
	StatusURL      string `json:"status_url"`
}

type conflictDoc struct {
	Event             string `json:"event"`
	Reason            string `json:"reason"`
	CommandID         string `json:"command_id"`
	OriginalCommandID string `json:"original_command_id"`
	IdempotencyKey    string `json:"idempotency_key"`
	EvidenceURL       string `json:"evidence_url"`
}

type confirmationRequiredDoc struct {
	Status         string `json:"status"`
	CommandID      string `json:"command_id"`
	IdempotencyKey string `json:"idempotency_key"`
	ConfirmURL     string `json:"confirm_url"`
}

func statusURL(commandID string) string { return "/commands/" + url.PathEscape(commandID) }

func evidenceURL(tenant, key string) string {
	return "/evidence?tenant_id=" + url.QueryEscape(tenant) + "&idempotency_key=" + url.QueryEscape(key)
}

// outcomeBodies are the outcome document of an original command, and its
// copy for a replay to another actor (result without private details).
func outcomeBodies(commandID, key, status, ref string, full, public json.RawMessage) ([]byte, []byte) {
	d := outcomeDoc{CommandID: commandID, IdempotencyKey: key, Status: status, OutcomeRef: ref, Result: full, StatusURL: statusURL(commandID)}
	a, _ := json.Marshal(d)
	d.Result = public
	b, _ := json.Marshal(d)
	return a, b
}

func processingBody(commandID, key string) []byte {
	b, _ := json.Marshal(processingDoc{commandID, key, "processing", statusURL(commandID)})
	return b
}

// scope is the dedupe scope of a tenant: the tenant itself, except under
// the tenant-not-in-key mutant (one scope for all).
func (s *Server) scope(tenant string) string {
	if s.mutant == MutantTenantNotInKey {
		return ""
	}
	return tenant
}

func runKey(scope, key string) string { return scope + "\x00" + key }

// claim takes the reservation k (a res_id) for the caller; false when
// another goroutine runs it.
func (s *Server) claim(k string) bool {
	s.runMu.Lock()
	defer s.runMu.Unlock()
	if s.running[k] {
		return false
	}
	if at, ok := s.unsure[k]; ok {
		if time.Since(at) < s.unsureWait() {
			return false
		}
		delete(s.unsure, k)
	}
	s.running[k] = true
	return true
}

// unsureWait is how long after a sink call timed out the resumer leaves
// its record alone: twice the call's bound, for a POST the sink had not
// yet read when the call gave up.
func (s *Server) unsureWait() time.Duration { return 2 * s.cfg.SinkTimeout }

func (s *Server) release(k string) {
	s.runMu.Lock()
	delete(s.running, k)
	s.runMu.Unlock()
}

func (s *Server) postCommand(w http.ResponseWriter, r *http.Request) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	env, args, err := parseEnvelope(body)
	if err != nil {
		return err
	}
	cmd := commandsByName[env.name()]
	if cmd == nil {
		return prob(422, codeUnknownCommand, "the registry has no command "+strconv.Quote(env.name()))
	}
	d := &delivery{env: env, cmd: cmd, now: s.clock(), fp: env.fingerprint()}
	derived := env.key(s.mutant)
	d.key, d.match = derived, derived
	if s.mutant == MutantEphemeralInKey {
		d.match = env.match(s.mutant)
	}
	if env.IdempotencyKey != nil && *env.IdempotencyKey != derived {
		d.key, d.clientKey = *env.IdempotencyKey, true
	}
	if cmd.Class == "I0" {
		// Read-only: no reservation, no effect, no evidence.
		if d.clientKey {
			return prob(400, codeKeyMismatch, "idempotency_key is not the key of this envelope")
		}
		writeRaw(w, 200, "application/json", []byte(`{"result":{"balance_minor":0}}`))
		return nil
	}
	d.scope = s.scope(env.TenantID)
	if cmd.validate != nil {
		d.reject = cmd.validate(args)
	}
	ab, _ := json.Marshal(env.Args) // compact
	d.args = string(ab)
	ctx := context.WithoutCancel(r.Context()) // a client gone does not abort an execution
	if s.dialect == dialectPostgres && s.mutant != MutantNoRateLimit {
		if ok, ra, err := s.countDuplicate(ctx, d); err != nil {
			return err
		} else if !ok {
			p := prob(429, codeDuplicateRateLimited, "more than "+strconv.Itoa(rateLimitMax)+" duplicates of this key within the window")
			p.retryAfter = ra
			return p
		}
	}
	var v any
	switch s.mutant {
	case MutantReplicaLocalCache:
		v, err = s.decideCached(ctx, d)
	case MutantCheckThenInsert:
		v, err = s.decideCheckThenInsert(ctx, d)
	default:
		v, err = s.decideNow(ctx, d)
	}
	if err != nil {
		if d.registered != "" {
			s.release(d.registered)
		}
		return err
	}
	return s.answer(ctx, w, d, v.(*decision))
}

// decideNow submits decide for d (after the no-reservation mutant's own
// lookup).
func (s *Server) decideNow(ctx context.Context, d *delivery) (any, error) {
	if s.mutant == MutantNoReservation {
		// The mutant checks on the read pool, outside the writer: the check
		// and the write are two steps, and the window between them is open.
		rec, err := scanRecord(s.st.rGetRecord.QueryRowContext(ctx, d.scope, d.key), d.scope, d.key)
		if err != nil {
			return nil, err
		}
		if rec == nil || !rec.live(d.now.UnixNano()) {
			racyWindow(ctx, runKey(d.scope, d.key))
			d.blind = !d.clientKey
		}
	}
	return s.w.Submit(ctx, func(tx *sql.Tx) (any, error) { return s.decide(tx, d) })
}

// answer writes the answer of decision dec of d, executing the effect of
// a reservation first.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, d *delivery, dec *decision) error {
	env, cmd := d.env, d.cmd
	h := w.Header()
	setDecision := func(decision string) {
		h[hdrDecision] = []string{decision}
		h[hdrEvidence] = []string{evidenceURL(env.TenantID, d.key)}
	}
	switch dec.kind {
	case kMismatch:
		return prob(400, codeKeyMismatch, "idempotency_key is not the key of this envelope, and no command is stored under it")
	case kRateLimited:
		p := prob(429, codeDuplicateRateLimited, "more than "+strconv.Itoa(rateLimitMax)+" duplicates of this key within the window")
		p.retryAfter = dec.retryAfter
		return p
	case kConfirmRequired:
		writeJSON(w, 428, confirmationRequiredDoc{"confirmation_required", env.CommandID, d.key, "/confirmations"})
		return nil
	case kConfirmInvalid:
		return prob(403, codeConfirmationInvalid, dec.detail)
	case kConflict:
		setDecision(decConflict)
		writeJSON(w, 409, conflictDoc{"execution.rejected", "idempotency_conflict", env.CommandID, dec.rec.commandID, d.key,
			evidenceURL(env.TenantID, d.key)})
		return nil
	case kReplay:
		setDecision(decReplayed)
		if dec.reexecute {
			s.sink.post(ctx, effectRequestOf(dec.rec), commandsByName[dec.rec.command].s1())
		}
		writeRaw(w, dec.status, "application/json", dec.body)
		return nil
	case kProcessing:
		setDecision(decReplayed)
		if dec.parallel {
			if b, ok := s.execute(ctx, jobOf(dec.rec, false)); ok {
				writeRaw(w, 201, "application/json", b)
				return nil
			}
		}
		writeRaw(w, 202, "application/json", processingBody(dec.rec.commandID, d.key))
		return nil
	case kTerminal:
		setDecision(decFirstSeen)
		if cmd.s2() && dec.rec.status == statusExecuted {
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
		evalFailpoint(FailpointAfterCommitBeforeReply)
		writeRaw(w, dec.status, "application/json", dec.body)
		return nil
	}
	// kReserved: execute the effect now; the record is ours (s.running).
	setDecision(decFirstSeen)
	b, ok := s.execute(ctx, jobOf(dec.rec, false))
	s.release(d.registered)
	if !ok {
		// The sink did not answer (or the outcome did not commit): the
		// record stays in_progress and the resumer finishes it.
		writeRaw(w, 202, "application/json", processingBody(env.CommandID, d.key))
		return nil
	}
	evalFailpoint(FailpointAfterCommitBeforeReply)
	writeRaw(w, 201, "application/json", b)
	return nil
}

// decide is the check-and-set of IDS §VIII.A, one op of the writer: it
// looks the key up, and either reserves it (with the evidence first_seen)
// or decides the duplicate or the collision (with its evidence), in the same
// transaction.
func (s *Server) decide(tx *sql.Tx, d *delivery) (*decision, error) {
	// On PostgreSQL an op that lost a race runs again: undo what the
	// attempt before did outside the store.
	if d.registered != "" {
		s.release(d.registered)
		d.registered = ""
	}
	if d.blind {
		return s.first(tx, d, d.over)
	}
	rec, err := scanRecord(tx.Stmt(s.st.getRecord).QueryRow(d.scope, d.key), d.scope, d.key)
	if err != nil {
		return nil, err
	}
	var expired *record
	if rec != nil && !rec.live(d.now.UnixNano()) {
		expired, rec = rec, nil
	}
	if rec != nil {
		return s.duplicate(tx, d, rec)
	}
	if d.clientKey {
		return &decision{kind: kMismatch}, nil
	}
	return s.first(tx, d, expired)
}

func (s *Server) insertEvidence(tx *sql.Tx, d *delivery, decision string, executed bool, original string, ref *string, stored, received *string) (int64, error) {
	ex := 0
	if executed {
		ex = 1
	}
	var seq int64
	err := tx.Stmt(s.st.insertEvidence).QueryRow(newID("ev_"), d.scope, d.key, decision, ex, d.env.CommandID, original, ref,
		d.now.UnixNano(), stored, received).Scan(&seq)
	return seq, err
}

func (s *Server) duplicate(tx *sql.Tx, d *delivery, rec *record) (*decision, error) {
	// (On PostgreSQL the duplicate was counted before the op: countDuplicate.)
	if s.mutant != MutantNoRateLimit && s.dialect == dialectSQLite {
		ok, ra, err := s.allowDuplicate(tx, d)
		if err != nil {
			return nil, err
		}
		if !ok {
			return &decision{kind: kRateLimited, retryAfter: ra}, nil
		}
	}
	if rec.match != d.match && s.mutant != MutantConflictAccepted {
		stored, received := &rec.fingerprint, &d.fp
		if s.mutant == MutantConflictNoFingerprints {
			stored, received = nil, nil
		}
		if _, err := s.insertEvidence(tx, d, decConflict, false, rec.commandID, nil, stored, received); err != nil {
			return nil, err
		}
		return &decision{kind: kConflict, rec: rec}, nil
	}
	decided := decReplayed
	if s.mutant == MutantEvidenceAsFirstSeen {
		decided = decFirstSeen
	}
	if rec.status == statusInProgress {
		if _, err := s.insertEvidence(tx, d, decided, false, rec.commandID, nil, &rec.fingerprint, &d.fp); err != nil {
			return nil, err
		}
		return &decision{kind: kProcessing, rec: rec, parallel: s.mutant == MutantInFlightExecutes}, nil
	}
	if s.mutant == MutantReplayAsksConfirmation && commandsByName[rec.command].Confirm && d.env.ConfirmationToken == nil {
		return &decision{kind: kConfirmRequired}, nil
	}
	ref, body := rec.outcomeRef.String, rec.body
	// A replay to another actor (same principal, another sender) shows
	// nothing beyond that actor's privilege (IDS §XV).
	if rec.actorID != d.env.ActorID && s.mutant != MutantReplayLeaksPrivate {
		body = rec.bodyPublic
	}
	if s.mutant == MutantReplayFreshID {
		var doc outcomeDoc
		if json.Unmarshal(body, &doc) == nil {
			ref = newID("out_")
			doc.OutcomeRef = ref
			body, _ = json.Marshal(doc)
		}
	}
	if s.cfg.ReplayForm == ReplayReference {
		body, _ = json.Marshal(referenceDoc{CommandID: rec.commandID, IdempotencyKey: rec.key, Status: rec.status, OutcomeRef: ref,
			StatusURL: statusURL(rec.commandID), EvidenceURL: evidenceURL(rec.tenantID, rec.key)})
	}
	if _, err := s.insertEvidence(tx, d, decided, false, rec.commandID, &ref, &rec.fingerprint, &d.fp); err != nil {
		return nil, err
	}
	return &decision{kind: kReplay, rec: rec, status: rec.httpStatus, body: body,
		reexecute: s.mutant == MutantReplayReexecutes && rec.status == statusExecuted}, nil
}

// first handles a first delivery (or the first after the window of the
// stored record expired): confirmation, then the reservation.
func (s *Server) first(tx *sql.Tx, d *delivery, expired *record) (*decision, error) {
	now := d.now.UnixNano()
	if d.cmd.Confirm {
		if d.env.ConfirmationToken == nil {
			return &decision{kind: kConfirmRequired}, nil
		}
		if detail, err := s.useToken(tx, d); err != nil || detail != "" {
			return &decision{kind: kConfirmInvalid, detail: detail}, err
		}
	}
	rec := &record{scope: d.scope, key: d.key, resID: newID("res_"), commandID: d.env.CommandID, tenantID: d.env.TenantID,
		actorID: d.env.ActorID, command: d.cmd.Name, args: d.args, fingerprint: d.fp, match: d.match, status: statusInProgress,
		createdAt: now}
	if expired != nil {
		rec.effectsBefore = expired.effectsBefore + expired.effectMade
	}
	if d.cmd.TTLSeconds != nil {
		ttl := float64(*d.cmd.TTLSeconds)
		if s.mutant == MutantWindowHalved {
			ttl /= 2
		}
		rec.ttlExpiresAt = sql.NullInt64{Int64: d.now.Add(s.dur(ttl)).UnixNano(), Valid: true}
	}
	var ref *string
	switch {
	case d.reject != "":
		rec.status, rec.httpStatus = statusRejected, 422
		reason, _ := json.Marshal(map[string]string{"reason": d.reject})
		rec.outcomeRef = sql.NullString{String: newID("out_"), Valid: true}
		rec.body, rec.bodyPublic = outcomeBodies(rec.commandID, rec.key, rec.status, rec.outcomeRef.String, reason, reason)
	case d.cmd.s2():
		// Transactional outbox (S2): the outcome and the effect to deliver
		// commit together; the dispatcher delivers it.
		rec.status, rec.httpStatus, rec.effectMade = statusExecuted, 201, 1
		rec.outcomeRef = sql.NullString{String: newID("out_"), Valid: true}
		full, public := d.cmd.result(rec.key, newID("rfd_"))
		rec.body, rec.bodyPublic = outcomeBodies(rec.commandID, rec.key, rec.status, rec.outcomeRef.String, full, public)
		if _, err := tx.Stmt(s.st.insertOutbox).Exec(rec.scope, rec.key, rec.tenantID, rec.commandID, rec.command, rec.args,
			rec.effectsBefore, now, now); err != nil {
			return nil, err
		}
	}
	if rec.outcomeRef.Valid {
		ref = &rec.outcomeRef.String
	}
	seq, err := s.insertEvidence(tx, d, decFirstSeen, true, rec.commandID, ref, &d.fp, &d.fp)
	if err != nil {
		return nil, err
	}
	rec.firstEvidence = seq
	if _, err := tx.Stmt(s.st.putRecord).Exec(rec.scope, rec.key, rec.resID, rec.commandID, rec.tenantID, rec.actorID, rec.command,
		rec.args, rec.fingerprint, rec.match, rec.status, rec.httpStatus, rec.outcomeRef, rec.body, rec.bodyPublic,
		rec.effectsBefore, rec.effectMade, rec.firstEvidence, now, now, rec.ttlExpiresAt); err != nil {
		return nil, err
	}
	if rec.status != statusInProgress {
		return &decision{kind: kTerminal, rec: rec, status: rec.httpStatus, body: rec.body}, nil
	}
	// The record is this request's to execute from now on: the resumer
	// leaves it alone until the request is done with it.
	s.runMu.Lock()
	s.running[rec.resID] = true
	s.runMu.Unlock()
	d.registered = rec.resID
	return &decision{kind: kReserved, rec: rec}, nil
}

// useToken checks the confirmation token of d and marks it used, in the
// transaction that reserves the key (IDS §X: bound to command_id and key,
// single use, short-lived). It returns why the token is refused, or "".
func (s *Server) useToken(tx *sql.Tx, d *delivery) (string, error) {
	h := tokenHash(*d.env.ConfirmationToken)
	var tenant, commandID, key string
	var expires int64
	var used sql.NullInt64
	err := tx.Stmt(s.st.getToken).QueryRow(h).Scan(&tenant, &commandID, &key, &expires, &used)
	switch {
	case errors.Is(err, sql.ErrNoRows) && s.mutant == MutantTokenUnverified && forgeable(*d.env.ConfirmationToken):
		return "", nil // taken for a token on its form alone
	case errors.Is(err, sql.ErrNoRows):
		return "unknown confirmation token", nil
	case err != nil:
		return "", err
	case tenant != d.env.TenantID:
		return "unknown confirmation token", nil
	case used.Valid && s.mutant != MutantConfirmationReusable:
		return "the confirmation token was already used", nil
	case expires <= d.now.UnixNano():
		return "the confirmation token expired", nil
	case (commandID != d.env.CommandID || key != d.key) && s.mutant != MutantTokenUnbound:
		return "the confirmation token is bound to another command_id or idempotency_key", nil
	}
	if s.mutant != MutantConfirmationReusable {
		if _, err := tx.Stmt(s.st.useToken).Exec(d.now.UnixNano(), h); err != nil {
			return "", err
		}
	}
	return "", nil
}

// forgeable reports whether token has the form of the tokens the server
// issues ("cft_" and 43 base64url characters): what the token-unverified
// mutant checks instead of looking it up.
func forgeable(token string) bool {
	return len(token) == 4+43 && token[:4] == "cft_"
}

func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// allowDuplicate counts one duplicate of d's key in its fixed window
// (IDS §XV: rate-limit repeated duplicate submissions), in the op's
// transaction; false with the Retry-After (real seconds) past
// rateLimitMax.
func (s *Server) allowDuplicate(tx *sql.Tx, d *delivery) (bool, string, error) {
	window, now := s.dur(rateLimitWindow), d.now.UnixNano()
	var start, n int64
	err := tx.Stmt(s.st.getRate).QueryRow(d.scope, d.key).Scan(&start, &n)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		start, n = now, 0
	case err != nil:
		return false, "", err
	case now-start >= int64(window) || now < start:
		start, n = now, 0
	}
	if n >= rateLimitMax {
		return false, retryAfter(start, window, now), nil
	}
	if _, err := tx.Stmt(s.st.putRate).Exec(d.scope, d.key, start, n+1); err != nil {
		return false, "", err
	}
	return true, "", nil
}

// countDuplicate is allowDuplicate on PostgreSQL, before the op: a
// delivery whose key holds a live record is counted in one statement of
// its own (bumpRate), so that the duplicates of a storm over every replica
// queue on the window's row rather than fail each other's serializable
// transactions. A delivery that finds no record is not counted (if one
// appears before its op, the op decides the duplicate uncounted).
func (s *Server) countDuplicate(ctx context.Context, d *delivery) (bool, string, error) {
	rec, err := scanRecord(s.st.rGetRecord.QueryRowContext(ctx, d.scope, d.key), d.scope, d.key)
	if err != nil || rec == nil || !rec.live(d.now.UnixNano()) {
		return true, "", err
	}
	window, now := s.dur(rateLimitWindow), d.now.UnixNano()
	var start, n int64
	if err := s.st.bumpRate.QueryRowContext(ctx, d.scope, d.key, now, now-int64(window)).Scan(&start, &n); err != nil {
		return false, "", err
	}
	if n > rateLimitMax {
		return false, retryAfter(start, window, now), nil
	}
	return true, "", nil
}

// retryAfter is the Retry-After (whole seconds, at least 1) of a window
// begun at start (Unix ns) at now.
func retryAfter(start int64, window time.Duration, now int64) string {
	ra := int(math.Ceil(time.Duration(start + int64(window) - now).Seconds()))
	return strconv.Itoa(max(ra, 1))
}

// job is an in-progress record to execute: by the request that reserved
// it, or by the resumer (reconcile: the sink may have acted already).
type job struct {
	rec       *record
	reconcile bool
}

func jobOf(rec *record, reconcile bool) job { return job{rec, reconcile} }

func effectRequestOf(rec *record) effectRequest {
	return effectRequest{TenantID: rec.tenantID, IdempotencyKey: rec.key, CommandID: rec.commandID, Command: rec.command,
		Args: json.RawMessage(rec.args)}
}

// execute makes the effect of an in-progress record and commits its
// outcome; it returns the outcome document, or false when the sink did not
// answer or the outcome did not commit (the record stays in_progress).
// A reconciling execution of a command not shielded by S1 first asks the
// sink what it did for the key (GET /effects/{key}): an effect counted
// there beyond effects_before is this command's, and is not made again.
func (s *Server) execute(ctx context.Context, j job) ([]byte, bool) {
	rec := j.rec
	cmd := commandsByName[rec.command]
	if cmd == nil || cmd.result == nil {
		s.log.Error("in-progress record of an unknown command", "command", rec.command)
		return nil, false
	}
	var effectID string
	if j.reconcile && !cmd.s1() && !cmd.internal(s.cfg.InternalOnly) {
		found, id, count, err := s.sink.get(ctx, rec.key)
		if err != nil {
			s.log.Debug("reconcile", "key", rec.key, "err", err)
			return nil, false
		}
		if found && count > rec.effectsBefore {
			effectID = id
		}
	}
	if effectID == "" && cmd.internal(s.cfg.InternalOnly) {
		effectID = newID("int_") // its own state only: nothing leaves the server
	}
	if effectID == "" {
		id, err := s.sink.post(ctx, effectRequestOf(rec), cmd.s1())
		if err != nil {
			s.log.Debug("effect", "key", rec.key, "err", err)
			var ne net.Error
			if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
				s.runMu.Lock()
				s.unsure[rec.resID] = time.Now()
				s.runMu.Unlock()
			}
			return nil, false
		}
		effectID = id
	}
	if evalFailpoint(FailpointAfterEffectBeforeCommit) == "error" {
		return nil, false
	}
	ref := newID("out_")
	full, public := cmd.result(rec.key, effectID)
	body, bodyPublic := outcomeBodies(rec.commandID, rec.key, statusExecuted, ref, full, public)
	now := s.clock().UnixNano()
	_, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		res, err := tx.Stmt(s.st.complete).Exec(ref, body, bodyPublic, effectID, now, rec.scope, rec.key, rec.resID)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil, nil // another execution finished it (only under a mutant)
		}
		_, err = tx.Stmt(s.st.setEvidenceOutcome).Exec(ref, rec.firstEvidence)
		return nil, err
	})
	if err != nil {
		s.log.Error("commit outcome", "key", rec.key, "err", err)
		return nil, false
	}
	return body, true
}
