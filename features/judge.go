package features

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/cucumber/godog"
	messages "github.com/cucumber/messages/go/v21"

	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

// How a scenario's steps are judged (the promise of a FAIL):
//
//   - An assertion is a Then step (Gherkin OUTCOME, And/But after Then
//     included) that starts with the rule it judges: "[RULE-ID] the response
//     status is 201". Its failure is evidence against that rule alone: the
//     rule's judgment from this step is FAIL, and the step does not stop the
//     scenario. A rule FAILs only on evidence from an assertion that names it.
//   - Where the text contradicts itself or leaves a choice open, one
//     observation is checked under every reading, each assertion naming its
//     reading: "[RULE-ID, reading lease-expiry=backoff] …" and
//     "[RULE-ID, reading lease-expiry=immediate] …" on the same response.
//     Together they are one judgment: PASS when every reading holds, READING
//     (naming the reading the target follows) when some do, FAIL when none
//     does. A target that declared its reading (Target.Readings) is held to
//     it: PASS or FAIL by that reading's assertion alone.
//   - Every other step is a precondition. When one fails (a Given or When
//     whose check did not hold), the scenario stops and the rules of the
//     assertions it did not reach are BLOCKED by the rule that covers the
//     step: the one its text names ("Given [RULE-ID] …") or
//     the one its definition declares (StepDef.Covers).
//   - After a failed assertion the scenario goes on only through pure checks
//     of the same response (StepKind Check or Gate, no request in between),
//     which are judged on their own, unless the failed one was a Gate (its
//     status, the intent it returned): then everything after it rests on a
//     failed check. The same check repeated right after it for another rule
//     ("[R1] the status is 404", "[R2] the status is 404") is judged too. At the first step that cannot stand on its own, the
//     scenario stops and the assertions left are BLOCKED by the failed rule.
//   - A SHOULD never gates a MUST. The rules above are for a failed
//     assertion of a MUST. A failed assertion of a SHOULD or a MAY (a
//     NON-STRICT finding) is an answer the text allows: the scenario goes
//     on; the assertions of SHOULD and MAY rules that would rest on it (by
//     the rules above) are BLOCKED by it, and those of MUST rules are
//     judged. Where a MUST genuinely rests on another rule's answer, its
//     assertion says so: "[RULE-ID, rests on OTHER-ID] …" is BLOCKED by
//     OTHER-ID when a check of OTHER-ID failed (or was blocked) earlier in
//     the scenario, whatever the levels.
//   - A precondition that cannot apply (NotApplicable) makes the rules left
//     N/A; a target that stops answering, or a bug of the harness, makes
//     them UNKNOWN.

// StepKind says what a step definition does; it decides what may follow
// a failed assertion.
type StepKind int

const (
	// Action sends requests or changes the scenario's state. Any check it
	// makes on the way is a precondition.
	Action StepKind = iota
	// Check reads the last response and sends nothing; checks of one
	// response stand on their own.
	Check
	// Gate reads the last response and sends nothing, and later checks of
	// the same response rest on it (its status; which resource it carries).
	Gate
	// Probe sends requests of its own to observe the target.
	Probe
)

// StepDef is one step definition of a suite.
type StepDef struct {
	Pattern string // regular expression anchored with ^ and $
	Fn      any    // the handler, as godog takes it
	Kind    StepKind
	// Covers names the rule whose check this step repeats when it fails as a
	// precondition and its text names no rule: a tester key made with
	// POST /admin/generate_key is covered by the rule of generate_key.
	Covers string
}

// rulePrefix is the rule an assertion or a precondition names:
// "[RULE-ID] ", "[RULE-ID, reading DECISION=READING] ", and either with
// ", rests on OTHER-ID" before the bracket.
var rulePrefix = regexp.MustCompile(`^\[(` + ruleID + `)(?:, reading ([a-z0-9-]+)=([a-z0-9-]+))?(?:, rests on (` + ruleID + `))?\] `)

// ruleID is the pattern of a rule ID inside a rule prefix.
const ruleID = `[A-Z][A-Z0-9]*-[0-9A-Za-z.]+-[a-z0-9]+(?:-[a-z0-9]+)*`

// prefixPattern is what Register lets stand before every step pattern.
const prefixPattern = `(?:\[[^\]]+\] )?`

// StepRule is the rule a step's text names, and the reading it is checked
// under, if any.
type StepRule struct {
	Rule     string `json:"rule"`
	Decision string `json:"decision,omitempty"`
	Reading  string `json:"reading,omitempty"`
	// RestsOn is the rule whose earlier failure in the scenario blocks
	// this assertion ("[RULE-ID, rests on OTHER-ID] …").
	RestsOn string `json:"rests_on,omitempty"`
}

// ParseStepRule splits a step's text into the rule its prefix names (zero
// when none) and the rest.
func ParseStepRule(text string) (StepRule, string) {
	m := rulePrefix.FindStringSubmatch(text)
	if m == nil {
		return StepRule{}, text
	}
	return StepRule{Rule: m[1], Decision: m[2], Reading: m[3], RestsOn: m[4]}, text[len(m[0]):]
}

// StepPattern returns a step definition's pattern as Register registers it:
// any text may be preceded by a rule prefix.
func StepPattern(p string) string {
	return "^" + prefixPattern + strings.TrimPrefix(p, "^")
}

// stepDefs is the compiled step table of one suite, for looking up what
// kind of step a text is.
type stepDefs struct {
	defs []StepDef
	res  []*regexp.Regexp
}

func (d *stepDefs) lookup(text string) (StepDef, bool) {
	if d == nil {
		return StepDef{}, false
	}
	_, rest := ParseStepRule(text)
	for i, re := range d.res {
		if re.MatchString(rest) {
			return d.defs[i], true
		}
	}
	return StepDef{}, false
}

// Register registers defs on sc so that each also matches a step that
// starts with a rule prefix, with every handler wrapped so that the runner
// judges what it returns (see the top of this file).
func Register(sc *godog.ScenarioContext, env *Env, defs []StepDef) {
	if env.judge != nil && env.judge.defs == nil {
		d := &stepDefs{defs: defs}
		for _, s := range defs {
			d.res = append(d.res, regexp.MustCompile(s.Pattern))
		}
		env.judge.defs = d
	}
	for _, s := range defs {
		sc.Step(StepPattern(s.Pattern), wrapHandler(env, s.Fn))
	}
}

var errorType = reflect.TypeOf((*error)(nil)).Elem()

// wrapHandler returns fn with the same signature, whose error result goes
// through the runner's judgment first: an assertion's failure is recorded
// and swallowed so the scenario goes on.
func wrapHandler(env *Env, fn any) any {
	v := reflect.ValueOf(fn)
	t := v.Type()
	if t.Kind() != reflect.Func {
		return fn // godog reports the bad handler itself
	}
	errAt := -1
	for i := 0; i < t.NumOut(); i++ {
		if t.Out(i) == errorType {
			errAt = i
		}
	}
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		out := v.Call(args)
		var err error
		if errAt >= 0 && !out[errAt].IsNil() {
			err = out[errAt].Interface().(error)
		}
		if j := env.judge; j != nil {
			err = j.stepReturned(err)
			if errAt >= 0 {
				if err == nil {
					out[errAt] = reflect.Zero(errorType)
				} else {
					out[errAt] = reflect.ValueOf(&err).Elem()
				}
			}
		}
		return out
	}).Interface()
}

// Judgment is one rule's verdict from one assertion (or group of
// reading-qualified assertions) of one scenario, or the verdict a scenario
// that stopped early gives the rules it did not reach.
type Judgment struct {
	Rule    string          `json:"rule"`
	Verdict verdict.Verdict `json:"verdict"`
	Reason  string          `json:"reason,omitempty"`
	Step    string          `json:"step,omitempty"` // the step that decided it
	// BlockedBy names the rule (or step) whose failure blocked this check;
	// BlockedStep is the step that failed, BlockedIn its scenario.
	BlockedBy   string                 `json:"blocked_by,omitempty"`
	BlockedStep string                 `json:"blocked_step,omitempty"`
	BlockedIn   string                 `json:"blocked_in,omitempty"`
	Reading     *verdict.ReadingChoice `json:"reading,omitempty"`
	Evidence    verdict.Evidence       `json:"evidence,omitzero"`
	// Variant, on an N/A, is the variant of the text the check judges when
	// the target declares another (NotThisVariant).
	Variant string `json:"variant,omitempty"`
}

// errStopped marks the step at which a scenario stops because the assertion
// it rests on failed; the rules left are BLOCKED by that assertion's rule.
var errStopped = errors.New("stopped: an earlier assertion this step rests on failed")

// judge is the runner's state of the scenario being run. godog runs one
// scenario at a time, so plain fields are enough.
type judge struct {
	defs *stepDefs
	env  *Env
	// maxProof and maxProofBody bound the exchanges a PASS keeps as its
	// proof (RunConfig.MaxProof, MaxProofBody).
	maxProof, maxProofBody int

	scenario string        // the name of the current scenario
	steps    []*godog.Step // of the current scenario
	idx      int           // index of the step running; -1 before the first
	cur      StepRule      // what the running step names
	def      StepDef       // its definition
	known    bool          // the running step matched a definition of the table
	mark     int           // Recorder.Len() when the running step began
	// scenarioMark is Recorder.Len() when the scenario began.
	scenarioMark int
	// answers are the answers the scenario's steps noted last
	// (Env.Answered), at most maxProof: what a check that sends nothing
	// read.
	answers []verdict.Exchange

	judgments []Judgment
	taint     *taint // the first failed assertion of a MUST in the scenario
	// soft is the first failed assertion of a SHOULD or a MAY: it blocks
	// the SHOULD and MAY checks that rest on it, never a MUST's.
	soft *taint
	// blocked, when set, is why the running assertion is not judged: it
	// rests on a failed check (soft, or the rule its prefix rests on).
	blocked *blocker
	// afterSoft: the running assertion, a MUST's, would rest on soft by
	// the rules of a MUST's failure; it is judged, and a failure says so.
	afterSoft bool
	// levels are the rules' levels (RunConfig.Rules); a rule not listed
	// counts as a MUST.
	levels  map[string]spec.Level
	group   *readingSet // pending reading-qualified assertions
	lastEnd int         // Recorder.Len() when the last assertion ended
	ran     bool        // the running step's handler returned
	// stopIdx is the index of the step at which the scenario stopped, -1
	// while it runs. godog still calls the step hooks of the steps it then
	// skips; they change nothing.
	stopIdx int
}

// taint is a failed assertion that later steps may rest on.
type taint struct {
	rule  string
	step  string // the failed step's text
	check string // the failed step's text after its rule prefix
	stops bool   // it was a Gate or a Probe: nothing after it stands on its own
	end   int    // Recorder.Len() when it ended
	ev    verdict.Evidence
}

// blocker is what the running assertion rests on that failed.
type blocker struct {
	rule, step string
	ev         verdict.Evidence
	na         string // the rule it rests on was N/A here: this reason
}

// must reports whether rule binds as a MUST (an unknown rule does).
func (j *judge) must(rule string) bool {
	l, ok := j.levels[rule]
	return !ok || l == spec.Must
}

// readingSet is a run of assertions of one rule on one observation, each
// under one reading of one decision.
type readingSet struct {
	rule, decision string
	step           string
	end            int
	outcomes       map[string]error // reading -> nil (holds) or the mismatch
	order          []string
	ev             verdict.Evidence
	proof          verdict.Evidence // what the first assertion of the set read
}

func (j *judge) reset(sc *godog.Scenario) {
	j.steps = sc.Steps
	j.scenario = sc.Name
	j.scenarioMark = j.env.Recorder.Len()
	j.answers = nil
	j.idx = -1
	j.judgments = nil
	j.taint = nil
	j.soft = nil
	j.blocked = nil
	j.group = nil
	j.lastEnd = -1
	j.stopIdx = -1
}

// afterStep is the AfterStep hook: the first step that did not pass is
// where the scenario stopped (godog skips the rest).
func (j *judge) afterStep(st *godog.Step, status godog.StepResultStatus) {
	if j.stopIdx >= 0 || status == godog.StepPassed || status == godog.StepSkipped {
		return
	}
	for i, s := range j.steps {
		if s.Id == st.Id {
			j.stopIdx = i
		}
	}
}

// beforeStep is the BeforeStep hook: it notes which step runs, resolves a
// reading set the step is not part of, and stops the scenario where the
// step would rest on a failed assertion.
func (j *judge) beforeStep(st *godog.Step) error {
	if j.stopIdx >= 0 {
		return nil
	}
	for i, s := range j.steps {
		if s.Id == st.Id {
			j.idx = i
		}
	}
	j.cur, _ = ParseStepRule(st.Text)
	j.def, j.known = j.defs.lookup(st.Text)
	j.mark = j.env.Recorder.Len()
	j.ran = false
	j.takeSinkReads() // what a step before this one read is not this step's
	if g := j.group; g != nil && !(j.isAssertion(st) && j.cur.Rule == g.rule && j.cur.Decision == g.decision && j.mark == g.end) {
		j.resolve()
	}
	j.blocked, j.afterSoft = nil, false
	if t := j.taint; t != nil && j.restsOn(st, t) {
		return fmt.Errorf("%w (%s)", errStopped, t.rule)
	}
	if !j.isAssertion(st) {
		return nil
	}
	if t := j.soft; t != nil && j.restsOn(st, t) {
		if j.must(j.cur.Rule) {
			j.afterSoft = true
		} else {
			j.blocked = &blocker{rule: t.rule, step: t.step, ev: t.ev}
		}
	}
	if j.blocked == nil && j.cur.RestsOn != "" {
		j.blocked = j.failedHere(j.cur.RestsOn)
	}
	return nil
}

// restsOn reports whether the step about to run rests on the failed
// assertion t: anything after a Gate or a Probe, anything after a request,
// except the same check of the same observation naming another rule.
func (j *judge) restsOn(st *godog.Step, t *taint) bool {
	pure := (j.def.Kind == Check || j.def.Kind == Gate) && j.mark == t.end
	// The same check of the same observation, naming another rule, is
	// not resting on the failed one: it is judged (and fails) too.
	_, rest := ParseStepRule(st.Text)
	same := j.isAssertion(st) && j.cur.Decision == "" && rest == t.check && j.mark == t.end
	return !same && (t.stops || !pure)
}

// failedHere returns what blocks a check that rests on rule: a check of
// rule that failed or was blocked earlier in this scenario (nil when none
// did; N/A, with its reason, when rule was N/A here).
func (j *judge) failedHere(rule string) *blocker {
	var na *blocker
	for _, jd := range j.judgments {
		if jd.Rule != rule {
			continue
		}
		switch jd.Verdict {
		case verdict.Fail:
			return &blocker{rule: rule, step: jd.Step, ev: jd.Evidence}
		case verdict.Blocked:
			return &blocker{rule: jd.BlockedBy, step: jd.BlockedStep, ev: jd.Evidence}
		case verdict.NA:
			if na == nil {
				na = &blocker{rule: rule, step: jd.Step, na: jd.Reason}
			}
		}
	}
	return na
}

// isAssertion reports whether st judges a rule: a Then step (And and But
// after Then included) naming one. Only checks may be written so (a test of
// each suite keeps it so).
func (j *judge) isAssertion(st *godog.Step) bool { return isAssertion(st) }

func isAssertion(st *godog.Step) bool {
	r, _ := ParseStepRule(st.Text)
	return st.Type == messages.PickleStepType_OUTCOME && r.Rule != ""
}

// stepReturned judges what the running step's handler returned and returns
// what godog should see: nil for an assertion whose outcome is recorded.
func (j *judge) stepReturned(err error) error {
	j.ran = true
	if j.idx < 0 || j.idx >= len(j.steps) || !j.isAssertion(j.steps[j.idx]) {
		var pn *PassNote
		var ob *Observation
		if errors.As(err, &pn) || errors.As(err, &ob) {
			return nil // a check that held, used as a precondition
		}
		return err
	}
	sinkRead := j.takeSinkReads()
	var held *Observation
	if errors.As(err, &held) {
		err = nil // a check that held, with what it observed
	}
	exs := j.env.Recorder.Since(j.mark)
	if b := j.blocked; b != nil {
		if err != nil && !errors.Is(err, ErrNotApplicable) && (isTransport(err) || unanswered(exs) != nil) {
			return err // the target did not answer: the scenario ends UNKNOWN
		}
		j.addBlocked(b)
		j.lastEnd = j.env.Recorder.Len()
		return nil
	}
	switch {
	case err == nil:
	case errors.Is(err, ErrNotApplicable):
		reason := err.Error()
		var na *naError
		variant := ""
		if errors.As(err, &na) {
			reason, variant = na.reason, na.variant
		}
		j.add(Judgment{Rule: j.cur.Rule, Verdict: verdict.NA, Reason: reason, Step: j.steps[j.idx].Text, Variant: variant})
		return nil
	case isTransport(err) || unanswered(exs) != nil:
		return err // the target did not answer: the scenario ends UNKNOWN
	}
	var pn *PassNote
	if errors.As(err, &pn) && j.cur.Decision == "" {
		j.add(Judgment{Rule: j.cur.Rule, Verdict: verdict.Pass, Reason: pn.Note, Step: j.steps[j.idx].Text, Evidence: j.proof(nil, sinkRead)})
		j.lastEnd = j.env.Recorder.Len()
		return nil
	}
	var be *BlockedError
	if errors.As(err, &be) {
		// Not this rule's evidence either way: the check goes on to the
		// next step, and nothing after it rests on it.
		ev := j.evidence(err)
		ev.Expected, ev.Observed = "", be.Reason
		j.finding(be, ev)
		step := j.steps[j.idx].Text
		j.add(Judgment{Rule: j.cur.Rule, Verdict: verdict.Blocked, BlockedBy: be.Blocker, BlockedStep: step, BlockedIn: j.scenario,
			Reason: fmt.Sprintf("not checked: the step %s in scenario %s got an answer that %s judges, not this rule: %s", guillemets(step), guillemets(j.scenario), be.Blocker, be.Reason),
			Step:   step, Evidence: ev})
		j.lastEnd = j.env.Recorder.Len()
		return nil
	}
	end := j.env.Recorder.Len()
	if j.cur.Decision != "" {
		g := j.group
		if g == nil {
			g = &readingSet{rule: j.cur.Rule, decision: j.cur.Decision, step: j.steps[j.idx].Text, outcomes: map[string]error{}}
			j.group = g
		}
		if _, ok := g.outcomes[j.cur.Reading]; !ok {
			g.order = append(g.order, j.cur.Reading)
		}
		if len(g.order) == 1 && g.proof.Step == "" {
			g.proof = j.proof(held, sinkRead)
		}
		// A reading holds when every assertion of it holds: its first
		// mismatch stays.
		if g.outcomes[j.cur.Reading] == nil {
			g.outcomes[j.cur.Reading] = err
		}
		g.end = end
		if err != nil && g.ev.Observed == "" {
			g.ev = j.evidence(err)
		}
		return nil
	}
	step := j.steps[j.idx].Text
	if err == nil {
		j.add(Judgment{Rule: j.cur.Rule, Verdict: verdict.Pass, Step: step, Evidence: j.proof(held, sinkRead)})
	} else {
		ev := j.evidence(err)
		reason := mismatchReason(err)
		if j.afterSoft {
			reason += fmt.Sprintf(" [judged although %s failed before it: a %s never gates a MUST]", j.soft.rule, j.level(j.soft.rule))
		}
		j.add(Judgment{Rule: j.cur.Rule, Verdict: verdict.Fail, Reason: reason, Step: step, Evidence: ev})
		if mm := (*MismatchError)(nil); errors.As(err, &mm) && mm.Finding != nil {
			j.finding(mm.Finding, ev)
		}
		_, rest := ParseStepRule(step)
		j.tainted(j.cur.Rule, step, rest, j.def.Kind, end, ev)
	}
	j.lastEnd = end
	return nil
}

// tainted notes a failed assertion: the first of a MUST stops what rests
// on it (taint), the first of a SHOULD or a MAY blocks only the SHOULD and
// MAY checks that rest on it (soft).
func (j *judge) tainted(rule, step, check string, kind StepKind, end int, ev verdict.Evidence) {
	for _, t := range []*taint{j.taint, j.soft} {
		if t != nil && t.check == check && t.end <= end {
			t.end = end // a probe repeated for another rule: what follows rests on its latest run
		}
	}
	t := &taint{rule: rule, step: step, check: check, stops: kind == Gate || kind == Probe, end: end, ev: ev}
	switch {
	case j.must(rule):
		if j.taint == nil {
			j.taint = t
		}
	case j.soft == nil:
		j.soft = t
	}
}

// level names a rule's level for a sentence ("SHOULD").
func (j *judge) level(rule string) string {
	if l, ok := j.levels[rule]; ok {
		return string(l)
	}
	return string(spec.Must)
}

// addBlocked judges the running assertion BLOCKED by what it rests on
// (N/A when that did not apply); a reading set's assertions after the
// first add nothing.
func (j *judge) addBlocked(b *blocker) {
	step := j.steps[j.idx].Text
	if n := len(j.judgments); j.cur.Decision != "" && n > 0 {
		if last := j.judgments[n-1]; last.Rule == j.cur.Rule && (last.Verdict == verdict.Blocked || last.Verdict == verdict.NA) && last.BlockedStep == b.step {
			return
		}
	}
	if b.na != "" {
		j.add(Judgment{Rule: j.cur.Rule, Verdict: verdict.NA, Step: step, BlockedStep: b.step,
			Reason: fmt.Sprintf("this check rests on %s, which did not apply here: %s", b.rule, b.na)})
		return
	}
	why := fmt.Sprintf("the step %s failed in scenario %s (it checks %s, and this check rests on it)", guillemets(b.step), guillemets(j.scenario), b.rule)
	if b.ev.Expected != "" || b.ev.Observed != "" {
		why += fmt.Sprintf(": expected %s, observed %s", oneLine(b.ev.Expected, 120), oneLine(b.ev.Observed, 160))
	}
	j.add(Judgment{Rule: j.cur.Rule, Verdict: verdict.Blocked, Reason: "not checked: " + why, Step: step,
		BlockedBy: b.rule, BlockedStep: b.step, BlockedIn: j.scenario, Evidence: b.ev})
}

// resolve turns the pending reading set into one judgment.
func (j *judge) resolve() {
	g := j.group
	j.group = nil
	if g == nil {
		return
	}
	jd := Judgment{Rule: g.rule, Step: g.step}
	var holds, fails []string
	for _, r := range g.order {
		if g.outcomes[r] == nil {
			holds = append(holds, r)
		} else {
			fails = append(fails, r)
		}
	}
	declared := j.env.Target.Readings[g.decision]
	switch {
	case declared != "":
		jd.Reading = &verdict.ReadingChoice{Decision: g.decision, Declared: declared}
		err, checked := g.outcomes[declared]
		switch {
		case !checked:
			jd.Verdict = verdict.NA
			jd.Reason = fmt.Sprintf("this check does not apply to the declared reading %s=%s", g.decision, declared)
		case err == nil:
			jd.Verdict = verdict.Pass
			jd.Reading.Follows = declared
			jd.Evidence = g.proof
		default:
			jd.Verdict = verdict.Fail
			jd.Reason = fmt.Sprintf("under the declared reading %s=%s: %s", g.decision, declared, mismatchReason(err))
			jd.Evidence = g.ev
			if len(holds) > 0 {
				jd.Reading.Follows = strings.Join(holds, ",")
				jd.Reason += fmt.Sprintf(" (the target follows %s=%s instead)", g.decision, jd.Reading.Follows)
			}
		}
	case len(fails) == 0:
		jd.Verdict = verdict.Pass
		jd.Evidence = g.proof
	case len(holds) == 0:
		jd.Verdict = verdict.Fail
		jd.Reason = fmt.Sprintf("under every reading of %s (%s): %s", g.decision, strings.Join(g.order, ", "), mismatchReason(g.outcomes[g.order[0]]))
		jd.Evidence = g.ev
	default:
		jd.Verdict = verdict.Reading
		jd.Reading = &verdict.ReadingChoice{Decision: g.decision, Follows: strings.Join(holds, ",")}
		jd.Reason = fmt.Sprintf("the target follows %s=%s; under %s: %s", g.decision, jd.Reading.Follows,
			strings.Join(fails, ", "), mismatchReason(g.outcomes[fails[0]]))
		jd.Evidence = g.ev
	}
	j.add(jd)
	j.lastEnd = g.end
	if jd.Verdict == verdict.Fail {
		j.tainted(g.rule, g.step, "", Check, g.end, jd.Evidence)
	}
}

func (j *judge) add(jd Judgment) { j.judgments = append(j.judgments, jd) }

// finding judges the rule a BlockedError's finding is evidence against,
// FAIL, once per scenario.
func (j *judge) finding(be *BlockedError, ev verdict.Evidence) {
	if !be.Finding {
		return
	}
	for _, jd := range j.judgments {
		if jd.Rule == be.Blocker && jd.Verdict == verdict.Fail {
			return
		}
	}
	step := ""
	if j.idx >= 0 && j.idx < len(j.steps) {
		step = j.steps[j.idx].Text
	}
	j.add(Judgment{Rule: be.Blocker, Verdict: verdict.Fail, Reason: be.Reason, Step: step,
		Evidence: verdict.Evidence{Scenario: j.scenario, Step: step, Expected: "no 5xx to a well-formed request", Observed: be.Reason, Exchanges: ev.Exchanges}})
}

// evidence is what an assertion's failure shows: expected and observed, and
// the scenario's exchanges so far.
func (j *judge) evidence(err error) verdict.Evidence {
	ev := verdict.Evidence{Scenario: j.scenario, Step: j.stepText(), Observed: err.Error()}
	var mm *MismatchError
	if errors.As(err, &mm) {
		ev.Expected, ev.Observed = mm.Expected, mm.Observed
	}
	ev.Exchanges = j.env.Recorder.Since(j.scenarioMark)
	return ev
}

func mismatchReason(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// finish ends the scenario: it resolves what is pending and, when the
// scenario stopped before its end, gives every assertion it did not reach
// the verdict that the stop decides. It returns the scenario's judgments.
func (j *judge) finish(stop ScenarioResult, stopErr error) []Judgment {
	j.resolve()
	if stopErr == nil {
		return j.judgments
	}
	// The step that stopped the scenario; it is reached (an assertion that
	// ended the scenario, by a transport error say, is undecided too).
	from := j.stopIdx
	if from < 0 {
		from = max(j.idx, 0)
	}
	blocker, why, failed := "", "", ""
	var bev verdict.Evidence
	var be *BlockedError
	stepAt := func(i int) string {
		if i >= 0 && i < len(j.steps) {
			return j.steps[i].Text
		}
		return ""
	}
	if stop.Verdict == verdict.Blocked {
		switch {
		case errors.As(stopErr, &be):
			blocker, failed = be.Blocker, stepAt(from)
			why = fmt.Sprintf("the step %s in scenario %s got an answer that %s judges: %s", guillemets(failed), guillemets(j.scenario), be.Blocker, be.Reason)
			bev = verdict.Evidence{Scenario: j.scenario, Step: failed, Observed: be.Reason, Exchanges: j.env.Recorder.Since(j.scenarioMark)}
			j.finding(be, bev)
		case j.taint != nil && errors.Is(stopErr, errStopped):
			blocker, bev, failed = j.taint.rule, j.taint.ev, j.taint.step
			why = fmt.Sprintf("the step %s failed in scenario %s (it checks %s, and this check rests on it)", guillemets(failed), guillemets(j.scenario), blocker)
			if bev.Expected != "" || bev.Observed != "" {
				why += fmt.Sprintf(": expected %s, observed %s", oneLine(bev.Expected, 120), oneLine(bev.Observed, 160))
			}
		default:
			blocker = j.cur.Rule
			if blocker == "" {
				blocker = j.def.Covers
			}
			failed = stepAt(from)
			checks := "no rule covers it"
			if blocker != "" {
				checks = "it checks " + blocker
			} else {
				blocker = fmt.Sprintf("the step %q", failed)
			}
			bev = stop.Evidence
			bev.Scenario, bev.Step = j.scenario, failed
			why = fmt.Sprintf("the step %s failed in scenario %s (%s): %s", guillemets(failed), guillemets(j.scenario), checks, oneLine(strings.TrimPrefix(stop.Reason, "before step hook failed: "), 300))
		}
	}
	seen := map[string]bool{}
	for i := from; i < len(j.steps); i++ {
		st := j.steps[i]
		if !j.isAssertion(st) {
			continue
		}
		if i == from && j.ran && stop.Verdict == verdict.Blocked {
			continue // an assertion that returned was judged already
		}
		r, _ := ParseStepRule(st.Text)
		if seen[r.Rule] {
			continue
		}
		seen[r.Rule] = true
		jd := Judgment{Rule: r.Rule, Verdict: stop.Verdict, Step: st.Text, Reason: stop.Reason, Evidence: stop.Evidence, Variant: stop.Variant}
		if stop.Verdict == verdict.Blocked {
			jd.BlockedBy, jd.BlockedStep, jd.BlockedIn = blocker, failed, j.scenario
			jd.Evidence = bev
			jd.Reason = "not checked: " + why
		}
		j.add(jd)
	}
	return j.judgments
}

// RulesOf returns the rules a scenario's assertions name, in order.
func RulesOf(steps []*godog.Step) []string {
	var out []string
	seen := map[string]bool{}
	for _, st := range steps {
		if !isAssertion(st) {
			continue
		}
		r, _ := ParseStepRule(st.Text)
		if !seen[r.Rule] {
			seen[r.Rule] = true
			out = append(out, r.Rule)
		}
	}
	return out
}

// stepText is the text of the running step ("" outside one).
func (j *judge) stepText() string {
	if j.idx >= 0 && j.idx < len(j.steps) {
		return j.steps[j.idx].Text
	}
	return ""
}

// takeSinkReads returns what the running step read at the effect sink
// since the last call, on one line ("" when nothing, or no sink).
func (j *judge) takeSinkReads() string {
	if j.env.Sink == nil {
		return ""
	}
	var parts []string
	for _, r := range j.env.Sink.TakeReads() {
		what := r.What
		if r.N == 1 {
			what = strings.TrimSuffix(what, "s")
		}
		if r.Key == "" {
			parts = append(parts, fmt.Sprintf("%d %s in all", r.N, what))
		} else {
			parts = append(parts, fmt.Sprintf("%d %s for key %s", r.N, what, r.Key))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "at the effect sink: " + strings.Join(parts, "; ")
}

// answered notes an answer the scenario's checks read next.
func (j *judge) answered(ex verdict.Exchange) {
	j.answers = append(j.answers, ex)
	if n := max(j.maxProof, DefaultMaxProof); len(j.answers) > n {
		j.answers = j.answers[len(j.answers)-n:]
	}
}

// proof is what a passing check read: the exchanges of its own step (a
// probe's requests) or, for a check that sends nothing, the answers the
// scenario's steps noted last (Env.Answered; else its latest exchanges);
// what it observed, when it said (an Observation); and the counts it read
// at the effect sink.
func (j *judge) proof(held *Observation, sinkRead string) verdict.Evidence {
	ev := verdict.Evidence{Scenario: j.scenario, Step: j.stepText()}
	if held != nil {
		ev.Expected, ev.Observed = held.Expected, held.Observed
	}
	if sinkRead != "" {
		if ev.Observed != "" {
			ev.Observed += "; "
		}
		ev.Observed += sinkRead
	}
	exs := j.env.Recorder.Since(j.mark)
	if len(exs) == 0 {
		exs = j.answers
	}
	if len(exs) == 0 {
		exs = j.env.Recorder.Since(j.scenarioMark)
	}
	max, body := j.maxProof, j.maxProofBody
	if max <= 0 {
		max = DefaultMaxProof
	}
	if body <= 0 {
		body = DefaultMaxProofBody
	}
	ev.Exchanges = TrimExchanges(exs, max, body)
	return ev
}

// guillemets quotes a step or scenario name for a sentence: «text».
func guillemets(s string) string { return "«" + oneLine(s, 200) + "»" }
