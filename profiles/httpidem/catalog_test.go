package httpidem_test

import (
	"strings"
	"testing"

	"github.com/idscheck/idscheck/profiles/httpidem"
	"github.com/idscheck/idscheck/spec"
)

func TestCatalogInvariants(t *testing.T) {
	rules := spec.RulesFor(httpidem.Name)
	if len(rules) < 25 {
		t.Fatalf("http-idempotency has %d rules", len(rules))
	}
	for _, msg := range spec.CheckCatalog(httpidem.Rules()) {
		t.Error(msg)
	}
	per := map[string]int{}
	// t-0's and Stripe's texts have no RFC 2119 keyword: a MUST of theirs is
	// a guarantee they state in the indicative, and carries its words
	// (CheckCatalog holds them to the quote). Stripe's limit on key length
	// and its permission to remove keys after 24 hours stay SHOULDs.
	should := map[string]bool{"STRIPE-IDEM-key-255": true, "STRIPE-IDEM-kept-24h": true}
	guarantees := map[string]int{}
	for _, r := range rules {
		per[httpidem.Variant(r)]++
		if r.ID == httpidem.RuleServerError {
			// The finding of every variant: RFC 9110 defines the 5xx
			// class; no variant's text makes it a guarantee.
			if httpidem.Variant(r) != "" || r.Level != spec.Should || r.Untestable != "" {
				t.Errorf("%s: variant %q, level %s, untestable %q: want every variant's testable SHOULD", r.ID, httpidem.Variant(r), r.Level, r.Untestable)
			}
			continue
		}
		if httpidem.Variant(r) == httpidem.VariantIETF {
			if r.Guarantee != "" {
				t.Errorf("%s has a guarantee, but the draft's MUSTs bind", r.ID)
			}
			continue
		}
		switch {
		case r.Untestable != "" && r.Level == spec.Should && r.Guarantee == "":
			// Advice to clients, or what follows a permission: no guarantee.
		case should[r.ID] && (r.Level != spec.Should || r.Guarantee != ""):
			t.Errorf("%s is %s (guarantee %q): the text only states a limit or a permission", r.ID, r.Level, r.Guarantee)
		case !should[r.ID] && (r.Level != spec.Must || r.Guarantee == ""):
			t.Errorf("%s is %s without a guarantee: the text states it as a guarantee", r.ID, r.Level)
		case r.Level == spec.Must:
			guarantees[httpidem.Variant(r)]++
		}
	}
	if guarantees[httpidem.VariantT0] != 9 || guarantees[httpidem.VariantStripe] != 4 {
		t.Errorf("guarantees %v, want t0 9 and stripe 4", guarantees)
	}
	for _, v := range httpidem.Variants() {
		if per[v] < 6 {
			t.Errorf("variant %s has %d rules", v, per[v])
		}
	}
}

// TestHTTPIdemDecisionQuotesAreInTheText: every reading quotes its text
// verbatim, and a rule names only decisions of the profile.
func TestHTTPIdemDecisionQuotesAreInTheText(t *testing.T) {
	text, ok := spec.SeedText(httpidem.SourceIETF)
	if !ok {
		t.Fatal("the draft's text is not found")
	}
	norm := spec.NormalizeSpace(text)
	for _, d := range httpidem.Decisions() {
		if len(d.Readings) < 2 {
			t.Errorf("%s: %d readings", d.ID, len(d.Readings))
		}
		for _, r := range d.Readings {
			if !strings.Contains(norm, spec.NormalizeSpace(r.Quote)) {
				t.Errorf("%s/%s: quote not in the draft: %s", d.ID, r.Name, r.Quote)
			}
		}
	}
	for _, r := range httpidem.Rules() {
		for _, id := range r.Readings {
			if _, ok := httpidem.DecisionByID(id); !ok {
				t.Errorf("%s names an unknown decision %s", r.ID, id)
			}
		}
	}
}
