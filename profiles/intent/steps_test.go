package intent

import (
	"bytes"
	"context"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/failpoint"

	"github.com/idscheck/idscheck/features"
	sut "github.com/idscheck/idscheck/sut/intent"
)

// TestIntentProfileAgainstBundledServer runs every scenario of
// intent.feature against the reference server (time scale 60) and requires
// every scenario to pass, or to be N/A only for want of protocol time.
func TestIntentProfileAgainstBundledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole intent profile (~30 s)")
	}
	for _, signed := range []bool{false, true} {
		name := "api-key"
		if signed {
			name = "require-signatures"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cfg := sut.Config{
				DBPath: filepath.Join(t.TempDir(), "bus.db"), Secret: "main-" + name, AdminSecret: "admin-secret",
				DashboardPassword: "dash-pw", MetricsToken: "metrics-token", RequireSignatures: signed,
				TimeScale: 60, Seed: 7, Logger: slog.New(slog.DiscardHandler),
			}
			srv, err := sut.Open(ctx, cfg)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer srv.Close()
			hs := httptest.NewServer(srv.Handler())
			defer hs.Close()
			var sel []string
			if signed {
				sel = []string{"INTENT-5.*", "INTENT-7.2-idem-*", "INTENT-7.3-atomic-claim"}
			}
			res, err := Profile().Run(ctx, features.RunConfig{
				Seed: 1, Select: sel,
				Target: features.Target{BaseURL: hs.URL, APIKey: cfg.Secret, TimeScale: 60,
					Credentials: credentialsOf(cfg), Described: Declared{RequireSignatures: signed}},
			})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			counts := map[verdict.Verdict]int{}
			for _, s := range res.Scenarios {
				counts[s.Verdict]++
				if s.Verdict != verdict.Pass {
					t.Logf("%s: %s: %s", s.Verdict, s.Name, s.Reason)
				}
				switch {
				case s.Verdict == verdict.Pass, s.Verdict == verdict.Reading:
				case s.Verdict == verdict.NA && (strings.Contains(s.Reason, "budget") || strings.Contains(s.Reason, "REQUIRE_SIGNATURES")):
				default:
					t.Errorf("%s: %s: %s (expected %s, observed %s)", s.Verdict, s.Name, s.Reason, s.Evidence.Expected, s.Evidence.Observed)
				}
			}
			t.Logf("%d scenarios: %v", len(res.Scenarios), counts)
			for _, r := range res.Rules {
				switch {
				case r.Verdict == verdict.Fail, r.Verdict.Undecided():
					t.Errorf("rule %s: %s: %s", r.RuleID, r.Verdict, r.Reason)
				case r.Verdict == verdict.Reading:
					// The bundled server follows every decision's first reading.
					d, ok := DecisionByID(r.Reading.Decision)
					if !ok || r.Reading.Follows != d.Readings[0].Name {
						t.Errorf("rule %s follows %+v, want the first reading of its decision", r.RuleID, r.Reading)
					}
				}
			}
			if counts[verdict.Pass] < len(res.Scenarios)/2 || len(res.Scenarios) == 0 {
				t.Errorf("too few scenarios passed: %v", counts)
			}
		})
	}
}

// TestIntentProfileKillsMutants runs, against every deliberate bug of the
// reference server, the scenarios that judge the rule the bug breaks, and
// requires that rule to fail: each mutant is killed by its own rule, not by
// a neighbour. (lost-on-crash is a crash mutant: its scenario catch rests on
// timing, and chaos proves it deterministically; idscheck mutants runs it.)
// IDSCHECK_MUTANTS=1 runs the whole profile against each instead.
func TestIntentProfileKillsMutants(t *testing.T) {
	whole := os.Getenv("IDSCHECK_MUTANTS") == "1"
	for _, m := range sut.Mutants() {
		if m.Name == sut.MutantLostOnCrash && !whole {
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			// The racy mutants' races show at every storm, not only under
			// lucky timing (their failpoints act in those mutants' branches only).
			for _, fp := range []string{sut.FailpointIdemRacyWindow, sut.FailpointClaimRacyWindow} {
				if err := failpoint.Enable(fp, `return("barrier")`); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { failpoint.Disable(fp) })
			}
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			cfg := sut.Config{DBPath: filepath.Join(t.TempDir(), "bus.db"), Secret: "main-key", AdminSecret: "admin-secret",
				DashboardPassword: "dash-pw", MetricsToken: "metrics-token", TimeScale: 60, Seed: 7, Mutant: m.Name,
				Logger: slog.New(slog.DiscardHandler)}
			srv, err := sut.Open(ctx, cfg)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer srv.Close()
			hs := httptest.NewServer(srv.Handler())
			defer hs.Close()
			var sel []string
			if !whole {
				sel = []string{m.Breaks}
			}
			res, err := Profile().Run(ctx, features.RunConfig{Seed: 1, Select: sel,
				Budget: 3 * time.Second,
				Target: features.Target{BaseURL: hs.URL, APIKey: cfg.Secret, TimeScale: 60, Credentials: credentialsOf(cfg)}})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			var failed []string
			caught := false
			for _, r := range res.Rules {
				if r.Verdict == verdict.Fail || r.Verdict == verdict.NonStrict {
					failed = append(failed, r.RuleID)
					caught = caught || r.RuleID == m.Breaks
				}
			}
			if !caught {
				t.Errorf("mutant %s (%s) is not caught by the rule it breaks, %s; failed: %v", m.Name, m.Description, m.Breaks, failed)
			}
		})
	}
}

// TestIntentRowFailureFailsOnlyItsRule: a target that refuses one boundary
// row of an outline (backoff_base 3600.0) fails the rule that row names and
// no other rule of the outlines it shares with other rows.
func TestIntentRowFailureFailsOnlyItsRule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the intent profile")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg := sut.Config{DBPath: filepath.Join(t.TempDir(), "bus.db"), Secret: "main-row", AdminSecret: "admin-row",
		TimeScale: 60, Seed: 7, Logger: slog.New(slog.DiscardHandler)}
	srv, err := sut.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/intent" {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"backoff_base": 3600.0`)) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":{"code":"invalid_backoff_base","message":"too slow"}}`)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	res, err := Profile().Run(ctx, features.RunConfig{
		Seed: 1, Select: []string{"INTENT-4.1-*"},
		Target: features.Target{BaseURL: hs.URL, APIKey: cfg.Secret, TimeScale: 60, Credentials: credentialsOf(cfg)},
	})
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, r := range res.Rules {
		if r.Verdict == verdict.Fail || r.Verdict == verdict.NonStrict || r.Verdict.Undecided() {
			failed[r.RuleID] = true
		}
	}
	if !failed["INTENT-4.1-backoff-base-range"] || len(failed) != 1 {
		t.Errorf("failed or undecided rules %v, want INTENT-4.1-backoff-base-range alone", failed)
	}
}

// credentialsOf returns the credentials a bundled server was opened with,
// by their names (features.Target.Credentials); an empty one is left out.
func credentialsOf(cfg sut.Config) map[string]string {
	m := map[string]string{}
	for name, v := range map[string]string{CredentialAdminToken: cfg.AdminSecret,
		CredentialMetricsToken: cfg.MetricsToken, CredentialDashboardPassword: cfg.DashboardPassword} {
		if v != "" {
			m[name] = v
		}
	}
	return m
}
