package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/pgtest"
)

// TestChaosStoreFaults: chaos on three replicas of the correct endpoint
// over the PostgreSQL cluster idscheck starts (--store local), a proxy
// between each replica and the store: store-partition cuts one replica
// from the store, store-lost-reply drops the store's replies to one,
// store-restart crashes and restarts the cluster; the run ends with no
// anomaly, each fault in the timeline with what it did, the reproduce
// line says --store local, and the cluster is gone at the end. Without
// --store-proxy, or against a store idscheck did not start, the faults are
// not available (exit 2, the reason said).
func TestChaosStoreFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster and replicas: skipped in -short")
	}
	pgtest.Shared(t) // skips where PostgreSQL is not installed
	t.Parallel()     // after the sequential tests, beside the other replica chaos tests (TestMain sets testBinaryIsCLI for the children)
	const pw = "store-fault-pw-3301"
	chaos := func(t *testing.T, store string, extra ...string) (int, string, string, string) {
		dir := filepath.Join(t.TempDir(), "run")
		args := append([]string{"chaos", "--profile", "http-idempotency", "--duration", "6s", "--workers", "8", "--seed", "7",
			"--replicas", "3", "--store", store, "--out", dir}, extra...)
		code, stdout, stderr := chaosInProcess(t, args...)
		b, _ := os.ReadFile(filepath.Join(dir, "chaos.json"))
		return code, stdout, stderr, string(b)
	}
	t.Run("not available", func(t *testing.T) {
		store := withPassword(t, pgtest.Database(t), pw)
		code, stdout, stderr, _ := chaos(t, store, "--faults", "store-partition")
		if code != exitUsage || !strings.Contains(stderr, "give --store-proxy") {
			t.Errorf("store-partition without --store-proxy: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		code, stdout, stderr, _ = chaos(t, store, "--faults", "store-restart", "--store-proxy")
		if code != exitUsage || !strings.Contains(stderr, "idscheck did not start this store") || strings.Contains(stderr, pw) {
			t.Errorf("store-restart of a store idscheck did not start: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
	t.Run("correct on three", func(t *testing.T) {
		code, stdout, stderr, run := chaos(t, "local", "--store-proxy", "--faults", "store-partition,store-lost-reply,store-restart,storm")
		if code != exitOK || !strings.Contains(stdout, "no anomaly") {
			t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		var doc struct {
			Timeline []struct {
				Fault  string            `json:"fault"`
				Params map[string]string `json:"params"`
				Err    string            `json:"err"`
			} `json:"timeline"`
		}
		if err := json.Unmarshal([]byte(run), &doc); err != nil {
			t.Fatalf("chaos.json: %v", err)
		}
		did := map[string]bool{}
		for _, in := range doc.Timeline {
			switch {
			case in.Err != "":
				t.Errorf("%s failed: %s", in.Fault, in.Err)
			case in.Fault == "store-partition" || in.Fault == "store-lost-reply":
				did[in.Fault] = in.Params["replica"] != "" && in.Params["replicas"] == "3"
			case in.Fault == "store-restart":
				did[in.Fault] = in.Params["restart_ms"] != ""
			}
		}
		for _, f := range []string{"store-partition", "store-lost-reply", "store-restart"} {
			if !did[f] {
				t.Errorf("the timeline has no %s saying what it did\n%s", f, run)
			}
		}
		if !strings.Contains(stdout, "--store 'local'") {
			t.Errorf("the reproduce line does not start a store of its own (--store local)\n%s", stdout)
		}
		m := regexp.MustCompile(`started a PostgreSQL cluster .* in (\S+) \(`).FindStringSubmatch(stderr)
		if m == nil {
			t.Fatalf("no word of the cluster started\n%s", stderr)
		}
		if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
			t.Errorf("the cluster's folder %s is still there after the run (%v)", m[1], err)
		}
	})
}
