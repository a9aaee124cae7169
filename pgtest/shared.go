package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for Store
)

// shared is the package's one cluster in a test binary: started by the
// first Database, stopped by Main.
var shared struct {
	once sync.Once
	c    *Cluster
	err  error
	n    atomic.Int64
}

// Main runs the tests of a package that uses Database and stops the shared
// cluster afterwards: func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }.
func Main(m *testing.M) int {
	defer func() {
		if shared.c != nil {
			shared.c.Stop()
		}
	}()
	return m.Run()
}

// Shared returns the test binary's cluster, starting it at the first call
// (about 2 s); where PostgreSQL is not installed it skips t, naming the
// command that installs it.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() { shared.c, shared.err = Start(context.Background()) })
	if shared.err == ErrNotInstalled || (shared.err != nil && strings.Contains(shared.err.Error(), "not installed")) {
		t.Skipf("PostgreSQL is not installed: %s (or run .ci/run, which installs it)", Install)
	}
	if shared.err != nil {
		t.Fatalf("pgtest: %v", shared.err)
	}
	return shared.c
}

// Database returns the URL of a new, empty database on the shared cluster
// (a test's own: nothing of another test is in it).
func Database(t testing.TB) string {
	t.Helper()
	c := Shared(t)
	name := fmt.Sprintf("t%d_%d", c.Port, shared.n.Add(1))
	u, err := c.CreateDatabase(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// stores is the database of Store: one per test binary, a schema in it for
// each store.
var stores struct {
	once sync.Once
	url  string
	db   *sql.DB
	err  error
	n    atomic.Int64
}

// Store returns the URL of a fresh, empty store on the shared cluster: a
// new schema (the URL's search_path) of one database of the test binary.
// A schema is made in milliseconds, a database in a third of a second.
func Store(t testing.TB) string {
	t.Helper()
	Shared(t)
	stores.once.Do(func() {
		stores.url = Database(t)
		stores.db, stores.err = sql.Open("pgx", stores.url)
	})
	if stores.err != nil || stores.url == "" {
		t.Fatalf("pgtest: the stores' database: %v", stores.err)
	}
	name := fmt.Sprintf("store_%d", stores.n.Add(1))
	if _, err := stores.db.Exec("CREATE SCHEMA " + name); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	u, err := url.Parse(stores.url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}
