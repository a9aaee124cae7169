package ids_test

import (
	"strings"
	"testing"

	"github.com/idscheck/idscheck/profiles/ids"
	"github.com/idscheck/idscheck/spec"
)

func TestCatalogInvariants(t *testing.T) {
	rules := spec.RulesFor(ids.Name)
	if len(rules) < 40 {
		t.Fatalf("ids has %d rules, want the whole text", len(rules))
	}
	for _, msg := range spec.CheckCatalog(ids.Rules()) {
		t.Error(msg)
	}
}

func TestDecisionQuotesAreInTheText(t *testing.T) {
	text, _ := spec.SeedText(ids.Source)
	norm := spec.NormalizeSpace(text)
	for _, d := range ids.Decisions() {
		if len(d.Readings) < 2 {
			t.Errorf("%s: %d readings", d.ID, len(d.Readings))
		}
		for _, r := range d.Readings {
			if !strings.Contains(norm, spec.NormalizeSpace(r.Quote)) {
				t.Errorf("%s/%s: quote not in the text: %s", d.ID, r.Name, r.Quote)
			}
		}
	}
	for _, r := range ids.Rules() {
		for _, d := range r.Readings {
			if d != ids.DecisionReplayForm {
				t.Errorf("%s names an unknown decision %s", r.ID, d)
			}
		}
	}
}
