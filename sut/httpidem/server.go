// Package httpidem is the bundled reference endpoint of the
// http-idempotency profile: a small payments API (POST /v1/payments) that
// turns at-least-once delivery into exactly-once payments with an
// idempotency key, under one of three texts (Config.Variant):
//
//   - "ietf" (the default): the IETF draft "The Idempotency-Key HTTP
//     Header Field". The key is the Idempotency-Key header, an RFC 8941
//     sf-string ("abc", quotes included); a request without it is 400; a
//     retry after completion gets the stored result, success or error
//     (validation errors and processor failures included); another
//     payload under a used key is 422; a retry while the original runs is
//     409 (not stored).
//   - "t0": t-0's receiver rules (seed 002). The key is the body's
//     paymentRef; a duplicate of a request in flight waits (bounded) for
//     the original and gets the same response; a rejection (a validation
//     error, a processor failure) never consumes the key: the corrected
//     resubmission is evaluated afresh.
//   - "stripe": Stripe's documented conventions. The key is the raw
//     Idempotency-Key header, 1..255 characters, and optional (no key: no
//     deduplication); the first result is stored "including 500 errors",
//     but a validation error is not (execution never began); another
//     payload under a used key is 400 idempotency_key_mismatch, a
//     concurrent duplicate 409 idempotency_key_in_use (not stored).
//
// How it holds:
//
//   - one writer goroutine owns the only SQLite write connection and
//     commits in batches (sut/internal/groupcommit); the reservation of a
//     key (caller, key) is one INSERT of that writer, so two requests with
//     one key cannot both execute;
//   - the payment processor is the effect sink (POST {sink}/effects, no
//     Idempotency-Key header: every call is an effect); its call carries
//     the payment id drawn at the reservation, and the payment is
//     committed only after the sink answered 2xx;
//   - a sink call whose outcome is unknown (a timeout, a lost reply, a
//     5xx) is resolved at once with GET {sink}/effects/{idempotency_key}:
//     found, the payment is created; not found, the request failed (502);
//     no answer either, the result is stored as the failure it is (ietf,
//     stripe) or the reservation is kept as "unknown" and the next request
//     with the key resolves it before anything else (t0);
//   - at Open every reservation a dead process left in flight is resolved
//     against the sink the same way (found: the payment is committed and
//     the key answers 201; not found: the reservation is deleted);
//   - a stored result is replayed byte for byte with Idempotent-Replayed:
//     true; a key is forgotten KeyTTL/TimeScale after its result was
//     stored (default 24 h).
//
// The package imports nothing of the harness: server and harness meet only
// on the wire.
package httpidem

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/idscheck/idscheck/sut/internal/groupcommit"
	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// Variants.
const (
	VariantIETF   = "ietf"
	VariantT0     = "t0"
	VariantStripe = "stripe"
)

// Defaults.
const (
	DefaultKeyTTL       = 24 * time.Hour
	DefaultSinkTimeout  = 2 * time.Second
	DefaultInFlightWait = 10 * time.Second
)

// Config configures the endpoint.
type Config struct {
	// DBPath is the SQLite database (the default store), for one process.
	DBPath string
	// Store, when set, is the store instead of DBPath: a PostgreSQL URL
	// (postgres://…) several replicas of the endpoint share.
	Store string
	// ReplicaID names this replica among those sharing Store: the owner of
	// the reservations it makes, and the one that resolves them when it
	// restarts; it must be stable across the replica's restarts and unique
	// among the replicas (required with Store; "" without one: "replica").
	ReplicaID string
	// SinkURL is the base URL of the effect sink (the payment processor);
	// Open refuses "".
	SinkURL string
	// Variant is "ietf" ("" too), "t0" or "stripe".
	Variant string
	// Callers are the bearer tokens, one a caller; Open refuses none.
	Callers []string
	// KeyTTL is how long a stored result is kept (its key remembered);
	// 0 means 24 h. It is divided by TimeScale.
	KeyTTL time.Duration
	// TimeScale divides KeyTTL; 0 means 1.
	TimeScale float64
	// Mutant names a deliberate bug (see Mutants); "" for the correct server.
	Mutant string
	// Clock is the server's time; nil is time.Now. Tests move it by hand.
	Clock  func() time.Time
	Logger *slog.Logger
	// SinkTimeout bounds one sink call; 0 means 2 s.
	SinkTimeout time.Duration
	// InFlightWait bounds how long a t0 duplicate waits for the original
	// in flight; 0 means 10 s.
	InFlightWait time.Duration
}

// Server is the endpoint. Its handler is safe for concurrent use.
type Server struct {
	cfg     Config
	variant string
	mutant  string
	log     *slog.Logger
	clock   func() time.Time
	ttl     time.Duration // in clock time, scaled
	wait    time.Duration
	callers []caller

	wdb, rdb *sql.DB
	w        writer
	dialect  string // dialectSQLite or dialectPostgres
	st       stmts
	sink     *sinkClient

	rs replicaState // the replica mutants'

	flightMu sync.Mutex
	flights  map[string]*flight // flightKey(caller, key) → the request in flight

	// waitHook, when set (tests), is called when a duplicate starts
	// waiting for the original in flight.
	waitHook func(caller, key string)

	closeOnce sync.Once
	closeErr  error
}

type caller struct {
	token []byte
	id    string
}

// CallerID is the caller id of a bearer token: "caller_" and the first 16
// hex digits of its SHA-256. It is the tenant_id of the caller's sink
// calls and the prefix of their idempotency_key.
func CallerID(token string) string {
	h := sha256.Sum256([]byte(token))
	return "caller_" + hex.EncodeToString(h[:8])
}

// Open opens (or creates) the database at c.DBPath, resolves against the
// sink every reservation a previous process left in flight, and returns a
// running server.
func Open(ctx context.Context, c Config) (*Server, error) {
	if c.Store != "" && !pgstore.IsPostgres(c.Store) {
		return nil, fmt.Errorf("httpidem: open: store %q: want a postgres:// URL (or no store: the SQLite database at DBPath)", pgstore.Redacted(c.Store))
	}
	if c.DBPath == "" && c.Store == "" {
		return nil, errors.New("httpidem: open: no database path")
	}
	if c.Store != "" && c.ReplicaID == "" {
		return nil, errors.New("httpidem: open: a store shared by replicas needs ReplicaID: a name unique among them, stable across restarts (it owns what the replica reserves)")
	}
	if c.ReplicaID == "" {
		c.ReplicaID = "replica"
	}
	if c.SinkURL == "" {
		return nil, errors.New("httpidem: open: no sink URL (every payment goes through the sink)")
	}
	if u, err := url.Parse(c.SinkURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("httpidem: open: the sink URL %q is not an http(s) URL", c.SinkURL)
	}
	switch c.Variant {
	case "":
		c.Variant = VariantIETF
	case VariantIETF, VariantT0, VariantStripe:
	default:
		return nil, fmt.Errorf("httpidem: open: unknown variant %q (valid: %s, %s, %s)", c.Variant, VariantIETF, VariantT0, VariantStripe)
	}
	if c.Mutant != "" && !knownMutant(c.Mutant) {
		var names []string
		for _, m := range Mutants() {
			names = append(names, m.Name)
		}
		return nil, fmt.Errorf("httpidem: open: unknown mutant %q (valid: %s)", c.Mutant, strings.Join(names, ", "))
	}
	if len(c.Callers) == 0 {
		return nil, errors.New("httpidem: open: no callers (every request needs a bearer token)")
	}
	seen := map[string]bool{}
	var callers []caller
	for _, tok := range c.Callers {
		if tok == "" || seen[tok] || strings.ContainsAny(tok, " \t\r\n") {
			return nil, fmt.Errorf("httpidem: open: caller token %q is empty, repeated or has white space", tok)
		}
		seen[tok] = true
		callers = append(callers, caller{token: []byte(tok), id: CallerID(tok)})
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0) {
		return nil, fmt.Errorf("httpidem: open: time scale must be > 0, got %v", c.TimeScale)
	}
	if c.KeyTTL == 0 {
		c.KeyTTL = DefaultKeyTTL
	}
	if c.KeyTTL < 0 {
		return nil, fmt.Errorf("httpidem: open: key TTL must be > 0, got %v", c.KeyTTL)
	}
	if c.SinkTimeout <= 0 {
		c.SinkTimeout = DefaultSinkTimeout
	}
	if c.InFlightWait <= 0 {
		c.InFlightWait = DefaultInFlightWait
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := c.Clock
	if clock == nil {
		clock = time.Now
	}
	s := &Server{cfg: c, variant: c.Variant, mutant: c.Mutant, log: log, clock: clock, wait: c.InFlightWait,
		ttl: max(time.Millisecond, time.Duration(float64(c.KeyTTL)/c.TimeScale)), callers: callers,
		sink: newSinkClient(c.SinkURL, c.SinkTimeout), flights: map[string]*flight{}}

	if c.Store != "" {
		if err := s.openPostgres(ctx, c); err != nil {
			s.sink.close()
			return nil, fmt.Errorf("httpidem: open: %w", err)
		}
		if err := s.st.prepare(ctx, s.wdb, s.rdb, s.dialect); err != nil {
			s.Close()
			return nil, fmt.Errorf("httpidem: open: %w", err)
		}
	} else if err := s.openSQLite(ctx, c); err != nil {
		return nil, err
	}
	s.warmCache(ctx)
	if err := s.recover(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("httpidem: open: %w", err)
	}
	log.Info("http-idempotency reference endpoint open", "db", c.DBPath, "store", pgstore.Redacted(c.Store), "replica", c.ReplicaID, "sink", c.SinkURL, "variant", s.variant,
		"key_ttl", c.KeyTTL, "time_scale", c.TimeScale, "mutant", s.mutant)
	return s, nil
}

// Close drains the writer (every queued operation is committed) and closes
// the database. Idempotent; the handler answers 503 afterwards.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.w.Close()
		s.st.close()
		s.sink.close()
		if s.rdb != s.wdb {
			s.closeErr = s.rdb.Close()
		}
		s.closeErr = errors.Join(s.closeErr, s.wdb.Close())
	})
	return s.closeErr
}

// Routes.
const (
	pathHealth   = "/health"
	pathPayments = "/v1/payments"

	headerKey      = "Idempotency-Key"
	headerReplayed = "Idempotent-Replayed"
)

// Handler returns the HTTP handler of every route.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("panic in handler", "path", r.URL.Path, "panic", fmt.Sprint(v))
			writeProblem(w, problemf(500, codeInternal, "internal error"))
		}
	}()
	if err := s.route(w, r); err != nil {
		s.writeError(w, err)
	}
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) error {
	switch r.URL.Path {
	case pathHealth:
		if r.Method != "GET" && r.Method != "HEAD" {
			w.Header().Set("Allow", "GET")
			return problemf(405, codeMethodNotAllowed, "method %s not allowed on %s", r.Method, pathHealth)
		}
		writeJSON(w, 200, map[string]any{"status": "ok", "profile": "http-idempotency", "variant": s.variant,
			"key_ttl_seconds": s.cfg.KeyTTL.Seconds(), "time_scale": s.cfg.TimeScale})
		return nil
	case pathPayments:
	default:
		return problemf(404, codeNotFound, "no such route: %s", r.URL.Path)
	}
	if r.Method != "GET" && r.Method != "HEAD" && r.Method != "POST" {
		w.Header().Set("Allow", "GET, POST")
		return problemf(405, codeMethodNotAllowed, "method %s not allowed on %s", r.Method, pathPayments)
	}
	who, ok := s.authenticate(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="payments"`)
		return problemf(401, codeUnauthorized, "a valid bearer token is required (Authorization: Bearer <token>)")
	}
	if r.Method == "POST" {
		return s.postPayment(w, r, who)
	}
	return s.listPayments(w, r, who)
}

// authenticate returns the caller id of the request's bearer token.
func (s *Server) authenticate(r *http.Request) (string, bool) {
	h := r.Header.Values("Authorization")
	if len(h) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(h[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	id := ""
	for _, c := range s.callers {
		if subtle.ConstantTimeCompare([]byte(tok), c.token) == 1 {
			id = c.id
		}
	}
	return id, id != ""
}

// listPayments answers GET /v1/payments?reference=R: the caller's payments
// with that reference (every payment of the caller without one, at most
// 1000), oldest first.
func (s *Server) listPayments(w http.ResponseWriter, r *http.Request, who string) error {
	q := r.URL.Query()
	var rows *sql.Rows
	var err error
	if refs, ok := q["reference"]; ok {
		if len(refs) != 1 || !validText(refs[0], maxReference) {
			return problemf(400, codeInvalidRequest, "reference must be given once, 1 to %d characters", maxReference)
		}
		rows, err = s.st.rList.QueryContext(r.Context(), who, refs[0])
	} else {
		rows, err = s.st.rListAll.QueryContext(r.Context(), who)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	b := []byte(`{"data":[`)
	n := 0
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return err
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, doc...)
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	b = append(b, "]}"...)
	writeRaw(w, 200, contentJSON, b)
	return nil
}

// openSQLite opens (or creates) the SQLite database at c.DBPath: one write
// connection owned by the group-commit writer, a read pool.
func (s *Server) openSQLite(ctx context.Context, c Config) error {
	wdb, err := sql.Open("sqlite", dsn(c.DBPath, false))
	if err != nil {
		return fmt.Errorf("httpidem: open: write db: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	fail := func(err error) error {
		if s.w != nil {
			s.w.Close()
		}
		s.st.close()
		if s.rdb != nil {
			s.rdb.Close()
		}
		wdb.Close()
		s.sink.close()
		return fmt.Errorf("httpidem: open: %w", err)
	}
	if _, err := wdb.ExecContext(ctx, schema); err != nil {
		return fail(fmt.Errorf("schema: %w", err))
	}
	var mode string
	if err := wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		return fail(fmt.Errorf("journal_mode is %q, want wal: %v", mode, err))
	}
	rdb, err := sql.Open("sqlite", dsn(c.DBPath, true))
	if err != nil {
		return fail(fmt.Errorf("read db: %w", err))
	}
	rdb.SetMaxOpenConns(4)
	rdb.SetMaxIdleConns(4)
	s.wdb, s.rdb = wdb, rdb
	if err := s.st.prepare(ctx, wdb, rdb, dialectSQLite); err != nil {
		return fail(err)
	}
	gw, err := groupcommit.New(wdb, s.log)
	if err != nil {
		return fail(err)
	}
	s.w, s.dialect = gw, dialectSQLite
	return nil
}

// writer runs the write operations: one at a time in batches on SQLite
// (groupcommit), each in its own serializable transaction on PostgreSQL.
type writer interface {
	Submit(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error)
	Close()
}

var (
	_ writer = (*groupcommit.Writer)(nil)
	_ writer = (*pgstore.Writer)(nil)
)

// Dialects of the store.
const (
	dialectSQLite   = "sqlite"
	dialectPostgres = "postgres"
)
