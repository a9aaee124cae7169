package verdict

import "time"

// Verdict is the end state of one rule in one run. UNKNOWN never reads as PASS.
type Verdict string

const (
	Pass      Verdict = "PASS"       // every check of the rule held
	Fail      Verdict = "FAIL"       // a MUST is broken
	NonStrict Verdict = "NON-STRICT" // a SHOULD is broken
	Unknown   Verdict = "UNKNOWN"    // the harness could not decide (timeout, target vanished)
	NA        Verdict = "N/A"        // the target does not offer what the rule needs; Reason says what
	// Blocked: a precondition of the rule's check failed (a setup step that
	// another rule covers, or an earlier failed assertion the check rests
	// on), so the check was not decided. BlockedBy names what blocked it.
	// Never a pass, never a failure: undecided, like UNKNOWN.
	Blocked Verdict = "BLOCKED"
	// Reading: the text contradicts itself or leaves a choice open where the
	// rule's check needs an answer, and the target follows one of the
	// readings it allows (RuleResult.Reading names it). Never fails a run,
	// unless the target declared another reading (then the check is PASS or
	// FAIL against the declared one).
	Reading Verdict = "READING"
)

// Undecided reports whether v leaves a rule undecided (UNKNOWN or BLOCKED):
// a run with such a rule and no failure exits 4.
func (v Verdict) Undecided() bool { return v == Unknown || v == Blocked }

// Exchange is one recorded HTTP request and its response, as the recording
// client saw it. Outcome is Unknown when the request may have reached the
// target but no response came back (timeout, reset after send).
type Exchange struct {
	Client      string              `json:"client,omitempty"` // which logical client sent it
	Method      string              `json:"method"`
	Path        string              `json:"path"` // path and query, as sent
	ReqHeaders  map[string][]string `json:"req_headers,omitempty"`
	ReqBody     string              `json:"req_body,omitempty"`
	Status      int                 `json:"status,omitempty"` // 0 when no response
	RespHeaders map[string][]string `json:"resp_headers,omitempty"`
	RespBody    string              `json:"resp_body,omitempty"`
	Call        time.Time           `json:"call"`
	Return      time.Time           `json:"return"`
	Outcome     Outcome             `json:"outcome"`
	Err         string              `json:"err,omitempty"` // transport error, when any
}

// Outcome of one operation: it took effect (OK), it certainly did not (Failed),
// or nobody can know (Unknown: the request may have been applied).
type Outcome string

const (
	OutcomeOK      Outcome = "ok"
	OutcomeFailed  Outcome = "fail"
	OutcomeUnknown Outcome = "unknown"
)

// Evidence is what decided a verdict: what was expected, what was observed,
// and the exchanges that show it.
type Evidence struct {
	// Scenario and Step name the check the evidence is of: the scenario
	// and the step (its text as written) that judged it.
	Scenario  string     `json:"scenario,omitempty"`
	Step      string     `json:"step,omitempty"`
	Expected  string     `json:"expected,omitempty"`
	Observed  string     `json:"observed,omitempty"`
	Exchanges []Exchange `json:"exchanges,omitempty"`
	// Omitted is how many earlier exchanges of the check's scenario were
	// left out of Exchanges to bound it (history.jsonl has them).
	Omitted int `json:"omitted_exchanges,omitempty"`
}

// RuleResult is the verdict of one rule with the evidence behind it.
type RuleResult struct {
	RuleID    string        `json:"rule_id"`
	Verdict   Verdict       `json:"verdict"`
	Reason    string        `json:"reason,omitempty"`    // one line: why this verdict
	Scenarios []string      `json:"scenarios,omitempty"` // names of the scenarios that exercised the rule
	Evidence  []Evidence    `json:"evidence,omitempty"`
	Duration  time.Duration `json:"duration_ns,omitempty"`
	// BlockedBy, on a BLOCKED verdict, names the rule whose check or
	// precondition failed first (or, when no rule covers it, the step).
	BlockedBy string `json:"blocked_by,omitempty"`
	// BlockedStep, on a BLOCKED verdict, is the step that failed (its text
	// as written) and BlockedIn the scenario it failed in: BlockedBy is the
	// rule that step checks, which may well pass where it is judged on its
	// own.
	BlockedStep string `json:"blocked_step,omitempty"`
	BlockedIn   string `json:"blocked_in,omitempty"`
	// Variant, on an N/A, names the variant of the text the rule belongs
	// to when the target declares another: the rule is N/A for that alone.
	Variant string `json:"variant,omitempty"`
	// Reading, on a READING verdict (and on a verdict judged against a
	// declared reading), says which reading of which decision it rests on.
	Reading *ReadingChoice `json:"reading,omitempty"`
}

// ReadingChoice is the reading of one decision (spec.Decision) that a
// target was seen to follow, or declared.
type ReadingChoice struct {
	Decision string `json:"decision"`
	// Follows names the reading(s) the target's answers agree with, joined
	// by "," when several (but not all) do.
	Follows string `json:"follows,omitempty"`
	// Declared is the reading the target declared (--reading); its check
	// was then held to that reading alone.
	Declared string `json:"declared,omitempty"`
}
