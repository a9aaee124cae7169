package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// redisServer is a redis-server the driver started on loopback, with no
// persistence (--save ” --appendonly no).
type redisServer struct {
	url  string
	addr string
	cmd  *exec.Cmd
	done chan struct{}
}

func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server is not installed (apt-get install -y redis-server): %v", err)
	}
	// redis-server changes into --dir before it opens --logfile: both absolute.
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--logfile", filepath.Join(dir, fmt.Sprintf("redis-%d.log", port)))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	errPath := filepath.Join(dir, fmt.Sprintf("redis-%d.stderr", port))
	ef, err := os.Create(errPath)
	if err != nil {
		return nil, err
	}
	defer ef.Close()
	cmd.Stdout, cmd.Stderr = ef, ef
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	rs := &redisServer{url: fmt.Sprintf("redis://127.0.0.1:%d", port), addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(rs.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if err := rs.command("PING", "+PONG"); err == nil {
			return rs, nil
		}
		select {
		case <-rs.done:
			b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("redis-%d.log", port)))
			e, _ := os.ReadFile(errPath)
			return nil, fmt.Errorf("redis-server exited at start: %s", lastLines(append(e, b...), 3))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			rs.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer PING within 20 s", rs.addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// command sends a one-word command and wants the reply want.
func (rs *redisServer) command(word, want string) error {
	c, err := net.DialTimeout("tcp", rs.addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "*1\r\n$%d\r\n%s\r\n", len(word), word); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(line); got != want {
		return fmt.Errorf("redis %s answered %q", word, got)
	}
	return nil
}

func (rs *redisServer) flushAll() error { return rs.command("FLUSHALL", "+OK") }

func (rs *redisServer) stop() {
	syscall.Kill(-rs.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-rs.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-rs.cmd.Process.Pid, syscall.SIGKILL)
		<-rs.done
	}
}
