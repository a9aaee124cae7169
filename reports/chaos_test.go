package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/verdict"
)

// TestChaosListsEveryRequestedFault: the chaos section lists each requested
// fault with its injections, failures and status; one never injected is
// named at the top with why, and the reason is escaped like any text.
func TestChaosListsEveryRequestedFault(t *testing.T) {
	c := sampleChaos()
	c.Verdict = verdict.Unknown
	c.Coverage = []FaultCoverage{
		{Fault: "partition", Kind: "net", Status: "injected", Scheduled: 3, Injected: 2, Errors: 1},
		{Fault: "storm", Kind: "storm", Status: "injected", Scheduled: 1, Injected: 1},
		{Fault: "crash", Kind: "crash", Status: "unavailable", Reason: "no --target-cmd " + hostile[0]},
	}
	r := &Result{Tool: CurrentTool(), Seed: 42, Command: "idscheck chaos --seed 42", ExitCode: 4, Chaos: c}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, want := range []string{
		"UNKNOWN: 1 requested fault was never injected",
		"<h3>Requested faults</h3>",
		`<td class="mono">partition</td><td>net</td><td>2</td><td>1</td><td>0</td><td>3</td><td>injected</td>`,
		`<td class="mono">crash</td><td>crash</td><td>0</td><td>0</td><td>0</td><td>0</td><td><span class="v v-unknown">unavailable</span> no --target-cmd &lt;script&gt;`,
	} {
		if !strings.Contains(html, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	if strings.Contains(html, hostile[0]) {
		t.Error("a reason went into the page unescaped")
	}
	// A run whose every requested fault was injected shows no such note.
	c.Coverage = c.Coverage[:2]
	b.Reset()
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "never injected") {
		t.Error("a note of a fault never injected, though every one was")
	}
	// result.json keeps the coverage.
	dir := t.TempDir()
	if err := WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResult(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Chaos.Coverage) != 2 || back.Chaos.Coverage[0].Injected != 2 || back.Chaos.Coverage[0].Errors != 1 {
		t.Errorf("result.json coverage read back as %+v", back.Chaos.Coverage)
	}
}
