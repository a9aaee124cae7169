// Package ids is the bundled reference server of RFC-WF-0010, Idempotency &
// Delivery Semantics (IDS), on idscheck's wire binding (docs/ids-binding.md):
// the yardstick idscheck compares vendors with. It is correct under
// duplicates, concurrent duplicates, crashes and a flaky effect sink:
//
//   - one writer goroutine owns the only SQLite write connection and commits
//     pending operations in batches (group commit, WAL, synchronous=FULL);
//     the check-and-set of a key is one operation of that writer, so it is
//     atomic (IDS §VIII.A); no reply leaves before its commit is durable;
//   - a synchronous effect is called after its reservation committed and
//     its outcome committed after the sink answered; a command whose sink
//     call did not answer stays in_progress and a resumer finishes it (S1:
//     the same Idempotency-Key; otherwise GET {sink}/effects/{key} first);
//   - S2 commands commit their outcome and an outbox row in one transaction;
//     one dispatcher delivers the outbox and reconciles a row it finds
//     dispatching before any second POST.
//
// The package imports nothing of the harness: it reads the binding, not
// idscheck's code, so that harness and server meet only on the wire.
package ids

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
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

	"github.com/idscheck/idscheck/sut/internal/groupcommit"
	"github.com/idscheck/idscheck/sut/internal/pgstore"
	"github.com/idscheck/idscheck/sut/internal/sqlitecols"
)

// Config configures the IDS reference server.
type Config struct {
	DBPath string
	// Store, when set, is the store instead of DBPath: a PostgreSQL URL
	// (postgres://…) several replicas of the server share.
	Store string
	// ReplicaID names this replica among those sharing Store: the owner of
	// the records it reserves and the outbox rows it claims, which it alone
	// resumes after it restarts; it must be stable across the replica's
	// restarts and unique among the replicas (required with Store; "" without one: "replica").
	ReplicaID string
	// SinkURL is the base URL of the effect sink; Open refuses "".
	SinkURL string
	// APIKey: "" → no authentication; else every route but /health needs
	// X-API-Key (401 problem "unauthorized" without it).
	APIKey string
	// TimeScale divides every declared duration (ttl_seconds,
	// confirmation_ttl_seconds, the rate-limit window) internally; the
	// registry still declares the unscaled values. 0 means 1.
	TimeScale float64
	// Mutant names a deliberate bug (see Mutants); "" for the correct server.
	Mutant string
	// Seed is accepted for symmetry with the other bundled servers; the
	// server draws its ids from crypto/rand.
	Seed uint64
	// Clock is the server's time; nil is time.Now. Tests move it by hand.
	Clock  func() time.Time
	Logger *slog.Logger
	// SinkTimeout bounds one sink call; 0 means 2 s.
	SinkTimeout time.Duration
	// ReplayForm is how a duplicate of a terminal command is answered
	// (IDS §IX.A, docs/ids-binding.md "Answers"): ReplayOutcome ("" too),
	// the stored outcome document byte for byte; ReplayReference, a
	// reference document (the original command_id, key, status and
	// outcome_ref, the status and evidence URLs; no result), with the
	// original HTTP status.
	ReplayForm string
	// InternalOnly makes the I1 and I2 commands change the server's own
	// state only: no sink call, and the registry declares them "effects":
	// false (docs/ids-binding.md). The I3 commands keep their effects.
	InternalOnly bool
}

// The replay forms of Config.ReplayForm.
const (
	ReplayOutcome   = "outcome"
	ReplayReference = "reference"
)

// Server is the IDS reference server. Its handler is safe for concurrent use.
type Server struct {
	cfg    Config
	log    *slog.Logger
	scale  float64
	mutant string
	clock  func() time.Time
	wdb    *sql.DB // SQLite: the only write connection, owned by w; PostgreSQL: the pool
	rdb    *sql.DB // SQLite: the read-only pool; PostgreSQL: the pool
	w      writer
	st     stmts
	sink   *sink
	// dialect is dialectSQLite or dialectPostgres.
	dialect string

	// running holds the reservations (res_id) a goroutine of this process
	// is executing: the request that reserved it, or the resumer. A record
	// is in it from its reservation op until its outcome committed (or its
	// sink call failed); the resumer takes only records not in it.
	runMu   sync.Mutex
	running map[string]bool
	// unsure holds, under runMu, the reservations whose sink call timed
	// out, and when: the POST may still reach the sink and count, so the
	// resumer reconciles such a record only a while later (unsureWait), or
	// its GET could find nothing yet and it would POST a second effect.
	unsure map[string]time.Time

	rs replicaState // the replica mutants'

	kick     chan struct{}   // wakes the dispatcher
	ctx      context.Context // ends when Close begins: stops background work
	cancel   context.CancelFunc
	bg       sync.WaitGroup
	interval time.Duration // of the resumer and the dispatcher

	closeOnce sync.Once
	closeErr  error
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

// Open opens (or creates) the database at c.DBPath (or the shared store
// c.Store) and returns a running server; its resumer and dispatcher start
// at once and finish what a previous process (of this replica) left in
// progress.
func Open(ctx context.Context, c Config) (*Server, error) {
	if c.Store != "" && !pgstore.IsPostgres(c.Store) {
		return nil, fmt.Errorf("ids: open: store %q: want a postgres:// URL (or no store: the SQLite database at DBPath)", pgstore.Redacted(c.Store))
	}
	if c.DBPath == "" && c.Store == "" {
		return nil, errors.New("ids: open: no database path")
	}
	if c.Store != "" && c.ReplicaID == "" {
		return nil, errors.New("ids: open: a store shared by replicas needs ReplicaID: a name unique among them, stable across restarts (it owns what the replica reserves)")
	}
	if c.ReplicaID == "" {
		c.ReplicaID = "replica"
	}
	if c.SinkURL == "" {
		return nil, errors.New("ids: open: no effect sink URL (every command with an effect sends it to the sink)")
	}
	if u, err := url.Parse(c.SinkURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ids: open: the effect sink URL %q is not an http(s) URL", c.SinkURL)
	}
	if c.Mutant != "" && !knownMutant(c.Mutant) {
		var names []string
		for _, m := range append(Mutants(), ReplicaMutants()...) {
			names = append(names, m.Name)
		}
		return nil, fmt.Errorf("ids: open: unknown mutant %q (valid: %s)", c.Mutant, strings.Join(names, ", "))
	}
	switch c.ReplayForm {
	case "":
		c.ReplayForm = ReplayOutcome
	case ReplayOutcome, ReplayReference:
	default:
		return nil, fmt.Errorf("ids: open: replay form %q: want %s or %s", c.ReplayForm, ReplayOutcome, ReplayReference)
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0) {
		return nil, fmt.Errorf("ids: open: time scale must be > 0, got %v", c.TimeScale)
	}
	if c.SinkTimeout <= 0 {
		c.SinkTimeout = 2 * time.Second
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := c.Clock
	if clock == nil {
		clock = time.Now
	}
	s := &Server{cfg: c, log: log, scale: c.TimeScale, mutant: c.Mutant, clock: clock,
		sink: newSink(c.SinkURL, c.SinkTimeout), running: map[string]bool{}, unsure: map[string]time.Time{}, kick: make(chan struct{}, 1)}
	// The resumer and the dispatcher retry every 200 ms of protocol time,
	// at least every 200 ms and at most every 20 ms of real time.
	s.interval = min(200*time.Millisecond, max(20*time.Millisecond, time.Duration(float64(200*time.Millisecond)/s.scale)))
	if c.Store != "" {
		if err := s.openPostgres(ctx, c); err != nil {
			s.sink.close()
			return nil, fmt.Errorf("ids: open: %w", err)
		}
		if err := s.st.prepare(ctx, s.wdb, s.rdb, s.dialect); err != nil {
			s.st.close()
			s.wdb.Close()
			s.sink.close()
			return nil, fmt.Errorf("ids: open: %w", err)
		}
	} else if err := s.openSQLite(ctx, c); err != nil {
		s.sink.close()
		return nil, err
	}
	s.warmCache(ctx)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.bg.Add(2)
	go s.resumeLoop()
	go s.dispatchLoop()
	log.Info("ids reference server open", "db", c.DBPath, "store", pgstore.Redacted(c.Store), "replica", c.ReplicaID, "sink", c.SinkURL,
		"time_scale", s.scale, "mutant", s.mutant)
	return s, nil
}

// openSQLite opens (or creates) the SQLite database at c.DBPath: one write
// connection owned by the group-commit writer, a read pool.
func (s *Server) openSQLite(ctx context.Context, c Config) error {
	wdb, err := sql.Open("sqlite", dsn(c.DBPath, false))
	if err != nil {
		return fmt.Errorf("ids: open: write db: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if _, err := wdb.ExecContext(ctx, schema); err != nil {
		wdb.Close()
		return fmt.Errorf("ids: open: schema: %w", err)
	}
	// An outbox made before its rows were claimed lacks the claim columns.
	if err := sqlitecols.Ensure(ctx, wdb, "outbox",
		sqlitecols.Column{Name: "owner", Def: `TEXT NOT NULL DEFAULT ''`}, sqlitecols.Column{Name: "lease_until", Def: `INTEGER NOT NULL DEFAULT 0`}); err != nil {
		wdb.Close()
		return fmt.Errorf("ids: open: %w", err)
	}
	var mode string
	if err := wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil || !strings.EqualFold(mode, "wal") {
		wdb.Close()
		return fmt.Errorf("ids: open: journal_mode is %q, want wal: %v", mode, err)
	}
	rdb, err := sql.Open("sqlite", dsn(c.DBPath, true))
	if err != nil {
		wdb.Close()
		return fmt.Errorf("ids: open: read db: %w", err)
	}
	rdb.SetMaxOpenConns(8)
	rdb.SetMaxIdleConns(8)
	s.wdb, s.rdb, s.dialect = wdb, rdb, dialectSQLite
	if err := s.st.prepare(ctx, wdb, rdb, dialectSQLite); err != nil {
		s.st.close()
		wdb.Close()
		rdb.Close()
		return fmt.Errorf("ids: open: %w", err)
	}
	gw, err := groupcommit.New(wdb, s.log)
	if err != nil {
		s.st.close()
		wdb.Close()
		rdb.Close()
		return fmt.Errorf("ids: open: %w", err)
	}
	s.w = gw
	return nil
}

// Close stops the resumer and the dispatcher, drains the writer (every
// queued operation is committed) and closes the database. Idempotent; the
// handler answers 503 afterwards.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		s.bg.Wait()
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

// dur converts protocol seconds to real time.
func (s *Server) dur(seconds float64) time.Duration {
	return time.Duration(seconds / s.scale * float64(time.Second))
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// timeFormat is RFC 3339 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func fmtTime(ns int64) string { return time.Unix(0, ns).UTC().Format(timeFormat) }

// Problem codes.
const (
	codeInvalidEnvelope      = "invalid_envelope"
	codeKeyMismatch          = "idempotency_key_mismatch"
	codeUnknownCommand       = "unknown_command"
	codeConfirmationInvalid  = "confirmation_invalid"
	codeDuplicateRateLimited = "duplicate_rate_limited"
	codeUnauthorized         = "unauthorized"
	codeNotFound             = "not_found"
	codeMethodNotAllowed     = "method_not_allowed"
	codeInvalidRequest       = "invalid_request"
	codeUnavailable          = "unavailable"
	codeInternal             = "internal_error"
)

var problemTitles = map[string]string{
	codeInvalidEnvelope:      "Invalid command envelope",
	codeKeyMismatch:          "The idempotency key is not this envelope's",
	codeUnknownCommand:       "Unknown command",
	codeConfirmationInvalid:  "Invalid confirmation token",
	codeDuplicateRateLimited: "Too many duplicates of one key",
	codeUnauthorized:         "Unauthorized",
	codeNotFound:             "Not found",
	codeMethodNotAllowed:     "Method not allowed",
	codeInvalidRequest:       "Invalid request",
	codeUnavailable:          "Service unavailable",
	codeInternal:             "Internal error",
}

// problem is an RFC 9457 problem document; it is also the error type of
// the handlers.
type problem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Code       string `json:"code"`
	retryAfter string
}

func (p *problem) Error() string { return p.Code + ": " + p.Detail }

func prob(status int, code, detail string) *problem {
	return &problem{Type: "https://idscheck.dev/ids/" + code, Title: problemTitles[code], Status: status, Detail: detail, Code: code}
}

func writeRaw(w http.ResponseWriter, status int, contentType string, b []byte) {
	h := w.Header()
	h["Content-Type"] = []string{contentType}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, prob(500, codeInternal, "cannot encode the response"))
		return
	}
	writeRaw(w, status, "application/json", b)
}

func writeProblem(w http.ResponseWriter, p *problem) {
	if p.retryAfter != "" {
		w.Header().Set("Retry-After", p.retryAfter)
	}
	b, _ := json.Marshal(p)
	writeRaw(w, p.Status, "application/problem+json", b)
}

func (s *Server) writeError(w http.ResponseWriter, err error) {
	var p *problem
	if !errors.As(err, &p) {
		var ee *envelopeError
		switch {
		case errors.As(err, &ee):
			p = prob(400, codeInvalidEnvelope, ee.msg)
		case errors.Is(err, errClosed):
			p = prob(503, codeUnavailable, "the server is shutting down")
		case errors.Is(err, errCommit):
			p = prob(503, codeUnavailable, "the database could not commit; retry")
			p.retryAfter = "1"
		case s.dialect == dialectPostgres && pgstore.Refused(err):
			p = prob(400, codeInvalidEnvelope, "a value of the request cannot be stored (a NUL character, or bytes that are not UTF-8)")
		case s.dialect == dialectPostgres && storeUnavailable(err):
			// The shared store did not answer: whether a write landed is
			// not known here, and a retry finds out.
			s.log.Warn("store unavailable", "err", err)
			p = prob(503, codeUnavailable, "the store did not answer; retry")
			p.retryAfter = "1"
		default:
			s.log.Error("internal error", "err", err)
			p = prob(500, codeInternal, "internal error")
		}
	}
	writeProblem(w, p)
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
			writeProblem(w, prob(500, codeInternal, "internal error"))
		}
	}()
	if err := s.route(w, r); err != nil {
		s.writeError(w, err)
	}
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) error {
	path := r.URL.Path
	method := func(m string) error {
		if r.Method == m || (m == "GET" && r.Method == "HEAD") {
			return nil
		}
		w.Header().Set("Allow", m)
		return prob(405, codeMethodNotAllowed, "method "+r.Method+" not allowed on "+path)
	}
	var h func(http.ResponseWriter, *http.Request) error
	var m string
	switch {
	case path == "/health":
		if err := method("GET"); err != nil {
			return err
		}
		writeJSON(w, 200, map[string]any{"status": "ok", "binding": bindingName, "time_scale": s.scale})
		return nil
	case path == "/registry":
		m, h = "GET", func(w http.ResponseWriter, r *http.Request) error {
			if s.cfg.InternalOnly {
				writeRaw(w, 200, "application/json", registryBodyOf(true))
			} else {
				writeRaw(w, 200, "application/json", registryBody)
			}
			return nil
		}
	case path == "/commands":
		m, h = "POST", s.postCommand
	case strings.HasPrefix(path, "/commands/"):
		m, h = "GET", s.getCommand
	case path == "/evidence":
		m, h = "GET", s.getEvidence
	case path == "/confirmations":
		m, h = "POST", s.postConfirmation
	default:
		return prob(404, codeNotFound, "no such route: "+path)
	}
	if err := method(m); err != nil {
		return err
	}
	if s.cfg.APIKey != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-API-Key")), []byte(s.cfg.APIKey)) != 1 {
		return prob(401, codeUnauthorized, "a valid X-API-Key is required")
	}
	return h(w, r)
}

// readBody reads a request body of at most maxBody bytes.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBody {
		return nil, badEnvelope("the body exceeds %d bytes", maxBody)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, badEnvelope("the body exceeds %d bytes", maxBody)
		}
		return nil, badEnvelope("cannot read the body: %v", err)
	}
	return b, nil
}
