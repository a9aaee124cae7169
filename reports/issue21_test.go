package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

func writePage(t *testing.T, r *Result) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func entry(r *Result, id string) *RuleEntry {
	for i := range r.Rules {
		if r.Rules[i].Rule.ID == id {
			return &r.Rules[i]
		}
	}
	return nil
}

// withProof gives the sample's passing rule the proof a run now keeps.
func withProof(r *Result) *Result {
	e := entry(r, "INTENT-6.1-claim")
	ex := r.Rules[0].Result.Evidence[0].Exchanges[0]
	e.Result.Evidence = []verdict.Evidence{{Scenario: "claim", Step: `[INTENT-6.1-claim] the response status is 201`,
		Observed: "at the effect sink: 1 effect for key k-1", Exchanges: []verdict.Exchange{ex}}}
	return r
}

// TestHTMLPassShowsItsProof (issue 21, item 1): a PASS shows the check that
// held, what it observed and the exchange it read, folded, and redacted.
func TestHTMLPassShowsItsProof(t *testing.T) {
	page := writePage(t, withProof(sampleResult()))
	sec := ruleSection(t, page, "INTENT-6.1-claim")
	for _, want := range []string{
		`<h3>Proof 1 of 1 <span class="muted">· scenario «claim»</span></h3>`,
		`the check that held:</span> <code>[INTENT-6.1-claim] the response status is 201</code>`,
		"at the effect sink: 1 effect for key k-1",
		"The answer it read:",
		"POST /intent?namespace=a",
		"201 Created",
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("the PASS section lacks %q:\n%s", want, sec)
		}
	}
	if strings.Contains(sec, " open>") {
		t.Errorf("a PASS is shown unfolded")
	}
	if strings.Contains(page, "sekret-key-1") {
		t.Error("the proof shows the API key")
	}
}

// TestHTMLBlockedNamesTheStep (issue 21, item 2): a BLOCKED rule names the
// step that failed, its scenario and the rule it checks, and says that rule
// passed where it was checked on its own.
func TestHTMLBlockedNamesTheStep(t *testing.T) {
	r := sampleResult()
	e := entry(r, "INTENT-6.6-claim-order")
	e.Result.BlockedBy, e.Result.BlockedStep, e.Result.BlockedIn = "INTENT-6.1-claim", `I claim intent "A"`, "claim twice"
	e.Result.Reason = `the step «I claim intent "A"» failed in scenario «claim twice» (it checks INTENT-6.1-claim): expected intent A, observed intent B; so the check «[INTENT-6.6-claim-order] the response status is 200» was not made`
	page := writePage(t, r)
	want := `<b>blocked:</b> the step «I claim intent &#34;A&#34;» failed in scenario «claim twice» (it checks INTENT-6.1-claim): expected intent A, observed intent B; so the check`
	link := `[<a href="#rule-INTENT-6.1-claim-2" class="mono">INTENT-6.1-claim</a>: PASS in this run, where it was checked on its own]`
	if n := strings.Count(page, want); n != 2 {
		t.Errorf("the failed step is named %d times, want 2 (summary and section): %q", n, want)
	}
	if n := strings.Count(page, link); n != 2 {
		t.Errorf("the rule of the failed step and its verdict are shown %d times, want 2: %q", n, link)
	}
	if sec := ruleSection(t, page, "INTENT-6.6-claim-order"); !strings.Contains(sec, `blocked: the step «I claim intent &#34;A&#34;» failed</span>`) {
		t.Errorf("the section's summary line does not name the step:\n%s", sec)
	}
	// Its evidence, the failed step's, is folded: the reason sums it up.
	e.Result.Evidence = []verdict.Evidence{{Expected: "intent A", Observed: "intent B"}}
	sec := ruleSection(t, writePage(t, r), "INTENT-6.6-claim-order")
	if !strings.Contains(sec, `<details class="more"><summary>the evidence of the step that failed`) || strings.Index(sec, "<pre>intent B</pre>") < strings.Index(sec, `<details class="more">`) {
		t.Errorf("the failed step's evidence is not folded:\n%s", sec)
	}
}

// TestHTMLFoldsWhatPassed (issue 21, item 3): FAIL, NON-STRICT, UNKNOWN and
// BLOCKED open, the rest folded; inside an open rule, the answer the check
// read is shown and the scenario's earlier exchanges folded, and a rule's
// further evidence too.
func TestHTMLFoldsWhatPassed(t *testing.T) {
	r := withProof(sampleResult())
	ev := r.Rules[0].Result.Evidence[0]
	r.Rules[0].Result.Evidence = append(r.Rules[0].Result.Evidence, ev)
	page := writePage(t, r)
	open := regexp.MustCompile(`<details class="rule rule-item ([a-z-]+)" id="[^"]+"( open)?>`)
	for _, m := range open.FindAllStringSubmatch(page, -1) {
		wantOpen := map[string]bool{"f-fail": true, "f-nonstrict": true, "f-unknown": true, "f-blocked": true}[m[1]]
		if (m[2] != "") != wantOpen {
			t.Errorf("rule of class %s: open=%v, want %v", m[1], m[2] != "", wantOpen)
		}
	}
	sec := ruleSection(t, page, "INTENT-7.2-idem-replay")
	earlier := strings.Index(sec, `<details class="earlier"><summary>1 earlier exchange of the scenario</summary>`)
	last := strings.LastIndex(sec, "exchange 2 of 2")
	if earlier < 0 || last < 0 || strings.Index(sec[earlier:], "</details>")+earlier > last {
		t.Errorf("the earlier exchange is not folded with the last one shown:\n%s", sec)
	}
	if !strings.Contains(sec, `<details class="more"><summary>1 more piece of evidence of this rule</summary>`) {
		t.Errorf("the second evidence is not folded:\n%s", sec)
	}
}

// variantResult is the sample certified under the ietf variant, with two
// rules of the t0 variant (N/A for that) and an untestable rule of its text.
func variantResult() *Result {
	r := sampleResult()
	r.Profile = "http-idempotency"
	r.Target.Variant = "ietf"
	t0 := func(id string, v verdict.RuleResult) RuleEntry {
		rule := fixtureRule(id, "R1", spec.Must)
		rule.Source = "002_58f6d1c48bb6cfb8.txt"
		v.RuleID = id
		return RuleEntry{Rule: rule, Result: v}
	}
	r.Rules = append(r.Rules,
		t0("T0-R1-original", verdict.RuleResult{Verdict: verdict.NA, Variant: "t0", Reason: "the target declares the ietf variant"}),
		t0("T0-R2-wait", verdict.RuleResult{Verdict: verdict.NA, Variant: "t0", Reason: "the target declares the ietf variant"}),
		t0("T0-R9-doc", verdict.RuleResult{Verdict: verdict.NA, Reason: "untestable: documentation"}))
	return r
}

// TestHTMLShowsTheVariant (issue 21, item 4): the header names the variant
// certified, and the rules of the other variants are set apart, folded.
func TestHTMLShowsTheVariant(t *testing.T) {
	page := writePage(t, variantResult())
	for _, want := range []string{
		`<title>idscheck http-idempotency (ietf): FAIL</title>`,
		`<h1>idscheck: profile http-idempotency, variant <span class="mono">ietf</span>`,
		`<dt>variant</dt><dd><b class="mono">ietf</b>`,
		`<details class="note other" id="other-variants"><summary><b>Other variants (N/A): 3 rules</b> — <span class="mono">t0</span>: 3.`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	other := page[strings.Index(page, `id="other-variants"`):]
	main := page[:strings.Index(page, `id="other-variants"`)]
	for _, id := range []string{"T0-R1-original", "T0-R2-wait", "T0-R9-doc"} {
		if strings.Contains(main, id) || !strings.Contains(other, `id="`+anchor(id, 0)[:len(anchor(id, 0))-2]) {
			t.Errorf("%s is not set apart with the other variants", id)
		}
	}
	// A result that names no variant keeps every rule in its place.
	r := variantResult()
	r.Target.Variant = ""
	r.Rules = r.Rules[:len(r.Rules)-3]
	if page := writePage(t, r); strings.Contains(page, "other-variants") || strings.Contains(page, "<dt>variant</dt>") {
		t.Error("a result without variants shows a variant")
	}
}

// TestHTMLNewFailuresOnlyWithAFile (issue 21, item 5): "new failures (not in
// the expected-failures file)" is said only when such a file was given.
func TestHTMLNewFailuresOnlyWithAFile(t *testing.T) {
	r := sampleResult()
	if page := writePage(t, r); !strings.Contains(page, "New failures: 1</b> (not in the expected-failures file)") {
		t.Error("with a file, the new failures are not listed")
	}
	r.ExpectedFailures = ""
	for i := range r.Rules {
		r.Rules[i].Expected = false
	}
	if page := writePage(t, r); strings.Contains(page, "New failures") || strings.Contains(page, "expected-failures file") {
		t.Error("without a file, the page speaks of new failures and of an expected-failures file")
	}
}

// TestRedactionCoversTheNewFields: the proof of a PASS, the failed step of
// a BLOCKED rule and the scenario of a piece of evidence are redacted in
// every report.
func TestRedactionCoversTheNewFields(t *testing.T) {
	r := withProof(sampleResult())
	e := entry(r, "INTENT-6.1-claim")
	e.Result.Evidence[0].Scenario = "as sekret-key-1"
	e.Result.Evidence[0].Step = "[INTENT-6.1-claim] sekret-key-1"
	b := entry(r, "INTENT-6.6-claim-order")
	b.Result.BlockedStep, b.Result.BlockedIn = "I send sekret-key-1", "with sekret-key-1"
	dir := t.TempDir()
	if err := WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ResultFile, JUnitFile, HTMLFile} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, []byte("sekret-key-1")) {
			t.Errorf("%s contains the secret", f)
		}
	}
}

// TestJUnitBlockedNamesTheStep (issue 21, item 2): the JUnit testcase of a
// BLOCKED rule names the failed step, not "blocked by" a rule that passed.
func TestJUnitBlockedNamesTheStep(t *testing.T) {
	r := sampleResult()
	e := entry(r, "INTENT-6.6-claim-order")
	e.Result.BlockedBy, e.Result.BlockedStep, e.Result.BlockedIn = "INTENT-6.1-claim", `I claim intent "A"`, "claim twice"
	e.Result.Reason = `the step «I claim intent "A"» failed in scenario «claim twice» (it checks INTENT-6.1-claim): expected intent A, observed intent B`
	var b bytes.Buffer
	if err := WriteJUnit(&b, r); err != nil {
		t.Fatal(err)
	}
	c := findCase(t, decodeJUnit(t, b.Bytes()), "INTENT-6.6-claim-order")
	if c.Skipped == nil || !strings.HasPrefix(c.Skipped.Message, `blocked: the step «I claim intent "A"» failed in scenario «claim twice» (it checks INTENT-6.1-claim)`) {
		t.Errorf("skipped: %+v", c.Skipped)
	}
	if c.SystemOut == nil || !strings.Contains(c.SystemOut.Text, `failed step: I claim intent "A" (scenario claim twice; it checks INTENT-6.1-claim)`) {
		t.Errorf("system-out: %+v", c.SystemOut)
	}
}
