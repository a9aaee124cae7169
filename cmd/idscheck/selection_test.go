package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSelection: any glob of a list that matches nothing is an error (not
// only a lone one); '!GLOB' and --exclude leave rules out; --variant of a
// profile without variants is named as such; --dry-run lists what would run
// and runs nothing.
func TestSelection(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rules", "INTENT-7.*,NOPE*"}, `--rules: "NOPE*" matches no rule of the intent profile`},
		{[]string{"--rules", "INTENT-7.*,!NOPE*"}, `--rules: "NOPE*" matches no rule of the intent profile`},
		{[]string{"--exclude", "NOPE*"}, `--exclude: "NOPE*" matches no rule of the intent profile`},
		{[]string{"--rules", "INTENT-7.2-idem-replay", "--exclude", "INTENT-7.2-*"}, "nothing is left once INTENT-7.2-* is excluded"},
		{[]string{"--variant", "t0"}, "unknown flag --variant: the intent profile has no --variant: it is a flag of --profile http-idempotency"},
		{[]string{"--profile", "ids", "--variant", "t0"}, "the ids profile has no --variant"},
	} {
		code, stdout, stderr := runCLI(t, append(tc.args, "--out", t.TempDir())...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q (stdout %d bytes); want exit 2 and one line saying %q", tc.args, code, stderr, len(stdout), tc.want)
		}
	}
	dir := filepath.Join(t.TempDir(), "never")
	code, stdout, stderr := runCLI(t, "--rules", "INTENT-7.2-*,!INTENT-7.2-idem*", "--exclude", "INTENT-7.2-too-many-429", "--dry-run", "--out", dir)
	if code != exitOK {
		t.Fatalf("--dry-run: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"nothing was run", "scenarios:", "judges INTENT-7.2-created-201", "rules:", "INTENT-7.2-created-201"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("--dry-run lacks %q:\n%s", want, stdout)
		}
	}
	for _, bad := range []string{"INTENT-7.2-idem-replay", "INTENT-7.2-too-many-429", "INTENT-7.3"} {
		if strings.Contains(stdout, bad) {
			t.Errorf("--dry-run lists %s, which the selection leaves out:\n%s", bad, stdout)
		}
	}
	if strings.Contains(stderr, "bundled") || fileExists(dir) {
		t.Errorf("--dry-run started a server or wrote %s:\n%s", dir, stderr)
	}
	// Excluded rules are not run.
	code, stdout, stderr = runCLI(t, "--rules", "INTENT-7.2-created-201,INTENT-7.2-publish-response", "--exclude", "INTENT-7.2-publish-response",
		"--seed", "1", "--out", filepath.Join(t.TempDir(), "r"))
	if code != exitOK || !strings.Contains(stdout, "1 rules") || strings.Contains(stdout, "INTENT-7.2-publish-response  ") {
		t.Errorf("exclusion: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
