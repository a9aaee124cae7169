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
	if strings.Count(page, `<tr><td class="id"`) != len(a.Rules) {
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
		low := strings.ToLower(out.String())
		for _, bad := range []string{"<script", "<img", "javascript:"} {
			if strings.Contains(low, bad) {
				t.Errorf("raw %q in the matrix", bad)
			}
		}
	}
}
