package spec

import (
	"strings"
	"testing"
)

// TestCheckCatalogGuarantee: a MUST of a text without RFC 2119 keywords
// stands on the words of its guarantee; a guarantee must be a MUST, stand
// in its quote, and never come from a text that has keywords of its own.
func TestCheckCatalogGuarantee(t *testing.T) {
	atp := Rule{ID: "ATP-2-unique-row", Profile: "atp", Source: "000_10301691a56e9f75.txt", Section: "2", Level: Must,
		Quote: "UNIQUE (intent_id, idempotency_key)", Guarantee: "UNIQUE", Explanation: "two rows for one key"}
	intent := Rule{ID: "INTENT-12-x", Profile: "intent", Source: "004_b5f0a9c556f3c9c3.txt", Section: "12", Level: Must,
		Quote: "GET /health", Guarantee: "GET", Explanation: "x"}
	for _, tc := range []struct {
		name string
		edit func(r *Rule)
		base Rule
		want string // "" for no complaint
	}{
		{"a guarantee of a text without keywords", func(*Rule) {}, atp, ""},
		{"no keyword and no guarantee", func(r *Rule) { r.Guarantee = "" }, atp, "no guarantee"},
		{"a guarantee that is not a MUST", func(r *Rule) { r.Level = Should }, atp, "gates as a MUST"},
		{"a guarantee not in the quote", func(r *Rule) { r.Guarantee = "is never an error" }, atp, "neither its quote"},
		{"a guarantee in a text with keywords", func(*Rule) {}, intent, "uses RFC 2119 keywords"},
		{"a rule of any profile prefix", func(r *Rule) { r.ID, r.Profile = "NEW-2-unique-row", "new" }, atp, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.base
			tc.edit(&r)
			bad := strings.Join(CheckCatalog([]Rule{r}), "\n")
			if tc.want == "" && bad != "" || tc.want != "" && !strings.Contains(bad, tc.want) {
				t.Errorf("complaints %q, want %q", bad, tc.want)
			}
		})
	}
}
