package intent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// stmts are prepared once on the write connection (outside any
// transaction; used through tx.Stmt) or on the read pool.
type stmts struct {
	insertIntent, getIdem, insertIdem, countOpen, claim, claimByID, insertNonce *sql.Stmt
	fulfill, failSelect, failOpen, failDead, extend, deadOnTouch, insertDead    *sql.Stmt
	rGetIntent, rGetIdem, rClaimSelect                                          *sql.Stmt
}

func (st *stmts) close() {
	for _, p := range []*sql.Stmt{st.insertIntent, st.getIdem, st.insertIdem, st.countOpen, st.claim, st.claimByID, st.insertNonce,
		st.fulfill, st.failSelect, st.failOpen, st.failDead, st.extend, st.deadOnTouch, st.insertDead, st.rGetIntent, st.rGetIdem, st.rClaimSelect} {
		if p != nil {
			p.Close()
		}
	}
}

const intentCols = `id, namespace, goal, payload, visibility, priority, max_attempts, backoff_base, target_worker, required_capability,
 publisher, status, claim_attempts, claimed_by, claim_token, claimed_at, claim_expires_at, run_at, created_at, expires_at,
 last_error, result, result_type, completed_at`

// claimWhere is the eligibility of §7.3 with the lease reading of
// ReadingLeaseExpiry "lease-expiry": run_at of a claimed intent is the end
// of its lease plus its backoff ("backoff"), or the end of its lease
// ("immediate"); see claimSet. Parameters: ?1 caller key, ?3 now,
// ?7 namespace, ?8 publisher filter, ?9 goal filter, ?10 worker id,
// ?11 ",cap1,cap2,".
func (s *Server) claimWhere() string {
	status := "status IN ('open','claimed')"
	if s.mutant == MutantLeaseNeverExpires {
		status = "status = 'open'"
	}
	// The mutants keep every parameter in the statement, typed by a column
	// (PostgreSQL prepares no parameter it cannot type).
	ns := "namespace = ?7"
	if s.mutant == MutantNamespaceLeak {
		ns = "(namespace = ?7 OR namespace <> ?7)"
	}
	attempts := "claim_attempts < max_attempts"
	if s.mutant == MutantMaxAttemptsIgnored {
		attempts = "TRUE"
	}
	vis := "(visibility = 'public' OR publisher = ?1)"
	if s.mutant == MutantVisibilityLeak {
		vis = "(visibility = 'public' OR publisher = ?1 OR TRUE)"
	}
	instr := "instr(?11, ',' || required_capability || ',')"
	if s.pg {
		instr = "strpos(?11, ',' || required_capability || ',')"
	}
	order := "priority DESC, run_at, claim_attempts, created_at, id"
	if s.mutant == MutantPriorityInverted {
		order = "priority ASC, run_at, claim_attempts, created_at, id"
	}
	return status + " AND " + ns + " AND run_at <= ?3 AND expires_at > ?3 AND " + attempts + " AND " + vis +
		" AND (?8 = '' OR publisher = ?8) AND (?9 = '' OR goal = ?9) AND (target_worker IS NULL OR target_worker = ?10)" +
		" AND (required_capability IS NULL OR " + instr + " > 0) ORDER BY " + order + " LIMIT 1"
}

// claimSet is the update of a claim. run_at is the moment the intent becomes
// claimable again should this lease expire (ReadingLeaseExpiry
// "lease-expiry"): under "backoff" the end of the lease plus
// backoff_base*2^claim_attempts (the new count) + jitter (?5), scaled by ?6;
// under "immediate" the end of the lease. Parameters: ?1 caller, ?2 token,
// ?3 now, ?4 end of the lease, ?5 jitter, ?6 time scale.
func (s *Server) claimSet() string {
	runAt := "?4 + (backoff_base * (1 << (claim_attempts + 1)) + ?5) / ?6"
	if s.rd.leaseImmediate {
		runAt = "?4" // ?5 and ?6 are bound but unused
		if s.pg {
			// PostgreSQL types every parameter from the statement: ?5 and
			// ?6 appear, multiplied by 0.
			runAt = "?4 + 0 * (backoff_base + ?5 + ?6)"
		}
	}
	return `status = 'claimed', claim_attempts = claim_attempts + 1, claimed_by = ?1, claim_token = ?2, claimed_at = ?3,
 claim_expires_at = ?4, run_at = ` + runAt + `,
 last_error = CASE WHEN status = 'claimed' THEN 'lease expired' ELSE last_error END`
}

// extendSet is the update of an extension (ReadingExtend "extend"):
// under "from-now" ?1 is the new end of the lease (now + seconds); under
// "added" ?1 is the seconds added to the current end. run_at moves with the
// end of the lease, so the backoff after expiry is kept.
func (s *Server) extendSet() string {
	if s.rd.extendAdded {
		return `claim_expires_at = claim_expires_at + ?1, run_at = run_at + ?1`
	}
	return `claim_expires_at = ?1, run_at = run_at + (?1 - claim_expires_at)`
}

const claimReturning = ` RETURNING id, namespace, goal, payload, claim_attempts, max_attempts, priority, visibility, target_worker, required_capability`

func (s *Server) prepare(ctx context.Context) error {
	w, r := s.wdb, s.rdb
	claimPick := `SELECT id FROM intents WHERE ` + s.claimWhere()
	rClaimSelect := claimPick
	insertDead := `INSERT OR REPLACE INTO dead_letters(intent_id, namespace, goal, payload, publisher, reason, claim_attempts, last_error, died_at)
 VALUES(?,?,?,?,?,?,?,?,?)`
	insertIdem := `INSERT INTO idempotency(api_key, key, body_hash, status, response, created_at) VALUES(?,?,?,?,?,?)`
	if s.pg {
		// The claim locks the row it takes and skips those other claims
		// (on any replica) hold: two claims never take one intent, nor wait
		// for one another.
		claimPick += ` FOR UPDATE SKIP LOCKED`
		// The claim-non-atomic mutant's read binds the claim's parameters
		// it does not use: PostgreSQL wants each typed.
		rClaimSelect = `WITH unused AS (SELECT CAST(?2 AS TEXT), CAST(?4 AS TEXT), CAST(?5 AS TEXT), CAST(?6 AS TEXT)) ` + rClaimSelect
		insertDead = `INSERT INTO dead_letters(intent_id, namespace, goal, payload, publisher, reason, claim_attempts, last_error, died_at)
 VALUES(?,?,?,?,?,?,?,?,?) ON CONFLICT (intent_id) DO UPDATE SET namespace = excluded.namespace, goal = excluded.goal,
 payload = excluded.payload, publisher = excluded.publisher, reason = excluded.reason, claim_attempts = excluded.claim_attempts,
 last_error = excluded.last_error, died_at = excluded.died_at`
		if s.mutant == MutantIdemCheckRacy || s.mutant == MutantReplicaLocalCache {
			// A second row for the key is silently dropped (an error would
			// end PostgreSQL's transaction, where SQLite's goes on).
			insertIdem += ` ON CONFLICT DO NOTHING`
		}
	}
	for _, p := range []struct {
		db  *sql.DB
		dst **sql.Stmt
		q   string
	}{
		{w, &s.st.insertIntent, `INSERT INTO intents(id, namespace, goal, payload, visibility, priority, max_attempts, backoff_base,
 target_worker, required_capability, publisher, status, run_at, created_at, expires_at) VALUES(?,?,?,?,?,?,?,?,?,?,?,'open',?,?,?)`},
		{w, &s.st.getIdem, `SELECT body_hash, status, response FROM idempotency WHERE api_key = ? AND key = ?`},
		{w, &s.st.insertIdem, insertIdem},
		{w, &s.st.countOpen, `SELECT COUNT(*) FROM intents WHERE publisher = ? AND status IN ('open','claimed')`},
		{w, &s.st.claim, `UPDATE intents SET ` + s.claimSet() + ` WHERE id = (` + claimPick + `)` + claimReturning},
		{w, &s.st.claimByID, `UPDATE intents SET ` + s.claimSet() + ` WHERE id = ?7` + claimReturning},
		{w, &s.st.insertNonce, `INSERT INTO nonces(api_key, nonce, ts) VALUES(?,?,?) ON CONFLICT DO NOTHING`},
		{w, &s.st.fulfill, `UPDATE intents SET status = 'fulfilled', result = ?, result_type = ?, completed_at = ?, claim_token = NULL
 WHERE id = ? AND status = 'claimed' AND claim_token = ? AND claimed_by = ? AND claim_expires_at > ? RETURNING claim_attempts`},
		{w, &s.st.failSelect, `SELECT claim_attempts, max_attempts, backoff_base FROM intents
 WHERE id = ? AND status = 'claimed' AND claim_token = ? AND claimed_by = ? AND claim_expires_at > ?`},
		{w, &s.st.failOpen, `UPDATE intents SET status = 'open', claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL, run_at = ?, last_error = ? WHERE id = ?`},
		{w, &s.st.failDead, `UPDATE intents SET status = 'dead', claim_token = NULL, claim_expires_at = NULL, last_error = ?, completed_at = ? WHERE id = ?
 RETURNING namespace, goal, payload, publisher, claim_attempts`},
		{w, &s.st.extend, `UPDATE intents SET ` + s.extendSet() + `
 WHERE id = ?2 AND status = 'claimed' AND claim_token = ?3 AND claimed_by = ?4 AND claim_expires_at > ?5 RETURNING claim_attempts, claim_expires_at`},
		{w, &s.st.deadOnTouch, `UPDATE intents SET status = 'dead', claim_token = NULL, completed_at = claim_expires_at,
 last_error = COALESCE(last_error, 'lease expired') WHERE id = ? AND status = 'claimed' AND claim_expires_at <= ? AND claim_attempts >= max_attempts
 RETURNING namespace, goal, payload, publisher, claim_attempts, last_error, completed_at`},
		{w, &s.st.insertDead, insertDead},
		{r, &s.st.rGetIntent, `SELECT ` + intentCols + ` FROM intents WHERE id = ?`},
		{r, &s.st.rGetIdem, `SELECT body_hash, status, response FROM idempotency WHERE api_key = ? AND key = ?`},
		{r, &s.st.rClaimSelect, rClaimSelect},
	} {
		st, err := p.db.PrepareContext(ctx, s.sql(p.q))
		if err != nil {
			return fmt.Errorf("prepare %.60q: %w", p.q, err)
		}
		*p.dst = st
	}
	return nil
}

// intentRow is one row of intents.
type intentRow struct {
	ID, Namespace, Goal, Payload, Visibility string
	Priority, MaxAttempts                    int
	BackoffBase                              float64
	TargetWorker, RequiredCapability         sql.NullString
	Publisher, Status                        string
	ClaimAttempts                            int
	ClaimedBy, ClaimToken                    sql.NullString
	ClaimedAt, ClaimExpiresAt                sql.NullFloat64
	RunAt, CreatedAt, ExpiresAt              float64
	LastError, Result, ResultType            sql.NullString
	CompletedAt                              sql.NullFloat64
}

type scanner interface{ Scan(...any) error }

func scanIntent(sc scanner) (*intentRow, error) {
	var x intentRow
	err := sc.Scan(&x.ID, &x.Namespace, &x.Goal, &x.Payload, &x.Visibility, &x.Priority, &x.MaxAttempts, &x.BackoffBase,
		&x.TargetWorker, &x.RequiredCapability, &x.Publisher, &x.Status, &x.ClaimAttempts, &x.ClaimedBy, &x.ClaimToken,
		&x.ClaimedAt, &x.ClaimExpiresAt, &x.RunAt, &x.CreatedAt, &x.ExpiresAt, &x.LastError, &x.Result, &x.ResultType, &x.CompletedAt)
	if err != nil {
		return nil, err
	}
	return &x, nil
}

// effectiveStatus is the status a reader sees at now: a claimed intent whose
// lease has lapsed is dead when its attempts are spent, open otherwise
// (ReadingLeaseExpiry "lease-expiry"), before any write records it.
func (s *Server) effectiveStatus(x *intentRow, now float64) string {
	if x.Status != stateClaimed || !x.ClaimExpiresAt.Valid || x.ClaimExpiresAt.Float64 > now || s.mutant == MutantLeaseNeverExpires {
		return x.Status
	}
	if x.ClaimAttempts >= x.MaxAttempts && s.mutant != MutantMaxAttemptsIgnored {
		return stateDead
	}
	return stateOpen
}

func nullStr(n sql.NullString) *string {
	if !n.Valid {
		return nil
	}
	return &n.String
}

func nullF(n sql.NullFloat64) *float64 {
	if !n.Valid {
		return nil
	}
	return &n.Float64
}

func (s *Server) view(x *intentRow, now float64, withResult, admin bool) intentView {
	v := intentView{ID: x.ID, Namespace: x.Namespace, Goal: x.Goal, Status: s.effectiveStatus(x, now), Priority: x.Priority,
		Visibility: x.Visibility, ClaimAttempts: x.ClaimAttempts, MaxAttempts: x.MaxAttempts, BackoffBase: x.BackoffBase,
		RunAt: x.RunAt, CreatedAt: x.CreatedAt, ExpiresAt: x.ExpiresAt, ClaimedAt: nullF(x.ClaimedAt),
		TargetWorker: nullStr(x.TargetWorker), RequiredCapability: nullStr(x.RequiredCapability),
		ResultType: nullStr(x.ResultType), CompletedAt: nullF(x.CompletedAt), Error: nullStr(x.LastError)}
	if v.Status == stateClaimed {
		v.ClaimExpiresAt = nullF(x.ClaimExpiresAt)
	}
	if v.Status == stateDead && x.Status == stateClaimed {
		v.CompletedAt = nullF(x.ClaimExpiresAt)
		if v.Error == nil {
			e := "lease expired"
			v.Error = &e
		}
	}
	if withResult && x.Result.Valid {
		v.Result = json.RawMessage(x.Result.String)
	}
	if admin {
		v.Payload = json.RawMessage(x.Payload)
		v.Publisher = x.Publisher
		v.ClaimedBy = nullStr(x.ClaimedBy)
		if v.Status == stateClaimed {
			v.ClaimToken = nullStr(x.ClaimToken)
		}
	}
	return v
}

// newIntent is a validated POST /intent body.
type newIntent struct {
	goal, namespace, visibility string
	payload                     []byte
	priority, maxAttempts       int
	delay, backoffBase          float64
	targetWorker, requiredCap   sql.NullString
}

// decodeObject parses body as one JSON object into raw fields.
func decodeObject(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, herr(400, codeInvalidPayload, "the body must be a JSON object")
	}
	if dec.More() {
		return nil, herr(400, codeInvalidPayload, "the body must be one JSON object")
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); err == nil {
		return nil, herr(400, codeInvalidPayload, "trailing data after the JSON object")
	}
	return m, nil
}

func isNull(r json.RawMessage) bool { return r == nil || string(bytes.TrimSpace(r)) == "null" }

func decodeString(m map[string]json.RawMessage, name, code string, minLen, maxLen int) (string, bool, error) {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return "", false, nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", false, herr(400, code, name+" must be a string")
	}
	if n := utf8.RuneCountInString(v); n < minLen || n > maxLen {
		return "", false, herr(400, code, fmt.Sprintf("%s must be %d–%d characters", name, minLen, maxLen))
	}
	return v, true, nil
}

func decodeInt(m map[string]json.RawMessage, name, code string, lo, hi, def int) (int, error) {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return def, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil || raw[0] == '"' {
		return 0, herr(400, code, name+" must be an integer")
	}
	v, err := n.Int64()
	if err != nil || v < int64(lo) || v > int64(hi) {
		return 0, herr(400, code, fmt.Sprintf("%s must be an integer in %d–%d", name, lo, hi))
	}
	return int(v), nil
}

func decodeFloat(m map[string]json.RawMessage, name, code string, lo, hi, def float64) (float64, error) {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return def, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil || raw[0] == '"' {
		return 0, herr(400, code, name+" must be a number")
	}
	v, err := n.Float64()
	if err != nil || math.IsNaN(v) || v < lo || v > hi {
		return 0, herr(400, code, fmt.Sprintf("%s must be a number in %g–%g", name, lo, hi))
	}
	return v, nil
}

func validNamespace(ns string) bool {
	if ns == "" || len(ns) > maxNamespaceLen {
		return false
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// decodeBounded decodes the number field name like decodeFloat. With
// bounds=clamp (ReadingBounds) a number outside lo–hi is brought into range
// instead of refused; a value that is not a number is refused either way.
func (s *Server) decodeBounded(m map[string]json.RawMessage, name, code string, lo, hi, def float64) (float64, error) {
	if !s.rd.clamp {
		return decodeFloat(m, name, code, lo, hi, def)
	}
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return def, nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil || raw[0] == '"' {
		return 0, herr(400, code, name+" must be a number")
	}
	v, err := strconv.ParseFloat(n.String(), 64) // ±Inf or 0 with ErrRange: clamped
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || math.IsNaN(v) {
		return 0, herr(400, code, name+" must be a number")
	}
	return min(max(v, lo), hi), nil
}

// decodeIntent validates a POST /intent body (§4.1, and the harness's binding
// "validation"). nullIsMissing follows the reading "missing" of decision
// "null-payload": an explicit null payload is refused like a missing one.
// Every rejection is an error carrying its HTTP status and code; it never
// panics.
func decodeIntent(body []byte, nullIsMissing bool) (*newIntent, error) {
	m, err := decodeObject(body)
	if err != nil {
		return nil, err
	}
	if _, ok := m["goal"]; !ok {
		return nil, herr(400, codeInvalidRequest, "goal is required")
	}
	if raw, ok := m["payload"]; !ok {
		return nil, herr(400, codeInvalidRequest, "payload is required")
	} else if nullIsMissing && isNull(raw) {
		return nil, herr(400, codeInvalidRequest, "payload is required; null is no payload")
	}
	n := &newIntent{namespace: "default", visibility: "private"}
	var ok bool
	if isNull(m["goal"]) {
		return nil, herr(400, codeInvalidGoal, "goal must be a string of 1–256 characters")
	}
	if n.goal, ok, err = decodeString(m, "goal", codeInvalidGoal, 1, maxGoalLen); err != nil || !ok {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m["payload"]); err != nil {
		return nil, herr(400, codeInvalidPayload, "payload is not valid JSON")
	}
	if buf.Len() > maxPayloadBytes {
		return nil, herr(413, codePayloadTooLarge, "the 'payload' field's serialized content exceeds 7KB limit")
	}
	n.payload = buf.Bytes()
	if ns, ok, err := decodeString(m, "namespace", codeInvalidNamespace, 1, maxNamespaceLen); err != nil {
		return nil, err
	} else if ok {
		if !validNamespace(ns) {
			return nil, herr(400, codeInvalidNamespace, "namespace must be 1–64 of A-Z a-z 0-9 . - _")
		}
		n.namespace = ns
	}
	if v, ok, err := decodeString(m, "visibility", codeInvalidVisibility, 1, 16); err != nil {
		return nil, err
	} else if ok {
		if v != "private" && v != "public" {
			return nil, herr(400, codeInvalidVisibility, `visibility must be "private" or "public"`)
		}
		n.visibility = v
	}
	if n.priority, err = decodeInt(m, "priority", codeInvalidPriority, minPriority, maxPriority, defaultPriority); err != nil {
		return nil, err
	}
	if n.delay, err = decodeFloat(m, "delay", codeInvalidDelay, 0, 86400, 0); err != nil {
		return nil, err
	}
	if n.maxAttempts, err = decodeInt(m, "max_attempts", codeInvalidMaxAttempts, minMaxAttempts, maxMaxAttempts, defaultMaxAttempts); err != nil {
		return nil, err
	}
	if n.backoffBase, err = decodeFloat(m, "backoff_base", codeInvalidBackoffBase, minBackoffBase, maxBackoffBase, defaultBackoffBase); err != nil {
		return nil, err
	}
	if v, ok, err := decodeString(m, "target_worker", codeInvalidTargetWorker, 1, 256); err != nil {
		return nil, err
	} else if ok {
		n.targetWorker = sql.NullString{String: v, Valid: true}
	}
	if v, ok, err := decodeString(m, "required_capability", codeInvalidRequiredCapability, 1, 256); err != nil {
		return nil, err
	} else if ok {
		if strings.ContainsAny(v, ", \t\r\n") {
			return nil, herr(400, codeInvalidRequiredCapability, "required_capability is one token: no commas or spaces")
		}
		n.requiredCap = sql.NullString{String: v, Valid: true}
	}
	return n, nil
}

// canonicalHash is the SHA-256 of body's canonical JSON: objects with sorted
// keys, no insignificant whitespace, numbers as written.
func canonicalHash(body []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	b := body
	if dec.Decode(&v) == nil {
		if c, err := json.Marshal(v); err == nil {
			b = c
		}
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

type replay struct {
	status int
	body   []byte
}

func (s *Server) createIntent(w http.ResponseWriter, q *request) error {
	idemKey := q.r.Header.Get(hdrIdempotencyKey)
	if _, present := q.r.Header[hdrIdempotencyKey]; present && (idemKey == "" || len(idemKey) > 255) {
		return herr(400, codeInvalidIdempotencyKey, "Idempotency-Key must be 1–255 bytes")
	}
	n, err := decodeIntent(q.body, s.rd.nullMissing)
	if err != nil {
		return err
	}
	useIdem := idemKey != "" && s.mutant != MutantIdemKeyIgnored
	var hash string
	racy := s.mutant == MutantIdemCheckRacy
	if useIdem && s.mutant == MutantReplicaLocalCache {
		if unlock := s.unseenKey(q.apiKey, idemKey); unlock != nil {
			// A key this process has not seen is taken for a new one: no
			// lookup, a second row for it dropped.
			defer unlock()
			return s.create(w, q, n, true, idemKey, canonicalHash(q.body), true)
		}
	}
	if useIdem {
		hash = canonicalHash(q.body)
		// Fast path: a replay needs no write.
		var h, resp string
		var st int
		if err := s.st.rGetIdem.QueryRowContext(q.r.Context(), q.apiKey, idemKey).Scan(&h, &st, &resp); err == nil {
			return s.answerIdem(w, hash, h, st, resp)
		}
		if s.mutant == MutantIdemCheckRacy {
			failpointIdemRacyWindow(q.r.Context(), q.apiKey, idemKey) // the mutant's window, widened in tests
		}
	}
	return s.create(w, q, n, useIdem, idemKey, hash, racy)
}

// create writes the intent n (and, with useIdem, its idempotency record
// under idemKey) in one write operation, which first looks the key up
// unless racy (the mutants that trust an earlier lookup, or none).
func (s *Server) create(w http.ResponseWriter, q *request, n *newIntent, useIdem bool, idemKey, hash string, racy bool) error {
	id := newIntentID()
	now := s.nowF()
	resp, _ := json.Marshal(createIntentResponse{ID: id, Status: statePublished, Namespace: n.namespace})
	apiKey, tester := q.apiKey, q.tester
	v, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		if useIdem && !racy {
			var h, resp string
			var st int
			err := tx.Stmt(s.st.getIdem).QueryRow(apiKey, idemKey).Scan(&h, &st, &resp)
			if err == nil {
				return replay{st, []byte(resp)}, errIdemFound{h, st, resp}
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
		}
		if tester {
			var c int
			if err := tx.Stmt(s.st.countOpen).QueryRow(apiKey).Scan(&c); err != nil {
				return nil, err
			}
			if c >= testerOpenCap {
				e := herr(429, codeLimitExceeded, "open intent cap of 2000 per tester key reached")
				e.retryAfter = "60"
				return nil, e
			}
		}
		if _, err := tx.Stmt(s.st.insertIntent).Exec(id, n.namespace, n.goal, string(n.payload), n.visibility, n.priority, n.maxAttempts,
			n.backoffBase, n.targetWorker, n.requiredCap, apiKey, now+s.secs(n.delay), now, now+s.secs(defaultIntentTTL)); err != nil {
			return nil, err
		}
		if useIdem {
			if _, err := tx.Stmt(s.st.insertIdem).Exec(apiKey, idemKey, hash, 201, string(resp), now); err != nil && !racy {
				return nil, err
			}
		}
		return nil, nil
	})
	var found errIdemFound
	if errors.As(err, &found) {
		return s.answerIdem(w, hash, found.hash, found.status, found.resp)
	}
	_ = v
	if err != nil {
		return err
	}
	s.writeRaw(w, 201, resp)
	return nil
}

// errIdemFound aborts a create op whose key is already recorded.
type errIdemFound struct {
	hash   string
	status int
	resp   string
}

func (e errIdemFound) Error() string { return "idempotency key already recorded" }

func (s *Server) answerIdem(w http.ResponseWriter, hash, storedHash string, status int, resp string) error {
	if hash != storedHash && s.mutant != MutantIdemConflictAccepted {
		return herr(422, codeIdempotencyConflict, "Idempotency-Key reused with a different request body")
	}
	w.Header().Set(hdrIdempotentReplay, "true")
	s.writeRaw(w, status, []byte(resp))
	return nil
}

type claimed struct {
	resp claimResponse
}

func (s *Server) claim(w http.ResponseWriter, q *request) error {
	qs := q.r.URL.Query()
	params := map[string]string{}
	for _, k := range []string{"namespace", "goal", "publisher", "worker_id", "capabilities"} {
		params[k] = qs.Get(k)
	}
	if len(bytes.TrimSpace(q.body)) > 0 {
		m, err := decodeObject(q.body)
		if err != nil {
			return err
		}
		for k := range params {
			if params[k] != "" {
				continue
			}
			if raw, ok := m[k]; ok && !isNull(raw) {
				var v string
				if err := json.Unmarshal(raw, &v); err != nil {
					return herr(400, "invalid_"+k, k+" must be a string")
				}
				params[k] = v
			}
		}
	}
	ns := params["namespace"]
	if ns == "" {
		ns = "default"
	}
	if !validNamespace(ns) {
		return herr(400, codeInvalidNamespace, "namespace must be 1–64 of A-Z a-z 0-9 . - _")
	}
	if len(params["goal"]) > maxGoalLen {
		return herr(400, codeInvalidGoal, "goal must be at most 256 characters")
	}
	pub := params["publisher"]
	if pub != "" && pub != q.apiKey && !q.admin && !s.isAdmin(q.r) {
		if s.rd.publisherEmpty {
			// ReadingPublisherFilter "empty": the filter matches no intent the
			// caller may see; nothing is claimed.
			return s.noContent(w)
		}
		return herr(403, codeForbidden, "the publisher filter is your own key unless you are an admin")
	}
	worker := q.r.Header.Get(hdrWorkerID)
	if worker == "" {
		worker = params["worker_id"]
	}
	if len(worker) > 256 {
		return herr(400, codeInvalidWorkerID, "worker id must be at most 256 characters")
	}
	capsRaw := q.r.Header.Get(hdrWorkerCapabilities)
	if capsRaw == "" {
		capsRaw = params["capabilities"]
	}
	if len(capsRaw) > 4096 {
		return herr(400, codeInvalidCapabilities, "capabilities must be at most 4096 bytes")
	}
	caps := ","
	for _, c := range strings.Split(capsRaw, ",") {
		if c = strings.TrimSpace(c); c != "" {
			caps += c + ","
		}
	}
	token := newHexID()
	caller := q.apiKey
	now := s.nowF()
	exp := now + s.secs(defaultClaimTimeout)
	var pick string
	if s.mutant == MutantCheckThenInsert {
		// Look up, then claim by id in another transaction, under the
		// process's lock: one step on one replica, a race over several.
		s.rs.checkMu.Lock()
		defer s.rs.checkMu.Unlock()
	}
	if s.mutant == MutantClaimNonAtomic || s.mutant == MutantCheckThenInsert {
		err := s.st.rClaimSelect.QueryRowContext(q.r.Context(), caller, nil, now, nil, nil, nil, ns, pub, params["goal"], worker, caps).Scan(&pick)
		if errors.Is(err, sql.ErrNoRows) {
			return s.noContent(w)
		}
		if err != nil {
			return err
		}
		if s.mutant == MutantCheckThenInsert {
			time.Sleep(checkThenInsertGap)
		} else {
			failpointClaimRacyWindow(q.r.Context(), pick)
		}
	}
	v, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		jitter := s.jitter()
		var row *sql.Row
		if pick != "" {
			row = tx.Stmt(s.st.claimByID).QueryRow(caller, token, now, exp, jitter, s.scale, pick)
		} else {
			row = tx.Stmt(s.st.claim).QueryRow(caller, token, now, exp, jitter, s.scale, ns, pub, params["goal"], worker, caps)
		}
		c := claimed{resp: claimResponse{ClaimToken: token, ClaimTimeout: defaultClaimTimeout, ClaimExpiresAt: exp}}
		var payload string
		var tw, rc sql.NullString
		err := row.Scan(&c.resp.ID, &c.resp.Namespace, &c.resp.Goal, &payload, &c.resp.ClaimAttempts, &c.resp.MaxAttempts,
			&c.resp.Priority, &c.resp.Visibility, &tw, &rc)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		c.resp.Payload = json.RawMessage(payload)
		c.resp.TargetWorker, c.resp.RequiredCapability = nullStr(tw), nullStr(rc)
		return c, nil
	})
	if err != nil {
		return err
	}
	if v == nil {
		return s.noContent(w)
	}
	if err := failpointAfterClaim(s); err != nil {
		return fmt.Errorf("claim: %w: %w", errCommit, err)
	}
	s.writeJSON(w, 200, v.(claimed).resp)
	return nil
}

func (s *Server) noContent(w http.ResponseWriter) error {
	if s.mutant != MutantNoRetryAfter {
		w.Header().Set(hdrRetryAfter, "1")
	}
	w.WriteHeader(204)
	return nil
}

// claimToken reads the claim token from the body field or the X-Claim-Token
// header (an extension; the harness's binding "fulfill-body").
func claimToken(q *request, m map[string]json.RawMessage) (string, error) {
	if raw, ok := m["claim_token"]; ok && !isNull(raw) {
		var t string
		if err := json.Unmarshal(raw, &t); err != nil || t == "" || len(t) > 256 {
			return "", herr(400, codeInvalidClaimToken, "claim_token must be a non-empty string")
		}
		return t, nil
	}
	if t := q.r.Header.Get(hdrClaimToken); t != "" {
		return t, nil
	}
	return "", herr(400, codeInvalidRequest, "claim_token is required")
}

func bodyObject(q *request) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(q.body)) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	return decodeObject(q.body)
}

var errLeaseLost = herr(404, codeNotFound, "intent not found, not held by this key, or claim_token invalid or expired")

// deadOnTouch records the death of an intent whose lease lapsed with its
// attempts spent, inside a mutation that touched it.
func (s *Server) deadOnTouch(tx *sql.Tx, id string, now float64) error {
	if s.mutant == MutantMaxAttemptsIgnored || s.mutant == MutantLeaseNeverExpires {
		return nil
	}
	var ns, goal, payload, pub string
	var attempts int
	var lastErr sql.NullString
	var died float64
	err := tx.Stmt(s.st.deadOnTouch).QueryRow(id, now).Scan(&ns, &goal, &payload, &pub, &attempts, &lastErr, &died)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = tx.Stmt(s.st.insertDead).Exec(id, ns, goal, payload, pub, "lease expired after max attempts", attempts, lastErr, died)
	return err
}

func (s *Server) fulfill(w http.ResponseWriter, q *request) error {
	m, err := bodyObject(q)
	if err != nil {
		return err
	}
	token, err := claimToken(q, m)
	if err != nil {
		return err
	}
	var result sql.NullString
	var rtype sql.NullString
	if raw, ok := m["result_type"]; ok && !isNull(raw) {
		var t string
		if json.Unmarshal(raw, &t) != nil || (t != "json" && t != "text") {
			return herr(400, codeInvalidResultType, `result_type must be "json" or "text"`)
		}
		rtype = sql.NullString{String: t, Valid: true}
	}
	if raw, ok := m["result"]; ok && !isNull(raw) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return herr(400, codeInvalidResult, "result is not valid JSON")
		}
		if rtype.String == "text" && buf.Bytes()[0] != '"' {
			return herr(400, codeInvalidResult, `a "text" result must be a JSON string`)
		}
		result = sql.NullString{String: buf.String(), Valid: true}
		if !rtype.Valid {
			rtype = sql.NullString{String: "json", Valid: true}
		}
	}
	id, caller := q.param, q.apiKey
	v, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		now := s.nowF()
		tok, by, at := token, caller, now
		var attempts int
		var err error
		if s.mutant == MutantStaleTokenAccepted {
			err = tx.QueryRow(s.sql(`UPDATE intents SET status = 'fulfilled', result = ?, result_type = ?, completed_at = ?, claim_token = NULL
 WHERE id = ? AND status = 'claimed' RETURNING claim_attempts`), result, rtype, now, id).Scan(&attempts)
		} else {
			err = tx.Stmt(s.st.fulfill).QueryRow(result, rtype, now, id, tok, by, at).Scan(&attempts)
		}
		if errors.Is(err, sql.ErrNoRows) {
			if err := s.deadOnTouch(tx, id, now); err != nil {
				return nil, err
			}
			return lost{}, nil
		}
		return attempts, err
	})
	if _, ok := v.(lost); ok && err == nil {
		return errLeaseLost
	}
	if err != nil {
		return err
	}
	n, _ := v.(int)
	s.writeJSON(w, 200, mutationResponse{ID: id, Status: stateFulfilled, ClaimAttempts: n})
	return nil
}

// lost is the value of an op that found no valid lease; it is not an error,
// so a lazy death it recorded (deadOnTouch) is kept.
type lost struct{}

func (s *Server) fail(w http.ResponseWriter, q *request) error {
	m, err := bodyObject(q)
	if err != nil {
		return err
	}
	token, err := claimToken(q, m)
	if err != nil {
		return err
	}
	msg, _, err := decodeString(m, "error", codeInvalidError, 0, 4096)
	if err != nil {
		return err
	}
	id, caller := q.param, q.apiKey
	v, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		now := s.nowF()
		var attempts, maxAttempts int
		var base float64
		var err error
		if s.mutant == MutantStaleTokenAccepted {
			err = tx.QueryRow(s.sql(`SELECT claim_attempts, max_attempts, backoff_base FROM intents WHERE id = ? AND status = 'claimed'`), id).Scan(&attempts, &maxAttempts, &base)
		} else {
			err = tx.Stmt(s.st.failSelect).QueryRow(id, token, caller, now).Scan(&attempts, &maxAttempts, &base)
		}
		if errors.Is(err, sql.ErrNoRows) {
			if err := s.deadOnTouch(tx, id, now); err != nil {
				return nil, err
			}
			return lost{}, nil
		}
		if err != nil {
			return nil, err
		}
		lastErr := sql.NullString{String: msg, Valid: msg != ""}
		if attempts >= maxAttempts && s.mutant != MutantMaxAttemptsIgnored {
			var ns, goal, payload, pub string
			var n int
			if err := tx.Stmt(s.st.failDead).QueryRow(lastErr, now, id).Scan(&ns, &goal, &payload, &pub, &n); err != nil {
				return nil, err
			}
			if _, err := tx.Stmt(s.st.insertDead).Exec(id, ns, goal, payload, pub, "failed after max attempts", n, lastErr, now); err != nil {
				return nil, err
			}
			return mutationResponse{ID: id, Status: stateDead, ClaimAttempts: attempts}, nil
		}
		runAt := now + s.secs(base*math.Pow(2, float64(attempts))+s.jitter())
		if s.mutant == MutantNoBackoff {
			runAt = now
		}
		if _, err := tx.Stmt(s.st.failOpen).Exec(runAt, lastErr, id); err != nil {
			return nil, err
		}
		return mutationResponse{ID: id, Status: stateOpen, ClaimAttempts: attempts, RunAt: &runAt}, nil
	})
	if _, ok := v.(lost); ok && err == nil {
		return errLeaseLost
	}
	if err != nil {
		return err
	}
	s.writeJSON(w, 200, v)
	return nil
}

func (s *Server) extendClaim(w http.ResponseWriter, q *request) error {
	m, err := bodyObject(q)
	if err != nil {
		return err
	}
	token, err := claimToken(q, m)
	if err != nil {
		return err
	}
	if raw, ok := m["seconds"]; !ok || isNull(raw) {
		return herr(400, codeInvalidSeconds, "seconds is required (10–3600)")
	}
	secs, err := s.decodeBounded(m, "seconds", codeInvalidSeconds, minExtendSeconds, maxExtendSeconds, 0)
	if err != nil {
		return err
	}
	id, caller := q.param, q.apiKey
	v, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		now := s.nowF()
		arg := now + s.secs(secs) // the new end ("from-now")
		if s.rd.extendAdded {
			arg = s.secs(secs) // added to the current end
		}
		var attempts int
		var exp float64
		var err error
		switch s.mutant {
		case MutantStaleTokenAccepted:
			err = tx.QueryRow(s.sql(`UPDATE intents SET `+s.extendSet()+` WHERE id = ?2 AND status = 'claimed' RETURNING claim_attempts, claim_expires_at`), arg, id).Scan(&attempts, &exp)
		case MutantExtendAfterExpiry:
			err = tx.Stmt(s.st.extend).QueryRow(arg, id, token, caller, math.Inf(-1)).Scan(&attempts, &exp)
		default:
			err = tx.Stmt(s.st.extend).QueryRow(arg, id, token, caller, now).Scan(&attempts, &exp)
		}
		if errors.Is(err, sql.ErrNoRows) {
			if err := s.deadOnTouch(tx, id, now); err != nil {
				return nil, err
			}
			return lost{}, nil
		}
		if err != nil {
			return nil, err
		}
		return mutationResponse{ID: id, Status: stateClaimed, ClaimAttempts: attempts, ClaimExpiresAt: &exp}, nil
	})
	if _, ok := v.(lost); ok && err == nil {
		return errLeaseLost
	}
	if err != nil {
		return err
	}
	s.writeJSON(w, 200, v)
	return nil
}

func (s *Server) readIntent(ctx context.Context, id string) (*intentRow, error) {
	x, err := scanIntent(s.st.rGetIntent.QueryRowContext(ctx, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, herr(404, codeNotFound, "intent not found")
	}
	return x, err
}

func (s *Server) resultOrStatus(w http.ResponseWriter, q *request, withResult bool) error {
	x, err := s.readIntent(q.r.Context(), q.param)
	if err != nil {
		return err
	}
	if !q.admin && x.Publisher != q.apiKey && !(x.ClaimedBy.Valid && x.ClaimedBy.String == q.apiKey) {
		if s.rd.access404 {
			// ReadingAccess "404": answered as an unknown id.
			return herr(404, codeNotFound, "intent not found")
		}
		return herr(403, codeForbidden, "only the publisher, the current claimer or an admin may read this intent")
	}
	s.writeJSON(w, 200, s.view(x, s.nowF(), withResult, false))
	return nil
}

func (s *Server) result(w http.ResponseWriter, q *request) error { return s.resultOrStatus(w, q, true) }
func (s *Server) status(w http.ResponseWriter, q *request) error {
	return s.resultOrStatus(w, q, false)
}

func validKVKey(k string) bool { return k != "" && len(k) <= 256 && utf8.ValidString(k) }

func (s *Server) set(w http.ResponseWriter, q *request) error {
	if !validKVKey(q.param) {
		return herr(400, codeInvalidKey, "key must be 1–256 bytes of UTF-8")
	}
	m, err := decodeObject(q.body)
	if err != nil {
		return err
	}
	raw, ok := m["value"]
	if !ok {
		return herr(400, codeInvalidRequest, "value is required")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return herr(400, codeInvalidValue, "value is not valid JSON")
	}
	ttl, err := s.decodeBounded(m, "ttl", codeInvalidTTL, 1, maxKVTTL, defaultKVTTL)
	if err != nil {
		return err
	}
	key, caller := q.param, q.apiKey
	exp := s.nowF() + s.secs(ttl)
	_, err = s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		_, err := tx.Exec(s.sql(`INSERT INTO store(api_key, key, value, expires_at) VALUES(?,?,?,?)
 ON CONFLICT(api_key, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`), caller, key, buf.String(), exp)
		return nil, err
	})
	if err != nil {
		return err
	}
	s.writeJSON(w, 200, map[string]any{"ok": true, "key": key, "expires_at": exp})
	return nil
}

func (s *Server) get(w http.ResponseWriter, q *request) error {
	if !validKVKey(q.param) {
		return herr(400, codeInvalidKey, "key must be 1–256 bytes of UTF-8")
	}
	var v string
	err := s.rdb.QueryRowContext(q.r.Context(), s.sql(`SELECT value FROM store WHERE api_key = ? AND key = ? AND expires_at > ?`), q.apiKey, q.param, s.nowF()).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return herr(404, codeNotFound, "no such key")
	}
	if err != nil {
		return err
	}
	s.writeJSON(w, 200, getResponse{Value: json.RawMessage(v)})
	return nil
}
