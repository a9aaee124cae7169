package features

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

// levelsRun runs feature against goodTarget with the given rules, whose
// steps are: a GET (an action), and a gate and a check that hold when
// their argument is "yes".
func levelsRun(t *testing.T, feature string, rules []spec.Rule) *RunResult {
	t.Helper()
	holds := func(v string) error {
		if v != "yes" {
			return Mismatch("yes", v)
		}
		return nil
	}
	cfg := RunConfig{
		Profile: "levels", Target: Target{BaseURL: startTarget(t, goodTarget), APIKey: "test-key"}, Seed: 1, Rules: rules,
		Suite: &Suite{FS: fstest.MapFS{"l.feature": {Data: []byte(feature)}}, Paths: []string{"l.feature"},
			Steps: func(sc *godog.ScenarioContext, env *Env) {
				c, _ := env.Client("levels")
				Register(sc, env, []StepDef{
					{Pattern: `^the client sends GET "([^"]*)"$`, Kind: Action, Fn: func(ctx context.Context, path string) error {
						_, err := c.Do(ctx, clientRequest(http.MethodGet, path, nil))
						return err
					}},
					{Pattern: `^the gate holds "([^"]*)"$`, Kind: Gate, Fn: holds},
					{Pattern: `^the check holds "([^"]*)"$`, Kind: Check, Fn: holds},
					{Pattern: `^the probe holds "([^"]*)"$`, Kind: Probe, Fn: func(ctx context.Context, v string) error {
						if _, err := c.Do(ctx, clientRequest(http.MethodGet, "/health", nil)); err != nil {
							return err
						}
						return holds(v)
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

// TestRunShouldNeverGatesAMust (issue 28, case 6): a failed SHOULD (a
// NON-STRICT finding, an answer the text allows) blocks the SHOULD checks
// that rest on it, never a MUST's; a MUST whose check declares that it
// rests on another rule is blocked by that rule's failure; a failed MUST
// still stops what rests on it.
func TestRunShouldNeverGatesAMust(t *testing.T) {
	feature := `Feature: levels
  Scenario: a SHOULD gate fails
    When the client sends GET "/health"
    Then [S-1-gate] the gate holds "no"
    And [M-1-same-answer] the check holds "yes"
    And [S-2-same-answer] the check holds "yes"
    When the client sends GET "/health"
    Then [M-2-next-request] the check holds "yes"
    And [M-3-declared, rests on S-1-gate] the check holds "yes"
    And [M-4-fails] the check holds "no"
    And [S-3-later] the probe holds "yes"

  Scenario: a MUST gate fails
    When the client sends GET "/health"
    Then [M-5-gate] the gate holds "no"
    And [M-6-rests] the check holds "yes"
    And [S-4-rests] the check holds "yes"

  Scenario: a SHOULD check fails, then the scenario sends on
    When the client sends GET "/health"
    Then [S-5-check] the check holds "no"
    When the client sends GET "/health"
    Then [M-7-state] the probe holds "yes"
    And [M-8-declared, rests on S-5-check] the probe holds "yes"
    And [M-9-not-failed, rests on M-7-state] the check holds "yes"
`
	rules := []spec.Rule{
		{ID: "S-1-gate", Level: spec.Should}, {ID: "S-2-same-answer", Level: spec.Should}, {ID: "S-3-later", Level: spec.May},
		{ID: "S-4-rests", Level: spec.Should}, {ID: "S-5-check", Level: spec.Should},
		{ID: "M-1-same-answer", Level: spec.Must}, {ID: "M-2-next-request", Level: spec.Must}, {ID: "M-3-declared", Level: spec.Must},
		{ID: "M-4-fails", Level: spec.Must}, {ID: "M-5-gate", Level: spec.Must}, {ID: "M-6-rests", Level: spec.Must},
		{ID: "M-7-state", Level: spec.Must}, {ID: "M-8-declared", Level: spec.Must}, {ID: "M-9-not-failed", Level: spec.Must},
	}
	res := levelsRun(t, feature, rules)
	want := map[string]struct {
		v  verdict.Verdict
		by string
	}{
		"S-1-gate":         {verdict.NonStrict, ""},
		"M-1-same-answer":  {verdict.Pass, ""},
		"S-2-same-answer":  {verdict.Blocked, "S-1-gate"},
		"M-2-next-request": {verdict.Pass, ""},
		"M-3-declared":     {verdict.Blocked, "S-1-gate"},
		"M-4-fails":        {verdict.Fail, ""},
		"S-3-later":        {verdict.Blocked, "M-4-fails"}, // a MUST's failure stops what rests on it
		"M-5-gate":         {verdict.Fail, ""},
		"M-6-rests":        {verdict.Blocked, "M-5-gate"},
		"S-4-rests":        {verdict.Blocked, "M-5-gate"},
		"S-5-check":        {verdict.NonStrict, ""},
		"M-7-state":        {verdict.Pass, ""},
		"M-8-declared":     {verdict.Blocked, "S-5-check"},
		"M-9-not-failed":   {verdict.Pass, ""},
	}
	for id, w := range want {
		r := ruleByID(res, id)
		if r.Verdict != w.v || r.BlockedBy != w.by {
			t.Errorf("%s: %s (blocked by %q), want %s (blocked by %q): %s", id, r.Verdict, r.BlockedBy, w.v, w.by, r.Reason)
		}
	}
	if r := ruleByID(res, "M-4-fails"); !strings.Contains(r.Reason, "judged although S-1-gate failed before it: a SHOULD never gates a MUST") {
		t.Errorf("M-4: a MUST judged after a SHOULD's failure does not say so: %q", r.Reason)
	}
	if r := ruleByID(res, "M-3-declared"); !strings.Contains(r.Reason, `the step «[S-1-gate] the gate holds "no"» failed`) {
		t.Errorf("M-3: the reason does not name the step it rests on: %q", r.Reason)
	}
}
