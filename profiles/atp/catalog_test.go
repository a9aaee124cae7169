package atp_test

import (
	"strings"
	"testing"

	"github.com/idscheck/idscheck/profiles/atp"
	"github.com/idscheck/idscheck/spec"
)

func TestCatalogInvariants(t *testing.T) {
	rules := atp.Rules()
	if len(rules) < 30 {
		t.Fatalf("atp has %d rules, want the whole text", len(rules))
	}
	for _, msg := range spec.CheckCatalog(atp.Rules()) {
		t.Error(msg)
	}
	// The text carries no RFC 2119 keyword: no rule may claim MUST.
	for _, r := range rules {
		if r.Level == spec.Must {
			t.Errorf("%s is a MUST, but seed 000 never says MUST", r.ID)
		}
	}
}

func TestDecisionQuotesAreInTheText(t *testing.T) {
	text, _ := spec.SeedText(atp.Source)
	norm := spec.NormalizeSpace(text)
	for _, d := range atp.Decisions() {
		if len(d.Readings) < 2 {
			t.Errorf("%s: %d readings", d.ID, len(d.Readings))
		}
		for _, r := range d.Readings {
			if !strings.Contains(norm, spec.NormalizeSpace(r.Quote)) {
				t.Errorf("%s/%s: quote not in the text: %s", d.ID, r.Name, r.Quote)
			}
		}
	}
	for _, r := range atp.Rules() {
		for _, d := range r.Readings {
			if d != atp.DecisionNonceSameKey {
				t.Errorf("%s names an unknown decision %s", r.ID, d)
			}
		}
	}
}
