package faults

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
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
