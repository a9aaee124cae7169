package spec

import (
	"regexp"
	"strings"
)

// idFormat is the shape of every rule ID: PREFIX-<section>-<slug>, the
// prefix naming the text (upper case).
var idFormat = regexp.MustCompile(`^[A-Z][A-Z0-9]*-[0-9A-Z]+(\.[0-9A-Z]+)*-[a-z0-9]+(-[a-z0-9]+)*$`)

// mustKeyword finds an uppercase RFC 2119 keyword of a MUST: MUST, MUST NOT,
// REQUIRED, SHALL, SHALL NOT. No \b before it: the extraction of the seeds
// glued words to it ("METHODMUST be uppercase", "BUS_SECRETMUST").
var mustKeyword = regexp.MustCompile(`(MUST|REQUIRED|SHALL)\b`)

// clientSubject finds a sentence whose subject is a client of the server (a
// worker or a publisher): its keyword binds the client, not the server.
var clientSubject = regexp.MustCompile(`^(Clients?|Workers?|Publishers?|The (client|worker|publisher)|An? (client|worker|publisher))\b`)

// CheckCatalog returns one message per rule that breaks a catalog invariant:
// unique well-formed IDs, a known level and profile, a seed that is embedded,
// a quote (and a binding, when there is one) that is a verbatim substring of
// it (whitespace collapsed), an explanation, and a section matching the ID.
// A testable MUST carries an uppercase MUST, MUST NOT, REQUIRED or SHALL in
// its quote or binding, or — in a text without such keywords — the words of
// a guarantee (Rule.Guarantee); and neither starts with a client subject ("Clients
// MUST include…" binds the client): a FAIL must mean the server broke a rule
// the text binds it to.
func CheckCatalog(rules []Rule) []string {
	var bad []string
	seen := map[string]bool{}
	for _, r := range rules {
		if seen[r.ID] {
			bad = append(bad, r.ID+": duplicate ID")
		}
		seen[r.ID] = true
		if !idFormat.MatchString(r.ID) {
			bad = append(bad, r.ID+": ID does not match "+idFormat.String())
		}
		if r.Section == "" || !strings.Contains(r.ID, "-"+r.Section+"-") {
			bad = append(bad, r.ID+": section "+r.Section+" is not the one in the ID")
		}
		switch r.Level {
		case Must, Should, May:
		default:
			bad = append(bad, r.ID+": level "+string(r.Level)+" is not MUST, SHOULD or MAY")
		}
		if r.Profile == "" {
			bad = append(bad, r.ID+": no profile")
		}
		if strings.TrimSpace(r.Explanation) == "" {
			bad = append(bad, r.ID+": empty explanation")
		}
		if r.Guarantee != "" {
			g := NormalizeSpace(r.Guarantee)
			switch {
			case r.Level != Must:
				bad = append(bad, r.ID+": a guarantee gates as a MUST, not as "+string(r.Level))
			case !strings.Contains(NormalizeSpace(r.Quote), g) && !strings.Contains(NormalizeSpace(r.Binding), g):
				bad = append(bad, r.ID+": guarantee "+r.Guarantee+" is in neither its quote nor its binding")
			}
			if text, ok := SeedText(r.Source); ok && mustKeyword.MatchString(text) {
				bad = append(bad, r.ID+": a guarantee in a text that uses RFC 2119 keywords: its MUSTs bind, its indicative does not")
			}
		}
		if r.Level == Must && r.Untestable == "" {
			if r.Guarantee == "" && !mustKeyword.MatchString(r.Quote) && !mustKeyword.MatchString(r.Binding) {
				bad = append(bad, r.ID+": a testable MUST whose quote and binding carry no uppercase MUST, REQUIRED or SHALL, and no guarantee")
			}
			for _, s := range []string{r.Quote, r.Binding} {
				if clientSubject.MatchString(NormalizeSpace(s)) {
					bad = append(bad, r.ID+": a testable MUST whose keyword binds a client: "+s)
				}
			}
		}
		text, ok := SeedText(r.Source)
		if !ok {
			bad = append(bad, r.ID+": seed "+r.Source+" is not embedded")
			continue
		}
		norm := NormalizeSpace(text)
		q := NormalizeSpace(r.Quote)
		if q == "" || !strings.Contains(norm, q) {
			bad = append(bad, r.ID+": quote is not in "+r.Source+": "+r.Quote)
		}
		if b := NormalizeSpace(r.Binding); r.Binding != "" && (b == "" || !strings.Contains(norm, b)) {
			bad = append(bad, r.ID+": binding is not in "+r.Source+": "+r.Binding)
		}
	}
	return bad
}
