// Package spec is the rule catalog: every MUST, SHOULD and MAY of the protocol
// texts idscheck certifies against, with the wire bindings the texts leave open.
// It imports the standard library only.
package spec

// Level is the RFC 2119 strength of a rule. A broken MUST fails a run; a broken
// SHOULD is NON-STRICT (a failure only with --strict); a MAY is informational.
type Level string

const (
	Must   Level = "MUST"
	Should Level = "SHOULD"
	May    Level = "MAY"
)

// Profile names one protocol text idscheck certifies against.
type Profile string

const (
	ProfileIntent Profile = "intent"
	ProfileIDS    Profile = "ids"
	ProfileATP    Profile = "atp"
	ProfileT0     Profile = "t0"
	ProfileA2A    Profile = "a2a"
)

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
	// Untestable, when set, says why no scenario can exercise the rule
	// (e.g. "deployment concern: HTTPS termination"). Such a rule is reported N/A.
	Untestable string `json:"untestable,omitempty"`
}
