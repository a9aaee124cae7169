package httpidem_test

import (
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
	for _, r := range rules {
		per[httpidem.Variant(r)]++
		// t-0's and Stripe's texts have no RFC 2119 keyword.
		if httpidem.Variant(r) != httpidem.VariantIETF && r.Level == spec.Must {
			t.Errorf("%s is a MUST, but its text never says MUST", r.ID)
		}
	}
	for _, v := range httpidem.Variants() {
		if per[v] < 6 {
			t.Errorf("variant %s has %d rules", v, per[v])
		}
	}
}
