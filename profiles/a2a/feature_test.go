package a2a

import (
	"net/http/httptest"
	"testing"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

func noDecision(string) (spec.Decision, bool) { return spec.Decision{}, false }

func scenarios(t *testing.T) []*godog.Scenario {
	t.Helper()
	ps, err := features.ListScenarios(*Profile().Suite)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestFeatureCoversTheCatalog: every assertion names an a2a rule, and
// every testable rule is judged by one.
func TestFeatureCoversTheCatalog(t *testing.T) {
	for _, msg := range features.CoverageProblems(scenarios(t), spec.RulesFor(Name), "", noDecision) {
		t.Error(msg)
	}
}

func TestAssertionsNameTheirRule(t *testing.T) {
	for _, msg := range features.AssertionProblems(scenarios(t), (&world{}).steps()) {
		t.Error(msg)
	}
}

func TestStepsAreDefined(t *testing.T) {
	var patterns []string
	for _, s := range (&world{}).steps() {
		patterns = append(patterns, features.StepPattern(s.Pattern))
	}
	for _, msg := range features.UndefinedSteps(scenarios(t), patterns) {
		t.Error(msg)
	}
}

// certify runs the profile against its bundled queue (mutant "" or one).
func certify(t *testing.T, mutant string, rules ...string) map[string]verdict.Verdict {
	t.Helper()
	p := Profile()
	b, err := p.Bundled(t.Context(), harness.BundledConfig{Dir: t.TempDir(), Mutant: mutant, TimeScale: p.DefaultTimeScale()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	srv := httptest.NewServer(b.Handler)
	defer srv.Close()
	target := b.Target
	target.BaseURL = srv.URL
	if err := p.Preflight(t.Context(), target, 0); err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(t.Context(), features.RunConfig{Target: target, Seed: 1, Select: rules})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]verdict.Verdict{}
	for _, r := range res.Rules {
		got[r.RuleID] = r.Verdict
	}
	return got
}

// TestBundledQueuePasses: every testable rule passes on the bundled
// queue; the untestable ones are N/A.
func TestBundledQueuePasses(t *testing.T) {
	got := certify(t, "")
	for _, r := range Rules() {
		want := verdict.Pass
		if r.Untestable != "" {
			want = verdict.NA
		}
		if got[r.ID] != want {
			t.Errorf("%s: %s, want %s", r.ID, got[r.ID], want)
		}
	}
}

// TestMutantsKilledByTheirRule: every mutant of the bundled queue fails
// the rule it breaks, judged by that rule's scenarios (idscheck mutants
// --profile a2a runs them all); a replica mutant, correct on one replica,
// passes them (idscheck chaos over replicas catches it: replicas_a2a_test
// in cmd/idscheck).
func TestMutantsKilledByTheirRule(t *testing.T) {
	if testing.Short() {
		t.Skip("certifies every mutant")
	}
	replicas := 0
	for _, m := range Profile().Mutants {
		if m.Replicas {
			replicas++
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			t.Parallel()
			if got := certify(t, m.Name, m.Breaks); got[m.Breaks] != verdict.Fail {
				t.Errorf("%s: %s is %s, want FAIL", m.Name, m.Breaks, got[m.Breaks])
			}
		})
	}
	if replicas != 2 {
		t.Errorf("%d replica mutants, want 2 (replica-local-cache, check-then-insert)", replicas)
	}
}
