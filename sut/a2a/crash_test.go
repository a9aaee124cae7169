package a2a

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idscheck/idscheck/pgtest"
	"github.com/idscheck/idscheck/sut/internal/pgstore"
)

// TestMain doubles as the queue process of the crash tests: with
// A2A_TEST_SERVE_DB set, the test binary serves that database (with the
// failpoints of GO_FAILPOINTS) instead of running tests.
func TestMain(m *testing.M) {
	if db := os.Getenv("A2A_TEST_SERVE_DB"); db != "" {
		c := Config{DBPath: db, APIKey: testKey}
		if pgstore.IsPostgres(db) {
			c = Config{Store: db, ReplicaID: "child", APIKey: testKey}
		}
		srv, err := Open(context.Background(), c)
		if err == nil {
			var ln net.Listener
			if ln, err = net.Listen("tcp", "127.0.0.1:0"); err == nil {
				fmt.Println("listening on http://" + ln.Addr().String())
				err = http.Serve(ln, srv.Handler())
			}
		}
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	os.Exit(pgtest.Main(m))
}

// startChild runs the test binary as the queue on db (a SQLite file or a
// PostgreSQL URL) and returns an env
// that talks to it; env adds variables.
func startChild(t *testing.T, db string, env ...string) (*testEnv, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{"A2A_TEST_SERVE_DB=" + db}, env...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				line <- u
				return
			}
		}
		close(line)
	}()
	select {
	case u, ok := <-line:
		if !ok {
			t.Fatal("the child exited before listening")
		}
		return &testEnv{t: t, base: u, clock: &fakeClock{}}, cmd
	case <-time.After(20 * time.Second):
		t.Fatal("the child did not listen within 20 s")
	}
	return nil, nil
}

// TestCrashAfterLeaseCommitNoRedelivery kills the queue (os.Exit(137)
// at the failpoint) after a lease is committed and before it is
// answered: restarted on the same file, the task is in_flight, leased to
// no one else, attempt 1; only the retry gate (enabled) or a repair
// queues it again.
func TestCrashAfterLeaseCommitNoRedelivery(t *testing.T) {
	db := testDB(t)
	e, cmd := startChild(t, db, `GO_FAILPOINTS=`+FailpointAfterLeaseCommit+`=return("exit")`)
	r := e.agent("r")
	id := taskID(e.enqueue(task(e.agent("s"), r, "k", SafetyIdempotent, str("crash-1"))))
	req, _ := http.NewRequest("POST", e.base+"/a2a/lease", strings.NewReader(`{"recipient":"`+r+`"}`))
	req.Header.Set("X-API-KEY", testKey)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the lease was answered %d: the failpoint did not crash the queue", res.StatusCode)
	}
	cmd.Wait()
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || st.ExitStatus() != 137 {
		t.Fatalf("the child ended %v, want exit 137", cmd.ProcessState)
	}
	e2, _ := startChild(t, db)
	e2.n = e.n
	if _, st := e2.lease(r); st != 204 {
		t.Fatalf("after the restart the leased task was leased again (%d)", st)
	}
	if s := e2.status(id); s["state"] != StateInFlight || num(s["attempt"]) != 1 {
		t.Fatalf("after the restart: %v", s)
	}
	rep := e2.retry(map[string]any{"enabled": true, "min_lease_age_ms": 0, "scan_limit": 1000})
	if !contains(ids(rep["requeued"]), id) {
		t.Fatalf("the gate did not requeue the stale idempotent task: %v", rep)
	}
	if l, st := e2.lease(r); st != 200 || taskID(l) != id || num(l["attempt"]) != 2 {
		t.Fatalf("the retry: %d %v", st, l)
	}
}

// TestCacheSurvivesKillAndCompaction: a cached result replays after
// SIGKILL, restart and compaction.
func TestCacheSurvivesKillAndCompaction(t *testing.T) {
	db := testDB(t)
	e, cmd := startChild(t, db)
	s, r := e.agent("s"), e.agent("r")
	id := taskID(e.enqueue(task(s, r, "k", SafetyIdempotent, str("cache-1"))))
	e.lease(r)
	if p := e.do("POST", "/a2a/tasks/"+id+"/result", map[string]any{"status": "completed", "content": map[string]any{"n": 1}}); p.status != 200 {
		t.Fatal(p)
	}
	e.do("POST", "/a2a/results/drain", map[string]any{"sender": s})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	e2, _ := startChild(t, db)
	if c := e2.do("POST", "/a2a/compact", nil).json(); num(c["dropped"]) != 1 {
		t.Fatalf("compact: %v", c)
	}
	again := e2.enqueue(task(s, r, "k", SafetyIdempotent, str("cache-1")))
	if again["state"] != StateResultPending {
		t.Fatalf("after kill, restart and compaction a duplicate is %v", again)
	}
	if res, _ := again["result"].(map[string]any); res["replayed"] != true {
		t.Fatalf("result %v", again["result"])
	}
}
