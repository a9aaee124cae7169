package faults

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startHelper starts this test binary as a helper server on a free port,
// with extra environment entries.
func startHelper(t *testing.T, extra ...string) (*Process, string) {
	t.Helper()
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	env := append([]string{helperEnv + "=serve", helperAddrEnv + "=" + addr}, extra...)
	p, err := StartProcess(testCtx(t), helperCmd(t), env, "http://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	return p, "http://" + addr
}

func TestProcessKillAndRestart(t *testing.T) {
	ctx := testCtx(t)
	p, url := startHelper(t)
	b, err := get(ctx, url+"/", 5*time.Second)
	if err != nil || !strings.HasPrefix(string(b), "ok ") {
		t.Fatalf("helper: %q, %v", b, err)
	}
	pid := p.PID()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Error("Running() after Kill")
	}
	if err := p.ExitErr(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("ExitErr() = %v, want signal: killed", err)
	}
	if _, err := get(ctx, url+"/", 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after SIGKILL: %v, want connection refused", err)
	}
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	b, err = get(ctx, url+"/", 5*time.Second)
	if err != nil || !strings.HasPrefix(string(b), "ok ") {
		t.Fatalf("after restart: %q, %v", b, err)
	}
	if p.PID() == pid || p.Starts() != 2 || !p.Running() {
		t.Errorf("after restart: pid %d (was %d), starts %d, running %v", p.PID(), pid, p.Starts(), p.Running())
	}
	if !strings.Contains(p.Output(), "helper starting") {
		t.Errorf("Output() = %q, want the helper's stderr", p.Output())
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := get(ctx, url+"/", 5*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("after Stop: %v, want connection refused", err)
	}
	exits := p.Exits()
	if len(exits) != 2 || exits[0].Cause != "sigkill" || exits[0].PID != pid || exits[1].Cause != "sigterm" {
		t.Errorf("Exits() = %+v, want a sigkill of %d then a sigterm", exits, pid)
	}
}

func TestProcessDirAndOutput(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "target.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, err = StartProcess(testCtx(t), "pwd; echo to-stdout; echo to-stderr >&2; exit 4", nil, addr, nil,
		WithDir(dir), WithOutput(log))
	if !errors.Is(err, ErrProcessExited) {
		t.Fatalf("error = %v, want ErrProcessExited", err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{dir, "to-stdout", "to-stderr"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("output file %q lacks %q", b, want)
		}
	}
}

func TestProcessStartFailures(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, cmd, health, want string
		sentinel                error
	}{
		{"exits before healthy", "echo boom >&2; exit 3", "http://" + addr + "/", "boom", ErrProcessExited},
		{"tcp health, exits", "echo tcp-boom >&2; exit 1", addr, "tcp-boom", ErrProcessExited},
		{"empty command", "  ", "", "empty command", nil},
		{"bad health", "sleep 5", "not a url", "want an http URL", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := StartProcess(testCtx(t), tc.cmd, nil, tc.health, nil)
			if err == nil {
				p.Stop()
				t.Fatal("started, want an error")
			}
			if !strings.Contains(err.Error(), tc.want) || (tc.sentinel != nil && !errors.Is(err, tc.sentinel)) {
				t.Errorf("error = %v, want %q (%v)", err, tc.want, tc.sentinel)
			}
		})
	}
}

func TestCrashKillsAndRestarts(t *testing.T) {
	ctx := testCtx(t)
	p, url := startHelper(t)
	var tl Timeline
	in, err := tl.Inject(ctx, rand.New(rand.NewPCG(1, 1)), &Crash{Process: p}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if in.Params["pid_killed"] == in.Params["pid_restarted"] || in.Duration() < 100*time.Millisecond || in.Kind != KindCrash {
		t.Errorf("injection = %+v", in)
	}
	if b, err := get(ctx, url+"/", 5*time.Second); err != nil || !strings.HasPrefix(string(b), "ok ") {
		t.Errorf("after the crash: %q, %v", b, err)
	}
	if err := (&Crash{}).Available(); !errors.Is(err, ErrNotAvailable) {
		t.Errorf("Crash without a process: Available() = %v, want ErrNotAvailable", err)
	}
}

// gone reports whether pid has ended: no such process, or a zombie waiting
// for a parent that is not this test to reap it.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// waitGone polls, up to d, until every pid has ended; it returns those still
// running.
func waitGone(d time.Duration, pids ...int) []int {
	deadline := time.Now().Add(d)
	for {
		var alive []int
		for _, pid := range pids {
			if !gone(pid) {
				alive = append(alive, pid)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return alive
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProcessDiesWithItsHarness: a harness (a real child process) that
// starts a target and is then SIGKILLed leaves nothing of the target behind,
// not even a grandchild that sh forked (`server & wait` does not exec it).
func TestProcessDiesWithItsHarness(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "server.pid")
	target := helperCmd(t) + " & echo $! > " + shellQuote(pidFile) + "; wait"
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	harness := exec.CommandContext(ctx, exe)
	harness.Env = append(os.Environ(), helperEnv+"=harness", helperCmdEnv+"="+target,
		helperHealthEnv+"=http://"+addr+"/", helperAddrEnv+"="+addr)
	out, err := harness.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	harness.Stderr = os.Stderr
	if err := harness.Start(); err != nil {
		t.Fatal(err)
	}
	var shPID, serverPID int
	t.Cleanup(func() {
		// Whatever the outcome, leave nothing running.
		harness.Process.Kill()
		for _, pid := range []int{shPID, serverPID} {
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	line := make(chan string, 1)
	go func() {
		b, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(b)
	}()
	select {
	case l := <-line:
		if _, err := fmt.Sscanf(l, "started %d", &shPID); err != nil {
			t.Fatalf("harness said %q", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the harness did not start its target within 20 s")
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if serverPID, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		t.Fatal(err)
	}
	if gone(shPID) || gone(serverPID) {
		t.Fatalf("target not running before the kill: sh %d, server %d", shPID, serverPID)
	}
	if err := harness.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.Wait()
	if alive := waitGone(10*time.Second, shPID, serverPID); len(alive) > 0 {
		t.Fatalf("10 s after the harness was SIGKILLed, still running: %v (sh %d, server %d)", alive, shPID, serverPID)
	}
	if _, err := get(ctx, "http://"+addr+"/", time.Second); err == nil {
		t.Error("the target still answers")
	}
}

// TestProcessErrorsCarryNoSecret: the command line and the output quoted in
// a start error have the secrets of the command, of its environment and of
// the harness's environment redacted.
func TestProcessErrorsCarryNoSecret(t *testing.T) {
	t.Setenv("FAULTS_TEST_TOKEN", "harness-env-tok")
	cmd := `FOO_SECRET=cmd-s3cr3t sh -c 'echo leaked $FOO_SECRET $BAR_PASSWORD $FAULTS_TEST_TOKEN given-key >&2; exit 3'`
	addr, err := FreeAddr() // nothing listens: the command exits first
	if err != nil {
		t.Fatal(err)
	}
	_, err = StartProcess(testCtx(t), cmd, []string{"BAR_PASSWORD=env-pw-123"}, addr, nil, WithSecrets("given-key"))
	if err == nil || !strings.Contains(err.Error(), "leaked") {
		t.Fatalf("error = %v, want the output tail", err)
	}
	for _, s := range []string{"cmd-s3cr3t", "env-pw-123", "harness-env-tok", "given-key"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("the error holds the secret %q: %v", s, err)
		}
	}
	if !strings.Contains(err.Error(), `FOO_SECRET=\"$FOO_SECRET\"`) {
		t.Errorf("the error does not show the redacted command: %v", err)
	}
}
