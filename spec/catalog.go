package spec

import (
	"embed"
	"strings"
	"sync"
)

// Seeds holds the five protocol texts, byte for byte as /work/shared/seeds
// has them, under seeds/<file name>. Every Rule.Quote is a substring of the
// text of its Source once whitespace is collapsed (see NormalizeSpace).
//
//go:embed seeds/*.txt
var Seeds embed.FS

// Texts holds the texts beyond the seeds that a profile cites (an
// Internet-Draft, a vendor's documented conventions), each with where it
// comes from at its head, under texts/<file name>.
//
//go:embed texts/*.txt
var Texts embed.FS

// SeedText returns the text of one seed file (e.g. "004_b5f0a9c556f3c9c3.txt")
// or cited text (e.g. "draft-ietf-httpapi-idempotency-key-header.txt");
// false when no such text is embedded.
func SeedText(source string) (string, bool) {
	if source == "" || strings.ContainsAny(source, "/\\") {
		return "", false
	}
	b, err := Seeds.ReadFile("seeds/" + source)
	if err != nil {
		if b, err = Texts.ReadFile("texts/" + source); err != nil {
			return "", false
		}
	}
	return string(b), true
}

// NormalizeSpace collapses every run of white space in s to one space and
// trims both ends: the form in which a quote is compared with its seed.
func NormalizeSpace(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// profileRules lists, in registration order, the rule tables of every
// profile: each profile's package (spec/<profile>) registers its own when it
// is imported, so the catalog holds the rules of every profile linked in.
var (
	profileRulesMu sync.Mutex
	profileRules   []func() []Rule
)

// RegisterRules adds a profile's rule table to the catalog (from the init
// of its spec/<profile> package).
func RegisterRules(f func() []Rule) {
	profileRulesMu.Lock()
	defer profileRulesMu.Unlock()
	profileRules = append(profileRules, f)
}

// Rules returns every rule of every profile in a stable order: by profile in
// the order of profileRules, then in the order of the text. The slice is a
// fresh copy; callers may change it.
func Rules() []Rule {
	profileRulesMu.Lock()
	fs := profileRules
	profileRulesMu.Unlock()
	var all []Rule
	for _, f := range fs {
		all = append(all, f()...)
	}
	return all
}

// RulesFor returns the rules of one profile in the order of its text (empty
// for a profile with no rules yet).
func RulesFor(p Profile) []Rule {
	var out []Rule
	for _, r := range Rules() {
		if r.Profile == p {
			out = append(out, r)
		}
	}
	return out
}

// Lookup returns the rule with the given ID; false when there is none.
func Lookup(id string) (Rule, bool) {
	for _, r := range Rules() {
		if r.ID == id {
			return r, true
		}
	}
	return Rule{}, false
}

// Profiles returns the profiles that have at least one rule, in catalog order.
func Profiles() []Profile {
	var out []Profile
	seen := map[Profile]bool{}
	for _, r := range Rules() {
		if !seen[r.Profile] {
			seen[r.Profile] = true
			out = append(out, r.Profile)
		}
	}
	return out
}
