package ids

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/pgtest"
)

// TestMain doubles as the server process of the crash test: with
// IDS_TEST_SERVE_DB set, the test binary serves that database (with the
// failpoints of GO_FAILPOINTS) instead of running tests.
func TestMain(m *testing.M) {
	if db := os.Getenv("IDS_TEST_SERVE_DB"); db != "" {
		if err := serveForTest(db, os.Getenv("IDS_TEST_SERVE_SINK"), os.Getenv("IDS_TEST_SERVE_STORE")); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(pgtest.Main(m))
}

func serveForTest(db, sinkURL, store string) error {
	srv, err := Open(context.Background(), Config{DBPath: db, Store: store, ReplicaID: "r1", SinkURL: sinkURL, SinkTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println("listening on http://" + ln.Addr().String())
	return http.Serve(ln, srv.Handler())
}

type child struct {
	cmd  *exec.Cmd
	base string
}

// startChild runs the test binary as a server on db; env adds variables.
func startChild(t *testing.T, db, sinkURL string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{"IDS_TEST_SERVE_DB=" + db, "IDS_TEST_SERVE_SINK=" + sinkURL}, env...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
		io.Copy(io.Discard, out)
	}()
	c := &child{cmd: cmd}
	t.Cleanup(func() { c.kill() })
	select {
	case c.base = <-addr:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("the server process did not start")
		return nil
	}
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Kill()
		c.cmd.Wait()
	}
}

// exitCode waits for the process to end by itself.
func (c *child) exitCode(t *testing.T) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- c.cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	case <-time.After(20 * time.Second):
		t.Fatal("the server process did not crash")
		return 0
	}
}

func (c *child) post(body []byte) (int, http.Header, []byte, error) {
	res, err := http.Post(c.base+"/commands", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b, err
}

func (c *child) status(id string) string {
	res, err := http.Get(c.base + "/commands/" + id)
	if err != nil {
		return err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestCrash kills the server (os.Exit(137) at a failpoint, a real process)
// between the effect and its commit, or between the commit and the reply,
// restarts it on the same database and proves that the command ends
// executed with exactly one effect at the sink.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs server processes")
	}
	crashTest(t, func(*testing.T) string { return "" })
}

// crashTest is TestCrash over the store store gives ("": a SQLite file).
func crashTest(t *testing.T, store func(*testing.T) string) {
	for _, c := range []struct {
		name, failpoint string
		env             map[string]any
		mayAnswer       bool // the reply may leave before the crash (S2: the dispatcher crashes)
		posts           int  // POSTs the sink sees in all
	}{
		{"note.add effect before commit", FailpointAfterEffectBeforeCommit, note("crash"), false, 1},
		{"payment.capture effect before commit", FailpointAfterEffectBeforeCommit, payment(4200), false, 2},
		{"refund.issue dispatcher effect before commit", FailpointAfterEffectBeforeCommit, refund(4200), true, 1},
		{"note.add commit before reply", FailpointAfterCommitBeforeReply, note("crash"), false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink := newFakeSink(t)
			db := filepath.Join(t.TempDir(), "ids.db")
			st := store(t)
			serveOn := "IDS_TEST_SERVE_STORE=" + st
			body := mustJSON(c.env)
			env, _, err := parseEnvelope(body)
			if err != nil {
				t.Fatal(err)
			}
			key := env.key("")
			p := startChild(t, db, sink.ts.URL, serveOn, "GO_FAILPOINTS="+c.failpoint+`=return("exit")`)
			code, _, b, err := p.post(body)
			if err == nil && !(c.mayAnswer && code == 201) {
				t.Fatalf("the crashing server answered %d %s", code, b)
			}
			if code := p.exitCode(t); code != 137 {
				t.Fatalf("exit code %d, want 137", code)
			}
			if n := sink.effectsOf(key); n != 1 {
				t.Fatalf("effects before the restart: %d", n)
			}
			p2 := startChild(t, db, sink.ts.URL, serveOn)
			eventually(t, 15*time.Second, "the restarted server finishes the command", func() bool {
				return strings.Contains(p2.status("cmd-1"), `"status":"executed"`) && outboxDrained(t, db, st)
			})
			code, h, b, err := p2.post(mustJSON(c.env))
			if err != nil || code != 201 || h.Get(hdrDecision) != decReplayed {
				t.Fatalf("duplicate after the restart: %d %q %s %v", code, h.Get(hdrDecision), b, err)
			}
			if sink.effectsOf(key) != 1 || sink.postsOf(key) != c.posts {
				t.Fatalf("effects %d POSTs %d, want 1 effect of %d POSTs", sink.effectsOf(key), sink.postsOf(key), c.posts)
			}
		})
	}
}

func outboxDrained(t *testing.T, path, store string) bool {
	db, err := sql.Open("sqlite", dsn(path, true))
	if store != "" {
		db, err = sql.Open("pgx", store)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM outbox WHERE state <> 'sent'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 0
}

// TestOpensAnOutboxOfAnEarlierVersion: a database file whose outbox was
// made before its rows were claimed (no owner, no lease_until) opens, and
// its outbox dispatches.
func TestOpensAnOutboxOfAnEarlierVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"owner", "lease_until"} {
		if _, err := db.Exec(`ALTER TABLE outbox DROP COLUMN ` + col); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	e := newEnv(t, "", func(c *Config) { c.DBPath = path })
	if r := e.send(refund(5)); r.status >= 300 {
		t.Fatalf("a refund (outbox) on the upgraded file: %s", r)
	}
}
