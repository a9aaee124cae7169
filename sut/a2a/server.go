// Package a2a is the bundled reference queue of the a2a profile: a
// durable, explicitly leased agent-to-agent task queue that follows
// Covenant's A2A idempotency policy over the binding of
// docs/a2a-binding.md.
//
// How it holds:
//
//   - one writer goroutine owns the only SQLite write connection and
//     commits in batches (sut/internal/groupcommit); a lease is one
//     UPDATE … RETURNING of that writer, committed before it is answered,
//     so a task is leased once, and a crash after the commit leaves it
//     in_flight and visible, never leased again by itself;
//   - a task is queued again only by a manual repair (with its posture) or
//     the retry gate (retry-stale, or the scheduler that runs it), which
//     requeues the same task id and keeps its attempt counter; the next
//     lease increments it;
//   - the gate is disabled by default (a report of what it would do) and
//     requeues only stale, in-flight, idempotent tasks with a non-empty
//     key, within max attempts, max requeues and scan limit, each with an
//     auto_requeue audit row in the same transaction;
//   - a completed result of an idempotent task with a key is cached by
//     (sender, recipient, task kind, key) in the same transaction; a later
//     task with that cache key is answered with the result at once;
//     compaction drops resolved tasks, never the cache or the audit log.
//
// On PostgreSQL (Config.Store, several replicas over one database) the
// database keeps the same guarantees: a lease is one UPDATE of the row its
// sub-select took FOR UPDATE SKIP LOCKED (two replicas never lease one
// task); every other write is a SERIALIZABLE transaction (pgstore.Writer)
// rerun when it lost a race, so an enqueue delivered to every replica at
// once stores one task (the UNIQUE id), a result is cached once (the
// cache's primary key), and the schedulers of every replica requeue a
// stale lease once (the requeue's condition is read again on a rerun).
//
// The package imports nothing of the harness: server and harness meet only
// on the wire.
package a2a

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/idscheck/idscheck/sut/internal/groupcommit"
	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// FailpointAfterLeaseCommit is evaluated after a lease is committed,
// before it is answered (return("exit"): os.Exit(137), a real crash). The
// restarted queue must show the task in_flight and lease it to no one.
const FailpointAfterLeaseCommit = "github.com/idscheck/idscheck/sut/a2a/after-lease-commit"

// Failpoints lists the crash points.
func Failpoints() []string { return []string{FailpointAfterLeaseCommit} }

// Policy is the retry gate's A2AAutoRetryPolicy.
type Policy struct {
	Enabled       bool  `json:"enabled"`
	MinLeaseAgeMS int64 `json:"min_lease_age_ms"`
	MaxAttempts   int   `json:"max_attempts"`
	MaxRequeues   int   `json:"max_requeues"`
	ScanLimit     int   `json:"scan_limit"`
}

// DefaultPolicy is Covenant's: disabled, 5 minutes, 3 attempts, 1
// requeue, 100 entries.
func DefaultPolicy() Policy {
	return Policy{MinLeaseAgeMS: 300000, MaxAttempts: 3, MaxRequeues: 1, ScanLimit: 100}
}

// Scheduler configures the periodic scheduler (off when !Enabled).
type Scheduler struct {
	Enabled  bool
	Interval time.Duration
	Policy   Policy
}

// SchedulerFromEnv reads Covenant's COVENANT_A2A_AUTO_RETRY_* variables
// (absent: Covenant's defaults; the scheduler is off unless
// COVENANT_A2A_AUTO_RETRY_SCHEDULER is 1, true, yes or on). Durations are
// divided by timeScale (0: 1).
func SchedulerFromEnv(getenv func(string) string, timeScale float64) (Scheduler, error) {
	if timeScale <= 0 {
		timeScale = 1
	}
	s := Scheduler{Interval: time.Minute, Policy: DefaultPolicy()}
	const p = "COVENANT_A2A_AUTO_RETRY_"
	switch v := strings.ToLower(strings.TrimSpace(getenv(p + "SCHEDULER"))); v {
	case "1", "true", "yes", "on":
		s.Enabled = true
	case "", "0", "false", "no", "off":
	default:
		return s, fmt.Errorf("%sSCHEDULER: expected a boolean, got %q", p, v)
	}
	num := func(name string, dst *int64) error {
		v := strings.TrimSpace(getenv(p + name))
		if v == "" {
			return nil
		}
		var n int64
		if _, err := fmt.Sscan(v, &n); err != nil || n < 0 {
			return fmt.Errorf("%s%s must be a non-negative integer, got %q", p, name, v)
		}
		*dst = n
		return nil
	}
	interval, age, attempts, requeues, limit := int64(60000), s.Policy.MinLeaseAgeMS, int64(s.Policy.MaxAttempts), int64(s.Policy.MaxRequeues), int64(s.Policy.ScanLimit)
	for _, x := range []struct {
		name string
		dst  *int64
	}{{"INTERVAL_MS", &interval}, {"MIN_LEASE_AGE_MS", &age}, {"MAX_ATTEMPTS", &attempts}, {"MAX_REQUEUES", &requeues}, {"SCAN_LIMIT", &limit}} {
		if err := num(x.name, x.dst); err != nil {
			return s, err
		}
	}
	if interval == 0 {
		return s, fmt.Errorf("%sINTERVAL_MS must be greater than zero", p)
	}
	s.Interval = max(time.Millisecond, time.Duration(float64(interval)*float64(time.Millisecond)/timeScale))
	s.Policy = Policy{Enabled: true, MinLeaseAgeMS: int64(float64(age) / timeScale), MaxAttempts: int(attempts), MaxRequeues: int(requeues), ScanLimit: int(limit)}
	return s, nil
}

// Config configures the queue.
type Config struct {
	// DBPath is the SQLite database (the default store), for one process.
	DBPath string
	// Store, when set, is the store instead of DBPath: a PostgreSQL URL
	// (postgres://…) several replicas of the queue share.
	Store string
	// ReplicaID names this replica among those sharing Store (its
	// connections' application_name); required with Store.
	ReplicaID string
	// APIKey is the key every route but /health needs; Open refuses "".
	APIKey    string
	Scheduler Scheduler
	// TimeScale is the factor the queue's durations (the scheduler's
	// interval and lease age) were divided by (0 means 1: real time); the
	// queue publishes it on GET /health as "time_scale", so that a harness
	// told nothing of it still knows how fast the queue runs.
	TimeScale float64
	// Mutant names a deliberate bug (see Mutants); "" for the correct queue.
	Mutant string
	// Clock is the server's time; nil is time.Now. Tests move it by hand.
	Clock  func() time.Time
	Logger *slog.Logger
}

// Server is the queue. Its handler is safe for concurrent use.
type Server struct {
	cfg    Config
	mutant string
	log    *slog.Logger
	clock  func() time.Time
	key    []byte

	wdb, rdb *sql.DB
	w        writer
	// pg is the shared PostgreSQL store (Config.Store), nil on SQLite;
	// then wdb and rdb are that one pool.
	pg *sql.DB

	rs replicaState // the replica mutants'

	// scanned is called after each scheduler pass (tests).
	scanned func()

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// writer runs each write in a transaction: groupcommit.Writer on SQLite
// (one writer, batched commits), pgstore.Writer on PostgreSQL (each write
// its own SERIALIZABLE transaction, rerun when it lost a race).
type writer interface {
	Submit(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error)
	Close()
}

// Open opens (or creates) the database at c.DBPath, or the shared store
// c.Store, and returns a running queue (its scheduler running when
// c.Scheduler.Enabled).
func Open(ctx context.Context, c Config) (*Server, error) {
	if c.DBPath == "" && c.Store == "" {
		return nil, errors.New("a2a: open: no database path")
	}
	if c.Store != "" && !pgstore.IsPostgres(c.Store) {
		return nil, errors.New("a2a: open: the store must be a postgres:// URL")
	}
	if c.APIKey == "" {
		return nil, errors.New("a2a: open: no API key")
	}
	if c.Mutant != "" && !knownMutant(c.Mutant) {
		var names []string
		for _, m := range append(Mutants(), ReplicaMutants()...) {
			names = append(names, m.Name)
		}
		return nil, fmt.Errorf("a2a: open: unknown mutant %q (valid: %s)", c.Mutant, strings.Join(names, ", "))
	}
	if c.Scheduler.Enabled && (c.Scheduler.Interval <= 0 || c.Scheduler.Policy.MaxAttempts <= 0 || c.Scheduler.Policy.ScanLimit <= 0) {
		return nil, errors.New("a2a: open: the scheduler needs an interval, max attempts and a scan limit > 0")
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock := c.Clock
	if clock == nil {
		clock = time.Now
	}
	s := &Server{cfg: c, mutant: c.Mutant, log: log, clock: clock, key: []byte(c.APIKey)}
	if c.Store != "" {
		if c.ReplicaID == "" {
			return nil, errors.New("a2a: open: a store shared by replicas needs ReplicaID: a name unique among them, stable across restarts")
		}
		if err := s.openPostgres(ctx); err != nil {
			return nil, fmt.Errorf("a2a: open: %w", err)
		}
		s.start()
		return s, nil
	}
	wdb, err := sql.Open("sqlite", dsn(c.DBPath, false))
	if err != nil {
		return nil, fmt.Errorf("a2a: open: write db: %w", err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	fail := func(err error) (*Server, error) {
		if s.w != nil {
			s.w.Close()
		}
		if s.rdb != nil {
			s.rdb.Close()
		}
		wdb.Close()
		return nil, fmt.Errorf("a2a: open: %w", err)
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
	gw, err := groupcommit.New(wdb, log)
	if err != nil {
		return fail(err)
	}
	s.w = gw
	s.start()
	return s, nil
}

// start warms the replica-local-cache mutant's cache and starts the
// scheduler when it is enabled.
func (s *Server) start() {
	s.warmCache(context.Background())
	bg, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	if s.cfg.Scheduler.Enabled {
		s.wg.Add(1)
		go s.schedule(bg)
	}
}

// Close stops the scheduler, commits what is queued and closes the store.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		s.wg.Wait()
		s.w.Close()
		if s.pg != nil {
			s.closeErr = s.pg.Close()
			return
		}
		s.closeErr = errors.Join(s.rdb.Close(), s.wdb.Close())
	})
	return s.closeErr
}

// schedule runs the gate every interval until ctx ends, and records one
// scan summary a pass.
func (s *Server) schedule(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.Scheduler.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rep, err := s.retryStale(ctx, s.cfg.Scheduler.Policy, true)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("a2a auto retry scheduler scan", "err", err)
			}
			continue
		}
		s.log.Debug("a2a auto retry scheduler scan complete", "considered", rep.Considered, "requeued", len(rep.Requeued), "skipped", len(rep.Skipped))
		if s.scanned != nil {
			s.scanned()
		}
	}
}

func (s *Server) nowMS() int64 { return s.clock().UnixMilli() }

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func (s *Server) authorized(got string) bool {
	return subtle.ConstantTimeCompare([]byte(got), s.key) == 1
}

// clampInt converts a JSON number to an int within [0, MaxInt32].
func clampInt(v int64) int { return int(min(max(v, 0), math.MaxInt32)) }
