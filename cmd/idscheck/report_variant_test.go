package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/reports"
)

// TestRunReportsTheVariant (issue 21, item 4): the report says which variant
// of the text a run certified, the bundled server's default included.
func TestRunReportsTheVariant(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, "ietf"}, {[]string{"--variant", "t0"}, "t0"}} {
		out := filepath.Join(t.TempDir(), "run")
		var stdout, stderr bytes.Buffer
		args := append([]string{"run", "--profile", "http-idempotency", "--seed", "1", "--out", out}, tc.args...)
		if code := cli(t.Context(), args, &stdout, &stderr); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
		}
		r, err := reports.ReadResult(out)
		if err != nil {
			t.Fatal(err)
		}
		if r.Target.Variant != tc.want {
			t.Errorf("%v: variant %q in result.json, want %q", tc.args, r.Target.Variant, tc.want)
		}
	}
}

// TestMoreAnomaliesSaysWhatCheckJSONHolds (issue 21, item 7): past the ten
// anomalies printed, the line says how many examples check.json keeps of
// how many found, not that it holds the rest.
func TestMoreAnomaliesSaysWhatCheckJSONHolds(t *testing.T) {
	rep := checker.Report{Counts: map[checker.AnomalyKind]int{"retry": 100}, Anomalies: make([]checker.Anomaly, 20)}
	got := moreAnomalies(rep, 10, "run/check.json")
	if want := "10 more examples in run/check.json, which keeps 20 of the 100 anomalies found"; !strings.HasPrefix(got, want) {
		t.Errorf("got %q, want it to start %q", got, want)
	}
	rep.Counts["retry"] = 20
	if got := moreAnomalies(rep, 10, "run/check.json"); got != "10 more in run/check.json (every anomaly found)" {
		t.Errorf("every anomaly kept: %q", got)
	}
}
