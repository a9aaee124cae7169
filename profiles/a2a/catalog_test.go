package a2a

import (
	"testing"

	"github.com/idscheck/idscheck/spec"
)

// TestCatalogInvariants: every quote verbatim in seed 003, every testable
// MUST carries the words of its guarantee (the text has no RFC 2119
// keyword), and what the text asks of senders and receivers is untestable.
func TestCatalogInvariants(t *testing.T) {
	rules := Rules()
	for _, msg := range spec.CheckCatalog(rules) {
		t.Error(msg)
	}
	testable, guarantees := 0, 0
	for _, r := range rules {
		if r.Untestable == "" {
			testable++
			if r.Level != spec.Must || r.Guarantee == "" {
				t.Errorf("%s: a testable rule of a text without RFC 2119 keywords is a guarantee: %s %q", r.ID, r.Level, r.Guarantee)
			}
		}
		if r.Guarantee != "" {
			guarantees++
		}
	}
	if len(rules) < 25 || testable < 18 {
		t.Errorf("%d rules, %d testable", len(rules), testable)
	}
	if got := spec.RulesFor(Name); len(got) != len(rules) {
		t.Errorf("the catalog registers %d a2a rules, want %d", len(got), len(rules))
	}
}
