package reports

import (
	"github.com/idscheck/idscheck/verdict"
	"os"
	"path/filepath"
	"testing"

	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/spec"
)

// TestWriteSample writes the sample reports (rules with every verdict, a
// chaos run, and one full of hostile strings) under
// $IDSCHECK_SAMPLE_REPORT_DIR, to look at in a browser:
//
//	IDSCHECK_SAMPLE_REPORT_DIR=/tmp/sample go test ./reports -run TestWriteSample
//
// Skipped unless the variable is set.
func TestWriteSample(t *testing.T) {
	dir := os.Getenv("IDSCHECK_SAMPLE_REPORT_DIR")
	if dir == "" {
		t.Skip("IDSCHECK_SAMPLE_REPORT_DIR not set")
	}
	r := sampleResult()
	r.Chaos = sampleChaos()
	chaosOnly := &Result{Tool: r.Tool, Profile: r.Profile, Seed: 42, Command: "idscheck chaos --seed 42", Chaos: sampleChaos()}
	// readings: a FAIL held to a declared reading, and a READING of two readings.
	readings := sampleResult()
	readings.Rules = append(readings.Rules,
		RuleEntry{Rule: readingRule("INTENT-6.7-lease-declared", "6.7"), Result: verdict.RuleResult{
			RuleID: "INTENT-6.7-lease-declared", Verdict: verdict.Fail, Reason: "declared backoff, but claimable again at once",
			Reading: &verdict.ReadingChoice{Decision: intent.DecisionLeaseExpiry, Follows: "immediate", Declared: "backoff"}}},
		RuleEntry{Rule: fixtureRule("INTENT-6.8-lease-several", "6.8", spec.Must), Result: verdict.RuleResult{
			RuleID: "INTENT-6.8-lease-several", Verdict: verdict.Reading, Reason: "no answer told the readings apart",
			Reading: &verdict.ReadingChoice{Decision: intent.DecisionLeaseExpiry, Follows: "backoff,immediate"}}})
	for name, res := range map[string]*Result{"rules": r, "chaos": chaosOnly, "hostile": hostileResult(hostile[1]), "readings": readings} {
		if err := WriteAll(filepath.Join(dir, name), res); err != nil {
			t.Fatal(err)
		}
	}
}
