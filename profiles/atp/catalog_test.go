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
	// The text carries no RFC 2119 keyword: a MUST is one of its
	// guarantees, stated in the indicative, and carries those words
	// (CheckCatalog holds them to the quote); what it recommends, permits,
	// or asks of the agent or the operator stays a SHOULD.
	should := map[string]bool{
		atp.RuleRetryAnyStep: true, atp.RuleKeyRequired: true, atp.RuleKeyStable: true,
		atp.RuleRetryPolicy: true, atp.RuleExpired410: true, atp.RuleSingleWriter: true,
		atp.RuleActionDedup: true, atp.RuleRetryExample: true, atp.RuleFirstConsumedAt: true,
	}
	musts := 0
	for _, r := range rules {
		switch {
		case should[r.ID] && (r.Level != spec.Should || r.Guarantee != ""):
			t.Errorf("%s is %s (guarantee %q): the text only recommends it, or asks it of the agent", r.ID, r.Level, r.Guarantee)
		case !should[r.ID] && (r.Level != spec.Must || r.Guarantee == ""):
			t.Errorf("%s is %s without a guarantee: the text states it as a guarantee", r.ID, r.Level)
		case r.Level == spec.Must:
			musts++
		}
	}
	if musts != 22 {
		t.Errorf("%d guarantees, want 22", musts)
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
