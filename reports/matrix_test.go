package reports

import (
	"bytes"
	"github.com/idscheck/idscheck/verdict"
	"strings"
	"testing"
)

func TestWriteMatrix(t *testing.T) {
	a := sampleResult()
	b := sampleResult()
	b.Target.Mutant = "none"
	b.Rules[0].Result.Verdict = verdict.Pass
	b.Rules = b.Rules[:3] // b does not run the later rules
	var out bytes.Buffer
	err := WriteMatrix(&out, []MatrixColumn{
		{Name: "no-replay", Link: "../runs/no-replay", Result: a},
		{Name: "clean", Link: "https://example.com/run", Result: b},
	})
	if err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{
		`href="../runs/no-replay/index.html#rule-INTENT-7.2-idem-replay-0"`, // cell links to the rule in that run
		`>clean<`, // column of the run without a safe link: named, not linked
		"not run", // b lacks later rules
		"mutant none",
		`title="blocked by INTENT-7.2-idem-replay: its setup replays a publish`, // a BLOCKED cell names its blocker
		`>READING: immediate</a>`, // a READING cell names the reading
	} {
		if !strings.Contains(page, want) {
			t.Errorf("matrix lacks %q", want)
		}
	}
	if strings.Contains(page, "example.com") {
		t.Errorf("a link out of the report's tree was kept")
	}
	if strings.Count(page, `<tr id="row-`) != len(a.Rules) {
		t.Errorf("want one row per rule (%d)", len(a.Rules))
	}
	if err := WriteMatrix(&out, nil); err == nil {
		t.Errorf("an empty matrix is not an error")
	}
}

func TestWriteMatrixEscapes(t *testing.T) {
	for _, h := range hostile {
		var out bytes.Buffer
		if err := WriteMatrix(&out, []MatrixColumn{{Name: h, Link: "x", Result: hostileResult(h)}}); err != nil {
			t.Fatal(err)
		}
		// The page's own script (allowed by its hash) aside, nothing runs.
		low := strings.ToLower(strings.Replace(out.String(), "<script>"+matrixScript+"</script>", "", 1))
		for _, bad := range []string{"<script", "<img", "javascript:"} {
			if strings.Contains(low, bad) {
				t.Errorf("raw %q in the matrix", bad)
			}
		}
	}
}

// TestMatrixFiltersAndHighlights (issue 21, item 6): the rows whose runs
// disagree are counted, highlighted and linked; each column's verdict
// counts are chips linking to their first row; a filter box and a "only
// rows that differ" toggle are driven by the page's one script, which the
// Content-Security-Policy allows by its hash, and nothing else.
func TestMatrixFiltersAndHighlights(t *testing.T) {
	a := sampleResult()
	b := sampleResult()
	b.Rules[0].Result.Verdict = verdict.Pass
	b.Rules = b.Rules[:len(b.Rules)-1] // the last rule is not run in b
	var out bytes.Buffer
	if err := WriteMatrix(&out, []MatrixColumn{{Name: "a", Link: "a", Result: a}, {Name: "b", Link: "b", Result: b}}); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{
		`<a href="#row-0" id="differ"><b>1 of 10 rules differ</b></a> between the runs that ran them`,
		`<tr id="row-0" class="row differs" data-text="intent-7.2-idem-replay §7.2 `,
		`<tr id="row-1" class="row" `,
		`<tr id="row-9" class="row" `, // not run in b: not a difference (issue 28, case 11)
		`1 rules were not run in every run`,
		`<a class="v v-fail chip" href="#row-0" data-col="0" data-v="FAIL" data-name="a" title="the FAIL rules of a">FAIL 2</a>`,
		`<a class="v v-fail chip" href="#row-1" data-col="1" data-v="FAIL" data-name="b" title="the FAIL rules of b">FAIL 1</a>`,
		`<input type="search" id="q"`,
		`<input type="checkbox" id="diff">`,
		`<td data-v="not run">`,
		"script-src '" + matrixScriptHash + "'",
		"<script>" + matrixScript + "</script>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the matrix lacks %q", want)
		}
	}
	if strings.Count(page, "<script") != 1 || strings.Contains(page, "script-src 'unsafe-inline'") {
		t.Error("the matrix runs more than its one script")
	}
}
