package a2a

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

const maxBody = 64 << 10

// Handler returns the queue's HTTP handler (docs/a2a-binding.md).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{"ok": true, "time_scale": s.timeScale()})
	})
	mux.HandleFunc("POST /a2a/tasks", s.handleEnqueue)
	mux.HandleFunc("POST /a2a/lease", s.handleLease)
	mux.HandleFunc("POST /a2a/tasks/{id}/result", s.handleResult)
	mux.HandleFunc("GET /a2a/tasks/{id}", s.handleStatus)
	mux.HandleFunc("GET /a2a/queue", s.handleQueue)
	mux.HandleFunc("POST /a2a/results/drain", s.handleDrain)
	mux.HandleFunc("POST /a2a/compact", s.handleCompact)
	mux.HandleFunc("POST /a2a/repair", s.handleRepair)
	mux.HandleFunc("POST /a2a/retry-stale", s.handleRetryStale)
	mux.HandleFunc("GET /a2a/audit", s.handleAudit)
	mux.HandleFunc("GET /a2a/scheduler", s.handleScheduler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("a2a: panic", "panic", fmt.Sprint(v))
				writeError(w, errf(400, "invalid_request", "the request could not be handled"))
			}
		}()
		if r.URL.Path != "/health" && !s.authorized(r.Header.Get("X-API-KEY")) {
			writeJSON(w, 401, map[string]any{"error": "unauthorized", "message": "X-API-KEY is missing or wrong"})
			return
		}
		if _, pat := mux.Handler(r); pat == "" {
			writeJSON(w, 404, map[string]any{"error": "not_found", "message": "no such route (docs/a2a-binding.md)"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = 500, []byte(`{"error":"internal","message":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// writeError writes an apiError as it is; a store failure is a 503 (the
// request was well formed; the queue could not serve it now).
func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeJSON(w, ae.status, map[string]any{"error": ae.code, "message": ae.message})
		return
	}
	writeJSON(w, 503, map[string]any{"error": "unavailable", "message": "the queue could not serve the request now; retry"})
}

// decode reads a JSON object body into v (unknown fields refused).
func decode(r *http.Request, v any) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return errf(400, "invalid_request", "unreadable body")
	}
	if len(b) > maxBody {
		return errf(413, "invalid_request", "body over 64 KiB")
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errf(400, "invalid_request", "body: "+err.Error())
	}
	if dec.More() {
		return errf(400, "invalid_request", "body: trailing data")
	}
	return nil
}

func agentOK(a string) bool { return strings.TrimSpace(a) != "" && len(a) <= 200 && textOK(a) }

// textOK: s can be a column of either store (valid UTF-8 without NUL, which
// PostgreSQL's text refuses): one that is not is refused as malformed, or
// names nothing, on both stores alike.
func textOK(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

func (s *Server) handleEnqueue(w http.ResponseWriter, r *http.Request) {
	var t Task
	if err := decode(r, &t); err != nil {
		writeError(w, err)
		return
	}
	switch {
	case !agentOK(t.Sender) || !agentOK(t.Recipient):
		writeError(w, errf(400, "invalid_request", "sender and recipient are non-empty agent ids of at most 200 characters"))
		return
	case len(t.ID) > 200:
		writeError(w, errf(400, "invalid_request", "id over 200 characters"))
		return
	case !textOK(t.ID) || !textOK(t.TaskKind) || (t.Idempotency != nil && t.Idempotency.Key != nil && !textOK(*t.Idempotency.Key)):
		writeError(w, errf(400, "invalid_request", "id, task_kind and idempotency.key are text without NUL"))
		return
	case t.Idempotency != nil && t.Idempotency.DuplicateSafety != SafetyIdempotent && t.Idempotency.DuplicateSafety != SafetyUnsafe:
		writeError(w, errf(400, "invalid_request", "idempotency.duplicate_safety is idempotent or unsafe"))
		return
	case t.Idempotency != nil && t.Idempotency.Key != nil && strings.TrimSpace(*t.Idempotency.Key) == "" && s.mutant != MutantEmptyKeyAccepted:
		writeError(w, errf(400, "invalid_idempotency_key", "a present idempotency key must be non-empty"))
		return
	}
	e, err := s.enqueue(r.Context(), t)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 201, map[string]any{"entry": e})
}

func (s *Server) handleLease(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Recipient string `json:"recipient"`
	}
	if err := decode(r, &q); err != nil {
		writeError(w, err)
		return
	}
	if !agentOK(q.Recipient) {
		writeError(w, errf(400, "invalid_request", "recipient is a non-empty agent id"))
		return
	}
	e, err := s.lease(r.Context(), q.Recipient)
	switch {
	case err != nil:
		writeError(w, err)
	case e == nil:
		w.WriteHeader(204)
	default:
		writeJSON(w, 200, map[string]any{"entry": e})
	}
}

func (s *Server) handleResult(w http.ResponseWriter, r *http.Request) {
	var q struct {
		LeaseID      string          `json:"lease_id"`
		Status       string          `json:"status"`
		Content      json.RawMessage `json:"content"`
		ErrorMessage string          `json:"error_message"`
	}
	if err := decode(r, &q); err != nil {
		writeError(w, err)
		return
	}
	if q.Status != "completed" && q.Status != "failed" {
		writeError(w, errf(400, "invalid_request", "status is completed or failed"))
		return
	}
	if len(q.Content) == 0 {
		q.Content = json.RawMessage("null")
	}
	if !textOK(r.PathValue("id")) {
		writeError(w, errUnknownTask)
		return
	}
	e, dup, err := s.postResult(r.Context(), r.PathValue("id"), q.LeaseID, Result{Status: q.Status, Content: q.Content, ErrorMessage: q.ErrorMessage})
	if err != nil {
		writeError(w, err)
		return
	}
	out := map[string]any{"entry": e}
	if dup {
		out["duplicate"] = true
	}
	writeJSON(w, 200, out)
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	if !textOK(r.PathValue("id")) {
		writeError(w, errUnknownTask)
		return
	}
	e, err := s.entryBy(s.rdb, r.PathValue("id"))
	switch {
	case err != nil:
		writeError(w, err)
	case e == nil:
		writeError(w, errUnknownTask)
	default:
		if s.mutant == MutantMetadataDropped {
			e.Task.Idempotency = nil
		}
		writeJSON(w, 200, map[string]any{"entry": e})
	}
}

// queryInt reads a non-negative integer parameter (def when absent).
func queryInt(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errf(400, "invalid_request", name+" is a non-negative integer")
	}
	return n, nil
}

func (s *Server) handleQueue(w http.ResponseWriter, r *http.Request) {
	age, err := queryInt(r, "min_lease_age_ms", -1)
	if err != nil {
		writeError(w, err)
		return
	}
	limit, err := queryInt(r, "limit", 100)
	if err != nil {
		writeError(w, err)
		return
	}
	limit = min(max(limit, 1), 1000)
	state := r.URL.Query().Get("state_filter")
	if state == "in-flight" {
		state = StateInFlight
	}
	if state != "" && state != StateQueued && state != StateInFlight {
		writeError(w, errf(400, "invalid_request", "state_filter is queued or in_flight"))
		return
	}
	now := s.nowMS()
	where := `state IN ('queued','in_flight')`
	args := []any{}
	if state != "" {
		where = `state = ?`
		args = append(args, state)
	}
	if age >= 0 {
		where += ` AND (state <> 'in_flight' OR leased_at_ms <= ?)`
		args = append(args, now-age)
	}
	tasks, err := s.entries(`SELECT `+entryCols+` FROM tasks WHERE `+where+` ORDER BY seq LIMIT ?`, append(args, limit)...)
	if err != nil {
		writeError(w, err)
		return
	}
	results, err := s.entries(`SELECT `+entryCols+` FROM tasks WHERE state = 'result_pending' ORDER BY seq LIMIT ?`, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	out := map[string]any{"kind": "a2a_status", "limit": limit, "min_lease_age_ms": nil, "state_filter": nil, "tasks": tasks, "results": results}
	if age >= 0 {
		out["min_lease_age_ms"] = age
	}
	if state != "" {
		out["state_filter"] = state
	}
	writeJSON(w, 200, out)
}

func (s *Server) entries(q string, args ...any) ([]*Entry, error) {
	rows, err := s.rdb.Query(s.q(q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Entry{}
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *Server) handleDrain(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Sender string `json:"sender"`
	}
	if err := decode(r, &q); err != nil {
		writeError(w, err)
		return
	}
	if !agentOK(q.Sender) {
		writeError(w, errf(400, "invalid_request", "sender is a non-empty agent id"))
		return
	}
	es, err := s.drain(r.Context(), q.Sender)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"results": es})
}

func (s *Server) handleCompact(w http.ResponseWriter, r *http.Request) {
	n, err := s.compact(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"kind": "a2a_compacted", "dropped": n})
}

func (s *Server) handleRepair(w http.ResponseWriter, r *http.Request) {
	var q RepairRequest
	if err := decode(r, &q); err != nil {
		writeError(w, err)
		return
	}
	e, row, err := s.repair(r.Context(), q)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"entry": e, "audit": row})
}

func (s *Server) handleRetryStale(w http.ResponseWriter, r *http.Request) {
	var q struct {
		Enabled       *bool  `json:"enabled"`
		MinLeaseAgeMS *int64 `json:"min_lease_age_ms"`
		MaxAttempts   *int64 `json:"max_attempts"`
		MaxRequeues   *int64 `json:"max_requeues"`
		ScanLimit     *int64 `json:"scan_limit"`
	}
	if err := decode(r, &q); err != nil {
		writeError(w, err)
		return
	}
	p := DefaultPolicy()
	if s.mutant == MutantGateEnabledByDefault {
		p.Enabled = true
	}
	if q.Enabled != nil {
		p.Enabled = *q.Enabled
	}
	for _, f := range []struct {
		v   *int64
		dst func(int64)
	}{
		{q.MinLeaseAgeMS, func(n int64) { p.MinLeaseAgeMS = n }},
		{q.MaxAttempts, func(n int64) { p.MaxAttempts = clampInt(n) }},
		{q.MaxRequeues, func(n int64) { p.MaxRequeues = clampInt(n) }},
		{q.ScanLimit, func(n int64) { p.ScanLimit = clampInt(n) }},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			writeError(w, errf(400, "invalid_request", "the policy's numbers are non-negative"))
			return
		}
		f.dst(*f.v)
	}
	if p.MaxAttempts == 0 || p.ScanLimit == 0 {
		writeError(w, errf(400, "invalid_request", "max_attempts and scan_limit are > 0"))
		return
	}
	p.ScanLimit = min(p.ScanLimit, 10000)
	rep, err := s.retryStale(r.Context(), p, false)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"kind": "a2a_auto_retried", "report": rep})
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	since, err := queryInt(r, "since_seq", 0)
	if err != nil {
		writeError(w, err)
		return
	}
	q, args := `SELECT row FROM audit WHERE seq > ?`, []any{since}
	if !textOK(r.URL.Query().Get("task_id")) || !textOK(r.URL.Query().Get("action")) {
		writeError(w, errf(400, "invalid_request", "task_id and action are text without NUL"))
		return
	}
	if id := r.URL.Query().Get("task_id"); id != "" {
		q, args = q+` AND task_id = ?`, append(args, id)
	}
	if a := r.URL.Query().Get("action"); a != "" {
		q, args = q+` AND action = ?`, append(args, a)
	}
	rows, err := s.rdb.Query(s.q(q+` ORDER BY seq LIMIT 1000`), args...)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rows.Close()
	out := []json.RawMessage{}
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			writeError(w, err)
			return
		}
		out = append(out, json.RawMessage(b))
	}
	if err := rows.Err(); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"rows": out})
}

func (s *Server) handleScheduler(w http.ResponseWriter, r *http.Request) {
	sc := s.cfg.Scheduler
	p := sc.Policy
	if !sc.Enabled {
		p = DefaultPolicy()
	}
	writeJSON(w, 200, map[string]any{"enabled": sc.Enabled, "interval_ms": sc.Interval.Milliseconds(), "policy": p})
}

// timeScale is the time scale the queue publishes: Config.TimeScale, 1
// when none was given.
func (s *Server) timeScale() float64 {
	if s.cfg.TimeScale > 0 {
		return s.cfg.TimeScale
	}
	return 1
}
