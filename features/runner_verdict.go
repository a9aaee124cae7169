package features

import (
	"context"
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/spec"
)

// Classify turns how one scenario stopped (the error godog hands the After
// hook, and the exchanges the scenario recorded) into the verdict of the
// assertions it did not reach. Failed assertions never stop a scenario (the
// runner judges and swallows them), so err is a precondition's:
//
//   - no error: PASS (the scenario ran to its end);
//   - ErrNotApplicable: N/A, with the reason;
//   - an undefined, pending or ambiguous step, or a step that panicked:
//     UNKNOWN (the runner's own bug, never the target's);
//   - a transport error, a deadline, or any exchange whose outcome is not ok:
//     UNKNOWN (the target did not answer, so nobody can decide);
//   - a *MismatchError, or any other error: BLOCKED, with Expected and
//     Observed (a precondition did not hold, so what rests on it is not
//     decided; see judge.go for who blocked it).
//
// The returned Evidence carries every exchange given; trim it with
// TrimExchanges before keeping it.
func Classify(err error, exs []verdict.Exchange) ScenarioResult {
	r := ScenarioResult{Verdict: verdict.Pass, Evidence: verdict.Evidence{Exchanges: exs}}
	if err == nil {
		return r
	}
	var na *naError
	var mm *MismatchError
	switch {
	case errors.Is(err, errRunAborted):
		r.Verdict, r.Reason = verdict.Unknown, errRunAborted.Error()
	case errors.Is(err, ErrRunnerBug):
		r.Verdict, r.Reason = verdict.Unknown, err.Error()
	case isStepPanic(err):
		r.Verdict, r.Reason = verdict.Unknown, "runner bug: a step panicked: "+err.Error()
	case errors.Is(err, ErrNotApplicable):
		r.Verdict, r.Reason = verdict.NA, err.Error()
		if errors.As(err, &na) {
			r.Reason, r.Variant = na.reason, na.variant
		}
	case errors.Is(err, godog.ErrUndefined):
		r.Verdict, r.Reason = verdict.Unknown, "runner bug: undefined step: "+stepText(err, godog.ErrUndefined)
	case errors.Is(err, godog.ErrPending):
		r.Verdict, r.Reason = verdict.Unknown, "runner bug: pending step: "+stepText(err, godog.ErrPending)
	case errors.Is(err, godog.ErrAmbiguous):
		r.Verdict, r.Reason = verdict.Unknown, "runner bug: ambiguous step: "+err.Error()
	case errors.Is(err, errStopped):
		r.Verdict, r.Reason = verdict.Blocked, err.Error()
	case isTransport(err):
		r.Verdict, r.Transport = verdict.Unknown, true
		r.Reason = "no answer from the target: " + err.Error()
		r.Evidence.Observed = err.Error()
	case unanswered(exs) != nil:
		ex := unanswered(exs)
		r.Verdict, r.Transport = verdict.Unknown, true
		r.Reason = fmt.Sprintf("%s %s got no answer (%s); the step then failed: %v", ex.Method, ex.Path, ex.Err, err)
		r.Evidence.Observed = err.Error()
	case errors.As(err, &mm):
		r.Verdict = verdict.Blocked
		r.Reason = mm.Error()
		r.Evidence.Expected, r.Evidence.Observed = mm.Expected, mm.Observed
	default:
		r.Verdict = verdict.Blocked
		r.Reason = err.Error()
		r.Evidence.Observed = err.Error()
	}
	return r
}

// isStepPanic reports whether err is godog's record of a panic in a step
// (its unexported *traceError): a bug of the harness, whatever the target did.
func isStepPanic(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if fmt.Sprintf("%T", e) == "*godog.traceError" {
			return true
		}
	}
	return false
}

// stepText returns what follows the sentinel in godog's "<sentinel>: <step>".
func stepText(err, sentinel error) string {
	s := err.Error()
	if i := strings.Index(s, sentinel.Error()+": "); i >= 0 {
		return s[i+len(sentinel.Error())+2:]
	}
	return s
}

// isTransport reports whether err says the target did not answer: a failed
// HTTP exchange, a network error or an expired deadline.
func isTransport(err error) bool {
	var ue *url.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}

// unanswered returns the first exchange that got no complete response.
func unanswered(exs []verdict.Exchange) *verdict.Exchange {
	for i := range exs {
		if exs[i].Outcome != verdict.OutcomeOK || exs[i].Err != "" {
			return &exs[i]
		}
	}
	return nil
}

// TrimExchanges keeps the last max exchanges and cuts every body to maxBody
// bytes, saying so in the body. It never modifies exs.
func TrimExchanges(exs []verdict.Exchange, max, maxBody int) []verdict.Exchange {
	if len(exs) > max {
		exs = exs[len(exs)-max:]
	}
	out := make([]verdict.Exchange, len(exs))
	for i, ex := range exs {
		ex.ReqBody = truncate(ex.ReqBody, maxBody)
		ex.RespBody = truncate(ex.RespBody, maxBody)
		out[i] = ex
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [truncated by idscheck: %d of %d bytes shown]", cut, len(s))
}

// verdictOrder ranks verdicts from the worst: what a rule (or a scenario)
// gets when its judgments disagree. A run never claims more than it did, so
// an undecided check outweighs a passing one.
var verdictOrder = []verdict.Verdict{verdict.Fail, verdict.Unknown, verdict.Blocked, verdict.Reading, verdict.Pass, verdict.NA}

func rank(v verdict.Verdict) int {
	for i, o := range verdictOrder {
		if o == v {
			return i
		}
	}
	return len(verdictOrder)
}

// worstJudgment is the verdict that sums a scenario's judgments up.
func worstJudgment(js []Judgment) verdict.Verdict {
	w := verdict.NA
	for _, j := range js {
		if rank(j.Verdict) < rank(w) {
			w = j.Verdict
		}
	}
	return w
}

// RuleVerdicts gives each rule its verdict from the judgments that name it,
// in catalog order:
//
//   - Untestable: N/A with the rule's reason;
//   - no judgment names it: no verdict, listed in notCovered;
//   - any FAIL: FAIL for a MUST, NON-STRICT for a SHOULD or a MAY (a MAY is
//     informational: it never fails a run, even with --strict);
//   - readings that contradict each other (the target follows one reading of
//     a decision in one check and another in the next, so no reading holds
//     for all): FAIL (NON-STRICT) likewise;
//   - else any UNKNOWN: UNKNOWN; else any BLOCKED: BLOCKED, naming what
//     blocked it;
//   - else any READING: READING, naming the reading(s) the target follows;
//   - else every judgment N/A: N/A;
//   - else PASS (N/A judgments beside passing ones are named in the reason).
//
// Evidence keeps the checks of the verdict's kind, the first
// DefaultEvidenceChecks of them, each with its own exchanges (its
// scenario's latest, at most maxEx; bodies were cut by TrimExchanges): the
// check the reason names always shows what decided it, whatever another
// scenario sent. A PASS keeps its proof: what its passing checks read,
// the first DefaultEvidenceChecks checks, DefaultMaxProof exchanges each.
func RuleVerdicts(rules []spec.Rule, scs []ScenarioResult, maxEx, maxBody int) (out []verdict.RuleResult, notCovered []string) {
	return ruleVerdicts(rules, scs, maxEx, DefaultMaxProof)
}

func ruleVerdicts(rules []spec.Rule, scs []ScenarioResult, maxEx, maxProof int) (out []verdict.RuleResult, notCovered []string) {
	type judged struct {
		Judgment
		scenario string
	}
	byRule := map[string][]judged{}
	for _, s := range scs {
		for _, j := range s.Judgments {
			byRule[j.Rule] = append(byRule[j.Rule], judged{j, s.Name})
		}
	}
	for _, rule := range rules {
		rr := verdict.RuleResult{RuleID: rule.ID}
		if rule.Untestable != "" {
			rr.Verdict, rr.Reason = verdict.NA, "untestable: "+rule.Untestable
			out = append(out, rr)
			continue
		}
		js := byRule[rule.ID]
		if len(js) == 0 {
			notCovered = append(notCovered, rule.ID)
			continue
		}
		count := map[verdict.Verdict]int{}
		first := map[verdict.Verdict]*judged{}
		seenScenario := map[string]bool{}
		for i := range js {
			j := &js[i]
			count[j.Verdict]++
			if first[j.Verdict] == nil {
				first[j.Verdict] = j
			}
			if !seenScenario[j.scenario] {
				seenScenario[j.scenario] = true
				rr.Scenarios = append(rr.Scenarios, j.scenario)
			}
		}
		for _, s := range scs {
			if seenScenario[s.Name] {
				rr.Duration += s.Duration
			}
		}
		// The readings the target was seen to follow, per decision.
		var conflict string
		follows := map[string]map[string]bool{} // decision -> readings every READING judgment allows
		var decisions []string
		for _, j := range js {
			if j.Verdict != verdict.Reading || j.Reading == nil {
				continue
			}
			d := j.Reading.Decision
			set := map[string]bool{}
			for _, r := range strings.Split(j.Reading.Follows, ",") {
				set[r] = true
			}
			prev, ok := follows[d]
			if !ok {
				follows[d] = set
				decisions = append(decisions, d)
				continue
			}
			both := map[string]bool{}
			for r := range prev {
				if set[r] {
					both[r] = true
				}
			}
			if len(both) == 0 && conflict == "" {
				conflict = fmt.Sprintf("no reading of %s holds for every check: the target follows %s in one (%s) and %s in another (%s)",
					d, keys(prev), first[verdict.Reading].scenario, j.Reading.Follows, j.scenario)
			}
			follows[d] = both
		}
		failed := func(reason string) {
			rr.Verdict = verdict.Fail
			switch rule.Level {
			case spec.Should, spec.May:
				rr.Verdict = verdict.NonStrict
			}
			rr.Reason = reason
			if rule.Level == spec.May {
				rr.Reason = "MAY (informational): " + rr.Reason
			}
		}
		switch {
		case count[verdict.Fail] > 0:
			f := first[verdict.Fail]
			failed(judgmentReason(f.scenario, f.Judgment, count[verdict.Fail], len(js), "failed"))
			rr.Evidence, rr.Reason = judgmentEvidence(js, verdict.Fail, maxEx, rr.Reason, func(j judged) Judgment { return j.Judgment })
		case conflict != "":
			failed(conflict)
			rr.Evidence, rr.Reason = judgmentEvidence(js, verdict.Reading, maxEx, rr.Reason, func(j judged) Judgment { return j.Judgment })
		case count[verdict.Unknown] > 0:
			f := first[verdict.Unknown]
			rr.Verdict = verdict.Unknown
			rr.Reason = judgmentReason(f.scenario, f.Judgment, count[verdict.Unknown], len(js), "undecided")
			rr.Evidence, rr.Reason = judgmentEvidence(js, verdict.Unknown, maxEx, rr.Reason, func(j judged) Judgment { return j.Judgment })
		case count[verdict.Blocked] > 0:
			f := first[verdict.Blocked]
			rr.Verdict = verdict.Blocked
			rr.BlockedBy, rr.BlockedStep, rr.BlockedIn = f.BlockedBy, f.BlockedStep, f.BlockedIn
			rr.Reason = blockedReason(f.scenario, f.Judgment, count[verdict.Blocked], len(js))
			rr.Evidence, rr.Reason = judgmentEvidence(js, verdict.Blocked, maxEx, rr.Reason, func(j judged) Judgment { return j.Judgment })
		case count[verdict.Reading] > 0:
			rr.Verdict = verdict.Reading
			d := decisions[0]
			rr.Reading = &verdict.ReadingChoice{Decision: d, Follows: keys(follows[d])}
			f := first[verdict.Reading]
			rr.Reason = judgmentReason(f.scenario, f.Judgment, count[verdict.Reading], len(js), "read one way")
			rr.Evidence, rr.Reason = judgmentEvidence(js, verdict.Reading, maxEx, rr.Reason, func(j judged) Judgment { return j.Judgment })
		case count[verdict.NA] == len(js):
			rr.Verdict = verdict.NA
			rr.Reason = first[verdict.NA].Reason
			rr.Variant = first[verdict.NA].Variant
			for _, j := range js {
				if j.Variant != rr.Variant {
					rr.Variant = "" // N/A for other reasons too: not only another variant's
				}
			}
		default:
			rr.Verdict = verdict.Pass
			var notes []string
			// N/A checks of scenarios that judge another variant of the
			// text are no news on a rule every variant shares.
			var na []judged
			for _, j := range js {
				if j.Verdict == verdict.NA && j.Variant == "" {
					na = append(na, j)
				}
			}
			if len(na) > 0 {
				notes = append(notes, fmt.Sprintf("%d of %d checks N/A (%s: %s)", len(na), len(js), na[0].scenario, na[0].Reason))
			}
			for _, j := range js {
				if j.Verdict == verdict.Pass && j.Reason != "" && !slices.Contains(notes, j.Reason) {
					notes = append(notes, j.Reason)
				}
			}
			rr.Reason = strings.Join(notes, "; ")
			rr.Evidence = proofEvidence(js, maxProof, func(j judged) (Judgment, string) { return j.Judgment, j.scenario })
		}
		// A verdict held to a declared reading says so.
		if rr.Reading == nil {
			for _, j := range js {
				if j.Reading != nil && j.Reading.Declared != "" {
					rr.Reading = j.Reading
					break
				}
			}
		}
		out = append(out, rr)
	}
	return out, notCovered
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func judgmentReason(scenario string, j Judgment, n, of int, what string) string {
	r := fmt.Sprintf("scenario %q, step %q: %s", scenario, oneLine(j.Step, 120), oneLine(j.Reason, 300))
	if n > 1 {
		r += fmt.Sprintf(" (%d of %d checks %s)", n, of, what)
	}
	return r
}

// blockedReason says what blocked a rule: the step that failed, in which
// scenario, the rule that step checks and what it expected and observed
// (the judgment's reason, from judge.finish), then the check left undone.
func blockedReason(scenario string, j Judgment, n, of int) string {
	why := strings.TrimPrefix(j.Reason, "not checked: ")
	if j.BlockedStep == "" { // a judgment of another runner: its reason as it is
		return judgmentReason(scenario, j, n, of, "blocked")
	}
	r := fmt.Sprintf("%s; so the check %s was not made", oneLine(why, 500), guillemets(oneLine(j.Step, 120)))
	if j.BlockedIn != scenario && scenario != "" {
		r += fmt.Sprintf(" (scenario %s)", guillemets(scenario))
	}
	if n > 1 {
		r += fmt.Sprintf(" (%d of %d checks blocked)", n, of)
	}
	return r
}

// proofEvidence is the proof of a PASS: the evidence of its passing
// checks (each check once), the first DefaultEvidenceChecks of them, each
// with at most maxProof exchanges, those its check read.
func proofEvidence[T any](js []T, maxProof int, get func(T) (Judgment, string)) []verdict.Evidence {
	var out []verdict.Evidence
	seen := map[string]bool{}
	for _, x := range js {
		j, scenario := get(x)
		ev := j.Evidence
		if j.Verdict != verdict.Pass || seen[scenario+"\x00"+ev.Step] {
			continue
		}
		if ev.Expected == "" && ev.Observed == "" && len(ev.Exchanges) == 0 && ev.Step == "" {
			continue
		}
		if len(out) == DefaultEvidenceChecks {
			break
		}
		seen[scenario+"\x00"+ev.Step] = true
		if len(ev.Exchanges) > maxProof {
			ev.Exchanges = ev.Exchanges[len(ev.Exchanges)-maxProof:]
		}
		ev.Exchanges = append([]verdict.Exchange(nil), ev.Exchanges...)
		out = append(out, ev)
	}
	return out
}

// judgmentEvidence collects the evidence of the judgments with verdict v:
// the first DefaultEvidenceChecks checks, each with its own exchanges (at
// most maxEx, its scenario's latest), so no check loses what decided it to
// another's. What it leaves out it says at the end of reason.
func judgmentEvidence[T any](js []T, v verdict.Verdict, maxEx int, reason string, get func(T) Judgment) ([]verdict.Evidence, string) {
	var ev []verdict.Evidence
	checks := 0
	for _, x := range js {
		j := get(x)
		if j.Verdict != v || (j.Evidence.Expected == "" && j.Evidence.Observed == "" && len(j.Evidence.Exchanges) == 0) {
			continue
		}
		checks++
		if len(ev) == DefaultEvidenceChecks {
			continue
		}
		e := j.Evidence
		if n := len(e.Exchanges); n > maxEx {
			e.Omitted += n - maxEx
			e.Exchanges = e.Exchanges[n-maxEx:]
		}
		e.Exchanges = append([]verdict.Exchange(nil), e.Exchanges...)
		ev = append(ev, e)
	}
	for _, e := range ev {
		if e.Omitted > 0 {
			reason += fmt.Sprintf(" [the evidence of scenario %q keeps its last %d of %d exchanges; history.jsonl has all]",
				oneLine(e.Scenario, 80), len(e.Exchanges), len(e.Exchanges)+e.Omitted)
			break
		}
	}
	if checks > len(ev) {
		reason += fmt.Sprintf(" [evidence of the first %d of %d checks]", len(ev), checks)
	}
	return ev, reason
}
