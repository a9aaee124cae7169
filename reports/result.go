// Package reports renders a finished run: result.json (everything needed to
// re-render, with no target), junit.xml (one testcase per rule) and one
// self-contained index.html an auditor can open offline. It imports spec and
// checker only; the runner and the chaos command fill a Result and call
// WriteAll, and `idscheck report DIR` re-renders from result.json alone.
package reports

import (
	"github.com/idscheck/idscheck/rundir"
	"github.com/idscheck/idscheck/verdict"
	"slices"
	"sort"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/spec"
)

// SchemaVersion is the version of the result.json layout. ReadResult refuses
// a file with a newer version.
const SchemaVersion = 1

// File names WriteAll writes in a run directory.
const (
	ResultFile = rundir.Result
	JUnitFile  = rundir.JUnit
	HTMLFile   = rundir.HTML
)

// Result is one finished run, everything a report shows. It never holds a
// secret: Command is redacted by whoever builds it, and every value listed in
// Redact is replaced by "[redacted]" in every rendering (result.json included),
// as are the values of the credential headers of recorded exchanges.
type Result struct {
	// Schema is SchemaVersion when written; 0 in a Result built in memory.
	Schema  int          `json:"schema"`
	Tool    Tool         `json:"tool"`
	Profile spec.Profile `json:"profile"`
	Target  Target       `json:"target"`
	Seed    uint64       `json:"seed"`
	// RunID is the run's own nonce, mixed into every key and id it sent:
	// Command repeats the seed's choices with fresh keys; --run-id RunID
	// repeats the keys too.
	RunID string `json:"run_id,omitempty"`
	// Command reproduces the run (secrets replaced by $VARIABLES).
	Command  string    `json:"command"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Strict makes a broken SHOULD (NON-STRICT) fail the run and its testcase.
	Strict bool `json:"strict,omitempty"`
	// Select holds the rule-ID globs of --rules (empty: every rule).
	Select []string `json:"select,omitempty"`
	// Rules holds one entry per selected rule, in catalog order.
	Rules []RuleEntry `json:"rules"`
	// Decisions are the profile's decisions (where its text contradicts
	// itself or is silent) with their questions and the quotes of their
	// readings: a report shows them beside a rule's reading from the
	// result alone.
	Decisions []spec.Decision `json:"decisions,omitempty"`
	// NotCovered lists selected rule IDs that no scenario exercises (they
	// have no verdict and are shown as such).
	NotCovered []string `json:"not_covered,omitempty"`
	// ExpectedFailures names the expected-failures file, when one was given;
	// RuleEntry.Expected marks the rules it lists.
	ExpectedFailures string `json:"expected_failures,omitempty"`
	// MinJudged is the least number of testable rules the run had to judge
	// (--min-judged); a run judges at least one whatever it says.
	MinJudged int `json:"min_judged,omitempty"`
	// ExitCode is what the run exited with (see cmd/idscheck/cli.go).
	ExitCode int `json:"exit_code"`
	// Chaos is the chaos section; nil when no chaos ran.
	Chaos *Chaos `json:"chaos,omitempty"`
	// Notes are free lines shown under the header (warnings of the run).
	Notes []string `json:"notes,omitempty"`
	// Unreachable is why the target could not be reached (GET /health never
	// answered 200), set when the run stopped before checking any rule: the
	// exit code is then 3, Rules is empty, the verdict UNKNOWN, and every
	// report leads with the cause (junit.xml: one <error> testcase).
	Unreachable string `json:"unreachable,omitempty"`
	// Preflight says that Unreachable is why the preflight failed: the
	// target answered, but not as the protocol does (exit 3), or refused a
	// credential it was given (exit 2). No rule was checked either way.
	Preflight bool `json:"preflight,omitempty"`

	// Redact lists secret values (API keys, tokens) to replace by
	// "[redacted]" wherever they appear. Never written.
	Redact []string `json:"-"`
}

// Tool is the idscheck build that produced the run.
type Tool struct {
	Name      string `json:"name"`       // "idscheck"
	Version   string `json:"version"`    // module version or VCS revision
	GoVersion string `json:"go_version"` // runtime.Version()
}

// Target describes the implementation under test, never its credentials.
type Target struct {
	URL       string  `json:"url"`                  // base URL tested (the bundled server's loopback URL when Bundled)
	Bundled   bool    `json:"bundled,omitempty"`    // the bundled reference server, started in-process
	Mutant    string  `json:"mutant,omitempty"`     // the deliberate mutant of the reference server, if any
	Command   string  `json:"command,omitempty"`    // the managed process command (--target-cmd), if any
	TimeScale float64 `json:"time_scale,omitempty"` // protocol durations divided by it (0 or 1: real time)
	// Variant is the variant of the text the target declares and was
	// certified under (a profile whose text has variants); "": none.
	Variant string `json:"variant,omitempty"`
}

// RuleEntry is one rule of the catalog and its verdict in this run.
type RuleEntry struct {
	Rule   spec.Rule          `json:"rule"`
	Result verdict.RuleResult `json:"result"`
	// Expected is set when the expected-failures file lists the rule.
	Expected bool `json:"expected,omitempty"`
}

// Failing reports whether the entry counts as a failure of the run: FAIL,
// or NON-STRICT when strict, except for a MAY (informational: it never fails
// a run). An expected failure still counts here; see Summary for the split.
func (e RuleEntry) Failing(strict bool) bool {
	v := e.Result.Verdict
	return v == verdict.Fail || (strict && v == verdict.NonStrict && e.Rule.Level != spec.May)
}

// Summary counts the verdicts of a Result. It is computed (Result.Summary),
// never stored apart from the rules: result.json carries a copy for readers
// such as jq, which ReadResult ignores.
type Summary struct {
	Total  int                     `json:"total"`
	Counts map[verdict.Verdict]int `json:"counts"`
	// Verdict is the run's overall verdict: FAIL when a rule fails (a
	// NON-STRICT one too with Strict) and the expected-failures file does
	// not list it, or when a listed rule now passes (the file is stale: the
	// run exits 1 too), else UNKNOWN when a rule is undecided (UNKNOWN or
	// BLOCKED, or a verdict this build does not know: the run exits 4), else
	// NON-STRICT when a SHOULD is broken, else PASS. It is never BLOCKED or
	// READING: a READING rule is counted but never fails the run nor keeps
	// it undecided (a target that declared a reading and broke it has FAIL).
	Verdict verdict.Verdict `json:"verdict"`
	// Judged counts the testable rules the run judged (PASS, FAIL,
	// NON-STRICT or READING) of Testable, the rules selected that the text
	// lets a run test. A run that judged none, or fewer than
	// Result.MinJudged, is UNKNOWN: it is never a pass.
	Judged   int `json:"judged"`
	Testable int `json:"testable"`
	// OutOfScope counts the rules left out of Testable because they judge
	// another variant of the text, or another reading of it, than the one
	// the target declares (N/A for that alone): they are not rules this
	// run could test.
	OutOfScope int `json:"out_of_scope,omitempty"`
	// NotJudged groups the testable rules left unjudged by why: the reason
	// of an N/A (what the target did not declare), or the verdict.
	NotJudged []ReasonCount `json:"not_judged,omitempty"`
	// NewFailures are failing rules not listed as expected.
	NewFailures []string `json:"new_failures,omitempty"`
	// ExpectedFailing are failing rules listed as expected.
	ExpectedFailing []string `json:"expected_failing,omitempty"`
	// NowPassing are rules listed as expected failures that passed: the
	// expected-failures file must drop them, and the run fails until it does.
	NowPassing []string `json:"now_passing,omitempty"`
}

// ReasonCount is how many rules were left unjudged for one reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	N      int    `json:"n"`
}

// Judged says whether a verdict judged its rule: the target was held to it
// (PASS, FAIL, NON-STRICT, READING); N/A, UNKNOWN and BLOCKED judged nothing.
func Judged(v verdict.Verdict) bool {
	return v == verdict.Pass || v == verdict.Fail || v == verdict.NonStrict || v == verdict.Reading
}

// Verdicts is the order verdicts are shown in, worst first: failures, the
// undecided (UNKNOWN, BLOCKED), a broken SHOULD, then what does not fail a
// run (READING: the target follows one reading of an ambiguous text; N/A;
// PASS).
var Verdicts = []verdict.Verdict{verdict.Fail, verdict.Unknown, verdict.Blocked, verdict.NonStrict, verdict.Reading, verdict.NA, verdict.Pass}

// Summary counts the verdicts of r's rules.
func (r *Result) Summary() Summary {
	s := Summary{Total: len(r.Rules), Counts: map[verdict.Verdict]int{}}
	for _, v := range Verdicts {
		s.Counts[v] = 0
	}
	undecided := 0
	why := map[string]int{}
	for _, e := range r.Rules {
		s.Counts[e.Result.Verdict]++
		if e.Rule.Untestable == "" && outOfScope(e.Result) {
			s.OutOfScope++
		} else if e.Rule.Untestable == "" {
			s.Testable++
			if Judged(e.Result.Verdict) {
				s.Judged++
			} else {
				reason := string(e.Result.Verdict)
				if e.Result.Verdict == verdict.NA && e.Result.Reason != "" {
					reason = "N/A: " + e.Result.Reason
				}
				why[reason]++
			}
		}
		if e.Result.Verdict.Undecided() || !slices.Contains(Verdicts, e.Result.Verdict) {
			undecided++ // a verdict this build does not know never reads as PASS
		}
		switch {
		case e.Failing(r.Strict) && e.Expected:
			s.ExpectedFailing = append(s.ExpectedFailing, e.Rule.ID)
		case e.Failing(r.Strict):
			s.NewFailures = append(s.NewFailures, e.Rule.ID)
		case e.Expected && e.Result.Verdict == verdict.Pass:
			s.NowPassing = append(s.NowPassing, e.Rule.ID)
		}
	}
	switch {
	case len(s.NewFailures) > 0 || len(s.NowPassing) > 0:
		s.Verdict = verdict.Fail
	case undecided > 0:
		s.Verdict = verdict.Unknown
	case s.Total > 0 && (s.Judged == 0 || s.Judged < r.MinJudged):
		s.Verdict = verdict.Unknown // a run that judged nothing is not a pass
	case s.Counts[verdict.NonStrict] > 0:
		s.Verdict = verdict.NonStrict
	default:
		s.Verdict = verdict.Pass
	}
	if s.Total == 0 && r.Chaos != nil {
		s.Verdict = r.Chaos.Verdict
	}
	if r.Unreachable != "" && s.Verdict != verdict.Fail {
		s.Verdict = verdict.Unknown // nothing was checked: never a pass
	}
	for reason, n := range why {
		s.NotJudged = append(s.NotJudged, ReasonCount{Reason: reason, N: n})
	}
	sort.Slice(s.NotJudged, func(i, j int) bool {
		a, b := s.NotJudged[i], s.NotJudged[j]
		return a.N > b.N || (a.N == b.N && a.Reason < b.Reason)
	})
	sort.Strings(s.NewFailures)
	sort.Strings(s.ExpectedFailing)
	sort.Strings(s.NowPassing)
	return s
}

// outOfScope reports whether a rule is N/A only because it judges a
// variant of the text, or a reading of it, that the target does not
// declare.
func outOfScope(rr verdict.RuleResult) bool {
	return rr.Verdict == verdict.NA && (rr.Variant != "" || (rr.Reading != nil && rr.Reading.Declared != ""))
}

// Chaos is the chaos section of a run: what the checker found in the
// recorded histories, the faults injected and when, and the throughput and
// latency of the workload over time. Plain fields: the chaos command maps
// its own types into them (reports does not import faults or chaos).
type Chaos struct {
	Start     time.Time     `json:"start"`
	End       time.Time     `json:"end"`
	Duration  time.Duration `json:"duration_ns"` // the fault phase asked for
	Workers   int           `json:"workers"`
	Faults    string        `json:"faults"`    // fault kinds asked for, as given on the command line
	Namespace string        `json:"namespace"` // namespace the workload used on the target
	// Unavailable maps a requested fault kind that could not run to why.
	Unavailable map[string]string `json:"unavailable,omitempty"`
	// Coverage lists every requested fault with what became of it (see
	// FaultCoverage); a run in which one was never injected is UNKNOWN.
	Coverage []FaultCoverage `json:"coverage,omitempty"`
	// Verdict is the checker's verdict over the histories (Report.Verdict).
	Verdict verdict.Verdict `json:"verdict"`
	// Ops and Effects count recorded operations and observed effects.
	Ops       int                         `json:"ops"`
	Effects   int                         `json:"effects"`
	Queue     checker.QueueStats          `json:"queue"`
	Models    []checker.ModelCheck        `json:"models"`
	Counts    map[checker.AnomalyKind]int `json:"counts"`
	Anomalies []checker.Anomaly           `json:"anomalies,omitempty"` // a bounded number of examples per kind
	// Timeline is every fault injection with its start and end.
	Timeline []FaultSpan `json:"timeline"`
	// Series is the workload over time in fixed buckets (one second).
	Series []Bucket `json:"series"`
	// Visualizations are file names, relative to the run directory, of
	// porcupine's views of the failing partitions (e.g. "linearization.html").
	Visualizations []string `json:"visualizations,omitempty"`
}

// FaultSpan is one fault injection: what, with which parameters, from when to
// when. A zero End means it never ended (it lasted to the end of the run).
type FaultSpan struct {
	Name   string            `json:"name"`
	Kind   string            `json:"kind"`
	Params map[string]string `json:"params,omitempty"`
	Start  time.Time         `json:"start"`
	End    time.Time         `json:"end"`
	Err    string            `json:"err,omitempty"` // injection failed
}

// Bucket is one time slice of the workload: At is its start since Chaos.Start;
// latency percentiles are over the operations that got a response.
type Bucket struct {
	At      time.Duration `json:"at"`
	Ops     int           `json:"ops"`
	Unknown int           `json:"unknown"`
	Failed  int           `json:"failed"`
	P50     time.Duration `json:"p50"`
	P99     time.Duration `json:"p99"`
}
