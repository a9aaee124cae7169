package httpidem

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"path/filepath"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	suthttpidem "github.com/idscheck/idscheck/sut/httpidem"
)

//go:embed http_idempotency.feature
var feature embed.FS

// Profile returns the http-idempotency profile: any HTTP endpoint with an
// idempotency key, judged under the variant its target declares
// (docs/http-idempotency.md): the IETF draft, t-0's receiver rules or
// Stripe's conventions. The bundled endpoint is a small payments API that
// follows each variant (sut/httpidem).
func Profile() harness.Profile {
	var mutants []harness.Mutant
	for _, m := range suthttpidem.Mutants() {
		mu := harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks, Variant: m.Variant}
		if m.Name == suthttpidem.MutantNoReservation {
			mu.Failpoints = map[string]string{suthttpidem.FailpointNoReservationRacyWindow: `return("barrier")`}
		}
		mutants = append(mutants, mu)
	}
	for _, m := range suthttpidem.ReplicaMutants() {
		mutants = append(mutants, harness.Mutant{Name: m.Name, Description: m.Description, Breaks: m.Breaks, Variant: m.Variant, Replicas: true})
	}
	return harness.Profile{
		Name:               Name,
		Title:              "HTTP Idempotency-Key (the IETF draft, t-0's receiver rules, Stripe's conventions)",
		Rules:              Rules,
		Decisions:          Decisions,
		Suite:              &features.Suite{FS: feature, Paths: []string{"http_idempotency.feature"}, Steps: registerSteps},
		Bundled:            bundled,
		EffectSink:         true,
		EffectsWithoutSink: effectsWithoutSink,
		Preflight:          preflight,
		Mutants:            mutants,
		// A key lives 24 hours: at 20,000× a day lasts 4.3 s, and the
		// stripe rule on keys kept a day fits a scenario.
		BundledTimeScale: 20000,
		Chaos:            Chaos(),
		Section:          Section(),
		Serve:            Serve(),
	}
}

// bundled opens the bundled payments endpoint over a fresh
// database with two callers of its own, and describes it as a target does.
func bundled(ctx context.Context, c harness.BundledConfig) (*harness.Bundled, error) {
	tok := func() string {
		var b [16]byte
		rand.Read(b[:])
		return "tok_" + hex.EncodeToString(b[:])
	}
	callers := []string{tok(), tok()}
	variant := c.Variant
	if variant == "" {
		variant = VariantIETF
	}
	srv, err := suthttpidem.Open(ctx, suthttpidem.Config{
		DBPath: filepath.Join(c.Dir, "payments.db"), SinkURL: c.SinkURL, Variant: variant, Callers: callers,
		TimeScale: c.TimeScale, Mutant: c.Mutant, Logger: c.Logger,
	})
	if err != nil {
		return nil, err
	}
	return &harness.Bundled{Handler: srv.Handler(), Target: features.Target{TimeScale: c.TimeScale, Described: BundledEndpoint(variant, callers)}, Close: srv.Close}, nil
}

// BundledEndpoint is the bundled payments endpoint as a target file
// describes it (docs/http-idempotency.md, the worked example).
func BundledEndpoint(variant string, callers []string) *Endpoint {
	e := &Endpoint{
		Variant: variant, Method: "POST", Path: "/v1/payments",
		Body:          map[string]any{"amount": 1250, "currency": "EUR", "reference": "{{unique}}"},
		Vary:          map[string]any{"amount": 990},
		Invalid:       map[string]any{"amount": -1},
		RequiresKey:   variant != VariantStripe,
		KeyTTLSeconds: 86400,
		ID:            "id",
		Count:         &CountRead{Path: "/v1/payments?reference={{unique}}", Pointer: "/data"},
		KeySpec:       &KeySpec{MinLength: 1, MaxLength: 255},
	}
	if variant == VariantT0 {
		e.Key = KeyPlace{Body: "paymentRef"}
		e.KeySpec.MaxLength = 128
	}
	for _, t := range callers {
		e.Callers = append(e.Callers, Caller{Headers: map[string]string{"Authorization": "Bearer " + t}})
	}
	e.Defaults()
	return e
}

// effectsWithoutSink says what judges the rules that count effects when
// no effect sink is declared: the declared count read ("" without one).
// What only the sink shows (a failed effect call, no effect after the
// first answer) is left unjudged, and a duplicate in flight needs the
// declared slow request.
func effectsWithoutSink(described any) string {
	e, ok := described.(*Endpoint)
	if !ok || e == nil || e.Count == nil {
		return ""
	}
	by := "the declared count read (GET " + e.Count.Path + "); what only the sink shows (the replay of a failed effect call, no effect after the first answer) is not judged"
	if e.Slow != nil {
		return by + ", and a duplicate in flight is sent during the declared slow request"
	}
	return by + ", nor is a duplicate in flight (declare \"slow\")"
}
