package main

import (
	"bytes"
	"path/filepath"
	"testing"

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
