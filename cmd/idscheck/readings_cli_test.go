package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/profiles"
)

// TestHelpPointersRun: every "idscheck rules …" that run -h points to runs
// (exit 0): rules --readings lists each profile's decisions and readings.
func TestHelpPointersRun(t *testing.T) {
	var help, errb bytes.Buffer
	cli(t.Context(), []string{"run", "-h"}, &help, &errb)
	ptrs := regexp.MustCompile(`idscheck rules( --[a-z]+( [A-Z]+\b)?)*`).FindAllString(help.String(), -1)
	if !slices.ContainsFunc(ptrs, func(p string) bool { return strings.HasPrefix(p, "idscheck rules --readings") }) {
		t.Errorf("run -h does not point to idscheck rules --readings: %q", ptrs)
	}
	for _, p := range ptrs {
		var out, e bytes.Buffer
		args := strings.Fields(strings.ReplaceAll(p, "NAME", "intent"))[1:]
		if code := cli(t.Context(), args, &out, &e); code != exitOK {
			t.Errorf("run -h points to %q, which exits %d: %s", p, code, e.String())
		}
	}
	var out, e bytes.Buffer
	if code := cli(t.Context(), []string{"rules", "--readings"}, &out, &e); code != exitOK {
		t.Fatalf("rules --readings: exit %d %s", code, e.String())
	}
	for _, n := range profiles.Names() {
		if !strings.Contains(out.String(), "\n"+string(n)+": ") {
			t.Errorf("rules --readings does not list the profile %s", n)
		}
		for _, d := range decisionsOf(n) {
			for _, r := range d.Readings {
				if !strings.Contains(out.String(), "--reading "+d.ID+"="+r.Name) {
					t.Errorf("rules --readings lacks --reading %s=%s", d.ID, r.Name)
				}
			}
		}
	}
}

// TestRunReadingConfiguresTheBundledServer: a reading declared against the
// bundled server is the server's too: lease-expiry=immediate is followed,
// and its check passes (it failed when the server kept its default).
func TestRunReadingConfiguresTheBundledServer(t *testing.T) {
	code, stdout, stderr := runCLI(t, "--reading", "lease-expiry=immediate", "--rules", "INTENT-7.3-immediate-reclaim,INTENT-3.3-expiry-backoff",
		"--seed", "1", "--out", filepath.Join(t.TempDir(), "r"))
	if code != exitOK || strings.Contains(stdout, "NON-STRICT INTENT") || strings.Contains(stdout, "FAIL       INTENT") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "started with the declared readings lease-expiry=immediate") {
		t.Errorf("the target line does not say the server follows the declared reading:\n%s", stderr)
	}
}
