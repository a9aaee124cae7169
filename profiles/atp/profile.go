// Package atp is the ATP profile: "ATP Consistency & Semantics" (seed 000),
// the Agent Transaction Protocol, made certifiable. It holds the text's
// rules, the places where it leaves a choice open, and idscheck's wire
// binding of it (docs/atp-binding.md): signed intents, the transaction row,
// receipts signed with Ed25519 over RFC 8785 (JCS); the agent client and
// the text's retry policy; the feature file and its steps; the checks of a
// chaos run and its workload; the payment rail the harness hosts and its
// faults; and the bundled server's serve command (sut/atp).
//
// The text carries no RFC 2119 keyword: it states its guarantees in the
// indicative ("is UNIQUE", "returns the existing row verbatim"). Such a
// rule is a MUST whose Guarantee holds those words, and gates like any
// MUST; what the text only recommends, permits, or asks of the agent or
// the operator stays a SHOULD (a broken one is NON-STRICT; --strict gates
// on it).
package atp

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"path/filepath"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
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
	for _, m := range sutatp.ReplicaMutants() {
		mutants = append(mutants, harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks, Replicas: true})
	}
	return harness.Profile{
		Name:              Name,
		Title:             "ATP (the Agent Transaction Protocol: consistency and semantics)",
		Rules:             Rules,
		Decisions:         Decisions,
		Suite:             &features.Suite{FS: feature, Paths: []string{"atp.feature"}, Steps: atpSteps},
		Bundled:           atpBundled,
		AlternateReadings: alternateReadings,
		EffectSink:        true,
		Preflight:         preflight,
		Mutants:           mutants,
		Serve:             serveCommand(),
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
