package atp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/pgtest"
	"github.com/idscheck/idscheck/sut/atp/fakerail"
)

// TestMain doubles as the server process of the crash test: with
// ATP_TEST_SERVE_DB set, the test binary serves that database (with the
// failpoints of GO_FAILPOINTS) instead of running tests.
func TestMain(m *testing.M) {
	if db := os.Getenv("ATP_TEST_SERVE_DB"); db != "" {
		if err := serveForTest(db, os.Getenv("ATP_TEST_SERVE_RAIL"), os.Getenv("ATP_TEST_SWEEP")); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(pgtest.Main(m))
}

var crashSiteSeed = bytes.Repeat([]byte{0x5a}, 32)

func serveForTest(db, railURL, sweep string) error {
	every := time.Hour
	if sweep != "" {
		d, err := time.ParseDuration(sweep)
		if err != nil {
			return err
		}
		every = d
	}
	srv, err := Open(context.Background(), Config{DBPath: db, RailURL: railURL, SiteKeySeed: crashSiteSeed,
		ReconcileInterval: every, RailTimeout: 2 * time.Second})
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
	hc   *http.Client
}

// startChild runs the test binary as a server on db; env adds variables.
func startChild(t *testing.T, db, railURL string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), append([]string{"ATP_TEST_SERVE_DB=" + db, "ATP_TEST_SERVE_RAIL=" + railURL}, env...)...)
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
	c := &child{cmd: cmd, hc: &http.Client{Timeout: 10 * time.Second}}
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

func (c *child) do(method, path string, body []byte, hdr ...string) (resp, error) {
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return resp{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return resp{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}, err
}

func (c *child) must(t *testing.T, method, path string, body []byte, hdr ...string) resp {
	t.Helper()
	r, err := c.do(method, path, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// TestCrash kills the server (os.Exit(137) at a failpoint, a real process)
// between the rail's charge and its commit (in an execute, in the sweep,
// in a callback) or between the commit and the reply, restarts it on the
// same database and proves that the row ends settled with one receipt and
// exactly one charge at the rail, its state never moving back.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs server processes")
	}
	for _, c := range []struct {
		name, failpoint string
		sweep           string // the crashing server's sweep period
		loseConfirm     bool   // the confirm's answer is lost: the sweep or the callback finds the charge
		callback        bool
	}{
		{"execute charge before commit", FailpointAfterChargeBeforeCommit, "", false, false},
		{"execute commit before reply", FailpointAfterCommitBeforeReply, "", false, false},
		{"sweep charge before commit", FailpointAfterChargeBeforeCommit, "100ms", true, false},
		{"callback charge before commit", FailpointAfterChargeBeforeCommit, "", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rail := fakerail.New()
			railTS := httptest.NewServer(rail)
			defer railTS.Close()
			db := filepath.Join(t.TempDir(), "atp.db")
			env := []string{"GO_FAILPOINTS=" + c.failpoint + `=return("exit")`}
			if c.sweep != "" {
				env = append(env, "ATP_TEST_SWEEP="+c.sweep)
			}
			p := startChild(t, db, railTS.URL, env...)
			agent := ed25519.NewKeyFromSeed(agentSeed)
			reg := mustJSON(map[string]any{"public_key": map[string]any{"kty": "OKP", "crv": "Ed25519",
				"x": b64.EncodeToString(agent.Public().(ed25519.PublicKey))}})
			if r := p.must(t, "PUT", pathAgents+"agt_1", reg); r.status != 201 {
				t.Fatalf("register: %s", r)
			}
			k := key("crash")
			in := signIntent(map[string]any{"intent_id": "int_crash", "agent_id": "agt_1", "nonce": "n_crash", "amount": 4200,
				"currency": "EUR", "payee": "merchant_42", "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, agent)
			if r := p.must(t, "POST", pathAuthorize, in, headerKey, k); r.status != 200 {
				t.Fatalf("authorize: %s", r)
			}
			if c.loseConfirm {
				rail.LoseConfirms(1)
			}
			if c.callback {
				rail.SetCallback(p.base)
			}
			r, err := p.do("POST", pathExecute, mustJSON(map[string]any{"intent_id": "int_crash"}), headerKey, k)
			switch {
			case c.loseConfirm && err == nil && r.status != 202:
				// The sweep or the callback crashes the server, before or
				// after the execute's 202 leaves.
				t.Fatalf("execute with its confirm lost: %s", r)
			case !c.loseConfirm && err == nil:
				t.Fatalf("the crashing server answered %s", r)
			}
			if code := p.exitCode(t); code != 137 {
				t.Fatalf("exit code %d, want 137", code)
			}
			rail.SetCallback("")
			if n := rail.Charges("int_crash"); n != 1 {
				t.Fatalf("charges before the restart: %d", n)
			}
			p2 := startChild(t, db, railTS.URL)
			var settled resp
			eventually(t, 15*time.Second, "the restarted server settles the row", func() bool {
				settled = p2.must(t, "GET", pathIntents+"int_crash", nil, headerKey, k)
				return settled.status == 200 && settled.tx(t).State == stateSettled
			})
			x := settled.tx(t)
			if !x.hasReceipt() {
				t.Fatalf("settled without a receipt: %s", settled)
			}
			for range 2 {
				if r := p2.must(t, "POST", pathExecute, mustJSON(map[string]any{"intent_id": "int_crash"}), headerKey, k); r.status != 200 ||
					!bytes.Equal(r.body, settled.body) {
					t.Fatalf("execute after the restart: %s, want %s", r, settled.body)
				}
			}
			if v := p2.must(t, "POST", pathVerify, x.Receipt).json(t); v["valid"] != true {
				t.Fatalf("the receipt does not verify: %v", v)
			}
			if rail.Charges("int_crash") != 1 || rail.Created("int_crash") != 1 {
				t.Fatalf("%d charges of %d payment intents, want 1 of 1", rail.Charges("int_crash"), rail.Created("int_crash"))
			}
			p2.kill()
			hist := states(t, db, "int_crash", k)
			monotonic(t, hist)
			if strings.Join(hist, ",") != "created,authorized,executing,executed,settled" {
				t.Fatalf("history %v", hist)
			}
		})
	}
}
