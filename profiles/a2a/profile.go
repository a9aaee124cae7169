package a2a

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"flag"
	"log/slog"
	"path/filepath"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	suta2a "github.com/idscheck/idscheck/sut/a2a"
)

//go:embed a2a.feature
var feature embed.FS

// APIKeyEnv is the variable the served queue reads its API key from.
const APIKeyEnv = "A2A_API_KEY"

// bundledTimeScale: the bundled queue's scheduler runs Covenant's
// defaults a hundred times faster (a pass every 600 ms, leases older than
// 3 s), so the scheduler scenario fits the budget.
const bundledTimeScale = 100

// Profile returns the a2a profile: Covenant's A2A idempotency policy over
// docs/a2a-binding.md, its bundled queue sut/a2a.
func Profile() harness.Profile {
	var mutants []harness.Mutant
	for _, m := range suta2a.Mutants() {
		mutants = append(mutants, harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks})
	}
	for _, m := range suta2a.ReplicaMutants() {
		mutants = append(mutants, harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks, Replicas: true})
	}
	return harness.Profile{
		Name:             Name,
		Title:            "A2A idempotency policy (Covenant): a durable, explicitly leased agent task queue",
		Rules:            Rules,
		Suite:            &features.Suite{FS: feature, Paths: []string{"a2a.feature"}, Steps: registerSteps},
		Bundled:          bundled,
		Mutants:          mutants,
		BundledTimeScale: bundledTimeScale,
		APIKeyRequired:   true,
		Preflight:        preflight,
		Serve: &harness.ServeCommand{
			Flags:       serveFlags,
			Env:         APIKeyEnv + ": the API key every route but /health takes in X-API-KEY (required); COVENANT_A2A_AUTO_RETRY_*: the scheduler's opt-in and bounds (docs/a2a-binding.md)",
			Child:       serveChild,
			SharedStore: true,
		},
		Chaos: Chaos(),
	}
}

// bundledScheduler is the scheduler of the bundled queue under idscheck
// run: opted in, Covenant's defaults divided by the time scale.
func bundledScheduler(timeScale float64) (suta2a.Scheduler, error) {
	return suta2a.SchedulerFromEnv(func(k string) string {
		if k == "COVENANT_A2A_AUTO_RETRY_SCHEDULER" {
			return "1"
		}
		return ""
	}, timeScale)
}

// bundled opens the bundled queue over a fresh database, its scheduler on.
func bundled(ctx context.Context, c harness.BundledConfig) (*harness.Bundled, error) {
	var b [16]byte
	rand.Read(b[:])
	key := "a2a_" + hex.EncodeToString(b[:])
	ts := c.TimeScale
	if ts <= 0 {
		ts = bundledTimeScale
	}
	sched, err := bundledScheduler(ts)
	if err != nil {
		return nil, err
	}
	srv, err := suta2a.Open(ctx, suta2a.Config{DBPath: filepath.Join(c.Dir, "a2a.db"), APIKey: key, Scheduler: sched, TimeScale: ts, Mutant: c.Mutant, Logger: c.Logger})
	if err != nil {
		return nil, err
	}
	return &harness.Bundled{Handler: srv.Handler(), Target: features.Target{APIKey: key, TimeScale: ts}, Close: srv.Close}, nil
}

// serveFlags: no flags of its own; the queue until ctx ends, its key from
// A2A_API_KEY, its scheduler from COVENANT_A2A_AUTO_RETRY_* (durations
// divided by --time-scale).
func serveFlags(*flag.FlagSet) func(ctx context.Context, c harness.ServeConfig) error {
	return func(ctx context.Context, c harness.ServeConfig) error {
		getenv := c.Getenv
		if getenv == nil {
			getenv = func(string) string { return "" }
		}
		key := getenv(APIKeyEnv)
		if key == "" {
			return errors.New("--profile a2a needs " + APIKeyEnv + ": the API key of the queue")
		}
		if c.TimeScale < 0 {
			return errors.New("--time-scale must be > 0")
		}
		sched, err := suta2a.SchedulerFromEnv(getenv, c.TimeScale)
		if err != nil {
			return err
		}
		db := c.DB
		if db == "" {
			db = "a2a.db"
		}
		logger := c.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		srv, err := suta2a.Open(ctx, suta2a.Config{DBPath: db, Store: c.Store, ReplicaID: c.ReplicaID, APIKey: key, Scheduler: sched, TimeScale: c.TimeScale, Mutant: c.Mutant, Logger: logger})
		if err != nil {
			return err
		}
		c.Logger, c.DB = logger, db
		return harness.ServeHandler(ctx, c, string(Name), srv.Handler(), srv.Close)
	}
}
