// Package atp is the bundled reference server of the Agent Transaction
// Protocol ("ATP Consistency & Semantics", seed 000) on idscheck's wire
// binding (docs/atp-binding.md): the yardstick idscheck compares vendors
// with. It turns the protocol's at-least-once wire into exactly-once effect:
//
//   - one writer goroutine owns the only SQLite write connection and commits
//     operations in batches (group commit, WAL, synchronous=FULL); the
//     authorize (nonce, action_dedup_key and the row) and the move of a row
//     from authorized to executing are each one operation of that writer,
//     so they are atomic; no reply leaves before its commit is durable;
//   - every state write is a conditional UPDATE that only moves a row
//     forward (a rank check in SQL): there is no executing → authorized
//     edge, and a restart resumes each row at the same or a later state;
//   - the charge goes through the rail's payment intents: the payment
//     intent is created with an Idempotency-Key bound to the row, its id is
//     committed in the row before it is confirmed, and a row whose charge is
//     unknown stays executing until the rail's callback (confirmed with GET)
//     or the reconciliation sweep resolves it against the rail;
//   - receipts are Ed25519 over the JCS form of their body, issued once on
//     entry to settled or compensated, stored in the row and replayed byte
//     for byte.
//
// Where the binding leaves a choice, this server takes these:
//
//   - a payment intent the sweep finds never confirmed (the execute's
//     confirm never reached the rail, or the creation's answer was lost) is
//     canceled at the rail and the row compensated (reason "canceled"); the
//     server never confirms on the agent's behalf what it did not see
//     confirmed;
//   - execute (and a retried authorize) of a row still authorized past its
//     expires_at moves it to expired and answers 410 intent_expired; a row
//     already expired answers 410 too (§5: 410 is terminal); executing,
//     settled and compensated rows answer the row even past expires_at;
//   - a replay of the signed intent under the key it was authorized with
//     answers the row (reading "row" of decision nonce-same-key) or 409
//     (reading "nonce"); another signed intent under an existing
//     (intent_id, key) is 409 idempotency_key_conflict;
//   - the execute body must hold intent_id; other members are ignored (the
//     text's §9 example shows "{ intent_id: …, ... }");
//   - the receipt key is the configured seed's; a database keeps every key
//     it ever signed with (site-1, site-2, …) in GET /api/atp/keys, so a
//     stored receipt verifies after the key changed.
//
// The package imports nothing of the harness: it reads the binding, not
// idscheck's code, so that harness and server meet only on the wire.
package atp

import (
	"context"
	"crypto/ed25519"
	"crypto/subtle"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/idscheck/idscheck/sut/internal/groupcommit"
	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// Binding is the wire binding this server implements.
const Binding = "idscheck-atp/1"

// Readings of decision "nonce-same-key" (docs/atp-binding.md, "Errors"):
// a replay of the signed intent under the key it was authorized with gets
// the stored row ("row", the default) or 409 nonce_consumed ("nonce").
const (
	DecisionNonceSameKey = "nonce-same-key"
	ReadingRow           = "row"
	ReadingNonce         = "nonce"
)

// Declared defaults (docs/atp-binding.md, "GET /api/atp/config").
const (
	DefaultReconcileInterval = 60 * time.Second
	DefaultActionDedupWindow = 10 * time.Minute
	DefaultRailTimeout       = 2 * time.Second
)

// Config configures the ATP reference server.
type Config struct {
	// DBPath is the SQLite database (the default store), for one process.
	DBPath string
	// Store, when set, is the store instead of DBPath: a PostgreSQL URL
	// (postgres://…) several replicas of the server share.
	Store string
	// ReplicaID names this replica among those sharing Store: the owner
	// of the rows it claims (to charge or reconcile them), and the one
	// that takes them back when it restarts; stable across the replica's
	// restarts, unique among the replicas (required with Store; "" without one: "replica").
	ReplicaID string
	// RailURL is the base URL of the payment rail (the binding's "The
	// rail"); Open refuses "".
	RailURL string
	// APIKey: "" → no credentials; else X-API-Key is required on every
	// route but /health, GET /api/atp/keys, POST /api/atp/receipts/verify
	// and POST /api/atp/rail/events (401 without it).
	APIKey string
	// TimeScale divides the reconciliation interval and the
	// action_dedup_key window internally; GET /api/atp/config still
	// declares the unscaled values. 0 means 1.
	TimeScale float64
	// ReconcileInterval is the declared period of the sweep; 0 means 60 s.
	ReconcileInterval time.Duration
	// ActionDedupWindow is the declared action_dedup_key window; 0 means
	// 10 min; negative: the site does not opt in (declared null, no check).
	ActionDedupWindow time.Duration
	// Readings picks a reading per decision: "nonce-same-key" is "row"
	// (default) or "nonce".
	Readings map[string]string
	// Mutant names a deliberate bug (see Mutants); "" for the correct server.
	Mutant string
	// Seed derives the site's receipt key when SiteKeySeed is empty (the
	// same seed, the same key).
	Seed uint64
	// SiteKeySeed is the 32-byte Ed25519 seed of the site's receipt key.
	SiteKeySeed []byte
	// Clock is the server's time; nil is time.Now. Tests move it by hand.
	Clock  func() time.Time
	Logger *slog.Logger
	// RailTimeout bounds one rail call; 0 means 2 s.
	RailTimeout time.Duration
}

// Server is the ATP reference server. Its handler is safe for concurrent use.
type Server struct {
	cfg          Config
	log          *slog.Logger
	scale        float64
	mutant       string
	clock        func() time.Time
	nonceReading string
	sweepEvery   time.Duration // real time
	dedupWindow  time.Duration // real time; 0: not opted in
	configDoc    []byte

	wdb, rdb *sql.DB
	w        writer
	dialect  string // dialectSQLite or dialectPostgres
	st       stmts
	rail     *railClient
	site     *siteKeys
	replica  string        // Config.ReplicaID: the owner of the rows this process claims
	leaseFor time.Duration // how long a claim on a row holds unless renewed (real time)

	// agents caches registered keys: a key never changes once registered
	// (the store refuses another), so a cached one is the store's on
	// every replica; an unknown agent is not cached.
	agentMu sync.RWMutex
	agents  map[string]ed25519.PublicKey

	rs replicaState // the replica mutants'

	sweepMu sync.Mutex // one sweep of this process at a time (the rows are claimed in the store)
	// live are the claims this process holds while it acts on their rows
	// (liveClaim keys): its sweep renews them before it claims rows,
	// so it never takes over a row of its own process, however late their
	// renewals run on a starved machine.
	live sync.Map
	// swept closes once the sweep Open starts has run (at once under the
	// no-reconciliation mutant): what a test sets up after it is not
	// resolved by it behind the test's back.
	swept  chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Open opens (or creates) the database at c.DBPath and returns a running
// server. Its reconciliation sweep runs at once (rows a previous process
// left executing are resolved against the rail), then every
// ReconcileInterval/TimeScale.
func Open(ctx context.Context, c Config) (*Server, error) {
	if c.Store != "" && !pgstore.IsPostgres(c.Store) {
		return nil, fmt.Errorf("atp: open: store %q: want a postgres:// URL (or no store: the SQLite database at DBPath)", pgstore.Redacted(c.Store))
	}
	if c.DBPath == "" && c.Store == "" {
		return nil, errors.New("atp: open: no database path")
	}
	if c.Store != "" && c.ReplicaID == "" {
		return nil, errors.New("atp: open: a store shared by replicas needs ReplicaID: a name unique among them, stable across restarts (it owns what the replica reserves)")
	}
	if c.ReplicaID == "" {
		c.ReplicaID = "replica"
	}
	if c.RailURL == "" {
		return nil, errors.New("atp: open: no rail URL (every execute charges through the rail)")
	}
	if u, err := url.Parse(c.RailURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("atp: open: the rail URL %q is not an http(s) URL", c.RailURL)
	}
	if c.Mutant != "" && !knownMutant(c.Mutant) {
		var names []string
		for _, m := range append(Mutants(), ReplicaMutants()...) {
			names = append(names, m.Name)
		}
		return nil, fmt.Errorf("atp: open: unknown mutant %q (valid: %s)", c.Mutant, strings.Join(names, ", "))
	}
	reading := ReadingRow
	for d, r := range c.Readings {
		if d != DecisionNonceSameKey {
			return nil, fmt.Errorf("atp: open: unknown decision %q (valid: %s)", d, DecisionNonceSameKey)
		}
		if r != ReadingRow && r != ReadingNonce {
			return nil, fmt.Errorf("atp: open: decision %s has no reading %q (valid: %s, %s)", d, r, ReadingRow, ReadingNonce)
		}
		reading = r
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0) {
		return nil, fmt.Errorf("atp: open: time scale must be > 0, got %v", c.TimeScale)
	}
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = DefaultReconcileInterval
	}
	if c.ReconcileInterval < 0 {
		return nil, fmt.Errorf("atp: open: reconcile interval must be > 0, got %v", c.ReconcileInterval)
	}
	if c.ActionDedupWindow == 0 {
		c.ActionDedupWindow = DefaultActionDedupWindow
	}
	if c.RailTimeout <= 0 {
		c.RailTimeout = DefaultRailTimeout
	}
	if len(c.SiteKeySeed) != 0 && len(c.SiteKeySeed) != ed25519.SeedSize {
		return nil, fmt.Errorf("atp: open: the site key seed has %d bytes, want %d", len(c.SiteKeySeed), ed25519.SeedSize)
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := c.Clock
	if clock == nil {
		clock = time.Now
	}
	s := &Server{cfg: c, log: log, scale: c.TimeScale, mutant: c.Mutant, clock: clock, nonceReading: reading,
		rail: newRailClient(c.RailURL, c.RailTimeout), agents: map[string]ed25519.PublicKey{}, replica: c.ReplicaID}
	s.sweepEvery = max(10*time.Millisecond, time.Duration(float64(c.ReconcileInterval)/s.scale))
	// A claim lapses half a sweep interval after it was taken or renewed,
	// and never sooner than 300 ms: a row a dead or cut-off replica held is
	// swept within two intervals and a second (the wait a harness gives
	// reconciliation), and a charge this process is making keeps its claim
	// while a renewal (every third of it, through the writer) is late on a
	// loaded machine.
	s.leaseFor = max(300*time.Millisecond, s.sweepEvery/2)
	if c.ActionDedupWindow > 0 {
		s.dedupWindow = time.Duration(float64(c.ActionDedupWindow) / s.scale)
	}
	cfgDoc := map[string]any{"binding": Binding, "reconcile_interval_seconds": c.ReconcileInterval.Seconds(),
		"action_dedup_window_seconds": nil, "rail": c.RailURL}
	if c.ActionDedupWindow > 0 {
		cfgDoc["action_dedup_window_seconds"] = c.ActionDedupWindow.Seconds()
	}
	s.configDoc, _ = json.Marshal(cfgDoc)

	if c.Store != "" {
		if err := s.openPostgres(ctx, c); err != nil {
			return nil, fmt.Errorf("atp: open: %w", err)
		}
		if err := s.st.prepare(ctx, s.wdb, s.rdb, s.dialect); err != nil {
			s.closeStore()
			return nil, fmt.Errorf("atp: open: %w", err)
		}
	} else if err := s.openSQLite(ctx, c); err != nil {
		return nil, err
	}
	var err error
	if s.site, err = s.loadSiteKeys(ctx, c.SiteKeySeed, c.Seed, clock()); err != nil {
		s.closeStore()
		return nil, fmt.Errorf("atp: open: %w", err)
	}
	// The rows this replica held when it stopped are free again: its
	// sweep (at once, below) resolves them; another replica's claims stay.
	if _, err := s.w.Submit(ctx, func(tx *sql.Tx) (any, error) {
		prefix := s.replica + "/"
		return tx.Stmt(s.st.unleaseOwn).Exec(utf8.RuneCountInString(prefix), prefix)
	}); err != nil {
		s.closeStore()
		return nil, fmt.Errorf("atp: open: release the rows of replica %s: %w", s.replica, err)
	}
	if err := s.warmCache(ctx); err != nil {
		s.closeStore()
		return nil, fmt.Errorf("atp: open: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.swept = make(chan struct{})
	if s.mutant != MutantNoReconciliation {
		s.bg.Add(1)
		go s.sweepLoop()
	} else {
		close(s.swept)
	}
	log.Info("atp reference server open", "db", c.DBPath, "store", pgstore.Redacted(c.Store), "replica", c.ReplicaID, "rail", c.RailURL, "time_scale", s.scale, "mutant", s.mutant,
		"nonce_same_key", reading, "kid", s.site.kid)
	return s, nil
}

// Close stops the sweep, drains the writer (every queued operation is
// committed) and closes the database. Idempotent; the handler answers 503
// afterwards.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.bg.Wait()
		s.closeErr = s.closeStore()
	})
	return s.closeErr
}

// closeStore drains the writer and closes the statements, the rail's
// client and the database.
func (s *Server) closeStore() error {
	if s.w != nil {
		s.w.Close()
	}
	s.st.close()
	s.rail.close()
	var err error
	if s.rdb != nil && s.rdb != s.wdb {
		err = s.rdb.Close()
	}
	if s.wdb != nil {
		err = errors.Join(err, s.wdb.Close())
	}
	return err
}

// openSQLite opens (or creates) the SQLite database at c.DBPath: one
// write connection owned by the group-commit writer, a read pool.
func (s *Server) openSQLite(ctx context.Context, c Config) error {
	wdb, err := sql.Open("sqlite", dsn(c.DBPath, false))
	if err != nil {
		return fmt.Errorf("atp: open: write db: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	s.wdb = wdb
	fail := func(err error) error {
		s.closeStore()
		return fmt.Errorf("atp: open: %w", err)
	}
	if _, err := wdb.ExecContext(ctx, schema); err != nil {
		return fail(fmt.Errorf("schema: %w", err))
	}
	if err := migrateSQLite(ctx, wdb); err != nil {
		return fail(err)
	}
	var mode string
	if err := wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		return fail(fmt.Errorf("journal_mode is %q, want wal: %v", mode, err))
	}
	rdb, err := sql.Open("sqlite", dsn(c.DBPath, true))
	if err != nil {
		return fail(fmt.Errorf("read db: %w", err))
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	s.rdb, s.dialect = rdb, dialectSQLite
	if err := s.st.prepare(ctx, wdb, rdb, dialectSQLite); err != nil {
		return fail(err)
	}
	gw, err := groupcommit.New(wdb, s.log)
	if err != nil {
		return fail(err)
	}
	s.w = gw
	return nil
}

// writer runs the write operations: one at a time in batches on SQLite
// (groupcommit), each in its own SERIALIZABLE transaction, rerun when it
// lost a race, on PostgreSQL (pgstore). An operation may run more than
// once: it has no effect outside the transaction.
type writer interface {
	Submit(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error)
	Close()
}

var (
	_ writer = (*groupcommit.Writer)(nil)
	_ writer = (*pgstore.Writer)(nil)
)

// Error codes of the bundled server (the binding fixes nonce_consumed and
// intent_expired; every other code is a suggestion).
const (
	codeNonceConsumed       = "nonce_consumed"
	codeIntentExpired       = "intent_expired"
	codeKeyRequired         = "idempotency_key_required"
	codeKeyInvalid          = "idempotency_key_invalid"
	codeKeyConflict         = "idempotency_key_conflict"
	codeInvalidIntent       = "invalid_intent"
	codeInvalidRequest      = "invalid_request"
	codeUnknownAgent        = "unknown_agent"
	codeInvalidSignature    = "invalid_signature"
	codePreconditionFailed  = "precondition_failed"
	codeActionDedupConflict = "action_dedup_conflict"
	codeNotAuthorized       = "not_authorized"
	codeAgentKeyConflict    = "agent_key_conflict"
	codeNotFound            = "not_found"
	codeMethodNotAllowed    = "method_not_allowed"
	codeUnauthorized        = "unauthorized"
	codeTooLarge            = "body_too_large"
	codeUnavailable         = "unavailable"
	codeInternal            = "internal_error"
)

// apiError is an error answer {"error": code, "detail": …}; it is also the
// error type of the handlers.
type apiError struct {
	status          int
	Code            string `json:"error"`
	Detail          string `json:"detail,omitempty"`
	FirstConsumedAt string `json:"first_consumed_at,omitempty"`
	retryAfter      string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Detail }

func errorf(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, Code: code, Detail: fmt.Sprintf(format, args...)}
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeAPIError(w, errorf(500, codeInternal, "cannot encode the answer"))
		return
	}
	writeRaw(w, status, b)
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter != "" {
		w.Header().Set("Retry-After", e.retryAfter)
	}
	b, _ := json.Marshal(e)
	writeRaw(w, e.status, b)
}

func (s *Server) writeError(w http.ResponseWriter, err error) {
	var e *apiError
	if !errors.As(err, &e) {
		switch {
		case errors.Is(err, groupcommit.ErrClosed):
			e = errorf(503, codeUnavailable, "the server is shutting down")
		case errors.Is(err, groupcommit.ErrCommit):
			e = errorf(503, codeUnavailable, "the database could not commit; retry")
			e.retryAfter = "1"
		case s.dialect == dialectPostgres && pgstore.Refused(err):
			e = errorf(400, codeInvalidRequest, "a value of the request cannot be stored (a NUL character, or bytes that are not UTF-8)")
		case s.dialect == dialectPostgres:
			// The shared store did not answer (a lost connection, a
			// timeout, races lost again and again): whatever it did is
			// read back by the retry, never taken for a success.
			s.log.Warn("store error", "err", err)
			e = errorf(503, codeUnavailable, "the database did not answer; retry")
			e.retryAfter = "1"
		default:
			s.log.Error("internal error", "err", err)
			e = errorf(500, codeInternal, "internal error")
		}
	}
	writeAPIError(w, e)
}

// Handler returns the HTTP handler of every route.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic in handler", "path", r.URL.Path, "panic", fmt.Sprint(v))
			writeAPIError(w, errorf(500, codeInternal, "internal error"))
		}
	}()
	if err := s.route(w, r); err != nil {
		s.writeError(w, err)
	}
}

// Routes.
const (
	pathHealth     = "/health"
	pathConfig     = "/api/atp/config"
	pathKeys       = "/api/atp/keys"
	pathAgents     = "/api/atp/agents/"
	pathAuthorize  = "/api/atp/authorize"
	pathExecute    = "/api/atp/execute"
	pathIntents    = "/api/atp/intents/"
	pathVerify     = "/api/atp/receipts/verify"
	pathRailEvents = "/api/atp/rail/events"

	headerKey    = "Idempotency-Key"
	headerAPIKey = "X-API-Key"
)

func (s *Server) route(w http.ResponseWriter, r *http.Request) error {
	path := r.URL.Path
	var h func(http.ResponseWriter, *http.Request) error
	var m string
	open := false // no credentials
	switch {
	case path == pathHealth:
		m, open, h = "GET", true, func(w http.ResponseWriter, r *http.Request) error {
			writeJSON(w, 200, map[string]any{"status": "ok", "binding": Binding, "time_scale": s.scale})
			return nil
		}
	case path == pathConfig:
		m, h = "GET", func(w http.ResponseWriter, r *http.Request) error {
			writeRaw(w, 200, s.configDoc)
			return nil
		}
	case path == pathKeys:
		m, open, h = "GET", true, func(w http.ResponseWriter, r *http.Request) error {
			writeRaw(w, 200, s.keySet(r.Context()))
			return nil
		}
	case strings.HasPrefix(path, pathAgents):
		m, h = "PUT", s.putAgent
	case path == pathAuthorize:
		m, h = "POST", s.postAuthorize
	case path == pathExecute:
		m, h = "POST", s.postExecute
	case strings.HasPrefix(path, pathIntents):
		m, h = "GET", s.getIntent
	case path == pathVerify:
		m, open, h = "POST", true, s.postVerify
	case path == pathRailEvents:
		m, open, h = "POST", true, s.postRailEvent
	default:
		return errorf(404, codeNotFound, "no such route: %s", path)
	}
	if r.Method != m && !(m == "GET" && r.Method == "HEAD") {
		w.Header().Set("Allow", m)
		return errorf(405, codeMethodNotAllowed, "method %s not allowed on %s", r.Method, path)
	}
	if !open && s.cfg.APIKey != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(headerAPIKey)), []byte(s.cfg.APIKey)) != 1 {
		return errorf(401, codeUnauthorized, "a valid X-API-Key is required")
	}
	return h(w, r)
}

// maxBody bounds a request body.
const maxBody = 64 << 10

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBody {
		return nil, errorf(413, codeTooLarge, "the body exceeds %d bytes", maxBody)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, errorf(413, codeTooLarge, "the body exceeds %d bytes", maxBody)
		}
		return nil, errorf(400, codeInvalidRequest, "cannot read the body: %v", err)
	}
	return b, nil
}

// timeFormat is RFC 3339 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func fmtTime(t time.Time) string { return t.UTC().Format(timeFormat) }

// rowKey names a row (intent_id\x00key) in a replica mutant's cache.
func rowKey(intentID, key string) string { return intentID + "\x00" + key }
