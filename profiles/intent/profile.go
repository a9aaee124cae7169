package intent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"github.com/idscheck/idscheck/harness"
	"path/filepath"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/spec"
	specintent "github.com/idscheck/idscheck/spec/intent"
	sut "github.com/idscheck/idscheck/sut/intent"
)

// Intent is the Intent Protocol v2.1 (seed 004): a leased job bus.
func Profile() harness.Profile {
	suite, _ := features.ProfileSuite(spec.ProfileIntent)
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
	return harness.Profile{
		Name:              spec.ProfileIntent,
		Title:             "Intent Protocol v2.1 (a leased job bus)",
		Rules:             func() []spec.Rule { return spec.RulesFor(spec.ProfileIntent) },
		Decisions:         specintent.Decisions,
		Suite:             &suite,
		Bundled:           intentBundled,
		AlternateReadings: sut.AlternateReadings,
		Mutants:           mutants,
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
		APIKey: secret("sk_"), AdminToken: secret("adm_"), MetricsToken: secret("met_"),
		DashboardPassword: secret("pw_"), TimeScale: c.TimeScale,
	}
	srv, err := sut.Open(ctx, sut.Config{
		DBPath: filepath.Join(c.Dir, "bus.db"), Secret: t.APIKey, AdminSecret: t.AdminToken,
		DashboardPassword: t.DashboardPassword, MetricsToken: t.MetricsToken,
		TimeScale: c.TimeScale, Mutant: c.Mutant, Seed: c.Seed, Readings: c.Readings, Logger: c.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &harness.Bundled{Handler: srv.Handler(), Target: t, Close: srv.Close}, nil
}
