// Package sut is the bundled reference server of the Intent Protocol v2.1
// (seed 004): the yardstick idscheck compares vendors with. One writer
// goroutine owns the only SQLite write connection and commits pending
// operations in batches (group commit, synchronous=FULL); no reply leaves
// before its commit is durable. Reads use a separate WAL reader pool.
package intent

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// Server is the reference server. Its handler is safe for concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	scale  float64
	mutant string
	rd     readings
	clock  func() time.Time
	wdb    *sql.DB // the only write connection, owned by w
	rdb    *sql.DB // read-only pool
	w      *writer
	st     stmts
	pg     bool // the store is PostgreSQL (Config.Store), shared with other replicas
	rndMu  sync.Mutex
	rnd    *mrand.Rand // under rndMu: on PostgreSQL writer ops run concurrently

	rs replicaState // the replica mutants' process state

	keysMu sync.RWMutex
	keys   map[string]string // tester api key → owner

	rateMu sync.Mutex
	rate   map[string]*rateWindow

	cleanMu      sync.Mutex
	nextCleanup  time.Time // lazy cleanup runs on traffic at or after this
	cleanRunning bool
	cleanClosed  bool           // Close has begun: no lazy pass starts
	cleanWG      sync.WaitGroup // the lazy pass in flight; Close waits for it

	closeOnce sync.Once
	closeErr  error
}

type rateWindow struct {
	start time.Time
	n     int
}

// Open opens (or creates) the database at cfg.DBPath and returns a running
// server. It refuses an empty or default BUS_SECRET and an unknown mutant.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Secret == "" || cfg.Secret == DefaultSecret {
		return nil, fmt.Errorf("open: BUS_SECRET must be set and must not be the default %q", DefaultSecret)
	}
	if cfg.Store != "" && !pgstore.IsPostgres(cfg.Store) {
		return nil, fmt.Errorf("open: store %q: want a postgres:// URL (or no store: the SQLite database at DBPath)", pgstore.Redacted(cfg.Store))
	}
	if cfg.DBPath == "" && cfg.Store == "" {
		return nil, errors.New("open: no database path")
	}
	if cfg.Mutant != "" && !knownMutant(cfg.Mutant) {
		return nil, fmt.Errorf("open: unknown mutant %q (valid: %s)", cfg.Mutant, strings.Join(mutantNames(), ", "))
	}
	if cfg.Store != "" && cfg.Mutant == MutantLostOnCrash {
		return nil, fmt.Errorf("open: mutant %s acknowledges SQLite batches before their commit: it has no PostgreSQL form", cfg.Mutant)
	}
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = "replica"
	}
	rd, err := resolveReadings(cfg.Readings)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	if cfg.TimeScale == 0 {
		cfg.TimeScale = 1
	}
	if !(cfg.TimeScale > 0) || math.IsInf(cfg.TimeScale, 0) {
		return nil, fmt.Errorf("open: time scale must be > 0, got %v", cfg.TimeScale)
	}
	if cfg.CleanupInterval <= 0 {
		cfg.CleanupInterval = DefaultCleanupInterval
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	seed := cfg.Seed
	if seed == 0 {
		var b [8]byte
		rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:])
	}
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	s := &Server{cfg: cfg, log: log, scale: cfg.TimeScale, mutant: cfg.Mutant, rd: rd, clock: clock,
		rnd: mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), keys: map[string]string{}, rate: map[string]*rateWindow{}}
	if cfg.Store != "" {
		s.pg = true
		if err := s.openPostgres(ctx, cfg); err != nil {
			return nil, fmt.Errorf("open: %w", err)
		}
	} else if err := s.openSQLite(ctx, cfg); err != nil {
		return nil, err
	}
	wdb, rdb := s.wdb, s.rdb
	if err := s.prepare(ctx); err != nil {
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("open: %w", err)
	}
	rows, err := rdb.QueryContext(ctx, "SELECT api_key, owner FROM api_keys")
	if err != nil {
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("open: load keys: %w", err)
	}
	for rows.Next() {
		var k, o string
		if err := rows.Scan(&k, &o); err == nil {
			s.keys[k] = o
		}
	}
	rows.Close()
	s.nextCleanup = s.clock().Add(s.dur(cfg.CleanupInterval.Seconds()))
	if s.pg {
		s.w = newPGWriter(wdb, failpointAfterCommit)
	} else {
		s.w, err = newWriter(wdb, log, s.mutant == MutantLostOnCrash, failpointAfterCommit)
	}
	if err == nil {
		err = s.warmCache(ctx)
	}
	if err != nil {
		s.st.close()
		wdb.Close()
		rdb.Close()
		return nil, fmt.Errorf("open: %w", err)
	}
	var chosen []string
	for k, v := range cfg.Readings {
		chosen = append(chosen, k+"="+v)
	}
	slices.Sort(chosen)
	log.Info("reference server open", "db", cfg.DBPath, "store", pgstore.Redacted(cfg.Store), "replica", cfg.ReplicaID, "time_scale", s.scale, "mutant", s.mutant, "readings", strings.Join(chosen, " "))
	return s, nil
}

// openSQLite opens the SQLite database at cfg.DBPath: the only write
// connection (WAL, synchronous FULL, or OFF for the lost-on-crash mutant)
// and a read-only pool.
func (s *Server) openSQLite(ctx context.Context, cfg Config) error {
	sync := "FULL"
	if s.mutant == MutantLostOnCrash {
		sync = "OFF"
	}
	wdb, err := sql.Open("sqlite", dsn(cfg.DBPath, false, sync))
	if err != nil {
		return fmt.Errorf("open: write db: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if _, err := wdb.ExecContext(ctx, schema); err != nil {
		wdb.Close()
		return fmt.Errorf("open: schema: %w", err)
	}
	var mode string
	if err := wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		wdb.Close()
		return fmt.Errorf("open: journal_mode is %q, want wal: %v", mode, err)
	}
	rdb, err := sql.Open("sqlite", dsn(cfg.DBPath, true, "FULL"))
	if err != nil {
		wdb.Close()
		return fmt.Errorf("open: read db: %w", err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	s.wdb, s.rdb = wdb, rdb
	return nil
}

// Close waits for a lazy cleanup pass in flight (and starts no other),
// drains the writer (every queued operation is committed) and closes the
// database. Idempotent; the handler answers 503 afterwards.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cleanMu.Lock()
		s.cleanClosed = true
		s.cleanMu.Unlock()
		s.cleanWG.Wait()
		s.w.close()
		s.st.close()
		s.closeErr = errors.Join(s.rdb.Close(), s.wdb.Close())
	})
	return s.closeErr
}

// dur converts a protocol duration in seconds to real time.
func (s *Server) dur(seconds float64) time.Duration {
	return time.Duration(seconds / s.scale * float64(time.Second))
}

// secs converts protocol seconds to real seconds.
func (s *Server) secs(seconds float64) float64 { return seconds / s.scale }

// nowF is the server's time in Unix seconds.
func (s *Server) nowF() float64 { return float64(s.clock().UnixNano()) / 1e9 }

func newHexID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newIntentID returns a 32-hex-digit intent id: 8 bytes of the creation time
// in nanoseconds, then 8 random bytes. Ids sort by creation, so inserts land
// on the right edge of the b-trees: a batch dirties few pages (fewer WAL
// frames per commit).
func newIntentID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixNano()))
	rand.Read(b[8:])
	return hex.EncodeToString(b[:])
}

// httpError is an error with its status and code; writeError renders it.
type httpError struct {
	status     int
	code, msg  string
	retryAfter string
}

func (e *httpError) Error() string { return e.code + ": " + e.msg }

func herr(status int, code, msg string) *httpError {
	return &httpError{status: status, code: code, msg: msg}
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("encode response", "err", err)
		status, b = 500, []byte(`{"error":{"code":"internal_error","message":"cannot encode the response"}}`)
	}
	s.writeRaw(w, status, b)
}

func (s *Server) writeRaw(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

func (s *Server) writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		switch {
		case errors.Is(err, errClosed):
			he = herr(503, codeMaintenance, "the server is shutting down")
		case errors.Is(err, errCommit) || strings.Contains(err.Error(), "SQLITE_BUSY") || strings.Contains(err.Error(), "database is locked"):
			he = herr(503, codeDatabaseBusy, "the database is busy; retry")
			he.retryAfter = "1"
		case s.pg && pgstore.Refused(err):
			he = herr(400, codeInvalidRequest, "the request holds a value the store cannot keep (a NUL character, or bytes that are not UTF-8)")
		case s.pg && storeUnavailable(err):
			// The shared store failed (a lost connection, a partition, a
			// reply that never came): the outcome is unknown, never a
			// success; retry.
			s.log.Warn("store unavailable", "err", err)
			he = herr(503, codeDatabaseBusy, "the database is unavailable; retry")
			he.retryAfter = "1"
		default:
			s.log.Error("internal error", "err", err)
			he = herr(500, codeInternal, "internal error")
		}
	}
	if he.retryAfter != "" && s.mutant != MutantNoRetryAfter {
		w.Header().Set(hdrRetryAfter, he.retryAfter)
	}
	s.writeJSON(w, he.status, errorBody{Error: errorDetail{Code: he.code, Message: he.msg}})
}

// request is one request after the common checks.
type request struct {
	r      *http.Request
	body   []byte
	apiKey string // "" for admin-only or unauthenticated routes
	tester bool   // apiKey is a tester key
	admin  bool   // admin credentials were presented and valid
	param  string // the path parameter
	now    time.Time
}

type route struct {
	method  string
	kind    int // routeOpen, routeClient, routeAdmin, routeMetrics
	handler func(s *Server, w http.ResponseWriter, q *request) error
}

const (
	routeOpen = iota
	routeClient
	routeAdmin
	routeMetrics
	routeClientOrAdmin
)

// match finds the route of path; param is its path parameter. ok is false
// for an unknown path; methods lists the allowed methods of a known one.
func match(path string) (routes []route, param string, ok bool) {
	switch path {
	case pathHealth:
		return []route{{"GET", routeOpen, (*Server).health}}, "", true
	case pathIntent:
		return []route{{"POST", routeClient, (*Server).createIntent}}, "", true
	case pathClaim:
		return []route{{"POST", routeClient, (*Server).claim}}, "", true
	case pathDashboard:
		return []route{{"GET", routeAdmin, (*Server).dashboard}}, "", true
	case pathGenerateKey:
		return []route{{"POST", routeAdmin, (*Server).generateKey}}, "", true
	case pathRevokeKey:
		return []route{{"POST", routeAdmin, (*Server).revokeKey}}, "", true
	case pathPurge:
		return []route{{"POST", routeAdmin, (*Server).purge}}, "", true
	case pathCleanup:
		return []route{{"POST", routeAdmin, (*Server).cleanupNow}}, "", true
	case pathDead:
		return []route{{"GET", routeAdmin, (*Server).deadList}}, "", true
	case pathMetrics:
		return []route{{"GET", routeMetrics, (*Server).metrics}}, "", true
	}
	one := func(prefix string) (string, bool) {
		rest, found := strings.CutPrefix(path, prefix)
		if !found || rest == "" || strings.Contains(rest, "/") {
			return "", false
		}
		return rest, true
	}
	for _, p := range []struct {
		prefix string
		r      route
	}{
		{pathExtendClaim, route{"POST", routeClient, (*Server).extendClaim}},
		{pathFulfill, route{"POST", routeClient, (*Server).fulfill}},
		{pathFail, route{"POST", routeClient, (*Server).fail}},
		{pathResult, route{"GET", routeClientOrAdmin, (*Server).result}},
		{pathStatus, route{"GET", routeClientOrAdmin, (*Server).status}},
		{pathSet, route{"POST", routeClient, (*Server).set}},
		{pathGet, route{"GET", routeClient, (*Server).get}},
		{pathDeadLetter, route{"GET", routeAdmin, (*Server).deadLetter}},
	} {
		if v, ok := one(p.prefix); ok {
			return []route{p.r}, v, true
		}
	}
	if rest, found := strings.CutPrefix(path, pathAdminIntents); found {
		id, action, _ := strings.Cut(rest, "/")
		if id != "" {
			switch action {
			case "":
				if !strings.HasSuffix(rest, "/") {
					return []route{{"GET", routeAdmin, (*Server).adminIntent}}, id, true
				}
			case "cancel":
				return []route{{"POST", routeAdmin, (*Server).adminCancel}}, id, true
			case "retry":
				return []route{{"POST", routeAdmin, (*Server).adminRetry}}, id, true
			}
		}
	}
	return nil, "", false
}

// Handler returns the HTTP handler of every endpoint.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if s.mutant != MutantMissingSecurityHeaders {
		h := w.Header()
		for _, kv := range securityHeaders {
			h[kv[0]] = []string{kv[1]}
		}
	}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic in handler", "path", r.URL.Path, "panic", fmt.Sprint(v))
			s.writeError(w, herr(500, codeInternal, "internal error"))
		}
	}()
	err := s.dispatch(w, r, s.clock())
	if err != nil {
		s.writeError(w, err)
	}
	if s.log.Enabled(r.Context(), slog.LevelDebug) {
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "remote", s.clientIP(r), "err", err, "took", time.Since(start))
	}
}

func (s *Server) clientIP(r *http.Request) string {
	if s.cfg.TrustProxy {
		if f := r.Header.Get("X-Forwarded-For"); f != "" {
			ip, _, _ := strings.Cut(f, ",")
			return strings.TrimSpace(ip)
		}
	}
	return r.RemoteAddr
}

func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, now time.Time) error {
	routes, param, ok := match(r.URL.Path)
	if !ok {
		if s.mutant == MutantNonJSON404 {
			http.NotFound(w, r)
			return nil
		}
		return herr(404, codeNotFound, "no such endpoint: "+r.URL.Path)
	}
	var rt *route
	for i := range routes {
		if routes[i].method == r.Method || (routes[i].method == "GET" && r.Method == "HEAD") {
			rt = &routes[i]
		}
	}
	if rt == nil {
		w.Header().Set("Allow", routes[0].method)
		return herr(405, codeMethodNotAllowed, "method "+r.Method+" not allowed on "+r.URL.Path)
	}
	if s.cfg.EnforceHTTPS && r.TLS == nil && !(s.cfg.TrustProxy && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")) {
		return herr(403, codeHTTPSRequired, "HTTPS is required")
	}
	if s.cfg.Maintenance && (rt.kind == routeClient || rt.kind == routeClientOrAdmin) {
		e := herr(503, codeMaintenance, "the server is in maintenance mode")
		e.retryAfter = "60"
		return e
	}
	q := &request{r: r, param: param, now: now}
	if r.Body != nil && r.Method != "GET" && r.Method != "HEAD" {
		if r.ContentLength > maxBodyBytes {
			return herr(413, codePayloadTooLarge, fmt.Sprintf("the request body exceeds %d bytes", maxBodyBytes))
		}
		b, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
		if err != nil {
			return herr(400, codeInvalidRequest, "cannot read the body")
		}
		if len(b) > maxBodyBytes {
			return herr(413, codePayloadTooLarge, fmt.Sprintf("the request body exceeds %d bytes", maxBodyBytes))
		}
		q.body = b
	}
	switch rt.kind {
	case routeAdmin:
		if err := s.adminAuth(w, r, rt); err != nil {
			return err
		}
		q.admin = true
	case routeMetrics:
		if !s.metricsAuth(r) {
			return herr(401, codeUnauthorized, "a metrics token or admin credentials are required")
		}
	case routeClient, routeClientOrAdmin:
		// /result and /status (ReadingAdminResult, "admin-result-access"):
		// under "admin-alone" admin credentials need no X-API-KEY; under
		// "with-api-key" they do (401 without one). Admin credentials with a
		// valid key grant an admin's access under both.
		if rt.kind == routeClientOrAdmin && !s.rd.adminWithKey && r.Header.Get(hdrAPIKey) == "" && s.isAdmin(r) {
			q.admin = true
			break
		}
		if err := s.clientAuth(r.Context(), q); err != nil {
			return err
		}
		if rt.kind == routeClientOrAdmin && s.isAdmin(r) {
			q.admin = true
		}
	}
	if rt.kind != routeOpen {
		s.maybeCleanup()
	}
	return rt.handler(s, w, q)
}

// clientAuth checks the API key, the HMAC signature (when present or
// required) and the tester rate limit.
func (s *Server) clientAuth(ctx context.Context, q *request) error {
	r := q.r
	key := r.Header.Get(hdrAPIKey)
	if key == "" {
		return herr(401, codeUnauthorized, "missing X-API-KEY")
	}
	if subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.Secret)) != 1 {
		ok, err := s.knownKey(ctx, key)
		if err != nil {
			return err
		}
		if !ok {
			return herr(401, codeUnauthorized, "invalid API key")
		}
		q.tester = true
	}
	q.apiKey = key
	sig, ts, nonce := r.Header.Get(hdrSignature), r.Header.Get(hdrTimestamp), r.Header.Get(hdrNonce)
	if sig != "" || ts != "" || nonce != "" || s.cfg.RequireSignatures {
		if err := s.verifySignature(ctx, q, sig, ts, nonce); err != nil {
			return err
		}
	}
	if q.tester {
		if err := s.rateLimit(ctx, key, q.now); err != nil {
			return err
		}
	}
	return nil
}

// sigRefused is the answer to a refused signature, timestamp or nonce
// (ReadingSignatureStatus): 401 with the specific code, or 403
// invalid_signature.
func (s *Server) sigRefused(code, msg string) error {
	if s.rd.signature403 {
		return herr(403, codeInvalidSignature, msg)
	}
	return herr(401, code, msg)
}

func (s *Server) verifySignature(ctx context.Context, q *request, sig, ts, nonce string) error {
	if sig == "" || ts == "" || nonce == "" {
		return s.sigRefused(codeSignatureRequired, "signed requests need X-Timestamp, X-Nonce and X-Signature")
	}
	t, err := strconv.ParseFloat(ts, 64)
	if err != nil || math.IsNaN(t) || math.IsInf(t, 0) {
		return s.sigRefused(codeInvalidTimestamp, "X-Timestamp is not a Unix timestamp")
	}
	now := float64(q.now.UnixNano()) / 1e9
	if math.Abs(now-t) > timestampWindow {
		return s.sigRefused(codeInvalidTimestamp, "X-Timestamp is outside ±300 s of server time")
	}
	if len(nonce) > 256 {
		return s.sigRefused(codeInvalidSignature, "X-Nonce is longer than 256 bytes")
	}
	// Repeated query parameters: ReadingQueryRepeated.
	cp, ok := canonicalPath(q.r.URL.EscapedPath(), q.r.URL.RawQuery, s.rd.queryAsSent)
	if !ok || !signatureValid(q.apiKey, signingString(q.r.Method, cp, ts, nonce, q.body), sig) {
		return s.sigRefused(codeInvalidSignature, "the signature does not match")
	}
	if s.mutant == MutantNonceReplayAccepted {
		return nil
	}
	key := q.apiKey
	v, err := s.w.submit(ctx, func(tx *sql.Tx) (any, error) {
		res, err := tx.Stmt(s.st.insertNonce).Exec(key, nonce, now)
		if err != nil {
			return nil, err
		}
		n, _ := res.RowsAffected()
		return n == 1, nil
	})
	if err != nil {
		return err
	}
	if !v.(bool) {
		return s.sigRefused(codeNonceReused, "X-Nonce was already used within the 300 s window")
	}
	return nil
}

// knownKey says key is a tester key: in the process's set on SQLite (it
// writes every change), in the store on PostgreSQL (another replica may
// have generated or revoked it).
func (s *Server) knownKey(ctx context.Context, key string) (bool, error) {
	if s.pg {
		if !utf8.ValidString(key) || strings.ContainsRune(key, 0) {
			return false, nil // no key generated is so; PostgreSQL refuses to compare it
		}
		var one int
		err := s.rdb.QueryRowContext(ctx, `SELECT 1 FROM api_keys WHERE api_key = $1`, key).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	s.keysMu.RLock()
	_, ok := s.keys[key]
	s.keysMu.RUnlock()
	return ok, nil
}

// jitter is a uniform draw in [0, 2).
func (s *Server) jitter() float64 {
	s.rndMu.Lock()
	defer s.rndMu.Unlock()
	return s.rnd.Float64() * 2
}

// rateExceeded is the 429 of a window that started at start.
func (s *Server) rateExceeded(start, now time.Time) error {
	e := herr(429, codeRateLimited, "rate limit: 60 requests per minute per tester key")
	e.retryAfter = strconv.Itoa(int(math.Ceil(start.Add(s.dur(60)).Sub(now).Seconds())))
	if e.retryAfter == "0" {
		e.retryAfter = "1"
	}
	return e
}

// rateLimit counts a tester key's request in its window: in the process
// on SQLite, in the store on PostgreSQL (every replica counts the same
// window).
func (s *Server) rateLimit(ctx context.Context, key string, now time.Time) error {
	if s.pg {
		return s.rateLimitShared(ctx, key, now)
	}
	window := s.dur(60)
	s.rateMu.Lock()
	defer s.rateMu.Unlock()
	rw := s.rate[key]
	if rw == nil || now.Sub(rw.start) >= window {
		rw = &rateWindow{start: now}
		s.rate[key] = rw
	}
	if rw.n >= testerRateLimit {
		return s.rateExceeded(rw.start, now)
	}
	rw.n++
	return nil
}

// isAdmin reports whether r carries valid admin credentials (§5.3):
// X-Admin-Token when BUS_ADMIN_SECRET is set, else HTTP Basic admin /
// DASHBOARD_PASSWORD. There is no fallback to BUS_SECRET.
// rateLimitShared is rateLimit on PostgreSQL: the key's window is a row,
// read and counted in one transaction.
func (s *Server) rateLimitShared(ctx context.Context, key string, now time.Time) error {
	window := s.dur(60)
	_, err := s.w.submit(ctx, func(tx *sql.Tx) (any, error) {
		var startNs int64
		var n int
		err := tx.QueryRow(`SELECT start_ns, n FROM rate_windows WHERE api_key = $1`, key).Scan(&startNs, &n)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && now.Sub(time.Unix(0, startNs)) >= window) {
			_, err = tx.Exec(`INSERT INTO rate_windows(api_key, start_ns, n) VALUES($1, $2, 1)
 ON CONFLICT (api_key) DO UPDATE SET start_ns = excluded.start_ns, n = 1`, key, now.UnixNano())
			return nil, err
		}
		if err != nil {
			return nil, err
		}
		if n >= testerRateLimit {
			return nil, s.rateExceeded(time.Unix(0, startNs), now)
		}
		_, err = tx.Exec(`UPDATE rate_windows SET n = n + 1 WHERE api_key = $1`, key)
		return nil, err
	})
	return err
}

func (s *Server) isAdmin(r *http.Request) bool {
	if tok := r.Header.Get(hdrAdminToken); tok != "" {
		if s.cfg.AdminSecret != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.AdminSecret)) == 1 {
			return true
		}
		if s.mutant == MutantAdminSecretFallback && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Secret)) == 1 {
			return true
		}
		return false
	}
	if u, p, ok := r.BasicAuth(); ok && s.cfg.DashboardPassword != "" {
		return subtle.ConstantTimeCompare([]byte(u), []byte("admin")) == 1 &&
			subtle.ConstantTimeCompare([]byte(p), []byte(s.cfg.DashboardPassword)) == 1
	}
	return false
}

func (s *Server) adminAuth(w http.ResponseWriter, r *http.Request, rt *route) error {
	if s.isAdmin(r) {
		return nil
	}
	if r.URL.Path == pathDashboard {
		w.Header().Set("WWW-Authenticate", `Basic realm="intent-bus admin", charset="UTF-8"`)
	}
	return herr(401, codeUnauthorized, "admin credentials required (X-Admin-Token or HTTP Basic)")
}

func (s *Server) metricsAuth(r *http.Request) bool {
	if a := r.Header.Get("Authorization"); s.cfg.MetricsToken != "" {
		if tok, ok := strings.CutPrefix(a, "Bearer "); ok && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.MetricsToken)) == 1 {
			return true
		}
	}
	return s.isAdmin(r)
}

func (s *Server) health(w http.ResponseWriter, q *request) error {
	s.writeJSON(w, 200, healthBody{OK: true, TS: s.nowF(), Version: serverVersion, TimeScale: s.scale, Maintenance: s.cfg.Maintenance,
		Readings: s.rd.effective})
	return nil
}
