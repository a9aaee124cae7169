package main

import (
	"bytes"
	"context"
	profids "github.com/idscheck/idscheck/profiles/ids"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/sut/ids"
)

var idsOnce sync.Once

// needIDSChaos makes sure the ids profile with its chaos workload is
// registered (the lead's profiles/ids.go registers it in idscheck; until
// then a test registers what chaos needs: its rules and IDSChaos), and
// makes this test binary act as idscheck when chaos starts it as the
// bundled server (serve --profile ids).
func needIDSChaos(t *testing.T) {
	t.Helper()
	idsOnce.Do(func() {
		if _, ok := profiles.Lookup(profids.Name); !ok {
			if err := profiles.Register(profiles.Profile{Name: profids.Name, Title: "IDS", Rules: profids.Rules, Chaos: profids.IDSChaos()}); err != nil {
				panic(err)
			}
		}
	})
	if p, _ := profiles.Lookup(profids.Name); p.Chaos == nil {
		t.Skip("the ids profile is registered without its chaos workload")
	}
	t.Setenv(testBinaryIsCLI, "1")
}

func chaosInProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := cli(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// TestChaosIDSBundledServer: chaos --profile ids against the bundled IDS
// server as a child process, through crashes, its failpoints, the sink's
// partition and lost replies and storms of 200+ identical envelopes: no
// anomaly, every fault injected, and check re-judges the directory offline.
func TestChaosIDSBundledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes a server: skipped in -short")
	}
	needIDSChaos(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "ids", "--duration", "6s", "--workers", "8", "--seed", "5",
		"--faults", "crash,failpoint,storm,sink-partition,sink-lost-replies,lost_response", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, "no anomaly") {
		t.Fatalf("exit %d, want 0 and no anomaly\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	run := readChaosRun(t, dir)
	if run.Profile != "ids" || len(run.Coverage) != 7 || !strings.Contains(run.Command, "--profile ids") {
		t.Fatalf("profile %q, %d faults covered, replay %q", run.Profile, len(run.Coverage), run.Command)
	}
	for _, c := range run.Coverage {
		if !c.OK() {
			t.Errorf("%s was not injected: %s", c.Fault, c)
		}
		if c.Kind == "" {
			t.Errorf("%s has no kind", c.Fault)
		}
	}
	for _, f := range []string{"history.jsonl", "ledger.jsonl", profids.IDSKeysFile, "check.json", "index.html", "result.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}
	var out bytes.Buffer
	if code := cli(t.Context(), []string{"check", dir}, &out, &out); code != exitOK || !strings.Contains(out.String(), "model ids-effects") {
		t.Fatalf("idscheck check: exit %d\n%s", code, out.String())
	}
}

// TestChaosIDSCatchesNoReservation: the bundled server that checks the key
// and then executes without reserving it (its racy window widened through
// GO_FAILPOINTS) executes concurrent duplicates twice: exit 1, the
// duplicated effects named with their key, and the replay line.
func TestChaosIDSCatchesNoReservation(t *testing.T) {
	if testing.Short() {
		t.Skip("real runs: skipped in -short")
	}
	needIDSChaos(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "ids", "--duration", "3s", "--workers", "8", "--seed", "7",
		"--faults", "storm", "--mutant", ids.MutantNoReservation, "--out", dir)
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, stdout, stderr)
	}
	for _, want := range []string{"- " + profids.RuleIDSExactlyOnceEffects + " ", "took effect 2 times at the sink: eff_",
		"replay: idscheck chaos --profile ids --seed 7 --duration 3s --workers 8 --faults storm --time-scale 60 --mutant no-reservation"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// TestChaosIDSUsage: the sink's faults are flags of the profiles with a
// sink only; ids storms are 200 and more; an external ids target needs the
// effect sink's address; serve --profile ids needs the sink.
func TestChaosIDSUsage(t *testing.T) {
	needIDSChaos(t)
	target := writeFile(t, "t.json", `{"url": "http://127.0.0.1:1", "api_key": "k"}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"chaos", "--faults", "sink-partition"}, `unknown fault "sink-partition"`},
		{[]string{"chaos", "--profile", "ids", "--faults", "sink-lost-replies", "--storm-max", "100"}, "at least 200"},
		{[]string{"chaos", "--profile", "ids", "--faults", "quake"}, "profile ids adds: sink-partition, sink-lost-replies"},
		{[]string{"chaos", "--profile", "ids", "--target-file", target}, "needs the effect sink's address: --effect-sink host:port"},
		{[]string{"serve", "--profile", "ids", "--addr", "127.0.0.1:0"}, "needs --sink"},
	} {
		code, _, stderr := chaosInProcess(t, append(tc.args, "--out", t.TempDir())...)
		if tc.args[0] == "serve" {
			code, _, stderr = chaosInProcess(t, tc.args...)
		}
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
}

// TestChaosIDSBundledReferenceReading: chaos --profile ids --reading
// replay-form=reference starts the bundled server in that reading (serve
// --replay-form reference) and judges it by it: no anomaly. The same run
// directory judged with no reading declared passes too and says the target
// followed the reference reading; judged under the outcome reading it
// fails IDS-IX.A-same-outcome: the server did replay by reference.
func TestChaosIDSBundledReferenceReading(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server: skipped in -short")
	}
	needIDSChaos(t)
	if p, _ := profiles.Lookup(profids.Name); p.Serve == nil || p.Serve.Readings == nil {
		t.Skip("the ids profile is registered without its serve command")
	}
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := chaosInProcess(t, "chaos", "--profile", "ids", "--reading", "replay-form=reference", "--duration", "3s",
		"--workers", "8", "--seed", "11", "--faults", "storm,lost_response", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, "no anomaly") || !strings.Contains(stdout, "replay-form=reference (declared)") {
		t.Fatalf("exit %d, want 0, no anomaly, the declared reading named\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	run := readChaosRun(t, dir)
	if run.Readings[profids.DecisionReplayForm] != "reference" || !strings.Contains(run.Command, "--reading") {
		t.Fatalf("readings %v, replay %q", run.Readings, run.Command)
	}
	h, l, files := readRunFiles(t, dir, run)
	for _, c := range []struct {
		readings map[string]string
		pass     bool
		model    string
	}{
		{nil, true, "replay-form=reference (followed)"},
		{map[string]string{profids.DecisionReplayForm: "outcome"}, false, "replay-form=outcome (declared)"},
	} {
		r := run
		r.Readings = c.readings
		rep := checkChaosRun(r, h, l, files)
		if got := rep.Counts[profids.IDSOutcome] == 0; got != c.pass || !strings.Contains(rep.Models[1].Model, c.model) {
			t.Errorf("readings %v: IX.A anomalies %d (want pass=%t), model %q (want %q)", c.readings, rep.Counts[profids.IDSOutcome], c.pass, rep.Models[1].Model, c.model)
		}
	}
}

// readRunFiles reads a chaos run directory's history, ledger and files.
func readRunFiles(t *testing.T, dir string, run chaosRun) (checker.History, checker.Ledger, map[string][]byte) {
	t.Helper()
	open := func(name string) *os.File {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	h, err := checker.ReadHistory(open("history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := checker.ReadLedger(open("ledger.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, name := range run.Files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	return h, l, files
}
