package sqlitecols

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// TestEnsureAddsWhatIsMissing: a table of an earlier version, with a row,
// gets the new columns (the row takes their default); a second Ensure
// changes nothing.
func TestEnsureAddsWhatIsMissing(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "old.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE outbox(seq INTEGER PRIMARY KEY, state TEXT NOT NULL); INSERT INTO outbox(state) VALUES('pending')`); err != nil {
		t.Fatal(err)
	}
	cols := []Column{{"owner", `TEXT NOT NULL DEFAULT ''`}, {"lease_until", `INTEGER NOT NULL DEFAULT 0`}}
	for range 2 {
		if err := Ensure(ctx, db, "outbox", cols...); err != nil {
			t.Fatal(err)
		}
	}
	var owner string
	var lease int64
	if err := db.QueryRow(`SELECT owner, lease_until FROM outbox`).Scan(&owner, &lease); err != nil || owner != "" || lease != 0 {
		t.Fatalf("owner %q lease %d: %v", owner, lease, err)
	}
}
