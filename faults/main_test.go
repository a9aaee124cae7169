package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
)

// The test binary doubles as the child process of the process tests: with
// helperEnv=serve it runs helperServe instead of the tests.
const (
	helperEnv     = "FAULTS_TEST_HELPER"
	helperAddrEnv = "FAULTS_TEST_ADDR"
	// testExitFailpoint makes the helper os.Exit(7) when armed with return("exit").
	testExitFailpoint = "github.com/idscheck/idscheck/faults/test-exit"
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "serve":
		helperServe(os.Getenv(helperAddrEnv))
		return
	case "harness":
		helperHarness()
		return
	}
	SilenceToxiproxy()
	os.Exit(m.Run())
}

// helperServe is the child: "/" answers "ok pid"; "/fp" evaluates
// testExitFailpoint and exits the process if it says "exit".
func helperServe(addr string) {
	fmt.Fprintln(os.Stderr, "helper starting on", addr)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "ok %d", os.Getpid())
	})
	mux.HandleFunc("/fp", func(w http.ResponseWriter, r *http.Request) {
		if v, err := failpoint.Eval(testExitFailpoint); err == nil && v == "exit" {
			fmt.Fprintln(os.Stderr, "failpoint fired: exiting")
			os.Exit(7)
		}
		fmt.Fprint(w, "survived")
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	// Bounded: a helper never outlives its test by more than a minute.
	time.AfterFunc(time.Minute, func() { os.Exit(9) })
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
}

// Environment of the harness helper: the command it starts and the health
// URL it waits for.
const (
	helperCmdEnv    = "FAULTS_TEST_CMD"
	helperHealthEnv = "FAULTS_TEST_HEALTH"
)

// helperHarness is a harness as a child process: it starts the command of
// helperCmdEnv as a managed Process (the command's own environment makes it
// a helper server), prints "started PID", and waits to be killed (bounded:
// it exits by itself after a minute).
func helperHarness() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := []string{helperEnv + "=serve", helperAddrEnv + "=" + os.Getenv(helperAddrEnv)}
	p, err := StartProcess(ctx, os.Getenv(helperCmdEnv), env, os.Getenv(helperHealthEnv), nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	fmt.Println("started", p.PID())
	<-ctx.Done()
	p.Stop()
	os.Exit(4)
}

// shellQuote quotes s for sh -c.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// helperCmd is the command line that runs this test binary as the helper.
func helperCmd(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return shellQuote(exe)
}

// counter is a target on loopback that counts the requests reaching its
// handler and answers body.
type counter struct {
	srv  *httptest.Server
	hits atomic.Int64
	body []byte
	mu   sync.Mutex
	got  []byte // the last request body
	rds  int    // reads that returned data for the last request body
}

func newCounter(t *testing.T, body []byte) *counter {
	t.Helper()
	c := &counter{body: body}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var got []byte
		reads := 0
		buf := make([]byte, 4096)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				reads++
				got = append(got, buf[:n]...)
			}
			if err != nil {
				break
			}
		}
		c.mu.Lock()
		c.got, c.rds = got, reads
		c.mu.Unlock()
		c.hits.Add(1)
		w.Write(c.body)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *counter) addr() string { return strings.TrimPrefix(c.srv.URL, "http://") }

// waitHits waits (bounded) until the counter reaches want; it returns the last count.
func (c *counter) waitHits(want int64) int64 {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if n := c.hits.Load(); n >= want {
			return n
		}
		time.Sleep(5 * time.Millisecond)
	}
	return c.hits.Load()
}

// newNet puts a Network in front of c.
func newNet(t *testing.T, c *counter) *Network {
	t.Helper()
	n, err := NewNetwork(c.addr(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// get sends one request with a fresh connection and a client timeout.
func get(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	return post(ctx, url, timeout, "")
}

func post(ctx context.Context, url string, timeout time.Duration, body string) ([]byte, error) {
	c := &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	method := http.MethodGet
	var rd io.Reader
	if body != "" {
		method, rd = http.MethodPost, strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return b, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("status %d", resp.StatusCode)
	}
	return b, nil
}

// isTimeout reports a client timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// testCtx is a context bounded for one test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
