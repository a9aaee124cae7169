package ids

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	sutids "github.com/idscheck/idscheck/sut/ids"
)

// Profile returns the IDS profile: RFC-WF-0010, Idempotency & Delivery
// Semantics (seed 001), over idscheck's wire binding (docs/ids-binding.md).
func Profile() harness.Profile {
	suite := Suite()
	var mutants []harness.Mutant
	for _, m := range sutids.Mutants() {
		mu := harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks}
		if m.Name == sutids.MutantNoReservation {
			mu.Failpoints = map[string]string{sutids.FailpointNoReservationRacyWindow: `return("barrier")`}
		}
		mutants = append(mutants, mu)
	}
	for _, m := range sutids.ReplicaMutants() {
		mutants = append(mutants, harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks, Replicas: true})
	}
	return harness.Profile{
		Name:       Name,
		Title:      "IDS RFC-WF-0010 (idempotency and exactly-once effects)",
		Rules:      Rules,
		Decisions:  Decisions,
		Suite:      &suite,
		Bundled:    idsBundled,
		EffectSink: true,
		Preflight:  preflight,
		Mutants:    mutants,
		Chaos:      IDSChaos(),
		// --readings alternate: the bundled server replays by reference.
		AlternateReadings: func() map[string]string {
			return map[string]string{DecisionReplayForm: sutids.ReplayReference}
		},
		Serve: ServeCommand(),
	}
}

// idsBundled opens the IDS reference server over a fresh database, with an
// API key of its own, sending its effects to the run's sink.
func idsBundled(ctx context.Context, c harness.BundledConfig) (*harness.Bundled, error) {
	var b [16]byte
	rand.Read(b[:])
	t := features.Target{APIKey: "ids_" + hex.EncodeToString(b[:]), TimeScale: c.TimeScale}
	srv, err := sutids.Open(ctx, sutids.Config{
		DBPath: filepath.Join(c.Dir, "ids.db"), SinkURL: c.SinkURL, APIKey: t.APIKey,
		TimeScale: c.TimeScale, Mutant: c.Mutant, Seed: c.Seed, Logger: c.Logger,
		ReplayForm: c.Readings[DecisionReplayForm],
	})
	if err != nil {
		return nil, err
	}
	return &harness.Bundled{Handler: srv.Handler(), Target: t, Close: srv.Close}, nil
}
