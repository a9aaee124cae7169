package reports

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/checker"
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

// TestChaosChartAxesAndKeyLists (issue 21, item 7): each chart panel labels
// intermediate values, not only 0 and its maximum; a model's failing keys
// show the first few, the rest folded, with how many there were in all;
// and the anomalies shown are said to be examples of how many found.
func TestChaosChartAxesAndKeyLists(t *testing.T) {
	c := sampleChaos()
	c.Models[0].Failing = nil
	for i := range 100 {
		c.Models[0].Failing = append(c.Models[0].Failing, fmt.Sprintf("k-%03d", i))
	}
	c.Models[0].FailingTotal = 129
	c.Counts[checker.Duplicated] = 100
	r := &Result{Tool: CurrentTool(), Seed: 42, Command: "idscheck chaos --seed 42", ExitCode: 1, Chaos: c}
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	// Throughput peaks at 120 ops/s (a panel up to 200), latency at 2 s.
	for _, tick := range []string{">0</text>", ">50</text>", ">100</text>", ">150</text>", ">200</text>", ">500</text>", ">1000</text>", ">1500</text>", ">2000</text>"} {
		if !strings.Contains(page, tick) {
			t.Errorf("the chart lacks the axis label %q", tick)
		}
	}
	for _, want := range []string{
		`<b>129 failing</b>: <span class="mono">k-000, k-001, k-002, k-003, k-004</span><details class="keys"><summary>95 more keys</summary>`,
		"100 of the 129 failing keys are listed (result.json and check.json keep those 100)",
		"2 examples of the 102 anomalies found are shown: result.json and check.json keep the same 2",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the chaos section lacks %q", want)
		}
	}
	if got := niceTicks(5); fmt.Sprint(got) != "[0 1 2 3 4 5]" {
		t.Errorf("niceTicks(5) = %v", got)
	}
}

// TestChaosFoldsAllButTheFirstViolations: forty examples of one kind are
// not a wall: the first few violations are unfolded, the rest folded and
// still marked violations.
func TestChaosFoldsAllButTheFirstViolations(t *testing.T) {
	c := sampleChaos()
	for i := range 10 {
		c.Anomalies = append(c.Anomalies, checker.Anomaly{Kind: checker.Duplicated, Key: fmt.Sprintf("k-%d", 100+i), Explanation: "again"})
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, &Result{Tool: CurrentTool(), Chaos: c}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, `<details class="rule" open><summary><span class="v v-fail">VIOLATION</span>`); n != openAnomalies {
		t.Errorf("%d violations unfolded, want %d", n, openAnomalies)
	}
	if n := strings.Count(page, `<details class="rule"><summary><span class="v v-fail">VIOLATION</span>`); n != 11-openAnomalies {
		t.Errorf("%d violations folded, want %d", n, 11-openAnomalies)
	}
}
