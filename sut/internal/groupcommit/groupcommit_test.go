package groupcommit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

func open(t *testing.T) (*sql.DB, *Writer) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "w.db")+"?_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		t.Fatal(err)
	}
	w, err := New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(); db.Close() })
	return db, w
}

// TestBatches: concurrent operations commit; a failing or panicking one
// rolls back only its own writes.
func TestBatches(t *testing.T) {
	db, w := open(t)
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = w.Submit(context.Background(), func(tx *sql.Tx) (any, error) {
				if _, err := tx.Exec(`INSERT INTO t(k, v) VALUES(?, ?)`, i, fmt.Sprint(i)); err != nil {
					return nil, err
				}
				switch i % 10 {
				case 3:
					return nil, errors.New("refused")
				case 7:
					panic("boom")
				}
				return i, nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if (i%10 == 3 || i%10 == 7) != (err != nil) {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n); err != nil || n != 160 {
		t.Fatalf("%d rows (%v), want 160", n, err)
	}
}

func TestClose(t *testing.T) {
	_, w := open(t)
	w.Close()
	w.Close()
	if _, err := w.Submit(context.Background(), func(tx *sql.Tx) (any, error) { return nil, nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestOptions: AfterCommit runs after the commit and before the reply (an
// error answers ErrCommit although the write landed); with EarlyAck the
// reply comes before the commit, and the hook between them.
func TestOptions(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprintf("early=%v", early), func(t *testing.T) {
			db, _ := open(t)
			var committed []int
			fail := errors.New("soft failure")
			opt := Options{AfterCommit: func() error {
				committed = append(committed, len(committed))
				return fail
			}}
			if early {
				opt.EarlyAck = 10 * time.Millisecond
			}
			w, err := NewWithOptions(db, nil, opt)
			if err != nil {
				t.Fatal(err)
			}
			_, err = w.Submit(context.Background(), func(tx *sql.Tx) (any, error) {
				_, err := tx.Exec(`INSERT INTO t(k, v) VALUES (42, 'x')`)
				return nil, err
			})
			if !early && !errors.Is(err, ErrCommit) {
				t.Errorf("after-commit error: Submit returned %v, want ErrCommit", err)
			}
			if early && err != nil {
				t.Errorf("early ack: Submit returned %v, want the reply given before the commit", err)
			}
			w.Close()
			var n int
			if err := db.QueryRow(`SELECT COUNT(*) FROM t WHERE k = 42`).Scan(&n); err != nil || n != 1 {
				t.Errorf("the write did not land: %d rows (%v)", n, err)
			}
			if len(committed) != 1 {
				t.Errorf("AfterCommit ran %d times, want once", len(committed))
			}
		})
	}
}
