package httpidem

import (
	"github.com/idscheck/idscheck/pgtest"

	"bufio"
	"bytes"
	"context"
	"encoding/json"
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
)

// TestMain doubles as the server process of the crash test: with
// HTTPIDEM_TEST_SERVE_DB set, the test binary serves that database (with
// the failpoints of GO_FAILPOINTS) instead of running tests.
func TestMain(m *testing.M) {
	if db := os.Getenv("HTTPIDEM_TEST_SERVE_DB"); db != "" {
		if err := serveForTest(db, os.Getenv("HTTPIDEM_TEST_SINK"), os.Getenv("HTTPIDEM_TEST_VARIANT")); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(pgtest.Main(m))
}

func serveForTest(db, sinkURL, variant string) error {
	srv, err := Open(context.Background(), Config{DBPath: db, SinkURL: sinkURL, Variant: variant, Callers: []string{tokA, tokB},
		SinkTimeout: 2 * time.Second})
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
	cmd     *exec.Cmd
	base    string
	variant string
	hc      *http.Client
}

// startChild runs the test binary as a server on db; env adds variables.
func startChild(t *testing.T, db, sinkURL, variant string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{"HTTPIDEM_TEST_SERVE_DB=" + db, "HTTPIDEM_TEST_SINK=" + sinkURL,
		"HTTPIDEM_TEST_VARIANT=" + variant}, env...)...)
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
	c := &child{cmd: cmd, variant: variant, hc: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(c.kill)
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

// exitCode waits (bounded) for the process to end by itself.
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

// pay posts a payment with the variant's key.
func (c *child) pay(key string, b map[string]any) (resp, error) {
	if c.variant == VariantT0 {
		b = with(b, "paymentRef", key)
	}
	req, err := http.NewRequest("POST", c.base+pathPayments, bytes.NewReader(mustJSON(b)))
	if err != nil {
		return resp{}, err
	}
	req.Header.Set("Authorization", "Bearer "+tokA)
	switch c.variant {
	case VariantIETF:
		req.Header.Set(headerKey, sfString(key))
	case VariantStripe:
		req.Header.Set(headerKey, key)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	rb, err := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, rb}, err
}

func (c *child) list(t *testing.T, reference string) []json.RawMessage {
	t.Helper()
	req, _ := http.NewRequest("GET", c.base+pathPayments+"?reference="+reference, nil)
	req.Header.Set("Authorization", "Bearer "+tokA)
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct{ Data []json.RawMessage }
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil || res.StatusCode != 200 {
		t.Fatalf("list: %d %v", res.StatusCode, err)
	}
	return doc.Data
}

// TestCrash kills the server (os.Exit(137) at a failpoint, a real process)
// between the sink's payment and its commit, or between the commit and the
// reply, restarts it on the same database, and proves that the retry
// answers the one payment, listed once, the sink having paid once.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs server processes")
	}
	for _, variant := range []string{VariantIETF, VariantT0, VariantStripe} {
		for _, fp := range Failpoints() {
			t.Run(variant+"/"+fp[strings.LastIndex(fp, "/")+1:], func(t *testing.T) {
				sink := newFakeSink(t)
				db := filepath.Join(t.TempDir(), "pay.db")
				p := startChild(t, db, sink.ts.URL, variant, "GO_FAILPOINTS="+fp+`=return("exit")`)
				if r, err := p.pay("crash", body("inv-crash")); err == nil {
					t.Fatalf("the crashing server answered %s", r)
				}
				if code := p.exitCode(t); code != 137 {
					t.Fatalf("exit code %d, want 137", code)
				}
				k := sinkKey(tokA, "crash")
				if n := sink.effectsOf(k); n != 1 {
					t.Fatalf("effects before the restart: %d", n)
				}
				p2 := startChild(t, db, sink.ts.URL, variant)
				first, err := p2.pay("crash", body("inv-crash"))
				if err != nil || first.status != 201 || !first.replayed() {
					t.Fatalf("retry after the restart: %s %v", first, err)
				}
				again, err := p2.pay("crash", body("inv-crash"))
				if err != nil || !bytes.Equal(again.body, first.body) {
					t.Fatalf("second retry: %s %v", again, err)
				}
				listed := p2.list(t, "inv-crash")
				if len(listed) != 1 || !bytes.Equal(listed[0], first.body) {
					t.Fatalf("payments %s, want [%s]", listed, first.body)
				}
				if sink.postsOf(k) != 1 || sink.effectsOf(k) != 1 {
					t.Fatalf("%d sink calls, %d effects, want 1 and 1", sink.postsOf(k), sink.effectsOf(k))
				}
			})
		}
	}
}
