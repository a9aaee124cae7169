package features

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/spec"
)

// Classify turns how one scenario ended (the error godog hands the After
// hook, and the exchanges the scenario recorded) into a scenario verdict:
//
//   - no error: PASS;
//   - ErrNotApplicable: N/A, with the reason;
//   - an undefined, pending or ambiguous step, or a step that panicked:
//     UNKNOWN (the runner's own bug, never the target's);
//   - a transport error, a deadline, or any exchange whose outcome is not ok:
//     UNKNOWN (the target did not answer, so nobody can decide);
//   - a *MismatchError: FAIL, with Expected and Observed;
//   - any other error: FAIL, with the error as what was observed.
//
// The returned Evidence carries every exchange given; trim it with
// TrimExchanges before keeping it.
func Classify(err error, exs []checker.Exchange) ScenarioResult {
	r := ScenarioResult{Verdict: checker.Pass, Evidence: checker.Evidence{Exchanges: exs}}
	if err == nil {
		return r
	}
	var na *naError
	var mm *MismatchError
	switch {
	case errors.Is(err, errRunAborted):
		r.Verdict, r.Reason = checker.Unknown, errRunAborted.Error()
	case errors.Is(err, errRunnerBug):
		r.Verdict, r.Reason = checker.Unknown, err.Error()
	case isStepPanic(err):
		r.Verdict, r.Reason = checker.Unknown, "runner bug: a step panicked: "+err.Error()
	case errors.Is(err, ErrNotApplicable):
		r.Verdict, r.Reason = checker.NA, err.Error()
		if errors.As(err, &na) {
			r.Reason = na.reason
		}
	case errors.Is(err, godog.ErrUndefined):
		r.Verdict, r.Reason = checker.Unknown, "runner bug: undefined step: "+stepText(err, godog.ErrUndefined)
	case errors.Is(err, godog.ErrPending):
		r.Verdict, r.Reason = checker.Unknown, "runner bug: pending step: "+stepText(err, godog.ErrPending)
	case errors.Is(err, godog.ErrAmbiguous):
		r.Verdict, r.Reason = checker.Unknown, "runner bug: ambiguous step: "+err.Error()
	case isTransport(err):
		r.Verdict, r.Transport = checker.Unknown, true
		r.Reason = "no answer from the target: " + err.Error()
		r.Evidence.Observed = err.Error()
	case unanswered(exs) != nil:
		ex := unanswered(exs)
		r.Verdict, r.Transport = checker.Unknown, true
		r.Reason = fmt.Sprintf("%s %s got no answer (%s); the step then failed: %v", ex.Method, ex.Path, ex.Err, err)
		r.Evidence.Observed = err.Error()
	case errors.As(err, &mm):
		r.Verdict = checker.Fail
		r.Reason = mm.Error()
		r.Evidence.Expected, r.Evidence.Observed = mm.Expected, mm.Observed
	default:
		r.Verdict = checker.Fail
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
func unanswered(exs []checker.Exchange) *checker.Exchange {
	for i := range exs {
		if exs[i].Outcome != checker.OutcomeOK || exs[i].Err != "" {
			return &exs[i]
		}
	}
	return nil
}

// TrimExchanges keeps the last max exchanges and cuts every body to maxBody
// bytes, saying so in the body. It never modifies exs.
func TrimExchanges(exs []checker.Exchange, max, maxBody int) []checker.Exchange {
	if len(exs) > max {
		exs = exs[len(exs)-max:]
	}
	out := make([]checker.Exchange, len(exs))
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

// RuleVerdicts gives each rule its verdict from the scenarios tagged with
// its ID, in catalog order:
//
//   - Untestable: N/A with the rule's reason;
//   - no scenario tagged with it: no verdict, listed in notCovered;
//   - any tagged scenario FAIL: FAIL for a MUST, NON-STRICT for a SHOULD or
//     a MAY (a MAY is informational: it never fails a run, even with --strict);
//   - else any UNKNOWN: UNKNOWN;
//   - else every scenario N/A: N/A;
//   - else PASS (scenarios N/A beside passing ones are named in the reason).
//
// Evidence keeps the last maxEx exchanges over the rule's failing (or
// undecided) scenarios; bodies were cut by TrimExchanges.
func RuleVerdicts(rules []spec.Rule, scs []ScenarioResult, maxEx, maxBody int) (out []checker.RuleResult, notCovered []string) {
	for _, rule := range rules {
		rr := checker.RuleResult{RuleID: rule.ID}
		if rule.Untestable != "" {
			rr.Verdict, rr.Reason = checker.NA, "untestable: "+rule.Untestable
			out = append(out, rr)
			continue
		}
		var tagged []ScenarioResult
		for _, s := range scs {
			if hasTag(s.Tags, rule.ID) {
				tagged = append(tagged, s)
				rr.Scenarios = append(rr.Scenarios, s.Name)
				rr.Duration += s.Duration
			}
		}
		if len(tagged) == 0 {
			notCovered = append(notCovered, rule.ID)
			continue
		}
		count := map[checker.Verdict]int{}
		first := map[checker.Verdict]*ScenarioResult{}
		for i := range tagged {
			v := tagged[i].Verdict
			count[v]++
			if first[v] == nil {
				first[v] = &tagged[i]
			}
		}
		switch {
		case count[checker.Fail] > 0:
			rr.Verdict = checker.Fail
			switch rule.Level {
			case spec.Should:
				rr.Verdict = checker.NonStrict
			case spec.May:
				rr.Verdict = checker.NonStrict
			}
			rr.Reason = scenarioReason(first[checker.Fail], count[checker.Fail], len(tagged), "failed")
			if rule.Level == spec.May {
				rr.Reason = "MAY (informational): " + rr.Reason
			}
			rr.Evidence, rr.Reason = ruleEvidence(tagged, checker.Fail, maxEx, rr.Reason)
		case count[checker.Unknown] > 0:
			rr.Verdict = checker.Unknown
			rr.Reason = scenarioReason(first[checker.Unknown], count[checker.Unknown], len(tagged), "undecided")
			rr.Evidence, rr.Reason = ruleEvidence(tagged, checker.Unknown, maxEx, rr.Reason)
		case count[checker.NA] == len(tagged):
			rr.Verdict = checker.NA
			rr.Reason = first[checker.NA].Reason
		default:
			rr.Verdict = checker.Pass
			if n := count[checker.NA]; n > 0 {
				rr.Reason = fmt.Sprintf("%d of %d scenarios N/A (%s: %s)", n, len(tagged), first[checker.NA].Name, first[checker.NA].Reason)
			}
		}
		out = append(out, rr)
	}
	return out, notCovered
}

func scenarioReason(s *ScenarioResult, n, of int, what string) string {
	r := fmt.Sprintf("scenario %q: %s", s.Name, oneLine(s.Reason, 300))
	if n > 1 {
		r += fmt.Sprintf(" (%d of %d scenarios %s)", n, of, what)
	}
	return r
}

// ruleEvidence collects the evidence of the scenarios with verdict v,
// keeping at most maxEx exchanges in all, the latest ones; when it drops
// some, it says so at the end of reason.
func ruleEvidence(scs []ScenarioResult, v checker.Verdict, maxEx int, reason string) ([]checker.Evidence, string) {
	var ev []checker.Evidence
	total := 0
	for _, s := range scs {
		if s.Verdict == v {
			ev = append(ev, s.Evidence)
			total += len(s.Evidence.Exchanges)
		}
	}
	left := maxEx
	for i := len(ev) - 1; i >= 0; i-- {
		exs := ev[i].Exchanges
		if len(exs) > left {
			exs = exs[len(exs)-left:]
		}
		left -= len(exs)
		ev[i].Exchanges = append([]checker.Exchange(nil), exs...)
	}
	if total > maxEx {
		reason += fmt.Sprintf(" [evidence keeps the last %d of %d exchanges; history.jsonl has all]", maxEx, total)
	}
	return ev, reason
}

func hasTag(tags []string, id string) bool {
	for _, t := range tags {
		if t == id {
			return true
		}
	}
	return false
}
