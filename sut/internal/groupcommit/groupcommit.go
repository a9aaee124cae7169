// Package groupcommit is the single SQLite writer of the bundled reference
// servers: one goroutine owns the only write connection and runs the
// operations submitted to it in batches, one transaction and one commit
// (one fsync) per batch, and answers each operation only after that commit
// returned. Every operation runs on the writer goroutine, one after the
// other, so an operation is atomic with respect to every other one: a
// check-and-set written as one operation needs no other lock.
//
// modernc.org/sqlite allows one writer: several write connections get
// SQLITE_BUSY, so the servers open their write *sql.DB with
// SetMaxOpenConns(1) and give it to New. Statements are prepared outside
// any transaction (preparing inside one deadlocks with a single
// connection); operations use them through tx.Stmt.
package groupcommit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("server closed")

// ErrCommit wraps a failed batch: every operation of the batch failed (its
// transaction was rolled back).
var ErrCommit = errors.New("commit failed")

// MaxBatch bounds the operations of one transaction.
const MaxBatch = 256

// op is one write operation: fn runs inside the batch transaction, in its
// own SAVEPOINT when the batch has several; its error rolls back only its
// own writes. done receives the outcome once the batch is durable (or
// failed).
type op struct {
	fn   func(tx *sql.Tx) (any, error)
	done chan result
}

type result struct {
	v   any
	err error
}

// Writer owns the only write connection. Its methods are safe for
// concurrent use.
type Writer struct {
	db     *sql.DB
	ch     chan op
	mu     sync.RWMutex // held for reading by submitters; Close takes it to close ch
	closed bool
	done   chan struct{}
	log    *slog.Logger

	opt Options

	savepoint, release, rollbackTo *sql.Stmt
}

// Options are what a server adds to its writer: a failpoint after each
// commit, and a mutant switch. The zero Options is the correct writer.
type Options struct {
	// AfterCommit runs after each durable commit, before any reply: a
	// crash point (a failpoint that exits loses the replies of committed
	// work). An error answers every operation of the batch with it,
	// wrapped in ErrCommit, although its writes landed (an ambiguous
	// outcome, as a crash after the commit gives a client).
	AfterCommit func() error
	// EarlyAck is the lost-on-crash mutant: every operation is answered
	// before its batch commits, and the commit waits this long after the
	// replies, AfterCommit between them (a crash there loses acknowledged
	// work). 0: the correct writer, which answers after the commit.
	EarlyAck time.Duration
}

// New starts the writer of db (a *sql.DB limited to one connection).
func New(db *sql.DB, log *slog.Logger) (*Writer, error) {
	return NewWithOptions(db, log, Options{})
}

// NewWithOptions starts the writer of db with a server's options.
func NewWithOptions(db *sql.DB, log *slog.Logger, opt Options) (*Writer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{db: db, ch: make(chan op, 1024), done: make(chan struct{}), log: log, opt: opt}
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{{&w.savepoint, "SAVEPOINT op"}, {&w.release, "RELEASE op"}, {&w.rollbackTo, "ROLLBACK TO op"}} {
		st, err := db.Prepare(p.q)
		if err != nil {
			w.closeStmts()
			return nil, fmt.Errorf("prepare %s: %w", p.q, err)
		}
		*p.dst = st
	}
	go w.loop()
	return w, nil
}

// Submit runs fn in the next batch and waits for its durable outcome: the
// value fn returned once the batch committed, or fn's error (its writes
// rolled back), or an error wrapping ErrCommit when the batch did not
// commit. Once the operation is queued Submit does not give up when ctx
// ends: the answer says whether the write landed.
func (w *Writer) Submit(ctx context.Context, fn func(tx *sql.Tx) (any, error)) (any, error) {
	o := op{fn: fn, done: make(chan result, 1)}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return nil, ErrClosed
	}
	select {
	case w.ch <- o:
	case <-ctx.Done():
		w.mu.RUnlock()
		return nil, ctx.Err()
	}
	w.mu.RUnlock()
	r := <-o.done
	return r.v, r.err
}

// Close stops accepting operations, runs every queued one and waits for
// the last commit. Idempotent. It does not close the database.
func (w *Writer) Close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.ch)
	}
	w.mu.Unlock()
	<-w.done
	w.closeStmts()
}

func (w *Writer) closeStmts() {
	for _, st := range []*sql.Stmt{w.savepoint, w.release, w.rollbackTo} {
		if st != nil {
			st.Close()
		}
	}
}

func (w *Writer) loop() {
	defer close(w.done)
	batch := make([]op, 0, MaxBatch)
	results := make([]result, 0, MaxBatch)
	for {
		first, ok := <-w.ch
		if !ok {
			return
		}
		batch = append(batch[:0], first)
	drain:
		for len(batch) < MaxBatch {
			select {
			case o, ok := <-w.ch:
				if !ok {
					break drain
				}
				batch = append(batch, o)
			default:
				break drain
			}
		}
		results = w.run(batch, results[:0])
		for i, o := range batch {
			o.done <- results[i]
		}
	}
}

// run executes one batch in one transaction and returns the per-op
// outcome. A batch of one op needs no savepoint: its error rolls back the
// whole transaction.
func (w *Writer) run(batch []op, results []result) []result {
	tx, err := w.db.Begin()
	if err != nil {
		for range batch {
			results = append(results, result{err: fmt.Errorf("begin: %w: %w", ErrCommit, err)})
		}
		return results
	}
	if len(batch) == 1 {
		v, err := call(batch[0].fn, tx)
		if err != nil {
			if rerr := tx.Rollback(); rerr != nil {
				w.log.Error("rollback", "err", rerr)
			}
			return append(results, result{v: v, err: err})
		}
		results = append(results, result{v: v})
	} else {
		sp, rel, rb := tx.Stmt(w.savepoint), tx.Stmt(w.release), tx.Stmt(w.rollbackTo)
		for _, o := range batch {
			if _, err := sp.Exec(); err != nil {
				results = append(results, result{err: fmt.Errorf("savepoint: %w", err)})
				continue
			}
			v, err := call(o.fn, tx)
			if err != nil {
				if _, rerr := rb.Exec(); rerr != nil {
					w.log.Error("rollback to savepoint", "err", rerr)
				}
			}
			if _, rerr := rel.Exec(); rerr != nil {
				w.log.Error("release savepoint", "err", rerr)
			}
			results = append(results, result{v: v, err: err})
		}
	}
	if w.opt.EarlyAck > 0 {
		// lost-on-crash mutant: acknowledge now, commit later.
		for i, o := range batch {
			o.done <- results[i]
			batch[i].done = make(chan result, 1)
		}
		time.Sleep(w.opt.EarlyAck)
		// Its crash point (the correct writer's after-commit failpoint)
		// sits between the replies and the commit: the moment this bug
		// loses acknowledged work.
		if w.opt.AfterCommit != nil {
			w.opt.AfterCommit()
		}
	}
	if err := tx.Commit(); err != nil {
		w.log.Error("batch commit", "ops", len(batch), "err", err)
		for i := range results {
			results[i] = result{err: fmt.Errorf("%w: %w", ErrCommit, err)}
		}
		return results
	}
	if w.opt.AfterCommit != nil && w.opt.EarlyAck == 0 {
		if err := w.opt.AfterCommit(); err != nil {
			for i := range results {
				results[i] = result{err: fmt.Errorf("%w: %w", ErrCommit, err)}
			}
		}
	}
	return results
}

// call runs fn; a panic in it is its error, not the end of the writer (and
// of every later request).
func call(fn func(tx *sql.Tx) (any, error), tx *sql.Tx) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("groupcommit: operation panicked: %v", p)
		}
	}()
	return fn(tx)
}
