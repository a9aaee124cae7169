package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
	profintent "github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/reports"
	"github.com/idscheck/idscheck/verdict"
)

// buildIDSCheck builds this command into a temporary directory: chaos owns
// the bundled server as a child process (os.Executable), which a test binary
// cannot be.
func buildIDSCheck(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "idscheck")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runChaosBinary runs the built command with args, bounded in time, and
// returns its exit code and output.
func runChaosBinary(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("chaos: %v\nstderr:\n%s", err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// TestChaosCrashesTheBundledServer runs chaos with SIGKILL crashes and
// failpoint crashes of the bundled server as a real child process, then
// re-checks the run directory offline.
func TestChaosCrashesTheBundledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and crashes a server: skipped in -short")
	}
	t.Parallel() // after the sequential tests, beside the other long chaos runs
	bin := buildIDSCheck(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runChaosBinary(t, bin, "chaos", "--duration", "6s", "--workers", "8", "--seed", "11",
		"--faults", "crash,failpoint", "--out", dir)
	if code != exitOK || !strings.Contains(stdout, "no anomaly") {
		t.Fatalf("want exit 0 and no anomaly, got exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var run chaosRun
	b, err := os.ReadFile(filepath.Join(dir, "chaos.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	crashes := 0
	for _, in := range run.Timeline {
		if in.Kind == "crash" || in.Kind == "failpoint" {
			crashes++
		}
	}
	if crashes == 0 {
		t.Fatalf("no crash was injected: timeline %+v", run.Timeline)
	}
	// Every requested fault, each failpoint too, was injected with effect.
	if len(run.Coverage) != 4 {
		t.Errorf("coverage of %d faults, want crash and the 3 failpoints: %+v", len(run.Coverage), run.Coverage)
	}
	for _, c := range run.Coverage {
		if !c.OK() {
			t.Errorf("%s was not injected: %s", c.Fault, c)
		}
	}
	for _, f := range []string{"history.jsonl", "ledger.jsonl", "check.json", "index.html", "result.json", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}
	// Offline re-check: same verdict, no target needed.
	var out2 bytes.Buffer
	if code := cli(context.Background(), []string{"check", dir}, &out2, &out2); code != exitOK {
		t.Fatalf("idscheck check: exit %d\n%s", code, out2.String())
	}
}

// TestChaosCatchesLostOnCrash: a server that acknowledges before its commit
// is durable loses acknowledged intents when it crashes; chaos must say so.
func TestChaosCatchesLostOnCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and crashes a server: skipped in -short")
	}
	t.Parallel() // after the sequential tests, beside the other long chaos runs
	bin := buildIDSCheck(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runChaosBinary(t, bin, "chaos", "--duration", "6s", "--workers", "8", "--seed", "5",
		"--faults", "failpoint/after-commit-before-reply", "--mutant", "lost-on-crash", "--out", dir)
	if code != exitFailed || !strings.Contains(stdout, "lost") {
		t.Fatalf("want exit %d and a lost anomaly, got exit %d\nstdout:\n%s\nstderr:\n%s", exitFailed, code, stdout, stderr)
	}
	// The replay line starts idscheck as it was started: this binary, by its path.
	if !strings.Contains(stdout, "replay: "+shellQuote(bin)+" chaos --profile intent --seed 5") {
		t.Fatalf("a failure must print the command that replays it, with the binary as it was started (%s):\n%s", bin, stdout)
	}
}

// runChaosCLI runs this test binary as idscheck (testBinaryIsCLI) with args and
// extra environment entries, bounded in time, and returns its exit code and
// output. A chaos run started so owns real child processes, as the built
// command does.
func runChaosCLI(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(append(os.Environ(), testBinaryIsCLI+"=1"), env...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("idscheck %v: %v\nstderr:\n%s", args, err, errOut.String())
	}
	return code, out.String(), errOut.String()
}

// readChaosRun reads chaos.json of a run directory.
func readChaosRun(t *testing.T, dir string) chaosRun {
	t.Helper()
	var run chaosRun
	b, err := os.ReadFile(filepath.Join(dir, "chaos.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	return run
}

// coverageOf returns the coverage entry of fault in run.
func coverageOf(t *testing.T, run chaosRun, fault string) faults.Coverage {
	t.Helper()
	for _, c := range run.Coverage {
		if c.Fault == fault {
			return c
		}
	}
	t.Fatalf("chaos.json has no coverage of %s: %+v", fault, run.Coverage)
	return faults.Coverage{}
}

// startServeTarget starts `idscheck serve` (this test binary) as a target
// the harness does not own, and returns its URL and API key.
func startServeTarget(t *testing.T) (string, string) {
	t.Helper()
	return startServeTargetAt(t, 60)
}

// startServeTargetAt is startServeTarget at the given time scale.
func startServeTargetAt(t *testing.T, scale float64) (string, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	const key = "serve-target-key"
	cmd := exec.Command(exe, "serve", "--addr", addr, "--db", filepath.Join(t.TempDir(), "bus.db"), "--time-scale", strconv.FormatFloat(scale, 'g', -1, 64))
	// Its metrics token is the one TestChaosTakesTheTargetDescription gives:
	// chaos's preflight holds every credential to the target.
	cmd.Env = append(os.Environ(), testBinaryIsCLI+"=1", "BUS_SECRET="+key, "BUS_ADMIN_SECRET=serve-target-admin", "BUS_METRICS_TOKEN=metrics-tok")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "http://" + addr
	if err := chaosWaitHealthy(t.Context(), url, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	return url, key
}

// TestChaosInjectsTheFaultAskedFor: `--faults truncate` used to inject
// nothing (no proxy was started for it) and exit 0. Every requested fault is
// now injected and chaos.json, the terminal and the report say how often.
func TestChaosInjectsTheFaultAskedFor(t *testing.T) {
	if testing.Short() {
		t.Skip("a real chaos run: skipped in -short")
	}
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runChaosCLI(t, nil, "chaos", "--duration", "3s", "--workers", "8", "--seed", "3",
		"--faults", "truncate", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	run := readChaosRun(t, dir)
	c := coverageOf(t, run, "truncate")
	if c.Status != faults.StatusInjected || c.Injected == 0 || len(run.Coverage) != 1 {
		t.Fatalf("coverage %+v, want truncate injected and nothing else", run.Coverage)
	}
	n := 0
	for _, in := range run.Timeline {
		if in.Fault == "truncate" && in.Err == "" {
			n++
		}
	}
	if n != c.Injected {
		t.Errorf("timeline holds %d truncate injections, coverage says %d", n, c.Injected)
	}
	if !regexp.MustCompile(`(?m)^  truncate +\d+ injected$`).MatchString(stdout) {
		t.Errorf("the terminal does not list truncate with its count:\n%s", stdout)
	}
}

// TestChaosUnavailableFaultIsUsage (issue 18): a fault asked for that is
// not available against the target (crash without a process idscheck
// starts, failpoints of a target that is not the bundled server) is a
// usage error, exit 2, with a clear message, before anything runs: no run
// directory is written. It used to run and end UNKNOWN (exit 4).
func TestChaosUnavailableFaultIsUsage(t *testing.T) {
	for _, tc := range []struct {
		faults string
		want   []string
	}{
		{"latency,crash,failpoint", []string{"--faults crash: not available", "--target-cmd"}},
		{"crash", []string{"--faults crash: not available", "--target-cmd"}},
		{"failpoint", []string{"--faults failpoint: not available", "failpoints exist only in the bundled reference server"}},
		{"failpoint/after-commit-before-reply", []string{"not available", "failpoints exist only in the bundled reference server"}},
	} {
		dir := filepath.Join(t.TempDir(), "run")
		var stdout, stderr bytes.Buffer
		code := cli(t.Context(), []string{"chaos", "--target", "http://127.0.0.1:1", "--api-key", "k", "--faults", tc.faults, "--out", dir}, &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("--faults %s: exit %d, want %d\nstderr: %s", tc.faults, code, exitUsage, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("--faults %s: stderr lacks %q: %s", tc.faults, w, stderr.String())
			}
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("--faults %s: the run directory was written: a usage error runs nothing", tc.faults)
		}
	}
	// With a start command crash is available; failpoints still are not.
	var stdout, stderr bytes.Buffer
	if code := cli(t.Context(), []string{"chaos", "--target", "http://127.0.0.1:1", "--api-key", "k", "--target-cmd", "false",
		"--faults", "failpoint", "--out", filepath.Join(t.TempDir(), "run")}, &stdout, &stderr); code != exitUsage {
		t.Errorf("--target-cmd --faults failpoint: exit %d, want %d", code, exitUsage)
	}
}

// TestChaosDefaultFaultsAreAvailable (issue 18): with no --faults, a run
// against a target idscheck does not start asks for what is available (net
// and storm, no crash) and is not UNKNOWN for a crash it could not inject.
func TestChaosDefaultFaultsAreAvailable(t *testing.T) {
	if testing.Short() {
		t.Skip("a real chaos run: skipped in -short")
	}
	url, key := startServeTarget(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runChaosCLI(t, nil, "chaos", "--target", url, "--api-key", key, "--time-scale", "60", "--duration", "4s",
		"--workers", "4", "--seed", "6", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	run := readChaosRun(t, dir)
	if run.Faults != "net,storm" {
		t.Errorf("faults %q, want net,storm", run.Faults)
	}
	for _, c := range run.Coverage {
		if c.Kind == faults.KindCrash || c.Fault == "crash" || c.Status != faults.StatusInjected {
			t.Errorf("coverage %+v: want every default fault available and injected, no crash", c)
		}
	}
	if len(run.Coverage) != 9 {
		t.Errorf("coverage of %d faults, want the 8 network faults and the storm: %+v", len(run.Coverage), run.Coverage)
	}
}

// TestChaosUnreachableWritesTheReports (issue 18): a target that does not
// answer is exit 3, and result.json, junit.xml and index.html say why, as
// run writes them. The run is at the target's time scale: the declared
// one, else 1 (real time), as run assumes and chaos -h says; chaos used to
// assume 60, and judged a correct real-time target as if its leases and
// TTLs were 60 times shorter.
func TestChaosUnreachableWritesTheReports(t *testing.T) {
	t.Parallel() // after the sequential tests, beside the other long chaos runs
	addr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	var stdout, stderr bytes.Buffer
	code := cli(t.Context(), []string{"chaos", "--target", "http://" + addr, "--api-key", "unreachable-key", "--faults", "latency", "--out", dir}, &stdout, &stderr)
	if code != exitUnreachable {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUnreachable, stdout.String(), stderr.String())
	}
	res, err := reports.ReadResult(dir)
	if err != nil {
		t.Fatalf("result.json: %v", err)
	}
	if res.ExitCode != exitUnreachable || res.Unreachable == "" || res.Profile == "" {
		t.Errorf("result.json: exit %d, unreachable %q, profile %q", res.ExitCode, res.Unreachable, res.Profile)
	}
	if res.Target.TimeScale != 1 || !strings.Contains(res.Command, "--time-scale 1 ") {
		t.Errorf("time scale %g (replay %q), want 1: the target declared none", res.Target.TimeScale, res.Command)
	}
	// A declared time scale is the run's.
	dir2 := filepath.Join(t.TempDir(), "run")
	if code := cli(t.Context(), []string{"chaos", "--target", "http://" + addr, "--api-key", "k", "--time-scale", "30", "--faults", "storm", "--out", dir2},
		io.Discard, io.Discard); code != exitUnreachable {
		t.Fatalf("--time-scale 30: exit %d, want %d", code, exitUnreachable)
	}
	if res, err := reports.ReadResult(dir2); err != nil || res.Target.TimeScale != 30 {
		t.Errorf("--time-scale 30: result.json %v, time scale %v", err, res)
	}
	for _, f := range []string{"junit.xml", "index.html"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !strings.Contains(string(b), "unreachable") {
			t.Errorf("%s does not say the target was unreachable", f)
		}
		if strings.Contains(string(b), "unreachable-key") {
			t.Errorf("%s carries the API key", f)
		}
	}
	if !strings.Contains(stdout.String(), "target unreachable") {
		t.Errorf("stdout does not say why: %s", stdout.String())
	}
}

// TestChaosTooShortForEveryFaultIsUnknown: a run too short to hold every
// requested fault says which were not drawn, and is UNKNOWN.
func TestChaosTooShortForEveryFaultIsUnknown(t *testing.T) {
	if testing.Short() {
		t.Skip("a real chaos run: skipped in -short")
	}
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runChaosCLI(t, nil, "chaos", "--duration", "1s", "--workers", "4", "--seed", "5",
		"--faults", "net,storm", "--out", dir)
	if code != exitUndecided {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUndecided, stdout, stderr)
	}
	run := readChaosRun(t, dir)
	notDrawn := 0
	for _, c := range run.Coverage {
		if c.Status == faults.StatusNotDrawn {
			notDrawn++
		}
	}
	if notDrawn == 0 || !strings.Contains(stdout, "NOT-DRAWN") || !strings.Contains(stdout, "raise --duration") {
		t.Errorf("want faults reported not drawn, with what to do; coverage %+v\nstdout:\n%s", run.Coverage, stdout)
	}
	if strings.Contains(stdout, "PASS") || !strings.Contains(stdout, "requested faults never injected") || !strings.Contains(stdout, "replay: idscheck chaos") {
		t.Errorf("the terminal does not say UNKNOWN, which faults, and the replay line:\n%s", stdout)
	}
	res, err := reports.ReadResult(dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != exitUndecided || res.Chaos.Verdict != verdict.Unknown || len(res.Chaos.Coverage) != len(run.Coverage) {
		t.Errorf("result.json: exit %d, verdict %s, coverage %+v", res.ExitCode, res.Chaos.Verdict, res.Chaos.Coverage)
	}
	html, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"requested faults were never injected", "Requested faults"} {
		if !strings.Contains(string(html), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
	junit, err := os.ReadFile(filepath.Join(dir, "junit.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(junit), `name="chaos_verdict" value="UNKNOWN"`) {
		t.Errorf("junit.xml does not carry the UNKNOWN verdict:\n%s", junit)
	}
	// Re-checked offline, the run is still undecided, never PASS.
	var out, errb bytes.Buffer
	if code := cli(t.Context(), []string{"check", dir}, &out, &errb); code != exitUndecided || strings.Contains(out.String(), "no anomaly: PASS") ||
		!strings.Contains(out.String(), "requested faults never injected") {
		t.Errorf("idscheck check: exit %d, want %d and the missing faults\n%s%s", code, exitUndecided, out.String(), errb.String())
	}
}

// TestChaosKeepsSecretsOut: secrets given to a chaos run with a managed
// target process (in --target-cmd, as the API key, in the environment) are
// in no file of the run directory and nowhere on the terminal, -v logs and
// the replay line included; the replay line and chaos.json show the command
// with the secret as a reference to the environment.
func TestChaosKeepsSecretsOut(t *testing.T) {
	if testing.Short() {
		t.Skip("a real chaos run: skipped in -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	const (
		busSecret = "bus-s3cr3t-7f1e"   // BUS_SECRET in --target-cmd, and the API key
		adminPW   = "adm1n-s3cr3t-92c4" // BUS_ADMIN_SECRET in --target-cmd
		dashPW    = "dash-pa55w0rd-e81" // DASHBOARD_PASSWORD in --target-cmd
		envToken  = "env-t0k3n-55aa"    // in the harness's environment only
	)
	db := filepath.Join(t.TempDir(), "target.db") // the target's own data, outside the run directory
	targetCmd := "echo \"starting with $CHAOS_TEST_TOKEN\" >&2; BUS_SECRET=" + busSecret + " BUS_ADMIN_SECRET='" + adminPW +
		"' DASHBOARD_PASSWORD=" + dashPW + " " + chaosShellQuote(exe) + " serve --addr " + addr + " --db " + chaosShellQuote(db) + " --time-scale 60"
	dir := filepath.Join(t.TempDir(), "run")
	// Every network fault and a crash do not fit in 2 s: under seed 1 the
	// crash is drawn and four network faults are not, the run is UNKNOWN
	// and prints its replay line.
	code, stdout, stderr := runChaosCLI(t, []string{"CHAOS_TEST_TOKEN=" + envToken}, "chaos", "-v",
		"--target", "http://"+addr, "--target-cmd", targetCmd, "--api-key", busSecret, "--time-scale", "60",
		"--duration", "2s", "--workers", "8", "--seed", "1", "--faults", "crash,net", "--out", dir)
	if code != exitUndecided {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUndecided, stdout, stderr)
	}
	run := readChaosRun(t, dir)
	if c := coverageOf(t, run, "crash"); !c.OK() {
		t.Fatalf("the managed target was not crashed: %s", c)
	}
	secrets := []string{busSecret, adminPW, dashPW, envToken}
	check := func(where, text string) {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				i := strings.Index(text, s)
				t.Errorf("%s holds the secret %q: …%s…", where, s, text[max(0, i-80):min(len(text), i+len(s)+20)])
			}
		}
	}
	check("stdout", stdout)
	check("stderr", stderr)
	files := 0
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		check(path, string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"chaos.json", "history.jsonl", "ledger.jsonl", "check.json", "result.json", "junit.xml", "index.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the run directory lacks %s: %v", f, err)
		}
	}
	// The command is kept, runnable where the variables are set.
	for _, want := range []string{`BUS_SECRET="$BUS_SECRET"`, `BUS_ADMIN_SECRET="$BUS_ADMIN_SECRET"`, `DASHBOARD_PASSWORD="$DASHBOARD_PASSWORD"`, `--api-key="$IDSCHECK_API_KEY"`} {
		if !strings.Contains(run.Command, want) {
			t.Errorf("chaos.json command lacks %q: %s", want, run.Command)
		}
		if !strings.Contains(stdout, "replay: ") || !strings.Contains(stdout, want) {
			t.Errorf("the replay line lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "process started") {
		t.Errorf("-v logged no process start (the check above would prove nothing):\n%s", stderr)
	}
	t.Logf("%d files and the terminal checked; replay: %s", files, run.Command)
}

// TestChaosSIGKILLedLeavesNoTarget: a chaos harness (a real child process)
// SIGKILLed in the middle of a run leaves no process of --target-cmd behind,
// not even the server that the command's shell forked.
func TestChaosSIGKILLedLeavesNoTarget(t *testing.T) {
	if testing.Short() {
		t.Skip("a real chaos run: skipped in -short")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	pidFile := filepath.Join(tmp, "server.pid")
	// sh forks the server and waits: Pdeathsig on sh alone would orphan it.
	targetCmd := "BUS_SECRET=sigkill-test-key BUS_ADMIN_SECRET=sigkill-test-admin " + chaosShellQuote(exe) + " serve --addr " + addr +
		" --db " + chaosShellQuote(filepath.Join(tmp, "target.db")) + " --time-scale 60 & echo $! > " + chaosShellQuote(pidFile) + "; wait"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	harness := exec.CommandContext(ctx, exe, "chaos", "--target", "http://"+addr, "--target-cmd", targetCmd,
		"--api-key", "sigkill-test-key", "--duration", "60s", "--workers", "4", "--faults", "latency", "--out", filepath.Join(tmp, "run"))
	harness.Env = append(os.Environ(), testBinaryIsCLI+"=1")
	if err := harness.Start(); err != nil {
		t.Fatal(err)
	}
	serverPID := 0
	t.Cleanup(func() {
		harness.Process.Kill()
		if serverPID > 0 {
			syscall.Kill(serverPID, syscall.SIGKILL) // whatever the outcome, nothing left running
		}
	})
	// Bounded: the target is up and has written its pid.
	deadline := time.Now().Add(30 * time.Second)
	for serverPID == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the target did not start within 30 s")
		}
		if b, err := os.ReadFile(pidFile); err == nil {
			serverPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := chaosWaitHealthy(ctx, "http://"+addr, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := harness.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for !processGone(serverPID) {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the harness was SIGKILLed its target (pid %d) still runs", serverPID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processGone reports whether pid has ended: no such process, or a zombie
// (its reaping is up to its new parent, not to this test).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// TestChaosFaultsFlag: --faults accepts the names of the one list and the
// bundled server's failpoints, and refuses anything else as a usage error.
func TestChaosFaultsFlag(t *testing.T) {
	for _, tc := range []struct {
		flag, want string
	}{
		{"quake", `unknown fault "quake"`},
		{"failpoint/nope", "the bundled server has no failpoint/nope; its failpoints: failpoint/after-claim-before-response"},
		{" , ", "empty list"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli(t.Context(), []string{"chaos", "--faults", tc.flag, "--out", t.TempDir()}, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("--faults %q: exit %d, stderr %q; want %d and %q", tc.flag, code, stderr.String(), exitUsage, tc.want)
		}
	}
	var stdout, stderr bytes.Buffer
	cli(t.Context(), []string{"chaos", "-h"}, &stdout, &stderr)
	for _, name := range faults.Names() {
		if !strings.Contains(stdout.String(), name) {
			t.Errorf("chaos -h does not name the fault %s", name)
		}
	}
}

// TestChaosTakesTheTargetDescription: chaos takes the same target
// description as run and check: every credential flag, and one target file
// that all three accept.
func TestChaosTakesTheTargetDescription(t *testing.T) {
	if testing.Short() {
		t.Skip("real runs: skipped in -short")
	}
	url, key := startServeTarget(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runChaosCLI(t, nil, "chaos", "--target", url, "--api-key", key, "--admin-token", "serve-target-admin",
		"--metrics-token", "metrics-tok", "--time-scale", "60", "--duration", "2s", "--workers", "4", "--seed", "3", "--faults", "latency", "--out", dir)
	if code != exitOK {
		t.Fatalf("every credential flag: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Setenv("CHAOS_FILE_KEY", key)
	file := writeFile(t, "target.json", `{"url": "`+url+`", "api_key_env": "CHAOS_FILE_KEY", "admin_token": "serve-target-admin", "time_scale": 60}`)
	dir2 := filepath.Join(t.TempDir(), "run")
	// Another seed: the workload's namespace comes from the seed, and this
	// target still holds the first run's intents.
	code, stdout, stderr = runChaosCLI(t, nil, "chaos", "--target-file", file, "--duration", "2s", "--workers", "4", "--seed", "4", "--faults", "latency", "--out", dir2)
	if code != exitOK || strings.Contains(stdout+stderr, key) {
		t.Fatalf("chaos --target-file: exit %d (want 0, and no key in the output)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if run := readChaosRun(t, dir2); !strings.Contains(run.Command, "--target-file=") || strings.Contains(run.Command, key) {
		t.Errorf("the replay line does not name the target file, or carries the key: %s", run.Command)
	}
	var out, errb bytes.Buffer
	if code := cli(t.Context(), []string{"check", dir2, "--target-file", file}, &out, &errb); code != exitOK {
		t.Errorf("check --target-file: exit %d\n%s%s", code, out.String(), errb.String())
	}
	res := filepath.Join(t.TempDir(), "report")
	if code, rout, rerr := runCLI(t, "--target-file", file, "--rules", "INTENT-7.1-*", "--out", res); code != exitOK {
		t.Errorf("run --target-file: exit %d\n%s%s", code, rout, rerr)
	}
}

// chaosCheckOptions are the check options as a run directory recorded
// before chaos.json named its profile kept them (its "check_options"):
// such a directory must still be re-checked under them.
func chaosCheckOptions() json.RawMessage {
	b, err := json.Marshal(profintent.ChaosCheckOptions())
	if err != nil {
		panic(err)
	}
	return b
}

// TestChaosOldRunDirKeepsItsCheckOptions: a run directory recorded before
// chaos.json named its profile kept the options its check ran under in
// chaos.json ("check_options"); check and report re-judge it under them
// (the workload's OptionsFile), not under today's defaults. Here the run
// promised exactly-once execution (max_effects 0): one intent executed
// twice is a duplicate, which the chaos workload's defaults (idempotent
// workers) would not count.
func TestChaosOldRunDirKeepsItsCheckOptions(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	write := func(opts json.RawMessage) string {
		dir := t.TempDir()
		run := chaosRun{Seed: 9, Command: "idscheck chaos --seed 9", Target: "http://127.0.0.1:9", Workers: 1, Faults: "storm",
			Namespace: "chaos-9", Start: t0, End: t0.Add(time.Second), Options: opts}
		h := checker.History{Ops: []checker.Operation{{ClientID: 1, Kind: checker.OpPublish, Key: "k-1", Input: checker.Input{Body: "d"},
			Output: checker.Output{Status: 201, ID: "in-1", Body: "r"}, Call: 1e6, Return: 2e6, Outcome: verdict.OutcomeOK}}}
		l := checker.Ledger{Effects: []checker.Effect{{Key: "k-1", Intent: "in-1", At: 3e6}, {Key: "k-1", Intent: "in-1", At: 4e6}}}
		if err := writeChaosRun(dir, run, h, l); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	exactlyOnce := json.RawMessage(`{"timeout_ns": 60000000000, "expired_is_lost": true, "must_finish": true}`)
	for _, tc := range []struct {
		name string
		opts json.RawMessage
		dup  int
	}{
		{"recorded exactly-once", exactlyOnce, 1},
		{"no options recorded", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(tc.opts)
			checkChaosDir(dir, io.Discard, io.Discard)
			var rep checker.Report
			b, err := os.ReadFile(filepath.Join(dir, "check.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatal(err)
			}
			if got := rep.Counts[checker.Duplicated]; got != tc.dup {
				t.Errorf("idscheck check: %d duplicated, want %d (%+v)", got, tc.dup, rep.Counts)
			}
			// report of a directory without check.json checks it again, the same way.
			dir2 := write(tc.opts)
			r, err := chaosDirResult(dir2)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Chaos.Counts[checker.Duplicated]; got != tc.dup {
				t.Errorf("idscheck report: %d duplicated, want %d", got, tc.dup)
			}
		})
	}
}
