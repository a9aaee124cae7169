package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/profiles/toy"
	"github.com/idscheck/idscheck/reports"
	"github.com/idscheck/idscheck/verdict"
)

// testRegistersToy, set in the environment, makes this test binary register
// the toy profile before it acts as idscheck (TestMain): the children of a
// toy's mutants run know it too.
const testRegistersToy = "IDSCHECK_TEST_REGISTERS_TOY"

// registerToy adds the toy profile to the registry for one test, and for
// the children it starts, and takes it out at the end.
func registerToy(t *testing.T) {
	t.Helper()
	if err := profiles.Register(toy.Profile()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { profiles.Deregister(toy.Name) })
	t.Setenv(testRegistersToy, "1")
	t.Setenv(testBinaryIsCLI, "1")
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestToyThroughTheRegistry: a profile that the registry gains in a test —
// no line of cmd names it — is listed by rules, certified by run (and its
// mutant failed by the rule it breaks), stopped by its preflight, served by
// serve, driven through faults by chaos (its mutant caught by its check),
// and its mutant killed by mutants in child processes.
func TestToyThroughTheRegistry(t *testing.T) {
	registerToy(t)
	ctx := t.Context()

	t.Run("rules", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := cli(ctx, []string{"rules", "--profile", "toy"}, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		for _, id := range []string{"TOY-1-read-back", "TOY-2-not-found"} {
			if !strings.Contains(stdout.String(), id) {
				t.Errorf("rules --profile toy lacks %s:\n%s", id, stdout.String())
			}
		}
		stderr.Reset()
		if code := cli(ctx, []string{"rules", "--profile", "nope"}, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "toy") {
			t.Errorf("an unknown profile: exit %d, and the error does not list the toy: %s", code, stderr.String())
		}
	})

	t.Run("run", func(t *testing.T) {
		for _, tc := range []struct {
			mutant string
			code   int
			want   verdict.Verdict
		}{{"", exitOK, verdict.Pass}, {toy.MutantStaleRead, exitFailed, verdict.Fail}} {
			out := t.TempDir()
			args := []string{"run", "--profile", "toy", "--out", out, "--seed", "1"}
			if tc.mutant != "" {
				args = append(args, "--mutant", tc.mutant)
			}
			var stdout, stderr bytes.Buffer
			if code := cli(ctx, args, &stdout, &stderr); code != tc.code {
				t.Fatalf("run --mutant %q: exit %d, want %d\n%s\n%s", tc.mutant, code, tc.code, stdout.String(), stderr.String())
			}
			doc, err := reports.ReadResult(out)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, e := range doc.Rules {
				if e.Rule.ID == "TOY-1-read-back" {
					got = string(e.Result.Verdict)
				}
			}
			if got != string(tc.want) {
				t.Errorf("run --mutant %q: TOY-1-read-back %s, want %s", tc.mutant, got, tc.want)
			}
		}
	})

	t.Run("no shared store", func(t *testing.T) {
		// The toy's server keeps its state in its SQLite file alone
		// (ServeCommand.SharedStore unset): --store is refused before
		// anything starts, saying why.
		for _, cmd := range []string{"run", "chaos"} {
			var stderr bytes.Buffer
			args := []string{cmd, "--profile", "toy", "--store", "postgres://u@127.0.0.1:1/x", "--out", t.TempDir()}
			if code := cli(ctx, args, io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "own SQLite file only") {
				t.Errorf("%s --store for a server without one: exit %d, want %d and the reason\n%s", cmd, code, exitUsage, stderr.String())
			}
		}
	})

	t.Run("preflight", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			health string
			status int
			code   int
			says   string
		}{
			{"a refused credential is a configuration answer", `{"ok":true}`, http.StatusUnauthorized, exitUsage, "the target refuses the API key"},
			{"a target that is not the protocol", "<html>hello</html>", http.StatusOK, exitUnreachable, "does not speak the toy profile"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.URL.Path == "/health" {
						io.WriteString(w, tc.health)
						return
					}
					w.WriteHeader(tc.status)
					io.WriteString(w, `{"error":"invalid API key"}`)
				}))
				defer srv.Close()
				out := t.TempDir()
				var stdout, stderr bytes.Buffer
				code := cli(ctx, []string{"run", "--profile", "toy", "--target", srv.URL, "--api-key", "wrong-key", "--out", out}, &stdout, &stderr)
				if code != tc.code || !strings.Contains(stdout.String(), tc.says) {
					t.Fatalf("exit %d (want %d); stdout does not say %q:\n%s\n%s", code, tc.code, tc.says, stdout.String(), stderr.String())
				}
				doc, err := reports.ReadResult(out)
				if err != nil {
					t.Fatal(err)
				}
				if len(doc.Rules) != 0 || !doc.Preflight || doc.ExitCode != tc.code {
					t.Errorf("the report holds %d rule verdicts, preflight %v, exit %d", len(doc.Rules), doc.Preflight, doc.ExitCode)
				}
				for _, f := range []string{reports.ResultFile, reports.JUnitFile, reports.HTMLFile} {
					b, _ := os.ReadFile(filepath.Join(out, f))
					if strings.Contains(string(b), "wrong-key") {
						t.Errorf("%s holds the credential", f)
					}
				}
			})
		}
	})

	t.Run("serve", func(t *testing.T) {
		sctx, cancel := context.WithCancel(ctx)
		var stdout syncBuffer
		done := make(chan int, 1)
		go func() {
			done <- cli(sctx, []string{"serve", "--profile", "toy", "--addr", "127.0.0.1:0"}, &stdout, io.Discard)
		}()
		var base string
		for deadline := time.Now().Add(10 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, rest, ok := strings.Cut(stdout.String(), "listening on "); ok {
				base = strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0])
			}
		}
		if base == "" {
			cancel()
			t.Fatalf("serve --profile toy printed no address: %q", stdout.String())
		}
		resp, err := http.Get(base + "/items/never")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET of an unknown item: %d, want 404", resp.StatusCode)
		}
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("serve ended with exit %d", code)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not stop when its context ended")
		}
	})

	t.Run("chaos", func(t *testing.T) {
		for _, tc := range []struct {
			mutant string
			code   int
			says   string
		}{{"", exitOK, "no anomaly"}, {toy.MutantStaleRead, exitFailed, "TOY-1-read-back"}} {
			out := t.TempDir()
			args := []string{"chaos", "--profile", "toy", "--duration", "3s", "--seed", "1", "--faults", "latency,partition", "--workers", "4", "--out", out}
			if tc.mutant != "" {
				args = append(args, "--mutant", tc.mutant)
			}
			var stdout, stderr bytes.Buffer
			code := cli(ctx, args, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.says) {
				t.Errorf("chaos --mutant %q: exit %d (want %d), output lacks %q:\n%s\n%s", tc.mutant, code, tc.code, tc.says, stdout.String(), stderr.String())
			}
			if _, err := os.Stat(filepath.Join(out, reports.HTMLFile)); err != nil {
				t.Errorf("chaos --mutant %q wrote no report: %v", tc.mutant, err)
			}
		}
	})

	t.Run("mutants", func(t *testing.T) {
		out := t.TempDir()
		var stdout, stderr bytes.Buffer
		code := cli(ctx, []string{"mutants", "--profile", "toy", "--parallel", "2", "--out", out}, &stdout, &stderr)
		if code != exitOK || !strings.Contains(stdout.String(), "1 of 1 mutants killed") {
			t.Fatalf("mutants --profile toy: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
		}
		if _, err := os.Stat(filepath.Join(out, toy.MutantStaleRead, "index.html")); err != nil {
			t.Errorf("no report of the mutant's run: %v", err)
		}
	})
}
