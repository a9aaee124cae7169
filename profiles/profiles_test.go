package profiles

import (
	"testing"

	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/spec"
)

func TestRegistry(t *testing.T) {
	p, ok := Lookup(intent.Name)
	if !ok || p.Suite == nil || p.Bundled == nil || len(p.Rules()) == 0 || len(p.Mutants) == 0 {
		t.Fatalf("intent profile incomplete: %+v", p)
	}
	if _, ok := p.Decision(intent.DecisionLeaseExpiry); !ok {
		t.Error("intent decisions missing")
	}
	for _, m := range p.Mutants {
		if r, ok := spec.Lookup(m.Breaks); !ok || r.Profile != p.Name {
			t.Errorf("mutant %s breaks %q: not a rule of %s", m.Name, m.Breaks, p.Name)
		}
	}
	if err := Register(harness.Profile{Name: intent.Name, Rules: p.Rules}); err == nil {
		t.Error("intent registered twice")
	}
	if err := Register(harness.Profile{Name: "nameless-rules"}); err == nil {
		t.Error("a profile without rules was accepted")
	}
	stray := harness.Profile{Name: "stray", Rules: func() []spec.Rule { return []spec.Rule{{ID: "X-1-a", Profile: "other"}} }}
	if err := Register(stray); err == nil {
		Deregister("stray")
		t.Error("a profile whose rule names another profile was accepted")
	}
	if _, ok := Lookup("no-such"); ok {
		t.Error("an unknown profile was found")
	}
}
