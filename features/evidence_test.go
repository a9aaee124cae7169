package features

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

// evidenceRun runs feature against goodTarget with one MUST rule E-1-rule
// and steps that send, storm, read and check.
func evidenceRun(t *testing.T, feature string) *RunResult {
	t.Helper()
	cfg := RunConfig{
		Profile: "evidence", Target: Target{BaseURL: startTarget(t, goodTarget), APIKey: "test-key"}, Seed: 1,
		Rules: []spec.Rule{{ID: "E-1-rule", Level: spec.Must}},
		Suite: &Suite{FS: fstest.MapFS{"e.feature": {Data: []byte(feature)}}, Paths: []string{"e.feature"},
			Steps: func(sc *godog.ScenarioContext, env *Env) {
				c, _ := env.Client("evidence")
				Register(sc, env, []StepDef{
					{Pattern: `^the client posts "([^"]*)"$`, Kind: Action, Fn: func(ctx context.Context, body string) error {
						r, err := c.Do(ctx, clientRequest(http.MethodPost, "/echo", []byte(`{"v":"`+body+`"}`)))
						env.Answered(r)
						return err
					}},
					{Pattern: `^a storm of (\d+) GETs$`, Kind: Action, Fn: func(ctx context.Context, n int) error {
						for i := range n {
							if _, err := c.Do(ctx, clientRequest(http.MethodGet, fmt.Sprint("/health?storm=", i), nil)); err != nil {
								return err
							}
						}
						return nil
					}},
					{Pattern: `^a count read holds$`, Kind: Probe, Fn: func(ctx context.Context) error {
						_, err := c.Do(ctx, clientRequest(http.MethodGet, "/health?count", nil))
						return err
					}},
					{Pattern: `^the last answer holds "([^"]*)"$`, Kind: Check, Fn: func(v string) error {
						if v != "yes" {
							return Mismatch("yes", v)
						}
						return nil
					}},
				})
			}},
	}
	res, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRunEvidenceKeepsWhatDecided (issue 28, case 4): a FAIL's evidence
// holds the exchanges of the check its reason names, however large a
// storm another scenario judging the same rule sent after it.
func TestRunEvidenceKeepsWhatDecided(t *testing.T) {
	res := evidenceRun(t, `Feature: evidence
  Scenario: a small failing check
    When the client posts "first"
    And the client posts "again"
    Then [E-1-rule] the last answer holds "no"

  Scenario: a storm, then a failing check
    When a storm of 30 GETs
    Then [E-1-rule] the last answer holds "no"
`)
	r := ruleByID(res, "E-1-rule")
	if r.Verdict != verdict.Fail || !strings.Contains(r.Reason, `scenario "a small failing check"`) {
		t.Fatalf("E-1: %s %q, want FAIL naming the first scenario", r.Verdict, r.Reason)
	}
	if len(r.Evidence) != 2 {
		t.Fatalf("E-1 keeps the evidence of %d checks, want 2", len(r.Evidence))
	}
	first := r.Evidence[0]
	if first.Scenario != "a small failing check" || len(first.Exchanges) != 2 || first.Exchanges[1].Method != http.MethodPost {
		t.Errorf("the check the reason names keeps %d exchanges (scenario %q): want its own two POSTs", len(first.Exchanges), first.Scenario)
	}
	storm := r.Evidence[1]
	if len(storm.Exchanges) != DefaultMaxEvidence || storm.Omitted != 30-DefaultMaxEvidence {
		t.Errorf("the storm's check keeps %d exchanges, omits %d: want its latest %d", len(storm.Exchanges), storm.Omitted, DefaultMaxEvidence)
	}
	if !strings.Contains(r.Reason, `[the evidence of scenario "a storm, then a failing check" keeps its last 20 of 30 exchanges; history.jsonl has all]`) {
		t.Errorf("the reason does not say what the storm's evidence leaves out: %q", r.Reason)
	}
}

// TestRunProofShowsEveryCheck (issue 28, case 4): a PASS's proof shows
// each check that judged the rule, a count read and the check of the
// answer alike, and a check that sends nothing shows the answer it read
// (Env.Answered), not the count read sent after it.
func TestRunProofShowsEveryCheck(t *testing.T) {
	res := evidenceRun(t, `Feature: proof
  Scenario: a count read and a check of the last answer
    When the client posts "held"
    And the client posts "duplicate"
    Then [E-1-rule] a count read holds
    And [E-1-rule] the last answer holds "yes"
`)
	r := ruleByID(res, "E-1-rule")
	if r.Verdict != verdict.Pass || len(r.Evidence) != 2 {
		t.Fatalf("E-1: %s with the proof of %d checks, want PASS with 2", r.Verdict, len(r.Evidence))
	}
	count, answer := r.Evidence[0], r.Evidence[1]
	if !strings.Contains(count.Step, "a count read") || len(count.Exchanges) != 1 || count.Exchanges[0].Path != "/health?count" {
		t.Errorf("the count read's proof: step %q, %d exchanges", count.Step, len(count.Exchanges))
	}
	if !strings.Contains(answer.Step, "the last answer") || len(answer.Exchanges) != 2 {
		t.Fatalf("the check of the last answer: step %q, %d exchanges", answer.Step, len(answer.Exchanges))
	}
	if last := answer.Exchanges[1]; last.Method != http.MethodPost || !strings.Contains(last.ReqBody, "duplicate") {
		t.Errorf("the check of the last answer shows %s %s %s, want the POST of the duplicate it read", last.Method, last.Path, last.ReqBody)
	}
}
