package ids

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/pingcap/failpoint"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/spec"
	sutids "github.com/idscheck/idscheck/sut/ids"
	"github.com/idscheck/idscheck/verdict"
)

// runIDS certifies the bundled IDS server (mutant "" for the correct one)
// on the rules sel selects (nil: all), with an effect sink of its own.
func runIDS(t *testing.T, mutant string, sel []string) *features.RunResult {
	return runIDSAt(t, mutant, sel, 60)
}

// runIDSAt is runIDS with the server and the target at time scale scale.
func runIDSAt(t *testing.T, mutant string, sel []string, scale float64) *features.RunResult {
	t.Helper()
	return runIDSConfig(t, mutant, sel, scale, nil)
}

// runIDSConfig is runIDSAt with the server's configuration changed by mod
// (nil: none).
func runIDSConfig(t *testing.T, mutant string, sel []string, scale float64, mod func(*sutids.Config)) *features.RunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cfg := sutids.Config{DBPath: filepath.Join(t.TempDir(), "ids.db"), SinkURL: s.URL(),
		APIKey: "ids-key", TimeScale: scale, Mutant: mutant, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := sutids.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	suite := Suite()
	res, err := features.Run(ctx, features.RunConfig{Profile: Name, Rules: spec.RulesFor(Name), Suite: &suite, Seed: 1, Select: sel,
		Budget: 8 * time.Second, Sink: s, Target: features.Target{BaseURL: hs.URL, APIKey: "ids-key", TimeScale: scale}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// TestIDSProfilePassesTheBundledServer: every testable IDS rule passes on
// the reference server, none is undecided.
func TestIDSProfilePassesTheBundledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole IDS profile")
	}
	res := runIDS(t, "", nil)
	pass := 0
	for _, r := range res.Rules {
		rule, _ := spec.Lookup(r.RuleID)
		switch {
		case r.Verdict == verdict.Pass:
			pass++
		case r.Verdict == verdict.NA && rule.Untestable != "":
		default:
			t.Errorf("rule %s: %s: %s", r.RuleID, r.Verdict, r.Reason)
		}
	}
	if pass < 40 {
		t.Errorf("only %d rules passed", pass)
	}
}

// TestIDSProfileKillsMutants runs, against every deliberate bug of the IDS
// reference server, the scenarios that judge the rule it breaks, and
// requires that rule to fail.
func TestIDSProfileKillsMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile per mutant")
	}
	if err := failpoint.Enable(sutids.FailpointNoReservationRacyWindow, `return("barrier")`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Disable(sutids.FailpointNoReservationRacyWindow) })
	for _, m := range sutids.Mutants() {
		t.Run(m.Name, func(t *testing.T) {
			scale := 60.0
			if m.Name == sutids.MutantNoRateLimit {
				// The duplicates must fall in one declared window whatever
				// the machine's load: at the real time scale the window is
				// the declared 60 s, not 1 s.
				scale = 1
			}
			res := runIDSAt(t, m.Name, []string{m.Breaks}, scale)
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

// TestIDSEffectsOnlyWhereDeclared: a server whose I1 and I2 commands
// change its own state only, and say so in the registry ("effects":
// false), fails no rule: the rules judged by effects are judged on its I3
// commands, or by the answers, or are N/A with the reason.
func TestIDSEffectsOnlyWhereDeclared(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole IDS profile")
	}
	res := runIDSConfig(t, "", nil, 60, func(c *sutids.Config) { c.InternalOnly = true })
	for _, r := range res.Rules {
		t.Logf("%s %s %s", r.RuleID, r.Verdict, r.Reason)
		if r.Verdict == verdict.Fail || r.Verdict == verdict.NonStrict || r.Verdict == verdict.Unknown || r.Verdict == verdict.Blocked {
			t.Errorf("rule %s: %s: %s", r.RuleID, r.Verdict, r.Reason)
		}
	}
}

// TestIDSDeclaredEffectsStillCounted: on that server, a duplicate that
// calls the sink again for a command that declares its effect (an I3
// command here) still fails the rule it breaks.
func TestIDSDeclaredEffectsStillCounted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	res := runIDSConfig(t, sutids.MutantReplayReexecutes, []string{"IDS-IX.A-no-reexecute"}, 60, func(c *sutids.Config) { c.InternalOnly = true })
	for _, r := range res.Rules {
		if r.RuleID == "IDS-IX.A-no-reexecute" && r.Verdict != verdict.Fail {
			t.Fatalf("IDS-IX.A-no-reexecute: %s: %s", r.Verdict, r.Reason)
		}
	}
}

// TestRegistryEntryHasEffects: what a registry entry declares wins; with
// nothing declared an I3 command has an external effect and no other does.
func TestRegistryEntryHasEffects(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		e    RegistryEntry
		want bool
	}{
		{RegistryEntry{Class: "I3"}, true}, {RegistryEntry{Class: "I1"}, false}, {RegistryEntry{Class: "I2"}, false},
		{RegistryEntry{Class: "I0"}, false}, {RegistryEntry{Class: "I1", Effects: &yes}, true}, {RegistryEntry{Class: "I3", Effects: &no}, false},
	} {
		if got := c.e.HasEffects(); got != c.want {
			t.Errorf("%s effects %v: %t, want %t", c.e.Class, c.e.Effects, got, c.want)
		}
	}
}
