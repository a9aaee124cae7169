package groupcommit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

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
