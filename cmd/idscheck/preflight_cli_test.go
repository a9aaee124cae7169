package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idscheck/idscheck/reports"
)

// plainWebServer answers as python3 -m http.server does in an empty
// folder: 404 with an HTML error page to every GET (GET /health too),
// 501 to every POST. health, when set, is served at /health (a web server
// with a file of that name). It counts the GET /health it was sent.
func plainWebServer(t *testing.T, health string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var probes atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/health" && r.Method == http.MethodGet {
			probes.Add(1)
			if health != "" {
				io.WriteString(w, health)
				return
			}
		}
		w.Header().Set("Content-Type", "text/html;charset=utf-8")
		status := http.StatusNotFound
		if r.Method != http.MethodGet {
			status = http.StatusNotImplemented
		}
		w.WriteHeader(status)
		io.WriteString(w, "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error response</title>\n</head>\n<body>\n<h1>Error response</h1>\n</body>\n</html>\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &probes
}

// answersEverything answers every request 200 {"id", "status"}, its
// health route too.
func answersEverything(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x1","status":"ok"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestNotTheProtocolIsExit3AtOnce (issue 28, case 3): a target that
// answered, but not as the profile's protocol does, is exit 3 in one round
// of calls, saying what it answered, printed once, with the reports of a
// stopped run (no rule verdict):
//   - a server with no /health (python3 -m http.server) as an intent or
//     ids target: one GET /health, "answered 404" (on main: 10 s of
//     probes, then "target unreachable");
//   - a server that answers every request 200 {"id", "status"}: the
//     preflight's call the protocol refuses, "answered 200" (on main it
//     passed the preflight and the run went on for minutes);
//   - a plain web server described as an http-idempotency endpoint: its
//     declared POST "answered 501" (on main every scenario ran, exit 4).
//
// The same for chaos, which on main had no preflight at all.
func TestNotTheProtocolIsExit3AtOnce(t *testing.T) {
	plain, plainProbes := plainWebServer(t, "")
	withHealth, _ := plainWebServer(t, `{"status":"ok"}`)
	hostile := answersEverything(t)
	endpoint := writeFile(t, "plain.json", `{
  "url": "`+withHealth.URL+`",
  "http_idempotency": {
    "variant": "ietf", "method": "POST", "path": "/v1/payments",
    "body": {"amount": 1250, "currency": "EUR", "reference": "{{unique}}"},
    "invalid": {"amount": -1}, "requires_key": true, "id": "id"
  }
}`)
	bound := []string{"--max-duration", "30s", "--budget", "1s", "--request-timeout", "1s", "--seed", "1"} // on main, the hostile run goes on
	chaosBound := []string{"--duration", "2s", "--seed", "1"}
	for _, tc := range []struct {
		name   string
		args   []string
		probes *atomic.Int32 // GET /health the plain server was sent: one
		says   string
	}{
		{"run intent, no /health", append([]string{"run", "--profile", "intent", "--target", plain.URL, "--api-key", "k3y-value"}, bound...), plainProbes,
			`/health answered 404, an HTML page titled "Error response"`},
		{"run ids, no /health", append([]string{"run", "--profile", "ids", "--target", plain.URL, "--api-key", "k3y-value"}, bound...), plainProbes,
			`/health answered 404, an HTML page titled "Error response"`},
		{"chaos intent, no /health", append([]string{"chaos", "--profile", "intent", "--target", plain.URL, "--api-key", "k3y-value"}, chaosBound...), plainProbes,
			`/health answered 404, an HTML page titled "Error response"`},
		{"run intent, answers everything", append([]string{"run", "--profile", "intent", "--target", hostile.URL, "--api-key", "k3y-value"}, bound...), nil,
			`(an intent id no one published) answered 200 {"id":"x1","status":"ok"}`},
		{"run ids, answers everything", append([]string{"run", "--profile", "ids", "--target", hostile.URL, "--api-key", "k3y-value"}, bound...), nil,
			`(a command_id no one sent) answered 200 {"id":"x1","status":"ok"}`},
		{"run a2a, answers everything", append([]string{"run", "--profile", "a2a", "--target", hostile.URL, "--api-key", "k3y-value"}, bound...), nil,
			`GET /a2a/queue?limit=1 answered 200 {"id":"x1","status":"ok"}`},
		{"chaos intent, answers everything", append([]string{"chaos", "--profile", "intent", "--target", hostile.URL, "--api-key", "k3y-value"}, chaosBound...), nil,
			`(an intent id no one published) answered 200 {"id":"x1","status":"ok"}`},
		{"run http-idempotency, a plain web server", append([]string{"run", "--profile", "http-idempotency", "--target-file", endpoint}, bound...), nil,
			`POST /v1/payments (a body that is not JSON) answered 501, an HTML page titled "Error response"`},
		{"chaos http-idempotency, a plain web server", append([]string{"chaos", "--profile", "http-idempotency", "--target-file", endpoint}, chaosBound...), nil,
			`POST /v1/payments (a body that is not JSON) answered 501, an HTML page titled "Error response"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.probes != nil {
				tc.probes.Store(0)
			}
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			suiteMu.Lock()
			var stdout, stderr bytes.Buffer
			code := cli(ctx, append(tc.args, "--out", out), &stdout, &stderr)
			suiteMu.Unlock()
			all := stdout.String() + stderr.String()
			if code != exitUnreachable || !strings.Contains(stdout.String(), "preflight failed") || !strings.Contains(stdout.String(), tc.says) {
				t.Fatalf("exit %d, want %d: preflight failed, saying %q\nstdout:\n%s\nstderr:\n%s", code, exitUnreachable, tc.says, stdout.String(), stderr.String())
			}
			if n := strings.Count(all, tc.says); n != 1 {
				t.Errorf("what the target answered is printed %d times, want once:\n%s", n, all)
			}
			if tc.probes != nil && tc.probes.Load() != 1 {
				t.Errorf("GET /health sent %d times: its 404 is the target's last word", tc.probes.Load())
			}
			doc, err := reports.ReadResult(out)
			if err != nil {
				t.Fatal(err)
			}
			if !doc.Preflight || len(doc.Rules) != 0 || doc.ExitCode != exitUnreachable || !strings.Contains(doc.Unreachable, tc.says) {
				t.Errorf("result.json: preflight %v, %d rules, exit %d, cause %q", doc.Preflight, len(doc.Rules), doc.ExitCode, doc.Unreachable)
			}
			if strings.Contains(all, "k3y-value") {
				t.Error("the output shows the API key")
			}
		})
	}
}
