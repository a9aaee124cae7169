// Package spec is the rule catalog: every MUST, SHOULD and MAY of the protocol
// texts idscheck certifies against, with the wire bindings the texts leave open.
// It imports the standard library only.
package spec

// Level is the strength of a rule: its RFC 2119 keyword, or for a text
// written without them what its words promise (Rule.Guarantee). A broken
// MUST fails a run; a broken SHOULD is NON-STRICT (a failure only with
// --strict); a MAY is informational.
type Level string

const (
	Must   Level = "MUST"
	Should Level = "SHOULD"
	May    Level = "MAY"
)

// Profile names one protocol text idscheck certifies against (its
// registered name: profiles/<name> defines its own constant).
type Profile string

// Rule is one requirement of one protocol text. ID is stable across releases
// (e.g. "INTENT-7.2-idem-replay"): scenarios are tagged with it, expected-failure
// files and CI dashboards refer to it.
type Rule struct {
	ID          string  `json:"id"`
	Profile     Profile `json:"profile"`
	Source      string  `json:"source"`  // seed file name, e.g. "004_b5f0a9c556f3c9c3.txt"
	Section     string  `json:"section"` // section number as the original document numbers it, e.g. "7.2"
	Level       Level   `json:"level"`
	Quote       string  `json:"quote"`       // the exact words of the text
	Explanation string  `json:"explanation"` // one line: what breaks when the rule is violated
	// Binding is the verbatim sentence of the text whose RFC 2119 keyword
	// governs Quote when Quote itself carries none: a table row or list item
	// under "All responses MUST include:" is bound by that sentence. Empty
	// when Quote carries its own keyword. A testable MUST always has its
	// uppercase keyword in Quote or Binding, and that keyword binds the
	// server, not a client ("Clients MUST …" makes no server rule). A SHOULD
	// may rest on a table, an example or prose without a keyword.
	Binding string `json:"binding,omitempty"`
	// Guarantee marks a MUST of a text written without RFC 2119 keywords
	// (or with a lower-case "must" only): the text states it
	// as a guarantee, in the indicative ("is UNIQUE", "returns the existing
	// row verbatim", "a duplicate is never an error"), so it binds the
	// server and gates as a MUST. Guarantee holds those words, verbatim in
	// Quote or Binding. Empty for a rule whose level comes from an RFC 2119
	// keyword, and for what such a text only recommends (a SHOULD).
	Guarantee string `json:"guarantee,omitempty"`
	// Untestable, when set, says why no scenario can exercise the rule
	// (e.g. "deployment concern: HTTPS termination"). Such a rule is reported N/A.
	Untestable string `json:"untestable,omitempty"`
	// Readings names the decisions (Decision.ID) where the text contradicts
	// itself or leaves a choice open and a check of this rule depends on the
	// choice. Such a check is judged under every reading (see Decision).
	Readings []string `json:"readings,omitempty"`
}

// Decision is a place where a text contradicts itself, or is silent where a
// check needs an answer. When it lists two or more Readings, every check that
// rests on it is judged under each: a target that follows any reading is not
// failed for it (it gets a reading verdict naming the reading it follows,
// with both quotes) unless it declared another reading (--reading ID=NAME).
// A decision without readings only records what the bundled reference
// server does where the text leaves it free; no check rests on it.
type Decision struct {
	ID       string    `json:"id"`      // stable name, e.g. "lease-expiry": the ID of --reading ID=NAME
	Profile  Profile   `json:"profile"` // the profile whose text it reads
	Section  string    `json:"section"` // sections of the text involved
	Question string    `json:"question"`
	Readings []Reading `json:"readings,omitempty"`
	// Choice says what the bundled reference server does: by default it
	// follows Readings[0]; with --readings alternate, Readings[1].
	Choice string `json:"choice"`
	Why    string `json:"why,omitempty"`
}

// Reading is one way a target may resolve a Decision, with the words of the
// text that support it.
type Reading struct {
	Name    string `json:"name"`    // e.g. "backoff": the NAME of --reading ID=NAME
	Section string `json:"section"` // where Quote stands
	Quote   string `json:"quote"`   // verbatim from the text (whitespace collapsed)
	Means   string `json:"means"`   // what a target that follows it does, one line
}

// ReadingByName returns the reading of d called name; false when d has none.
func (d Decision) ReadingByName(name string) (Reading, bool) {
	for _, r := range d.Readings {
		if r.Name == name {
			return r, true
		}
	}
	return Reading{}, false
}

// WithBinding returns r bound by binding: the verbatim sentence of the
// text whose keyword governs a quote that carries none (see Binding).
func (r Rule) WithBinding(binding string) Rule {
	r.Binding = binding
	return r
}
