package reports

import (
	"os"
	"testing"
)

func TestZZWriteSample(t *testing.T) {
	dir := os.Getenv("H6_SAMPLE_DIR")
	if dir == "" {
		t.Skip()
	}
	r := sampleResult()
	r.Chaos = sampleChaos()
	if err := WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(dir+"/chaos", &Result{Tool: r.Tool, Profile: "intent", Command: "idscheck chaos --seed 42", Chaos: sampleChaos()}); err != nil {
		t.Fatal(err)
	}
	if err := WriteAll(dir+"/hostile", hostileResult(hostile[1])); err != nil {
		t.Fatal(err)
	}
}
