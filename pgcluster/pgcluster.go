// Package pgcluster starts throwaway PostgreSQL clusters on loopback:
// initdb and pg_ctl in a temporary folder, a free port on 127.0.0.1, the
// unix socket in that folder. idscheck starts one for a run of replicas
// (idscheck run|chaos --store local) and restarts it as a fault
// (Cluster.Restart); the tests start one per package through pgtest. It
// names no protocol and imports the standard library alone: it drives the
// PostgreSQL programs, it speaks no SQL.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Install is the command that installs the PostgreSQL programs here
// (Debian 12).
const Install = "apt-get install -y postgresql-15"

// ErrNotInstalled: initdb or pg_ctl is not found.
var ErrNotInstalled = errors.New("postgresql is not installed (initdb and pg_ctl not found on PATH nor in /usr/lib/postgresql/*/bin); install it: " + Install)

// Cluster is one running PostgreSQL cluster. Its URL names the database
// "postgres" as the superuser "postgres", with no password (trust on
// loopback only).
type Cluster struct {
	Dir  string // the temporary folder: data/, the socket, log
	Port int
	URL  string

	bin     string // the folder holding initdb, pg_ctl, postgres
	cred    *syscall.Credential
	durable bool
}

// Options of a cluster.
type Options struct {
	// Durable keeps PostgreSQL's defaults: fsync on, each commit flushed
	// before it is acknowledged, so that a crash (Restart) loses nothing
	// acknowledged. false, for tests: no fsync, commits acknowledged
	// before they are flushed (Restart may lose the last ones;
	// RestartFast does not).
	Durable bool
}

// Binaries returns the folder holding initdb and pg_ctl: on PATH first,
// else the newest /usr/lib/postgresql/N/bin.
func Binaries() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Dir(r), nil
			}
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(d, "initdb")); err == nil && !st.IsDir() {
			return d, nil
		}
	}
	return "", ErrNotInstalled
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start creates and starts a cluster in a new temporary folder, for tests
// (not Durable).
func Start(ctx context.Context) (*Cluster, error) { return StartWith(ctx, Options{}) }

// StartWith creates and starts a cluster in a new temporary folder.
// PostgreSQL refuses to run as root: as root, the cluster runs as the user
// "postgres" (the package's), which then owns the folder.
func StartWith(ctx context.Context, o Options) (*Cluster, error) {
	bin, err := Binaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgcluster-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{Dir: dir, bin: bin, durable: o.Durable}
	fail := func(err error) (*Cluster, error) {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fail(fmt.Errorf("running as root, and no user postgres to run the cluster as: %w", err))
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return fail(err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fail(err)
	}
	if out, err := c.command(ctx, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync").CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %w: %s", err, lastLines(out)))
	}
	var lastErr error
	for range 3 { // a port found free can be taken before postgres binds it
		port, err := freePort()
		if err != nil {
			return fail(err)
		}
		c.Port = port
		if lastErr = c.pgctl(ctx, "start"); lastErr == nil {
			c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
			return c, nil
		}
	}
	return fail(lastErr)
}

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

// pgctl runs pg_ctl start, restart or stop and waits (at most 30 s) for it.
func (c *Cluster) pgctl(ctx context.Context, action string, extra ...string) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", c.Port, c.Dir)
	if !c.durable {
		opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	args := []string{action, "-D", c.data(), "-w", "-t", "30", "-l", filepath.Join(c.Dir, "log")}
	if action != "stop" {
		args = append(args, "-o", opts)
	}
	args = append(args, extra...)
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	if out, err := c.command(ctx, "pg_ctl", args...).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.Dir, "log"))
		return fmt.Errorf("pg_ctl %s: %w: %s; log: %s", action, err, lastLines(out), lastLines(log))
	}
	return nil
}

// Restart stops the cluster at once, as a crash does (every connection is
// cut; of a Durable cluster, what was acknowledged stays), and starts it
// again on the same port.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.pgctl(ctx, "stop", "-m", "immediate"); err != nil {
		return err
	}
	return c.pgctl(ctx, "start")
}

// RestartFast is pg_ctl restart (its fast mode): every client is cut and
// its open transaction rolled back, what was acknowledged is written out
// (a cluster not Durable runs with synchronous_commit=off, so an
// immediate stop, as Restart does, may lose the last commits it
// acknowledged), and the
// cluster starts again on the same port.
func (c *Cluster) RestartFast(ctx context.Context) error {
	return c.pgctl(ctx, "restart", "-m", "fast")
}

// Stop stops the cluster and removes its folder.
func (c *Cluster) Stop() error {
	err := c.pgctl(context.Background(), "stop", "-m", "immediate")
	return errors.Join(err, os.RemoveAll(c.Dir))
}

// DatabaseURL is the URL of database name on the cluster.
func (c *Cluster) DatabaseURL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, name)
}

// CreateDatabase creates database name with psql (names are
// [a-z0-9_] only) and returns its URL.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return "", fmt.Errorf("pgcluster: database name %q: want [a-z0-9_]", name)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := c.command(ctx, "psql", "-X", "-q", "-h", c.Dir, "-p", strconv.Itoa(c.Port), "-U", "postgres",
		"-d", "postgres", "-v", "ON_ERROR_STOP=1", "-c", "CREATE DATABASE "+name).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("pgcluster: create database %s: %w: %s", name, err, lastLines(out))
	}
	return c.DatabaseURL(name), nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, " | ")
}
