package main

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/reports"
)

// TestVersion: `idscheck version` and `idscheck --version` print the
// version the reports record, then the module and the VCS revision of the
// build information; exit 0.
func TestVersion(t *testing.T) {
	saved := readBuildInfo
	t.Cleanup(func() { readBuildInfo = saved })
	readBuildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/idscheck/idscheck", Version: "v1.2.3"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
				{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var stdout, stderr bytes.Buffer
		if code := cli(t.Context(), args, &stdout, &stderr); code != exitOK || stderr.Len() != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
		out := stdout.String()
		first, _, _ := strings.Cut(out, "\n")
		if want := "idscheck " + reports.CurrentTool().Version; first != want {
			t.Errorf("%v: first line %q, want the reports' version %q", args, first, want)
		}
		for _, w := range []string{"github.com/idscheck/idscheck v1.2.3", "0123456789abcdef0123456789abcdef01234567 (2025-01-02T03:04:05Z), with uncommitted changes", "go1."} {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", args, w, out)
			}
		}
	}
	var stdout, stderr bytes.Buffer
	if code := cli(t.Context(), []string{"version", "--json"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("version --json: exit %d, %s", code, stderr.String())
	}
	var v buildVersion
	if err := json.Unmarshal(stdout.Bytes(), &v); err != nil || v.Revision == "" || !v.Modified || v.Version != reports.CurrentTool().Version {
		t.Errorf("version --json: %v, %+v", err, v)
	}
	// A build without a VCS stamp says so and how to get one.
	readBuildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Path: "github.com/idscheck/idscheck", Version: "(devel)"}}, true
	}
	stdout.Reset()
	cli(t.Context(), []string{"version"}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "revision unknown: this build carries no VCS stamp") {
		t.Errorf("no VCS stamp, not said:\n%s", stdout.String())
	}
}
