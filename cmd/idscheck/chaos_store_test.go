package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/pgtest"
)

// TestChaosStoreFaults: chaos on three replicas of the correct endpoint
// over a PostgreSQL cluster the test started (registered as the store
// idscheck started: storeRestarter), a proxy between each replica and the
// store: store-partition cuts one replica from the store, store-lost-reply
// drops the store's replies to one, store-restart restarts the cluster;
// the run ends with no anomaly and each fault is in the timeline with
// what it did. Without --store-proxy, or against a store idscheck did not
// start, the faults are not available (exit 2, the reason said).
func TestChaosStoreFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PostgreSQL cluster and replicas: skipped in -short")
	}
	pgtest.Shared(t) // skips where PostgreSQL is not installed
	t.Setenv(testBinaryIsCLI, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cluster, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop() })
	store, err := cluster.CreateDatabase(ctx, "chaos_store")
	if err != nil {
		t.Fatal(err)
	}
	const pw = "store-fault-pw-3301"
	store = withPassword(t, store, pw)
	chaos := func(t *testing.T, extra ...string) (int, string, string, string) {
		dir := filepath.Join(t.TempDir(), "run")
		args := append([]string{"chaos", "--profile", "http-idempotency", "--duration", "6s", "--workers", "8", "--seed", "7",
			"--replicas", "3", "--store", store, "--out", dir}, extra...)
		code, stdout, stderr := chaosInProcess(t, args...)
		b, _ := os.ReadFile(filepath.Join(dir, "chaos.json"))
		return code, stdout, stderr, string(b)
	}
	t.Run("not available", func(t *testing.T) {
		code, stdout, stderr, _ := chaos(t, "--faults", "store-partition")
		if code != exitUsage || !strings.Contains(stderr, "give --store-proxy") {
			t.Errorf("store-partition without --store-proxy: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		code, stdout, stderr, _ = chaos(t, "--faults", "store-restart", "--store-proxy")
		if code != exitUsage || !strings.Contains(stderr, "idscheck did not start this store") || strings.Contains(stderr, pw) {
			t.Errorf("store-restart of a store idscheck did not start: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	})
	t.Run("correct on three", func(t *testing.T) {
		storeRestarter = func(s string) func(context.Context) error {
			if s != store {
				return nil
			}
			return cluster.RestartFast // pg_ctl restart: the cluster acknowledges commits before they are on disk (synchronous_commit=off)
		}
		t.Cleanup(func() { storeRestarter = nil })
		code, stdout, stderr, run := chaos(t, "--store-proxy", "--faults", "store-partition,store-lost-reply,store-restart,storm")
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
		if strings.Contains(stdout+stderr+run, pw) {
			t.Error("the store's password is in the output")
		}
	})
}
