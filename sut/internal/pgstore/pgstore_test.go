package pgstore

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const schema = `
CREATE TABLE IF NOT EXISTS items(id TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS items_n ON items(n);
`

// TestOpenWhileAReplicaHoldsALock: a replica that restarts while another
// replica's transaction holds the table (cut from the store
// mid-transaction) opens at once: the schema is there, nothing is run.
// Before, CREATE INDEX IF NOT EXISTS waited for that transaction.
func TestOpenWhileAReplicaHoldsALock(t *testing.T) {
	store := pgtest.Database(t)
	ctx := context.Background()
	first, err := Open(ctx, store, "r1", schema)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	tx, err := first.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec(`LOCK TABLE items IN SHARE ROW EXCLUSIVE MODE`); err != nil { // conflicts with CREATE INDEX's SHARE lock
		t.Fatal(err)
	}
	octx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	second, err := Open(octx, store, "r2", schema)
	if err != nil {
		t.Fatalf("a second replica could not open while the first holds the table: %v", err)
	}
	second.Close()
}

// TestDSN: the replica names its connections, and bounds connects and
// idle transactions, unless the URL says otherwise.
func TestDSN(t *testing.T) {
	got, err := DSN("postgres://u@127.0.0.1:5432/db?sslmode=disable", "replica-2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"application_name=replica-2", "connect_timeout=5", "idle_in_transaction_session_timeout=" + IdleInTransaction, "sslmode=disable"} {
		if !strings.Contains(got, want) {
			t.Errorf("DSN %q lacks %q", got, want)
		}
	}
	// The replica's name is its owner name: never one the URL shares
	// with every replica.
	got, _ = DSN("postgres://u@h/db?application_name=mine&idle_in_transaction_session_timeout=1s", "replica-2")
	if !strings.Contains(got, "application_name=replica-2") || !strings.Contains(got, "idle_in_transaction_session_timeout=1s") {
		t.Errorf("DSN %q: want the replica's name, and the URL's idle timeout", got)
	}
	if _, err := DSN("postgres://u:s3cr%t@db/x", "r"); err == nil || strings.Contains(err.Error(), "s3cr") {
		t.Errorf("a URL that does not parse: %v (its password must not be quoted)", err)
	}
}
