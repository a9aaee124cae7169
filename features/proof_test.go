package features

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

func ruleByID(res *RunResult, id string) verdict.RuleResult {
	for _, r := range res.Rules {
		if r.RuleID == id {
			return r
		}
	}
	return verdict.RuleResult{}
}

// TestRunPassKeepsItsProof (issue 21, item 1): a PASS carries the exchange
// its deciding check read, bounded, bodies cut, and secrets redacted.
func TestRunPassKeepsItsProof(t *testing.T) {
	cfg := selfTestConfig(startTarget(t, goodTarget), 1)
	cfg.MaxProofBody = 8
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"T-1-health", "T-2-echo", "T-9-header", "T-10-same-response", "T-15-row-a"} {
		rr := ruleByID(res, id)
		if rr.Verdict != verdict.Pass {
			t.Fatalf("%s: %s, want PASS", id, rr.Verdict)
		}
		if len(rr.Evidence) == 0 || len(rr.Evidence[0].Exchanges) == 0 {
			t.Errorf("%s: PASS without proof: %+v", id, rr.Evidence)
			continue
		}
		if len(rr.Evidence) > DefaultEvidenceChecks {
			t.Errorf("%s: proof keeps %d checks, more than %d", id, len(rr.Evidence), DefaultEvidenceChecks)
		}
		for _, ev := range rr.Evidence {
			if len(ev.Exchanges) > DefaultMaxProof {
				t.Errorf("%s: the proof of a check keeps %d exchanges, more than %d", id, len(ev.Exchanges), DefaultMaxProof)
			}
			if ev.Scenario == "" || !strings.HasPrefix(ev.Step, "["+id) {
				t.Errorf("%s: proof names scenario %q, step %q: want the check that decided it", id, ev.Scenario, ev.Step)
			}
			for _, ex := range ev.Exchanges {
				if len(ex.RespBody) > 8 && !strings.Contains(ex.RespBody, "truncated by idscheck") {
					t.Errorf("%s: proof body not cut: %q", id, ex.RespBody)
				}
			}
		}
	}
	// The check of the echo reads the POST it echoes.
	if ev := ruleByID(res, "T-2-echo").Evidence; len(ev) > 0 {
		exs := ev[0].Exchanges
		if last := exs[len(exs)-1]; last.Method != http.MethodPost || last.Path != "/echo" {
			t.Errorf("T-2 proof ends with %s %s, want the POST /echo its check read", last.Method, last.Path)
		}
	}
	// A passing judgment (scenarios.json) names its check and leaves the
	// exchanges to its rule's proof and history.jsonl.
	for _, s := range res.Scenarios {
		for _, j := range s.Judgments {
			if j.Verdict == verdict.Pass && (len(j.Evidence.Exchanges) > 0 || j.Evidence.Step == "") {
				t.Errorf("%s: a passing judgment keeps %d exchanges, check %q", j.Rule, len(j.Evidence.Exchanges), j.Evidence.Step)
			}
		}
	}
	res.Redact(cfg.Target.Secrets())
	b, _ := json.Marshal(struct {
		R []verdict.RuleResult
		S []ScenarioResult
	}{res.Rules, res.Scenarios})
	if strings.Contains(string(b), "test-key") {
		t.Error("the API key survived redaction in a proof")
	}
}

// TestRunPassShowsWhatItObserved (issue 21, item 1): a check that reads
// counts at the effect sink, or says what it observed, passes with them.
func TestRunPassShowsWhatItObserved(t *testing.T) {
	snk, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	feature := `Feature: proof
  Scenario: counts at the sink
    When the client sends GET "/health"
    Then [P-1-sink] the sink saw no effect for "k-1"
    And [P-2-observed] the check says what it saw

  Scenario: a precondition reads the sink too
    Given the sink is read for "k-2"
    When the client sends GET "/health"
    Then [P-2-observed] the check says what it saw
`
	rules := []spec.Rule{{ID: "P-1-sink", Level: spec.Must}, {ID: "P-2-observed", Level: spec.Must}}
	cfg := RunConfig{
		Profile: "proof", Target: Target{BaseURL: startTarget(t, goodTarget), APIKey: "test-key"}, Seed: 1, Rules: rules, Sink: snk,
		Suite: &Suite{FS: fstest.MapFS{"proof.feature": {Data: []byte(feature)}}, Paths: []string{"proof.feature"},
			Steps: func(sc *godog.ScenarioContext, env *Env) {
				c, _ := env.Client("proof")
				Register(sc, env, []StepDef{
					{Pattern: `^the client sends GET "([^"]*)"$`, Kind: Action, Fn: func(ctx context.Context, path string) error {
						_, err := c.Do(ctx, clientRequest(http.MethodGet, path, nil))
						return err
					}},
					{Pattern: `^the sink is read for "([^"]*)"$`, Kind: Action, Fn: func(key string) error {
						env.Sink.Effects(key)
						return nil
					}},
					{Pattern: `^the sink saw no effect for "([^"]*)"$`, Kind: Check, Fn: func(key string) error {
						if n := env.Sink.Effects(key); n != 0 {
							return Mismatch("no effect", fmt.Sprint(n))
						}
						env.Sink.TotalEffects()
						return nil
					}},
					{Pattern: `^the check says what it saw$`, Kind: Check, Fn: func() error {
						return Observed("a healthy target", "ok true")
					}},
				})
			}},
	}
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	sinkRule := ruleByID(res, "P-1-sink")
	if sinkRule.Verdict != verdict.Pass || len(sinkRule.Evidence) == 0 {
		t.Fatalf("P-1: %s %+v, want PASS with its proof", sinkRule.Verdict, sinkRule.Evidence)
	}
	if got := sinkRule.Evidence[0].Observed; got != "at the effect sink: 0 effects for key k-1; 0 effects in all" {
		t.Errorf("P-1 observed %q, want the counts its check read at the sink", got)
	}
	obs := ruleByID(res, "P-2-observed")
	if obs.Verdict != verdict.Pass || len(obs.Evidence) == 0 {
		t.Fatalf("P-2: %s %+v, want PASS with its proof", obs.Verdict, obs.Evidence)
	}
	for _, ev := range obs.Evidence {
		if ev.Expected != "a healthy target" || ev.Observed != "ok true" {
			t.Errorf("P-2 proof: expected %q, observed %q (a precondition's sink read is not the check's)", ev.Expected, ev.Observed)
		}
	}
}

// TestRunBlockedNamesTheFailedStep (issue 21, item 2): a BLOCKED rule names
// the step that failed, its scenario and the rule it checks, with what it
// expected and observed, not only the rule (which may pass elsewhere).
func TestRunBlockedNamesTheFailedStep(t *testing.T) {
	res, err := Run(t.Context(), selfTestConfig(startTarget(t, invalidJSONTarget), 1))
	if err != nil {
		t.Fatal(err)
	}
	r := ruleByID(res, "T-8-after-session")
	if r.Verdict != verdict.Blocked {
		t.Fatalf("T-8: %s, want BLOCKED", r.Verdict)
	}
	if r.BlockedBy != "T-1-health" || r.BlockedStep != "the client has a healthy session" || r.BlockedIn != "a failed precondition blocks what rests on it" {
		t.Errorf("T-8 blocked by %q, step %q, in %q", r.BlockedBy, r.BlockedStep, r.BlockedIn)
	}
	want := "the step «the client has a healthy session» failed in scenario «a failed precondition blocks what rests on it» (it checks T-1-health): expected a JSON object, observed"
	if !strings.HasPrefix(r.Reason, want) {
		t.Errorf("T-8 reason\n %q\nwant it to start\n %q", r.Reason, want)
	}
	if !strings.Contains(r.Reason, "so the check «[T-8-after-session] the status is 200» was not made") {
		t.Errorf("T-8 reason %q does not name the check left undone", r.Reason)
	}

	res, err = Run(t.Context(), selfTestConfig(startTarget(t, oddTarget), 1))
	if err != nil {
		t.Fatal(err)
	}
	r = ruleByID(res, "T-11-next-request")
	if r.BlockedStep != `[T-9-header] the header "X-Test" is "yes"` ||
		!strings.HasPrefix(r.Reason, `the step «[T-9-header] the header "X-Test" is "yes"» failed in scenario «checks of one response stand on their own, until the next request» (it checks T-9-header, and this check rests on it): expected X-Test: yes, observed`) {
		t.Errorf("T-11: step %q, reason %q", r.BlockedStep, r.Reason)
	}
}

// TestRunNotThisVariantNamesTheVariant (issue 21, item 4): a rule N/A only
// because it judges another variant of the text says which, so the reports
// can set it apart; N/A for another reason too, it names none.
func TestRunNotThisVariantNamesTheVariant(t *testing.T) {
	feature := `Feature: variants
  Scenario: the other variant's check
    Given the text is read as "other"
    Then [V-1-other] nothing is checked

  Scenario: the other variant's check, twice
    Given the text is read as "other"
    Then [V-2-mixed] nothing is checked

  Scenario: a check without what it needs
    Given the target offers nothing for this
    Then [V-2-mixed] nothing is checked
`
	rules := []spec.Rule{{ID: "V-1-other", Level: spec.Must}, {ID: "V-2-mixed", Level: spec.Must}}
	cfg := RunConfig{
		Profile: "variants", Target: Target{BaseURL: startTarget(t, goodTarget)}, Seed: 1, Rules: rules,
		Suite: &Suite{FS: fstest.MapFS{"v.feature": {Data: []byte(feature)}}, Paths: []string{"v.feature"},
			Steps: func(sc *godog.ScenarioContext, env *Env) {
				Register(sc, env, []StepDef{
					{Pattern: `^the text is read as "([^"]*)"$`, Kind: Action, Fn: func(v string) error {
						return NotThisVariant(v, "the target declares another variant")
					}},
					{Pattern: `^the target offers nothing for this$`, Kind: Action, Fn: func() error { return NotApplicable("nothing") }},
					{Pattern: `^nothing is checked$`, Kind: Check, Fn: func() error { return nil }},
				})
			}},
	}
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := ruleByID(res, "V-1-other"); r.Verdict != verdict.NA || r.Variant != "other" {
		t.Errorf("V-1: %s variant %q, want N/A of the variant other", r.Verdict, r.Variant)
	}
	if r := ruleByID(res, "V-2-mixed"); r.Verdict != verdict.NA || r.Variant != "" {
		t.Errorf("V-2: %s variant %q, want N/A naming no variant", r.Verdict, r.Variant)
	}
}
