package intent

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"path/filepath"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/spec"
	sut "github.com/idscheck/idscheck/sut/intent"
)

// Name is the profile's name.
const Name spec.Profile = "intent"

//go:embed intent.feature
var feature embed.FS

// Suite is the profile's feature file and its step definitions.
func Suite() features.Suite {
	return features.Suite{FS: feature, Paths: []string{"intent.feature"}, Steps: intentSteps}
}

// Profile returns the Intent Protocol v2.1 (seed 004): a leased job bus.
func Profile() harness.Profile {
	suite := Suite()
	var mutants []harness.Mutant
	for _, m := range sut.Mutants() {
		mu := harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks}
		switch m.Name {
		case sut.MutantIdemCheckRacy:
			mu.Failpoints = map[string]string{sut.FailpointIdemRacyWindow: `return("barrier")`}
		case sut.MutantClaimNonAtomic:
			mu.Failpoints = map[string]string{sut.FailpointClaimRacyWindow: `return("barrier")`}
		}
		mutants = append(mutants, mu)
	}
	for _, m := range sut.ReplicaMutants() {
		// Correct on one replica: caught by idscheck chaos --replicas N.
		mutants = append(mutants, harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks, Replicas: true})
	}
	return harness.Profile{
		Name:              Name,
		Title:             "Intent Protocol v2.1 (a leased job bus)",
		Rules:             Rules,
		Decisions:         Decisions,
		Suite:             &suite,
		Bundled:           intentBundled,
		AlternateReadings: sut.AlternateReadings,
		Preflight:         preflight,
		Mutants:           mutants,
		Credentials:       credentials,
		APIKeyRequired:    true,
		Section:           section(),
		Serve:             serve(),
		Chaos:             Chaos(),
	}
}

// intentBundled opens the reference server over a fresh database with
// secrets of its own, drawn from crypto/rand.
func intentBundled(ctx context.Context, c harness.BundledConfig) (*harness.Bundled, error) {
	secret := func(prefix string) string {
		var b [16]byte
		rand.Read(b[:])
		return prefix + hex.EncodeToString(b[:])
	}
	t := features.Target{
		APIKey: secret("sk_"), TimeScale: c.TimeScale,
		Credentials: map[string]string{
			CredentialAdminToken:        secret("adm_"),
			CredentialMetricsToken:      secret("met_"),
			CredentialDashboardPassword: secret("pw_"),
		},
	}
	srv, err := sut.Open(ctx, sut.Config{
		DBPath: filepath.Join(c.Dir, "bus.db"), Secret: t.APIKey, AdminSecret: t.Credentials[CredentialAdminToken],
		DashboardPassword: t.Credentials[CredentialDashboardPassword], MetricsToken: t.Credentials[CredentialMetricsToken],
		TimeScale: c.TimeScale, Mutant: c.Mutant, Seed: c.Seed, Readings: c.Readings, Logger: c.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &harness.Bundled{Handler: srv.Handler(), Target: t, Close: srv.Close}, nil
}
