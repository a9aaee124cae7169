package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
	"github.com/idscheck/idscheck/profiles/httpidem"
)

// TestRunHTTPIdemReplicas: run --profile http-idempotency --replicas 3
// --store postgres://… starts three replicas of the bundled endpoint as
// children over one store, the scenarios spread each logical request's
// deliveries over them, and every variant passes (exit 0); the store's
// password is in no output. The stripe variant runs over the cluster
// idscheck starts itself (--store local).
func TestRunHTTPIdemReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas over PostgreSQL: skipped in -short")
	}
	pgtest.Shared(t)
	t.Parallel() // after the sequential tests; runCLI runs one suite at a time
	// The cluster trusts loopback: a password in the URL is sent to no
	// one, and must be printed nowhere.
	const pw = "pg2-s3cret-pw"
	store := withPassword(t, pgtest.Database(t), pw)
	for _, v := range httpidem.Variants() {
		t.Run(v, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report")
			st := store
			if v == httpidem.VariantStripe {
				st = "local"
			}
			code, stdout, stderr := runCLI(t, "--profile", "http-idempotency", "--variant", v, "--seed", "1",
				"--replicas", "3", "--store", st, "--out", out)
			if code != exitOK || !strings.Contains(stderr, "3 replicas over one store") ||
				st == "local" && !strings.Contains(stderr, "started a PostgreSQL cluster") {
				t.Fatalf("exit %d, want 0 on three replicas\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			if strings.Contains(stdout, pw) || strings.Contains(stderr, pw) || fileHas(t, filepath.Join(out, "result.json"), pw) {
				t.Errorf("the store's password is in the output")
			}
		})
	}
}

// runOnReplicas is `idscheck run args… --replicas 3 --store URL` over a
// fresh database of the shared cluster, the URL carrying a password:
// three replicas must have started over it, and the password must be in
// no output (stdout, stderr, result.json).
func runOnReplicas(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	const pw = "replicas-s3cret-pw-6021"
	store := withPassword(t, pgtest.Database(t), pw)
	out := filepath.Join(t.TempDir(), "report")
	code, stdout, stderr := runCLI(t, append(args, "--replicas", "3", "--store", store, "--out", out)...)
	if !strings.Contains(stderr, "3 replicas over one store") {
		t.Errorf("no three replicas started over the store (exit %d)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, pw) || strings.Contains(stderr, pw) || fileHas(t, filepath.Join(out, "result.json"), pw) {
		t.Errorf("the store's password is in the output")
	}
	return code, stdout, stderr
}

// withPassword is store with the password pw for its user.
func withPassword(t *testing.T, store, pw string) string {
	t.Helper()
	u, err := url.Parse(store)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String()
}

// fileHas says whether the file name holds s.
func fileHas(t *testing.T, name, s string) bool {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), s)
}
