package reports

import (
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/spec"
)

// bigResult is a run at the scale of a full catalog gone wrong: n rules, each
// FAIL with 20 exchanges of 2 KB bodies.
func bigResult(n int) *Result {
	r := sampleResult()
	ex := r.Rules[0].Result.Evidence[0].Exchanges[0]
	ex.ReqBody, ex.RespBody = strings.Repeat("q", 2048), strings.Repeat("r", 2048)
	exs := make([]verdict.Exchange, 20)
	for i := range exs {
		exs[i] = ex
	}
	r.Rules = nil
	for i := range n {
		id := fmt.Sprintf("INTENT-%d.%d-rule", i/10, i%10)
		r.Rules = append(r.Rules, RuleEntry{Rule: fixtureRule(id, fmt.Sprintf("%d.%d", i/10, i%10), spec.Must),
			Result: verdict.RuleResult{RuleID: id, Verdict: verdict.Fail, Reason: "broken",
				Evidence: []verdict.Evidence{{Expected: "x", Observed: "y", Exchanges: exs}}}})
	}
	return r
}

// BenchmarkWriteAll renders result.json, junit.xml and index.html of 200
// failing rules with 20 exchanges each:
//
//	go test ./reports -run '^$' -bench WriteAll -benchtime 5x
func BenchmarkWriteAll(b *testing.B) {
	r := bigResult(200)
	dir := b.TempDir()
	for b.Loop() {
		if err := WriteAll(dir, r); err != nil {
			b.Fatal(err)
		}
	}
}
