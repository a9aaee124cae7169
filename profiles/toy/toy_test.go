package toy

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/verdict"
)

// TestToyProfileEndToEnd adds the toy profile to the registry and runs it as
// cmd runs a profile: look it up, start its bundled handler (clean, then
// with its mutant), run its scenarios, check the recorded history with its
// model. Nothing outside this package changes to add it.
func TestToyProfileEndToEnd(t *testing.T) {
	if err := profiles.Register(Profile()); err != nil {
		t.Fatal(err)
	}
	if err := profiles.Register(Profile()); err == nil {
		t.Error("a profile registered twice was accepted")
	}
	p, ok := profiles.Lookup(Name)
	if !ok {
		t.Fatalf("toy not found among %v", profiles.Names())
	}
	for _, tc := range []struct {
		mutant string
		want   map[string]verdict.Verdict
		linear checker.LinResult
		breaks string
	}{
		{"", map[string]verdict.Verdict{"TOY-1-read-back": verdict.Pass, "TOY-2-not-found": verdict.Pass}, checker.LinOk, ""},
		{MutantStaleRead, map[string]verdict.Verdict{"TOY-1-read-back": verdict.Fail, "TOY-2-not-found": verdict.Pass}, checker.LinIllegal, p.Mutants[0].Breaks},
	} {
		t.Run("mutant="+tc.mutant, func(t *testing.T) {
			b, err := p.Bundled(t.Context(), harness.BundledConfig{Dir: t.TempDir(), Mutant: tc.mutant})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			srv := httptest.NewServer(b.Handler)
			defer srv.Close()
			target := b.Target
			target.BaseURL = srv.URL
			res, err := p.Run(t.Context(), features.RunConfig{Target: target, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]verdict.Verdict{}
			for _, r := range res.Rules {
				got[r.RuleID] = r.Verdict
			}
			for id, v := range tc.want {
				if got[id] != v {
					t.Errorf("%s: %s, want %s", id, got[id], v)
				}
			}
			if tc.breaks != "" && got[tc.breaks] != verdict.Fail {
				t.Errorf("the mutant is not caught by the rule it breaks, %s", tc.breaks)
			}
			mr := checker.CheckModels(History(res.Exchanges), p.Models, time.Second)
			if len(mr) != 1 || mr[0].Result != tc.linear {
				t.Errorf("model results %+v, want %s", mr, tc.linear)
			}
		})
	}
}
