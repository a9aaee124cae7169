// Package pgtest gives tests a throwaway PostgreSQL cluster (pgcluster,
// not durable: no fsync) shared by a test binary (Shared, stopped by Main),
// and a fresh database to each test (Database). Where PostgreSQL is not
// installed the tests that need it are skipped, naming the command that
// installs it.
package pgtest

import (
	"context"

	"github.com/idscheck/idscheck/pgcluster"
)

// Cluster is a running cluster (pgcluster.Cluster).
type Cluster = pgcluster.Cluster

// Install is the command that installs the PostgreSQL programs here.
const Install = pgcluster.Install

// ErrNotInstalled: initdb or pg_ctl is not found.
var ErrNotInstalled = pgcluster.ErrNotInstalled

// Start starts a cluster of the test's own (not shared; the caller stops
// it).
func Start(ctx context.Context) (*Cluster, error) { return pgcluster.Start(ctx) }
