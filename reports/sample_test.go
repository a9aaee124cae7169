package reports

import (
	"os"
	"path/filepath"
	"testing"
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
	for name, res := range map[string]*Result{"rules": r, "chaos": chaosOnly, "hostile": hostileResult(hostile[1])} {
		if err := WriteAll(filepath.Join(dir, name), res); err != nil {
			t.Fatal(err)
		}
	}
}
