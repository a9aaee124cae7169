package intent

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"strings"
	"time"
)

const retentionSeconds = 7 * 86400

// maybeCleanup starts the lazy cleanup pass (§16: triggered by traffic) when
// the interval has passed; after a failure the next try waits 60 s (scaled).
func (s *Server) maybeCleanup() {
	now := s.clock()
	s.cleanMu.Lock()
	if s.cleanRunning || s.cleanClosed || now.Before(s.nextCleanup) {
		s.cleanMu.Unlock()
		return
	}
	s.cleanRunning = true
	s.cleanWG.Add(1)
	s.cleanMu.Unlock()
	go func() {
		defer s.cleanWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := s.runCleanup(ctx)
		s.cleanMu.Lock()
		defer s.cleanMu.Unlock()
		s.cleanRunning = false
		if err != nil {
			s.log.Warn("lazy cleanup failed; backing off 60 s", "err", err)
			s.nextCleanup = s.clock().Add(s.dur(60))
			return
		}
		s.nextCleanup = s.clock().Add(s.dur(s.cfg.CleanupInterval.Seconds()))
	}()
}

// expireLeases records the end of every lapsed lease: dead when the attempts
// are spent (with a dead-letter row), open otherwise (run_at already holds
// the backoff).
func (s *Server) expireLeases(tx *sql.Tx, now float64, st *cleanupStats) error {
	if s.mutant == MutantLeaseNeverExpires {
		return nil
	}
	if s.mutant != MutantMaxAttemptsIgnored {
		rows, err := tx.Query(s.sql(`UPDATE intents SET status = 'dead', claim_token = NULL, completed_at = claim_expires_at,
 last_error = COALESCE(last_error, 'lease expired') WHERE status IN ('open','claimed') AND status = 'claimed' AND claim_expires_at <= ? AND claim_attempts >= max_attempts
 RETURNING id, namespace, goal, payload, publisher, claim_attempts, last_error, completed_at`), now)
		if err != nil {
			return err
		}
		var dead []deadLetter
		var pubs, payloads []string
		for rows.Next() {
			var d deadLetter
			var pub, payload string
			var le sql.NullString
			if err := rows.Scan(&d.IntentID, &d.Namespace, &d.Goal, &payload, &pub, &d.ClaimAttempts, &le, &d.DiedAt); err != nil {
				rows.Close()
				return err
			}
			d.LastError = nullStr(le)
			dead, pubs, payloads = append(dead, d), append(pubs, pub), append(payloads, payload)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for i, d := range dead {
			if _, err := tx.Stmt(s.st.insertDead).Exec(d.IntentID, d.Namespace, d.Goal, payloads[i], pubs[i], "lease expired after max attempts", d.ClaimAttempts, d.LastError, d.DiedAt); err != nil {
				return err
			}
		}
		if st != nil {
			st.ExpiredClaimsDead = int64(len(dead))
		}
	}
	res, err := tx.Exec(s.sql(`UPDATE intents SET status = 'open', claim_token = NULL, claimed_by = NULL, claim_expires_at = NULL,
 last_error = COALESCE(last_error, 'lease expired') WHERE status IN ('open','claimed') AND status = 'claimed' AND claim_expires_at <= ?`), now)
	if err != nil {
		return err
	}
	if st != nil {
		st.ExpiredClaimsRequeued, _ = res.RowsAffected()
	}
	return nil
}

// runCleanup is one cleanup pass (§8.4), in one write operation.
func (s *Server) runCleanup(ctx context.Context) (cleanupStats, error) {
	if err := failpointInsideCleanup(); err != nil {
		return cleanupStats{}, fmt.Errorf("cleanup: %w", err)
	}
	v, err := s.w.submit(ctx, func(tx *sql.Tx) (any, error) {
		var st cleanupStats
		now := s.nowF()
		if err := s.expireLeases(tx, now, &st); err != nil {
			return nil, err
		}
		retention := now - s.secs(retentionSeconds)
		for _, d := range []struct {
			dst  *int64
			q    string
			args []any
		}{
			{&st.ExpiredOpenDeleted, `DELETE FROM intents WHERE status IN ('open','claimed') AND status = 'open' AND expires_at <= ?`, []any{now}},
			{&st.FulfilledDeleted, `DELETE FROM intents WHERE status IN ('fulfilled','dead') AND status = 'fulfilled' AND completed_at <= ?`, []any{retention}},
			{&st.DeadDeleted, `DELETE FROM intents WHERE status IN ('fulfilled','dead') AND status = 'dead' AND completed_at <= ?`, []any{retention}},
			{&st.DeadLettersDeleted, `DELETE FROM dead_letters WHERE died_at <= ?`, []any{retention}},
			{&st.StoreDeleted, `DELETE FROM store WHERE expires_at <= ?`, []any{now}},
			{&st.IdempotencyDeleted, `DELETE FROM idempotency WHERE created_at <= ?`, []any{now - s.secs(defaultIntentTTL)}},
			// A nonce can be replayed while its timestamp is in the window:
			// up to 300 s after receipt plus 300 s of skew, in real seconds.
			{&st.NoncesDeleted, `DELETE FROM nonces WHERE ts <= ?`, []any{now - 2*timestampWindow}},
		} {
			res, err := tx.Exec(s.sql(d.q), d.args...)
			if err != nil {
				return nil, err
			}
			*d.dst, _ = res.RowsAffected()
		}
		if s.pg {
			// The tester rate windows are rows here, shared by the replicas.
			res, err := tx.Exec(`DELETE FROM rate_windows WHERE start_ns <= $1`, s.clock().Add(-s.dur(60)).UnixNano())
			if err != nil {
				return nil, err
			}
			st.RateLimitsDeleted, _ = res.RowsAffected()
		}
		return st, nil
	})
	if err != nil {
		return cleanupStats{}, fmt.Errorf("cleanup: %w", err)
	}
	st := v.(cleanupStats)
	window := s.dur(60)
	now := s.clock()
	s.rateMu.Lock()
	for k, rw := range s.rate {
		if now.Sub(rw.start) >= window {
			delete(s.rate, k)
			st.RateLimitsDeleted++
		}
	}
	s.rateMu.Unlock()
	return st, nil
}

func (s *Server) cleanupNow(w http.ResponseWriter, q *request) error {
	st, err := s.runCleanup(q.r.Context())
	if err != nil {
		return err
	}
	s.cleanMu.Lock()
	s.nextCleanup = s.clock().Add(s.dur(s.cfg.CleanupInterval.Seconds()))
	s.cleanMu.Unlock()
	s.writeJSON(w, 200, st)
	return nil
}

func (s *Server) generateKey(w http.ResponseWriter, q *request) error {
	m, err := decodeObject(q.body)
	if err != nil {
		return err
	}
	if _, ok := m["owner"]; !ok {
		return herr(400, codeInvalidRequest, "owner is required")
	}
	owner, ok, err := decodeString(m, "owner", codeInvalidOwner, 1, 128)
	if err != nil {
		return err
	}
	if !ok {
		return herr(400, codeInvalidOwner, "owner must be a string of 1–128 characters")
	}
	key := "tk_" + newHexID()
	if _, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		_, err := tx.Exec(s.sql(`INSERT INTO api_keys(api_key, owner, created_at) VALUES(?,?,?)`), key, owner, s.nowF())
		return nil, err
	}); err != nil {
		return err
	}
	s.keysMu.Lock()
	s.keys[key] = owner
	s.keysMu.Unlock()
	s.writeJSON(w, 201, generateKeyResponse{APIKey: key, Owner: owner})
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, q *request) error {
	m, err := decodeObject(q.body)
	if err != nil {
		return err
	}
	if _, ok := m["api_key"]; !ok {
		return herr(400, codeInvalidRequest, "api_key is required")
	}
	key, ok, err := decodeString(m, "api_key", codeInvalidAPIKey, 1, 256)
	if err != nil {
		return err
	}
	if !ok {
		return herr(400, codeInvalidAPIKey, "api_key must be a string")
	}
	// Remove it from the live set first: no request authenticates with it
	// once the revocation is durable.
	s.keysMu.Lock()
	owner, known := s.keys[key]
	delete(s.keys, key)
	s.keysMu.Unlock()
	v, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		res, err := tx.Exec(s.sql(`DELETE FROM api_keys WHERE api_key = ?`), key)
		if err != nil {
			return nil, err
		}
		n, _ := res.RowsAffected()
		tables := []string{"idempotency", "nonces"}
		if s.pg {
			tables = append(tables, "rate_windows")
		}
		for _, t := range tables {
			if _, err := tx.Exec(s.sql(`DELETE FROM `+t+` WHERE api_key = ?`), key); err != nil {
				return nil, err
			}
		}
		return n, nil
	})
	if err != nil {
		if known {
			s.keysMu.Lock()
			s.keys[key] = owner
			s.keysMu.Unlock()
		}
		return err
	}
	s.rateMu.Lock()
	delete(s.rate, key)
	s.rateMu.Unlock()
	if v.(int64) == 0 {
		return herr(404, codeNotFound, "no such tester key")
	}
	s.writeJSON(w, 200, map[string]any{"revoked": true, "api_key": key})
	return nil
}

func (s *Server) purge(w http.ResponseWriter, q *request) error {
	m, err := decodeObject(q.body)
	if err != nil {
		return err
	}
	var confirm bool
	if raw, ok := m["confirm"]; !ok || json.Unmarshal(raw, &confirm) != nil || !confirm {
		return herr(400, codeInvalidConfirm, "confirm: true is required")
	}
	ns, hasNS, err := decodeString(m, "namespace", codeInvalidNamespace, 1, maxNamespaceLen)
	if err != nil {
		return err
	}
	if hasNS && !validNamespace(ns) {
		return herr(400, codeInvalidNamespace, "namespace must be 1–64 of A-Z a-z 0-9 . - _")
	}
	v, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		out := map[string]int64{}
		stmts := [][3]string{{"intents_deleted", `DELETE FROM intents`, ""}, {"dead_letters_deleted", `DELETE FROM dead_letters`, ""}}
		if !hasNS {
			stmts = append(stmts, [3]string{"idempotency_deleted", `DELETE FROM idempotency`, ""}, [3]string{"nonces_deleted", `DELETE FROM nonces`, ""})
		}
		for _, d := range stmts {
			var res sql.Result
			var err error
			if hasNS {
				res, err = tx.Exec(s.sql(d[1]+` WHERE namespace = ?`), ns)
			} else {
				res, err = tx.Exec(d[1])
			}
			if err != nil {
				return nil, err
			}
			out[d[0]], _ = res.RowsAffected()
		}
		if s.pg && !hasNS {
			if _, err := tx.Exec(`DELETE FROM rate_windows`); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	if !hasNS {
		s.rateMu.Lock()
		clear(s.rate)
		s.rateMu.Unlock()
	}
	out := v.(map[string]int64)
	body := map[string]any{"ok": true}
	for k, n := range out {
		body[k] = n
	}
	if hasNS {
		body["namespace"] = ns
	}
	s.writeJSON(w, 200, body)
	return nil
}

func (s *Server) adminIntent(w http.ResponseWriter, q *request) error {
	x, err := s.readIntent(q.r.Context(), q.param)
	if err != nil {
		return err
	}
	s.writeJSON(w, 200, s.view(x, s.nowF(), true, true))
	return nil
}

func (s *Server) adminCancel(w http.ResponseWriter, q *request) error {
	id := q.param
	v, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		now := s.nowF()
		var ns, goal, payload, pub string
		var attempts int
		var le sql.NullString
		err := tx.QueryRow(s.sql(`UPDATE intents SET status = 'dead', claim_token = NULL, claim_expires_at = NULL, completed_at = ?,
 last_error = COALESCE(last_error, 'cancelled by admin') WHERE id = ? RETURNING namespace, goal, payload, publisher, claim_attempts, last_error`), now, id).
			Scan(&ns, &goal, &payload, &pub, &attempts, &le)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, herr(404, codeNotFound, "intent not found")
		}
		if err != nil {
			return nil, err
		}
		if _, err := tx.Stmt(s.st.insertDead).Exec(id, ns, goal, payload, pub, "cancelled by admin", attempts, le, now); err != nil {
			return nil, err
		}
		return mutationResponse{ID: id, Status: stateDead, ClaimAttempts: attempts}, nil
	})
	if err != nil {
		return err
	}
	s.writeJSON(w, 200, v)
	return nil
}

func (s *Server) adminRetry(w http.ResponseWriter, q *request) error {
	id := q.param
	v, err := s.w.submit(q.r.Context(), func(tx *sql.Tx) (any, error) {
		now := s.nowF()
		if err := s.deadOnTouch(tx, id, now); err != nil {
			return nil, err
		}
		res, err := tx.Exec(s.sql(`UPDATE intents SET status = 'open', claim_attempts = 0, claimed_by = NULL, claim_token = NULL, claimed_at = NULL,
 claim_expires_at = NULL, result = NULL, result_type = NULL, last_error = NULL, completed_at = NULL, run_at = ?, expires_at = ?
 WHERE id = ? AND status = 'dead'`), now, now+s.secs(defaultIntentTTL), id)
		if err != nil {
			return nil, err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var st string
			if err := tx.QueryRow(s.sql(`SELECT status FROM intents WHERE id = ?`), id).Scan(&st); errors.Is(err, sql.ErrNoRows) {
				return nil, herr(404, codeNotFound, "intent not found")
			}
			return nil, herr(409, codeInvalidState, "only a dead intent can be retried")
		}
		if _, err := tx.Exec(s.sql(`DELETE FROM dead_letters WHERE intent_id = ?`), id); err != nil {
			return nil, err
		}
		return mutationResponse{ID: id, Status: stateOpen, RunAt: &now}, nil
	})
	if err != nil {
		return err
	}
	s.writeJSON(w, 200, v)
	return nil
}

// settleLeases records lapsed leases before an admin view of dead letters.
func (s *Server) settleLeases(ctx context.Context) error {
	_, err := s.w.submit(ctx, func(tx *sql.Tx) (any, error) { return nil, s.expireLeases(tx, s.nowF(), nil) })
	return err
}

func scanDead(sc scanner, withPayload bool) (deadLetter, error) {
	var d deadLetter
	var le sql.NullString
	var payload string
	err := sc.Scan(&d.IntentID, &d.Namespace, &d.Goal, &d.Reason, &d.ClaimAttempts, &le, &d.DiedAt, &payload)
	d.LastError = nullStr(le)
	if withPayload {
		d.Payload = json.RawMessage(payload)
	}
	return d, err
}

const deadCols = `intent_id, namespace, goal, reason, claim_attempts, last_error, died_at, payload`

func (s *Server) deadList(w http.ResponseWriter, q *request) error {
	if err := s.settleLeases(q.r.Context()); err != nil {
		return err
	}
	rows, err := s.rdb.QueryContext(q.r.Context(), `SELECT `+deadCols+` FROM dead_letters ORDER BY died_at DESC LIMIT 100`)
	if err != nil {
		return err
	}
	defer rows.Close()
	out := deadLetters{DeadLetters: []deadLetter{}}
	for rows.Next() {
		d, err := scanDead(rows, false)
		if err != nil {
			return err
		}
		out.DeadLetters = append(out.DeadLetters, d)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	s.writeJSON(w, 200, out)
	return nil
}

func (s *Server) deadLetter(w http.ResponseWriter, q *request) error {
	if err := s.settleLeases(q.r.Context()); err != nil {
		return err
	}
	d, err := scanDead(s.rdb.QueryRowContext(q.r.Context(), s.sql(`SELECT `+deadCols+` FROM dead_letters WHERE intent_id = ?`), q.param), true)
	if errors.Is(err, sql.ErrNoRows) {
		return herr(404, codeNotFound, "no such dead letter")
	}
	if err != nil {
		return err
	}
	s.writeJSON(w, 200, d)
	return nil
}

type statusCount struct {
	Status, Namespace string
	N                 int64
}

func (s *Server) counts(ctx context.Context) ([]statusCount, int64, int64, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT status, namespace, COUNT(*) FROM intents GROUP BY status, namespace ORDER BY namespace, status`)
	if err != nil {
		return nil, 0, 0, err
	}
	defer rows.Close()
	var out []statusCount
	for rows.Next() {
		var c statusCount
		if err := rows.Scan(&c.Status, &c.Namespace, &c.N); err != nil {
			return nil, 0, 0, err
		}
		out = append(out, c)
	}
	var dead, keys int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM dead_letters), (SELECT COUNT(*) FROM api_keys)`).Scan(&dead, &keys); err != nil {
		return nil, 0, 0, err
	}
	return out, dead, keys, rows.Err()
}

func promLabel(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

func (s *Server) metrics(w http.ResponseWriter, q *request) error {
	cs, dead, keys, err := s.counts(q.r.Context())
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# HELP intent_bus_intents_total Total intents by status and namespace\n# TYPE intent_bus_intents_total gauge\n")
	for _, c := range cs {
		fmt.Fprintf(&b, "intent_bus_intents_total{status=\"%s\",namespace=\"%s\"} %d\n", promLabel(c.Status), promLabel(c.Namespace), c.N)
	}
	fmt.Fprintf(&b, "# HELP intent_bus_dead_letters_total Total dead-letter intents\n# TYPE intent_bus_dead_letters_total gauge\nintent_bus_dead_letters_total %d\n", dead)
	fmt.Fprintf(&b, "# HELP intent_bus_tester_keys_total Total active tester keys\n# TYPE intent_bus_tester_keys_total gauge\nintent_bus_tester_keys_total %d\n", keys)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.WriteHeader(200)
	w.Write([]byte(b.String()))
	return nil
}

var dashboardTmpl = template.Must(template.New("d").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Intent Bus dashboard</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em}</style></head>
<body><h1>Intent Bus {{.Version}} (protocol {{.Protocol}})</h1>
<h2>Queue</h2><table><tr><th>namespace</th><th>status</th><th>intents</th></tr>
{{range .Counts}}<tr><td>{{.Namespace}}</td><td>{{.Status}}</td><td>{{.N}}</td></tr>{{end}}</table>
<h2>Recent intents</h2><table><tr><th>id</th><th>namespace</th><th>goal</th><th>status</th><th>attempts</th></tr>
{{range .Recent}}<tr><td>{{.ID}}</td><td>{{.Namespace}}</td><td>{{.Goal}}</td><td>{{.Status}}</td><td>{{.ClaimAttempts}}</td></tr>{{end}}</table>
<h2>Tester keys ({{len .Keys}})</h2><ul>{{range .Keys}}<li>{{.}}</li>{{end}}</ul>
<h2>Dead letters ({{.Dead}})</h2><table><tr><th>intent</th><th>goal</th><th>reason</th><th>error</th></tr>
{{range .DeadRows}}<tr><td>{{.IntentID}}</td><td>{{.Goal}}</td><td>{{.Reason}}</td><td>{{if .LastError}}{{.LastError}}{{end}}</td></tr>{{end}}</table>
</body></html>`))

func (s *Server) dashboard(w http.ResponseWriter, q *request) error {
	ctx := q.r.Context()
	cs, dead, _, err := s.counts(ctx)
	if err != nil {
		return err
	}
	data := struct {
		Version, Protocol string
		Counts            []statusCount
		Recent            []intentView
		Keys              []string
		Dead              int64
		DeadRows          []deadLetter
	}{Version: serverVersion, Protocol: intentVersion, Counts: cs, Dead: dead}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+intentCols+` FROM intents ORDER BY created_at DESC LIMIT 20`)
	if err != nil {
		return err
	}
	now := s.nowF()
	for rows.Next() {
		x, err := scanIntent(rows)
		if err != nil {
			rows.Close()
			return err
		}
		data.Recent = append(data.Recent, s.view(x, now, false, false))
	}
	rows.Close()
	keys := map[string]string{}
	if s.pg { // another replica may have generated or revoked keys
		krows, err := s.rdb.QueryContext(ctx, `SELECT api_key, owner FROM api_keys`)
		if err != nil {
			return err
		}
		for krows.Next() {
			var k, o string
			if err := krows.Scan(&k, &o); err != nil {
				krows.Close()
				return err
			}
			keys[k] = o
		}
		krows.Close()
	} else {
		s.keysMu.RLock()
		maps.Copy(keys, s.keys)
		s.keysMu.RUnlock()
	}
	for k, o := range keys {
		data.Keys = append(data.Keys, o+" ("+k[:min(len(k), 7)]+"…)")
	}
	drows, err := s.rdb.QueryContext(ctx, `SELECT `+deadCols+` FROM dead_letters ORDER BY died_at DESC LIMIT 20`)
	if err != nil {
		return err
	}
	for drows.Next() {
		d, err := scanDead(drows, false)
		if err != nil {
			drows.Close()
			return err
		}
		data.DeadRows = append(data.DeadRows, d)
	}
	drows.Close()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.WriteHeader(200)
	return dashboardTmpl.Execute(w, data)
}
