package atp

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"github.com/idscheck/idscheck/harness"
	"path/filepath"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/spec"
	specatp "github.com/idscheck/idscheck/spec/atp"
	sutatp "github.com/idscheck/idscheck/sut/atp"
)

// feature is the profile's feature file.
//
//go:embed atp.feature
var feature embed.FS

// Profile is "ATP Consistency & Semantics" (seed 000), the Agent Transaction
// Protocol, over idscheck's wire binding (docs/atp-binding.md): signed
// intents, the transaction row, Ed25519 receipts over JCS, and the payment
// rail the harness hosts (served by the effect sink).
func Profile() harness.Profile {
	var mutants []harness.Mutant
	for _, m := range sutatp.Mutants() {
		mu := harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks}
		if m.Name == sutatp.MutantNoReservation {
			mu.Failpoints = map[string]string{sutatp.FailpointNoReservationRacyWindow: `return("barrier")`}
		}
		mutants = append(mutants, mu)
	}
	return harness.Profile{
		Name:              spec.ProfileATP,
		Title:             "ATP (the Agent Transaction Protocol: consistency and semantics)",
		Rules:             specatp.Rules,
		Decisions:         specatp.Decisions,
		Suite:             &features.Suite{FS: feature, Paths: []string{"atp.feature"}, Steps: atpSteps},
		Bundled:           atpBundled,
		AlternateReadings: func() map[string]string { return map[string]string{specatp.DecisionNonceSameKey: "nonce"} },
		EffectSink:        true,
		Mutants:           mutants,
		Chaos:             ATPChaos(),
	}
}

// atpBundled opens the ATP reference server over a fresh database, with an
// API key of its own, charging through the run's rail (the effect sink).
func atpBundled(ctx context.Context, c harness.BundledConfig) (*harness.Bundled, error) {
	var b [16]byte
	rand.Read(b[:])
	t := features.Target{APIKey: "atp_" + hex.EncodeToString(b[:]), TimeScale: c.TimeScale}
	srv, err := sutatp.Open(ctx, sutatp.Config{
		DBPath: filepath.Join(c.Dir, "atp.db"), RailURL: c.SinkURL, APIKey: t.APIKey,
		TimeScale: c.TimeScale, Mutant: c.Mutant, Seed: c.Seed, Readings: c.Readings, Logger: c.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &harness.Bundled{Handler: srv.Handler(), Target: t, Close: srv.Close}, nil
}
