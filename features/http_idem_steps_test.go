package features

import (
	"context"
	"encoding/hex"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/pingcap/failpoint"

	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/spec/httpidem"
	suthttpidem "github.com/idscheck/idscheck/sut/httpidem"
	"github.com/idscheck/idscheck/verdict"
)

// bundledEndpoint describes the bundled payments endpoint as a target file
// does (profiles.BundledEndpoint; features cannot import profiles).
func bundledEndpoint(variant string, callers []string) *httpidem.Endpoint {
	e := &httpidem.Endpoint{
		Variant: variant, Path: "/v1/payments",
		Body: map[string]any{"amount": 1250, "currency": "EUR", "reference": "{{unique}}"},
		Vary: map[string]any{"amount": 990}, Invalid: map[string]any{"amount": -1},
		RequiresKey: variant != httpidem.VariantStripe, KeyTTLSeconds: 86400, ID: "id",
		Count: &httpidem.CountRead{Path: "/v1/payments?reference={{unique}}", Items: "data"},
	}
	if variant == httpidem.VariantT0 {
		e.Key = httpidem.KeyPlace{Body: "paymentRef"}
	}
	for _, t := range callers {
		e.Callers = append(e.Callers, httpidem.Caller{Headers: map[string]string{"Authorization": "Bearer " + t}})
	}
	e.Defaults()
	return e
}

// runHTTPIdem certifies the bundled endpoint under variant (mutant "" for
// the correct one) on the rules sel selects (nil: all).
func runHTTPIdem(t *testing.T, variant, mutant string, sel []string) *RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	callers := []string{"tok_" + hex.EncodeToString([]byte("caller-one")), "tok_" + hex.EncodeToString([]byte("caller-two"))}
	const scale = 20000
	srv, err := suthttpidem.Open(ctx, suthttpidem.Config{DBPath: filepath.Join(t.TempDir(), "p.db"), SinkURL: s.URL(),
		Variant: variant, Callers: callers, TimeScale: scale, Mutant: mutant, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	res, err := Run(ctx, RunConfig{Profile: spec.ProfileHTTPIdem, Rules: spec.RulesFor(spec.ProfileHTTPIdem), Seed: 1, Select: sel,
		Budget: 8 * time.Second, Sink: s, Target: Target{BaseURL: hs.URL, TimeScale: scale, HTTPIdem: bundledEndpoint(variant, callers)}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// TestHTTPIdemPassesTheBundledEndpoint: under each variant, every testable
// rule of that variant passes, and the others are N/A.
func TestHTTPIdemPassesTheBundledEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole profile per variant")
	}
	for _, v := range httpidem.Variants() {
		t.Run(v, func(t *testing.T) {
			res := runHTTPIdem(t, v, "", nil)
			pass := 0
			for _, r := range res.Rules {
				rule, _ := spec.Lookup(r.RuleID)
				mine := httpidem.Variant(rule) == v
				switch {
				case r.Verdict == verdict.Pass && mine:
					pass++
				case r.Verdict == verdict.NA && (!mine || rule.Untestable != ""):
				default:
					t.Errorf("rule %s (%s): %s: %s", r.RuleID, httpidem.Variant(rule), r.Verdict, r.Reason)
				}
			}
			if pass < 5 {
				t.Errorf("only %d rules of %s passed", pass, v)
			}
		})
	}
}

// TestHTTPIdemKillsMutants: every mutant of the bundled endpoint, run under
// its variant, fails the rule it breaks.
func TestHTTPIdemKillsMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the profile per mutant")
	}
	if err := failpoint.Enable(suthttpidem.FailpointNoReservationRacyWindow, `return("barrier")`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Disable(suthttpidem.FailpointNoReservationRacyWindow) })
	for _, m := range suthttpidem.Mutants() {
		t.Run(m.Name, func(t *testing.T) {
			res := runHTTPIdem(t, m.Variant, m.Name, []string{m.Breaks})
			var failed []string
			caught := false
			for _, r := range res.Rules {
				if r.Verdict == verdict.Fail || r.Verdict == verdict.NonStrict {
					failed = append(failed, r.RuleID)
					caught = caught || r.RuleID == m.Breaks
				}
			}
			if !caught {
				t.Errorf("mutant %s (%s) under %s is not caught by %s; failed: %v", m.Name, m.Description, m.Variant, m.Breaks, failed)
			}
		})
	}
}
