package faults

import (
	"context"
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/redact"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds of the process lifecycle. Every wait of a Process is bounded by
// one of them and by the caller's ctx.
const (
	// ProcessStartTimeout bounds the wait for a started process to answer its health check.
	ProcessStartTimeout = 60 * time.Second
	// ProcessStopTimeout bounds the wait after SIGTERM before SIGKILL.
	ProcessStopTimeout = 5 * time.Second
	// processExitTimeout bounds the wait for a SIGKILLed process to be reaped.
	processExitTimeout = 10 * time.Second
	// tailSize is how much of the process's stderr (and stdout) is kept for error messages.
	tailSize = 4096
)

// ErrProcessExited reports a managed process that exited before it became
// healthy, or that is not running when it should be.
var ErrProcessExited = errors.New("process exited")

// Process is a target process the harness owns: started with `sh -c
// cmdline` in its own process group, killed with SIGKILL (the whole group)
// at chosen moments and restarted with the same command, environment and
// working directory, hence on the same data. Its stdout and stderr are
// discarded except for a tail kept for error messages. A Process is safe for
// concurrent use; Kill, Restart and Stop are serialised.
//
// No orphan: the group dies with the harness, however the harness ends
// (SIGKILL included). The shell gets Pdeathsig=SIGKILL, and beside the
// command the group holds a lifeline, a shell blocked reading a pipe whose
// other end only the harness holds: when the harness dies the kernel closes
// that end, the read returns and the lifeline SIGKILLs its whole group: the
// command's own children too, which Pdeathsig alone would leave behind (sh
// does not exec the last command of `a; b` or `a & wait`). The harness also
// closes its end once the shell is reaped, so a command that exits and leaves
// children behind in its group does not leave them running.
//
// No secret in what it prints: the command line shown in logs and errors is
// redacted (redact.Redactor.Command) of the secrets it carries (CommandSecrets of
// the command, of env and of this process's environment) and of those given
// WithSecrets; so is the tail of its output quoted in errors.
//
// Failpoints of the reference server: put "GO_FAILPOINTS=<path>=<term>[;…]"
// (see FailpointsEnv) in env to arm failpoints from the process's start, and
// "GO_FAILPOINTS_HTTP=127.0.0.1:<port>" (see FailpointsHTTPEnv) to arm and
// disarm them at chosen moments with a RemoteFailpoint. failpoint reads both
// in its init, so the child must import github.com/pingcap/failpoint.
type Process struct {
	cmdline   string
	display   string           // cmdline redacted, for logs and errors
	redact    *redact.Redactor // the secrets of the command, its environment and WithSecrets
	secrets   []string
	env       []string
	healthURL string
	logger    *slog.Logger

	output io.Writer // optional copy of stdout and stderr
	dir    string

	mu     sync.Mutex // serialises start, Kill, Restart, Stop; guards the fields below
	cmd    *exec.Cmd
	exited chan struct{} // closed when the current process has been reaped
	status *exitStatus   // the current process's exit status, set before exited closes
	starts int
	tail   *tailBuffer

	exitMu sync.Mutex // guards exits and every exitStatus.cause; never held while waiting
	exits  []ProcessExit
}

// exitStatus is written once, by the goroutine that reaps the process, before
// it closes the process's exited channel; read err only after that.
type exitStatus struct {
	err   error
	cause string // "sigkill" or "sigterm" when the harness ended it; under exitMu
}

// ProcessExit is one end of a managed process, as the harness saw it. Cause
// is "sigkill" (Kill, Restart, a crash fault), "sigterm" (Stop) or "exited"
// (on its own: a failpoint that called os.Exit, a crash of the target's own).
type ProcessExit struct {
	PID    int       `json:"pid"`
	At     time.Time `json:"at"`
	Cause  string    `json:"cause"`
	Status string    `json:"status"`
}

// ProcessOption changes how StartProcess runs the command.
type ProcessOption func(*Process)

// WithOutput copies the process's stdout and stderr to w (e.g. a log file in
// the run directory), besides the tail kept for error messages. w must be
// safe for the process's two streams writing at once (an *os.File is).
func WithOutput(w io.Writer) ProcessOption { return func(p *Process) { p.output = w } }

// WithDir runs the command in dir.
func WithDir(dir string) ProcessOption { return func(p *Process) { p.dir = dir } }

// WithSecrets adds secret values (an API key given to the harness) that the
// Process redacts from its logs and errors, besides those it finds itself.
func WithSecrets(secrets ...string) ProcessOption {
	return func(p *Process) { p.secrets = append(p.secrets, secrets...) }
}

// Display is the command line as the Process shows it: secrets redacted.
func (p *Process) Display() string { return p.display }

// StartProcess starts `sh -c cmdline` with env appended to this process's
// environment and waits until healthURL answers: an http(s) URL must return a
// status below 500 to a GET; a bare host:port must accept a TCP connection;
// an empty healthURL is not waited for. The wait is bounded by ctx and
// ProcessStartTimeout; a process that exits first fails with
// ErrProcessExited and the tail of its output.
func StartProcess(ctx context.Context, cmdline string, env []string, healthURL string, logger *slog.Logger, opts ...ProcessOption) (*Process, error) {
	if strings.TrimSpace(cmdline) == "" {
		return nil, errors.New("process: empty command")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if healthURL != "" {
		if _, err := healthCheck(healthURL); err != nil {
			return nil, err
		}
	}
	p := &Process{cmdline: cmdline, env: append([]string(nil), env...), healthURL: healthURL, logger: logger}
	for _, o := range opts {
		o(p)
	}
	secrets := append(redact.CommandSecrets(cmdline, append(os.Environ(), env...)), p.secrets...)
	p.redact = redact.NewRedactor(secrets...)
	p.display = p.redact.Command(cmdline)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// lifelineScript runs as `sh -c lifelineScript sh CMDLINE` with the read end
// of the lifeline pipe as fd 3: it forks the lifeline (blocked reading fd 3,
// its output and input away from the command's, deaf to the SIGTERM of Stop
// so that it outlives the command), then replaces itself with `sh -c
// CMDLINE` without fd 3, so the command runs as the group leader under the
// pid the harness knows. When the read returns (the harness's end of the pipe
// closed: the harness died, or reaped the command), `kill -9 0` ends the
// whole group, the lifeline last.
const lifelineScript = `{ trap '' TERM INT HUP; read x <&3; kill -9 0; } </dev/null >/dev/null 2>&1 & exec /bin/sh -c "$1" 3<&-`

// start starts the process and waits for health; p.mu is held.
func (p *Process) start(ctx context.Context) error {
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("process: lifeline: %w", err)
	}
	cmd := exec.Command("/bin/sh", "-c", lifelineScript, "sh", p.cmdline)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.ExtraFiles = []*os.File{lifeR} // fd 3 in the child
	// Its own group (the harness kills the group), and SIGKILL when the
	// harness dies (Linux: when the thread that started it ends; Go does not
	// end threads it did not lock).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Dir = p.dir
	tail := &tailBuffer{max: tailSize}
	var out io.Writer = tail
	if p.output != nil {
		out = io.MultiWriter(tail, p.output)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.WaitDelay = time.Second // do not hang on grandchildren holding the pipes
	err = cmd.Start()
	lifeR.Close() // the child holds it now
	if err != nil {
		lifeW.Close()
		return fmt.Errorf("process: start %q: %w", p.display, p.redactErr(err))
	}
	exited, status := make(chan struct{}), &exitStatus{}
	p.cmd, p.exited, p.status, p.tail = cmd, exited, status, tail
	p.starts++
	pid := cmd.Process.Pid
	go func() {
		// Takes only exitMu: Kill and start wait on exited while holding p.mu.
		err := cmd.Wait()
		// The shell is gone: the lifeline ends whatever it left in its group.
		lifeW.Close()
		p.exitMu.Lock()
		status.err = err
		cause := status.cause
		if cause == "" {
			cause = "exited"
		}
		p.exits = append(p.exits, ProcessExit{PID: pid, At: time.Now(), Cause: cause, Status: exitText(err)})
		p.exitMu.Unlock()
		if cause == "exited" {
			p.logger.Warn("process exited on its own", "pid", pid, "status", exitText(err))
		}
		close(exited)
	}()
	p.logger.Info("process started", "pid", cmd.Process.Pid, "cmd", p.display, "start", p.starts)
	if err := p.waitHealthy(ctx, exited); err != nil {
		p.killLocked()
		return err
	}
	return nil
}

// redactErr returns err with the Process's secrets redacted from its text.
func (p *Process) redactErr(err error) error {
	if err == nil {
		return nil
	}
	if s := p.redact.String(err.Error()); s != err.Error() {
		return errors.New(s)
	}
	return err
}

// waitHealthy polls the health check until it passes, the process exits, or
// ctx or ProcessStartTimeout ends the wait.
func (p *Process) waitHealthy(ctx context.Context, exited <-chan struct{}) error {
	if p.healthURL == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ProcessStartTimeout)
	defer cancel()
	check, err := healthCheck(p.healthURL)
	if err != nil {
		return err
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		err = check(cctx)
		ccancel()
		if err == nil {
			p.logger.Info("process healthy", "pid", p.cmd.Process.Pid, "health", p.healthURL)
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("process: %q: %w before it was healthy; output: %s", p.display, ErrProcessExited, p.redact.String(p.tail.String()))
		case <-ctx.Done():
			return fmt.Errorf("process: %q not healthy at %s (last: %v): %w; output: %s", p.display, p.healthURL, p.redactErr(err), ctx.Err(), p.redact.String(p.tail.String()))
		case <-tick.C:
		}
	}
}

// healthCheck returns the check for an http(s) URL or a host:port.
func healthCheck(health string) (func(ctx context.Context) error, error) {
	if strings.HasPrefix(health, "http://") || strings.HasPrefix(health, "https://") {
		if _, err := url.Parse(health); err != nil {
			return nil, fmt.Errorf("process: health url: %w", err)
		}
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		return func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode >= 500 {
				return fmt.Errorf("health: status %d", resp.StatusCode)
			}
			return nil
		}, nil
	}
	if _, _, err := net.SplitHostPort(health); err != nil {
		return nil, fmt.Errorf("process: health %q: want an http URL or host:port: %w", health, err)
	}
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", health)
		if err != nil {
			return err
		}
		return c.Close()
	}, nil
}

// PID is the current process's id (0 before the first start).
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Starts counts how many times the process was started (1 after StartProcess).
func (p *Process) Starts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// Running reports whether the current process has not exited.
func (p *Process) Running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Exited returns a channel closed when the current process exits (by a
// Kill, or on its own: a failpoint that calls os.Exit, a crash).
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// ExitErr is the current process's exit status (as exec.Cmd.Wait returns
// it) once it has exited, and nil while it runs.
func (p *Process) ExitErr() error {
	p.mu.Lock()
	exited, status := p.exited, p.status
	p.mu.Unlock()
	if exited == nil {
		return nil
	}
	select {
	case <-exited:
		return status.err
	default:
		return nil
	}
}

// Output is the tail of the current process's stdout and stderr, secrets
// redacted.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tail == nil {
		return ""
	}
	return p.redact.String(p.tail.String())
}

// Kill sends SIGKILL to the process group and waits (bounded) until the
// process is reaped. Killing a process that already exited is not an error.
func (p *Process) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killLocked()
}

func (p *Process) killLocked() error {
	if p.cmd == nil {
		return nil
	}
	pid := p.cmd.Process.Pid
	select {
	case <-p.exited:
		return nil
	default:
	}
	p.setCause("sigkill")
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("process: kill %d: %w", pid, err)
	}
	t := time.NewTimer(processExitTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
		p.logger.Info("process killed", "pid", pid, "signal", "SIGKILL")
		return nil
	case <-t.C:
		return fmt.Errorf("process: %d still running %s after SIGKILL", pid, processExitTimeout)
	}
}

// Restart makes sure the current process is gone (SIGKILL if it still runs),
// then starts the same command again with the same environment, and waits for
// health as StartProcess does.
func (p *Process) Restart(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.killLocked(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if err := p.start(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return nil
}

// Stop ends the process for good: SIGTERM to the group, a wait bounded by
// ProcessStopTimeout, then SIGKILL.
func (p *Process) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	pid := p.cmd.Process.Pid
	p.setCause("sigterm")
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("process: stop %d: %w", pid, err)
	}
	t := time.NewTimer(ProcessStopTimeout)
	defer t.Stop()
	select {
	case <-p.exited:
		p.logger.Info("process stopped", "pid", pid, "signal", "SIGTERM")
		return nil
	case <-t.C:
	}
	return p.killLocked()
}

// setCause notes why the current process is about to end; p.mu is held.
func (p *Process) setCause(cause string) {
	p.exitMu.Lock()
	p.status.cause = cause
	p.exitMu.Unlock()
}

// Exits lists every end of the process so far, oldest first: the kills and
// stops of the harness and the exits of the target's own. A chaos run writes
// them beside the fault timeline; an "exited" cause outside a failpoint
// injection is the target crashing by itself.
func (p *Process) Exits() []ProcessExit {
	p.exitMu.Lock()
	defer p.exitMu.Unlock()
	return append([]ProcessExit(nil), p.exits...)
}

// lastExitCause is the cause of the last end of the process ("exited",
// "sigkill", "sigterm"), "" before any.
func (p *Process) lastExitCause() string {
	p.exitMu.Lock()
	defer p.exitMu.Unlock()
	if len(p.exits) == 0 {
		return ""
	}
	return p.exits[len(p.exits)-1].Cause
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.b))
	if s == "" {
		return "(none)"
	}
	return s
}
