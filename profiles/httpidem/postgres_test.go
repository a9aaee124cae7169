package httpidem

import (
	"os"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestHTTPIdemOnPostgres: the bundled endpoint on a PostgreSQL store passes
// the profile's suite under every variant, and every mutant still fails
// the rule it breaks.
func TestHTTPIdemOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole profile per variant and part of it per mutant")
	}
	pgtest.Shared(t)
	suiteStore = pgtest.Database
	defer func() { suiteStore = nil }()
	t.Run("passes", TestHTTPIdemPassesTheBundledEndpoint)
	t.Run("kills mutants", TestHTTPIdemKillsMutants)
}
