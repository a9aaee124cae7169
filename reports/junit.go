package reports

import (
	"encoding/xml"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idscheck/idscheck/spec"
)

// junitMapping is written as a comment at the top of junit.xml: how the
// verdicts map onto JUnit's three outcomes.
const junitMapping = ` idscheck verdicts in JUnit:
  PASS       - a passing testcase.
  FAIL       - <failure type="FAIL">, the evidence (expected, observed, transcript) in its body.
  UNKNOWN    - <error type="unknown">: the harness could not decide; never a pass.
  BLOCKED    - <skipped message="blocked by RULE: reason">: a precondition failed, the check was
               not decided; never a pass (the run exits 4 when nothing fails).
  READING    - the text allows several readings and the target follows one: a passing testcase,
               <system-out> says "follows reading NAME of DECISION" (properties reading_*).
  NON-STRICT - a SHOULD is broken: a passing testcase (property verdict=NON-STRICT, evidence in
               <system-out>) unless the run is strict, then <failure type="non-strict">.
               A MAY is informational and never fails, even when strict.
  N/A        - <skipped message="reason">.
  not covered (no scenario exercises the rule) - <skipped message="not covered: ...">.
  A failure listed in the expected-failures file is <skipped message="expected failure: ...">
  with the evidence in <system-out>; a listed rule that now passes is <failure type="now-passes">
  (remove it from the file), with property expected_failure_now_passes=true.
  target unreachable (exit 3: GET /health never answered 200, no rule was checked) - one testcase
  "target unreachable" with <error type="unreachable" message="the cause">.
`

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Comment  xml.Comment  `xml:",comment"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
	SystemOut  string          `xml:"system-out,omitempty"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name       string          `xml:"name,attr"`
	Classname  string          `xml:"classname,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Failure    *junitProblem   `xml:"failure"`
	Error      *junitProblem   `xml:"error"`
	Skipped    *junitSkipped   `xml:"skipped"`
	SystemOut  *junitText      `xml:"system-out"`
}

// junitText is element text kept as CDATA, so transcripts keep their lines.
type junitText struct {
	Text string `xml:",cdata"` // xmlText: no character XML forbids
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Body    string `xml:",cdata"` // xmlText: no character XML forbids
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes r as JUnit XML: one <testsuite> per profile, one
// <testcase> per rule named "<rule ID>: <short explanation>" (names are
// unique: rule IDs are), classname "<profile>.<section>", with the rule ID,
// section, level and source as properties. The mapping of verdicts is in
// junitMapping, written as a comment at the top of the file.
func WriteJUnit(w io.Writer, r *Result) error {
	r = redacted(r)
	sum := r.Summary()
	byProfile := map[spec.Profile]*junitSuite{}
	var order []spec.Profile
	suite := func(p spec.Profile) *junitSuite {
		if p == "" {
			p = r.Profile
		}
		s := byProfile[p]
		if s == nil {
			s = &junitSuite{Name: "idscheck." + string(p), Properties: suiteProperties(r, sum)}
			if !r.Started.IsZero() {
				s.Timestamp = r.Started.UTC().Format("2006-01-02T15:04:05")
			}
			byProfile[p] = s
			order = append(order, p)
		}
		return s
	}
	seen := map[string]int{}
	add := func(rule spec.Rule, c junitCase) {
		seen[c.Name]++
		if n := seen[c.Name]; n > 1 { // a rule listed twice: keep names unique all the same
			c.Name = fmt.Sprintf("%s (%d)", c.Name, n)
		}
		s := suite(rule.Profile)
		s.Cases = append(s.Cases, c)
	}
	var total time.Duration
	for _, e := range r.Rules {
		total += e.Result.Duration
		add(e.Rule, junitRuleCase(r, e))
	}
	for _, id := range r.NotCovered {
		rule, ok := spec.Lookup(id)
		if !ok {
			rule = spec.Rule{ID: id, Profile: r.Profile}
		}
		c := junitCase{Name: caseName(rule), Classname: className(rule, r.Profile), Time: "0.000",
			Properties: ruleProperties(rule, "NOT-COVERED"),
			Skipped:    &junitSkipped{Message: "not covered: no scenario exercises this rule"}}
		add(rule, c)
	}
	if r.Unreachable != "" {
		add(spec.Rule{Profile: r.Profile}, junitUnreachableCase(r))
	}
	if sum := r.Summary(); sum.Total > 0 && r.Unreachable == "" && (sum.Judged == 0 || sum.Judged < r.MinJudged) {
		add(spec.Rule{Profile: r.Profile}, junitCoverageCase(r, sum))
	}
	if len(order) == 0 {
		suite(r.Profile) // an empty run still has its suite, with the run's properties
	}
	doc := junitSuites{Comment: xml.Comment(junitMapping), Name: "idscheck"}
	for _, p := range order {
		s := byProfile[p]
		var d time.Duration
		for _, c := range s.Cases {
			s.Tests++
			switch {
			case c.Failure != nil:
				s.Failures++
			case c.Error != nil:
				s.Errors++
			case c.Skipped != nil:
				s.Skipped++
			}
		}
		for _, e := range r.Rules {
			if e.Rule.Profile == p || (e.Rule.Profile == "" && p == r.Profile) {
				d += e.Result.Duration
			}
		}
		s.Time = seconds(d)
		doc.Tests += s.Tests
		doc.Failures += s.Failures
		doc.Errors += s.Errors
		doc.Skipped += s.Skipped
		doc.Suites = append(doc.Suites, *s)
	}
	run := total
	if !r.Started.IsZero() && r.Finished.After(r.Started) {
		run = r.Finished.Sub(r.Started)
	}
	doc.Time = seconds(run)

	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	return nil
}

func suiteProperties(r *Result, sum Summary) []junitProperty {
	ps := []junitProperty{
		{"tool", strings.TrimSpace(r.Tool.Name + " " + r.Tool.Version)},
		{"go_version", r.Tool.GoVersion},
		{"profile", string(r.Profile)},
		{"seed", fmt.Sprint(r.Seed)},
		{"command", r.Command},
		{"target", r.Target.URL},
		{"strict", fmt.Sprint(r.Strict)},
		{"verdict", string(sum.Verdict)},
		{"exit_code", fmt.Sprint(r.ExitCode)},
	}
	if r.Target.Bundled {
		ps = append(ps, junitProperty{"target_bundled", "true"})
	}
	if r.Target.Mutant != "" {
		ps = append(ps, junitProperty{"target_mutant", r.Target.Mutant})
	}
	if r.ExpectedFailures != "" {
		ps = append(ps, junitProperty{"expected_failures", r.ExpectedFailures})
	}
	if r.Chaos != nil {
		ps = append(ps, junitProperty{"chaos_verdict", string(r.Chaos.Verdict)})
	}
	return ps
}

func ruleProperties(rule spec.Rule, verdict string) []junitProperty {
	return []junitProperty{
		{"rule_id", rule.ID},
		{"section", rule.Section},
		{"level", string(rule.Level)},
		{"source", rule.Source},
		{"verdict", verdict},
	}
}

// caseName is "<rule ID>: <explanation cut to one short line>".
func caseName(rule spec.Rule) string {
	short := oneLine(rule.Explanation, 80)
	if short == "" {
		short = oneLine(rule.Quote, 80)
	}
	if short == "" {
		return rule.ID
	}
	return rule.ID + ": " + short
}

// className is "<profile>.<section>", e.g. "toy.7.2".
func className(rule spec.Rule, fallback spec.Profile) string {
	p := rule.Profile
	if p == "" {
		p = fallback
	}
	if rule.Section == "" {
		return string(p)
	}
	return string(p) + "." + rule.Section
}

func junitRuleCase(r *Result, e RuleEntry) junitCase {
	rr := e.Result
	c := junitCase{Name: caseName(e.Rule), Classname: className(e.Rule, r.Profile), Time: seconds(rr.Duration),
		Properties: ruleProperties(e.Rule, string(rr.Verdict))}
	if len(rr.Scenarios) > 0 {
		c.Properties = append(c.Properties, junitProperty{"scenarios", strings.Join(rr.Scenarios, "; ")})
	}
	if rr.BlockedBy != "" {
		c.Properties = append(c.Properties, junitProperty{"blocked_by", rr.BlockedBy})
	}
	if rr.BlockedStep != "" {
		c.Properties = append(c.Properties, junitProperty{"blocked_step", rr.BlockedStep}, junitProperty{"blocked_in", rr.BlockedIn})
	}
	if rr.Variant != "" {
		c.Properties = append(c.Properties, junitProperty{"variant", rr.Variant})
	}
	if rd := rr.Reading; rd != nil {
		c.Properties = append(c.Properties, junitProperty{"reading_decision", rd.Decision})
		if rd.Follows != "" {
			c.Properties = append(c.Properties, junitProperty{"reading_follows", rd.Follows})
		}
		if rd.Declared != "" {
			c.Properties = append(c.Properties, junitProperty{"reading_declared", rd.Declared})
		}
	}
	msg := oneLine(rr.Reason, 300)
	body := xmlText(evidenceText(e))
	switch {
	case e.Failing(r.Strict) && e.Expected:
		c.Properties = append(c.Properties, junitProperty{"expected_failure", "true"})
		c.Skipped = &junitSkipped{Message: "expected failure (" + string(rr.Verdict) + "): " + msg}
		c.SystemOut = &junitText{body}
	case rr.Verdict == verdict.Fail:
		c.Failure = &junitProblem{Message: msg, Type: "FAIL", Body: body}
	case rr.Verdict == verdict.NonStrict && e.Failing(r.Strict):
		c.Failure = &junitProblem{Message: msg, Type: "non-strict", Body: body}
	case rr.Verdict == verdict.NonStrict:
		c.SystemOut = &junitText{"NON-STRICT (passes: the run is not --strict)\n" + body}
	case rr.Verdict == verdict.Unknown:
		c.Error = &junitProblem{Message: msg, Type: "unknown", Body: body}
	case rr.Verdict == verdict.NA:
		c.Skipped = &junitSkipped{Message: "N/A: " + msg}
	case rr.Verdict == verdict.Blocked:
		c.Skipped = &junitSkipped{Message: oneLine(blockedLine(rr), 300)}
		c.SystemOut = &junitText{body}
	case rr.Verdict == verdict.Reading:
		c.SystemOut = &junitText{xmlText(readingLine(rr.Reading)) + "\n" + body}
	case rr.Verdict == verdict.Pass:
		if e.Expected {
			c.Properties = append(c.Properties, junitProperty{"expected_failure_now_passes", "true"})
			c.Failure = &junitProblem{Message: "listed in the expected-failures file, and now passes: remove it from the file", Type: "now-passes"}
		}
	default: // a verdict this build does not know: never a pass
		c.Error = &junitProblem{Message: "unrecognised verdict " + string(rr.Verdict) + ": " + msg, Type: "unknown", Body: body}
	}
	return c
}

// junitUnreachableCase is the one testcase of a run whose target never
// answered: an <error> naming the cause, so a CI job shows why it failed.
func junitUnreachableCase(r *Result) junitCase {
	var body strings.Builder
	if r.Preflight {
		fmt.Fprintf(&body, "preflight failed: %s\n", r.Unreachable)
	} else {
		fmt.Fprintf(&body, "target unreachable: %s\n", r.Unreachable)
	}
	if r.Target.URL != "" {
		fmt.Fprintf(&body, "target: %s\n", r.Target.URL)
	}
	for _, n := range r.Notes {
		if !strings.Contains(n, r.Unreachable) { // the cause is said once
			fmt.Fprintf(&body, "%s\n", n)
		}
	}
	name, kind := "target unreachable", "unreachable"
	if r.Preflight {
		name, kind = "preflight", "preflight"
	}
	return junitCase{Name: name, Classname: string(r.Profile), Time: "0.000",
		Properties: []junitProperty{{"verdict", string(verdict.Unknown)}, {"exit_code", fmt.Sprint(r.ExitCode)}},
		Error:      &junitProblem{Message: name + ": " + oneLine(r.Unreachable, 300), Type: kind, Body: xmlText(body.String())}}
}

// junitCoverageCase is the testcase of a run that judged too few testable
// rules: an <error>, so that a CI job shows that nothing (or too little) was
// tested rather than a column of skipped rules.
func junitCoverageCase(r *Result, sum Summary) junitCase {
	msg := fmt.Sprintf("judged %d of %d testable rules (at least %d required): not a pass", sum.Judged, sum.Testable, max(r.MinJudged, 1))
	var body strings.Builder
	for _, nj := range sum.NotJudged {
		fmt.Fprintf(&body, "%d × %s\n", nj.N, nj.Reason)
	}
	return junitCase{Name: "rules judged", Classname: string(r.Profile), Time: "0.000",
		Properties: []junitProperty{{"verdict", string(verdict.Unknown)}, {"exit_code", fmt.Sprint(r.ExitCode)}},
		Error:      &junitProblem{Message: msg, Type: "coverage", Body: xmlText(body.String())}}
}

// blockedLine is "blocked: reason" when the reason names the failed step
// (and the rule it checks), else "blocked by RULE: reason", or "blocked:
// reason" when nothing is named.
func blockedLine(rr verdict.RuleResult) string {
	s := "blocked"
	if rr.BlockedBy != "" && rr.BlockedStep == "" {
		s += " by " + rr.BlockedBy
	}
	if rr.Reason != "" {
		s += ": " + rr.Reason
	}
	return s
}

// readingLine is "follows reading NAME of DECISION" (readings A,B when
// several), with the declared reading when there is one.
func readingLine(rd *verdict.ReadingChoice) string {
	if rd == nil {
		return "follows a reading of the text"
	}
	var s string
	switch names := strings.Split(rd.Follows, ","); {
	case rd.Follows == "":
		s = "follows no single reading of " + rd.Decision
	case len(names) > 1:
		s = "follows readings " + rd.Follows + " of " + rd.Decision
	default:
		s = "follows reading " + rd.Follows + " of " + rd.Decision
	}
	if rd.Declared != "" {
		s += "; declared reading " + rd.Declared
	}
	return s
}

// evidenceText renders the rule, its verdict and its evidence as plain text:
// the body of a JUnit failure.
func evidenceText(e RuleEntry) string {
	var b strings.Builder
	rr := e.Result
	fmt.Fprintf(&b, "%s %s (%s §%s, %s)\n", rr.Verdict, e.Rule.ID, e.Rule.Source, e.Rule.Section, e.Rule.Level)
	if rr.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", rr.Reason)
	}
	if rr.BlockedStep != "" {
		fmt.Fprintf(&b, "failed step: %s (scenario %s; it checks %s)\n", rr.BlockedStep, rr.BlockedIn, rr.BlockedBy)
	} else if rr.BlockedBy != "" {
		fmt.Fprintf(&b, "blocked by: %s\n", rr.BlockedBy)
	}
	if rr.Reading != nil {
		fmt.Fprintf(&b, "reading: %s\n", readingLine(rr.Reading))
	}
	if e.Rule.Quote != "" {
		fmt.Fprintf(&b, "rule: %q\n", e.Rule.Quote)
	}
	for i, ev := range rr.Evidence {
		fmt.Fprintf(&b, "\n--- evidence %d of %d\n", i+1, len(rr.Evidence))
		if ev.Expected != "" {
			fmt.Fprintf(&b, "expected: %s\n", ev.Expected)
		}
		if ev.Observed != "" {
			fmt.Fprintf(&b, "observed: %s\n", ev.Observed)
		}
		for j, ex := range ev.Exchanges {
			fmt.Fprintf(&b, "\n# exchange %d of %d\n", j+1, len(ev.Exchanges))
			b.WriteString(transcriptText(ex))
		}
	}
	return b.String()
}

// transcriptText renders one exchange as an HTTP-like transcript: request
// line, headers and body; then status, headers and body, or the transport
// error. Headers are sorted, bodies cut at maxShownBody with a note.
func transcriptText(ex verdict.Exchange) string {
	var b strings.Builder
	if ex.Client != "" {
		fmt.Fprintf(&b, "(client %s)\n", ex.Client)
	}
	if ex.Replica != "" {
		fmt.Fprintf(&b, "(replica %s)\n", ex.Replica)
	}
	fmt.Fprintf(&b, "> %s %s\n", ex.Method, ex.Path)
	writeHeaders(&b, "> ", ex.ReqHeaders)
	if ex.ReqBody != "" {
		b.WriteString(">\n")
		b.WriteString(indentLines("> ", cutBody(ex.ReqBody)))
	}
	switch {
	case ex.Status != 0:
		fmt.Fprintf(&b, "< %d\n", ex.Status)
		writeHeaders(&b, "< ", ex.RespHeaders)
		if ex.RespBody != "" {
			b.WriteString("<\n")
			b.WriteString(indentLines("< ", cutBody(ex.RespBody)))
		}
	default:
		b.WriteString("< (no response)\n")
	}
	if ex.Err != "" {
		fmt.Fprintf(&b, "! %s\n", ex.Err)
	}
	fmt.Fprintf(&b, "= outcome %s", ex.Outcome)
	if !ex.Call.IsZero() && !ex.Return.IsZero() {
		fmt.Fprintf(&b, " after %s", ex.Return.Sub(ex.Call).Round(time.Microsecond))
	}
	b.WriteString("\n")
	return b.String()
}

func writeHeaders(b *strings.Builder, prefix string, h map[string][]string) {
	for _, k := range sortedKeys(h) {
		for _, v := range h[k] {
			fmt.Fprintf(b, "%s%s: %s\n", prefix, k, v)
		}
	}
}

func sortedKeys(h map[string][]string) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func indentLines(prefix, s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(prefix)
		b.WriteString(line)
		b.WriteString("\n")
	}
	return b.String()
}

// maxShownBody is how much of one body a report shows; result.json keeps
// what the runner recorded.
const maxShownBody = 4096

// cutBody returns s cut to maxShownBody bytes on a rune boundary, with a note
// saying how much was left out.
func cutBody(s string) string {
	if len(s) <= maxShownBody {
		return s
	}
	cut := maxShownBody
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n… [report shows %d of %d bytes; the rest is in result.json]", cut, len(s))
}

// oneLine collapses whitespace and cuts s to at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n-1]) + "…"
}

// xmlText replaces every character XML 1.0 forbids (most control
// characters, invalid UTF-8) by a visible \xNN or \uNNNN escape: CDATA
// sections are not escaped by encoding/xml, and a target may send anything.
func xmlText(s string) string {
	if xmlClean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i, w := 0, 0; i < len(s); i += w {
		r, n := utf8.DecodeRuneInString(s[i:])
		w = n
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r == '\t' || r == '\n' || r == '\r',
			r >= 0x20 && r <= 0xD7FF, r >= 0xE000 && r <= 0xFFFD, r >= 0x10000 && r <= 0x10FFFF:
			b.WriteRune(r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}

// xmlClean reports whether s holds only characters XML 1.0 allows.
func xmlClean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || (r > 0xD7FF && r < 0xE000) || r == 0xFFFE || r == 0xFFFF {
			return false
		}
		i += n
	}
	return true
}

func seconds(d time.Duration) string {
	return fmt.Sprintf("%.3f", d.Seconds())
}
