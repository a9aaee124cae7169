package intent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzDecodeIntent: decoding never panics; a rejection is a 400 with an
// invalid_* code (or 413 payload_too_large); an acceptance is within every
// limit of §4.1; the canonical hash ignores key order and whitespace.
func FuzzDecodeIntent(f *testing.F) {
	for _, s := range []string{
		`{"goal":"g","payload":1}`,
		`{"goal":"send","payload":{"m":"hi"},"namespace":"a.b-c_d","visibility":"public","priority":1000,"delay":1.5,"max_attempts":20,"backoff_base":1,"target_worker":"w","required_capability":"gpu"}`,
		`{"goal":"","payload":null}`, `[]`, `null`, `{"goal":"g","payload":1,"priority":1e3}`, `{"goal":"g","payload":1,"priority":"5"}`,
		`{"goal":"\u00e9","payload":"x","delay":-0}`, `{"goal":"g","payload":1} x`, `{"payload":1,"goal":"g","goal":"h"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := decodeIntent(body, true); err != nil {
			var he *httpError
			if !errors.As(err, &he) || he.status != 400 && he.status != 413 {
				t.Fatalf("rejection under null-payload=missing: %v", err)
			}
		}
		n, err := decodeIntent(body, false)
		if err != nil {
			var he *httpError
			if !errors.As(err, &he) {
				t.Fatalf("error without status: %v", err)
			}
			if !(he.status == 400 && strings.HasPrefix(he.code, "invalid_")) && !(he.status == 413 && he.code == codePayloadTooLarge) {
				t.Fatalf("rejection %d %s", he.status, he.code)
			}
			return
		}
		if l := utf8.RuneCountInString(n.goal); l < 1 || l > maxGoalLen {
			t.Fatalf("goal length %d", l)
		}
		if !validNamespace(n.namespace) || (n.visibility != "private" && n.visibility != "public") {
			t.Fatalf("namespace %q visibility %q", n.namespace, n.visibility)
		}
		if n.priority < minPriority || n.priority > maxPriority || n.maxAttempts < minMaxAttempts || n.maxAttempts > maxMaxAttempts {
			t.Fatalf("priority %d max_attempts %d", n.priority, n.maxAttempts)
		}
		if n.delay < 0 || n.backoffBase < minBackoffBase || n.backoffBase > maxBackoffBase {
			t.Fatalf("delay %v backoff %v", n.delay, n.backoffBase)
		}
		if !json.Valid(n.payload) || len(n.payload) > maxPayloadBytes {
			t.Fatalf("payload %q", n.payload)
		}
		var v any
		if json.Unmarshal(body, &v) == nil {
			again, _ := json.MarshalIndent(v, "", "  ")
			if canonicalHash(again) != canonicalHash(body) && !strings.Contains(string(body), "e") && !strings.Contains(string(body), ".") {
				t.Fatalf("canonical hash differs after re-encoding")
			}
		}
	})
}

// handlerFuzz is the state of FuzzHandler in one fuzz process: two servers
// (the default readings and the alternate ones) on one fake clock that
// stands still, so that a timestamp can be valid.
type handlerFuzz struct {
	srv [2]*Server
	clk *fakeClock
	n   atomic.Int64 // fixtures made
}

// fixture publishes and claims one intent on srv with the main key, in a
// namespace of its own: {id} and {token} of a fuzz input.
func (h *handlerFuzz) fixture(t *testing.T, srv *Server) (id, token string) {
	t.Helper()
	ns := fmt.Sprintf("fz%d", h.n.Add(1))
	do := func(method, target, body string) []byte {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.Header.Set(hdrAPIKey, testSecret)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code >= 300 {
			t.Fatalf("fixture %s %s: %d %s", method, target, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	do("POST", pathIntent, `{"goal":"fz","payload":{"n":1},"namespace":"`+ns+`","max_attempts":2}`)
	var c claimResponse
	if err := json.Unmarshal(do("POST", pathClaim+"?namespace="+ns, ""), &c); err != nil || c.ClaimToken == "" {
		t.Fatalf("fixture claim: %v %+v", err, c)
	}
	return c.ID, c.ClaimToken
}

// FuzzHandler: whatever a client sends, the server answers below 500 and
// does not panic, and every error answer has the §11 shape. The fuzzer
// writes the method, the request target, header lines ("Name: value", one
// a line) and the body; net/http's own parser (http.ReadRequest, as the
// server reads a connection) makes them a request; what it refuses, a
// server never sees. The main key is sent unless the headers name
// X-API-KEY; admin adds the admin token; alt picks the server that follows
// the alternate readings. In the target, the headers and the body, {id} and
// {token} become the id and claim token of an intent just claimed, {ts} the
// server's time; an X-Signature of {sig} becomes the valid signature of the
// request. The servers live as long as the fuzz process: an input that
// fails only after others is still a bug, but may need them to reproduce.
func FuzzHandler(f *testing.F) {
	type in struct {
		method, target, hdrs, body string
		admin, alt                 bool
	}
	signed := "X-Timestamp: {ts}\nX-Nonce: n-{token}\nX-Signature: {sig}"
	for _, s := range []in{
		{"GET", "/health", "", "", false, false},
		{"POST", "/intent", "", `{"goal":"g","payload":{"a":[1,2]},"priority":5,"delay":0.5,"max_attempts":20,"backoff_base":3600}`, false, false},
		{"POST", "/intent", "Idempotency-Key: k1", `{"goal":"g","payload":1}`, false, true},
		{"POST", "/intent", "", `{"goal":"g","payload":1,"priority":1e400,"delay":-0}`, false, false},
		{"POST", "/intent", "", `{"goal":"g","payload":null}`, false, true},
		{"POST", "/intent", "Content-Type: application/json", `{"goal":"\ud800","payload":"\u0000"}`, false, false},
		{"POST", "/claim?namespace=x&goal=g&capabilities=a,b&worker_id=w", "X-Worker-ID: w\nX-Worker-Capabilities: gpu, cpu", "", false, false},
		{"POST", "/claim", "", `{"namespace":"default","publisher":"someone"}`, false, true},
		{"POST", "/claim?publisher=" + testSecret, "", `{"goal":5}`, true, false},
		{"POST", "/extend_claim/{id}", "", `{"claim_token":"{token}","seconds":60}`, false, false},
		{"POST", "/extend_claim/{id}", "", `{"claim_token":"{token}","seconds":1e999}`, false, true},
		{"POST", "/extend_claim/{id}", "X-Claim-Token: {token}", `{"seconds":-1e999}`, false, true},
		{"POST", "/fulfill/{id}", "", `{"claim_token":"{token}","result":{"ok":true},"result_type":"json"}`, false, false},
		{"POST", "/fulfill/{id}", "", `{"claim_token":"{token}","result":5,"result_type":"text"}`, false, false},
		{"POST", "/fulfill/{id}", "X-Claim-Token: {token}", ``, false, false},
		{"POST", "/fail/{id}", "", `{"claim_token":"{token}","error":"boom"}`, false, false},
		{"GET", "/result/{id}", "", "", false, false},
		{"GET", "/status/{id}", "X-API-KEY:", "", true, true},
		{"POST", "/set/a%2Fb", "", `{"value":{"x":[1]},"ttl":86400}`, false, false},
		{"POST", "/set/k", "", `{"value":1,"ttl":1e999}`, false, true},
		{"GET", "/get/a%2Fb", "", "", false, false},
		{"POST", "/intent", signed, `{"goal":"g","payload":1}`, false, false},
		{"POST", "/claim?b=2&a=1&a=0", signed, "", false, true},
		{"POST", "/intent", "X-Timestamp: 1e308\nX-Nonce: n\nX-Signature: 00", `{}`, false, false},
		{"POST", "/admin/generate_key", "", `{"owner":"o"}`, true, false},
		{"POST", "/admin/revoke_key", "", `{"api_key":"tk_x"}`, true, false},
		{"POST", "/admin/purge", "", `{"confirm":true,"namespace":"zz"}`, true, false},
		{"POST", "/admin/cleanup", "", "", true, false},
		{"GET", "/admin/intents/{id}", "", "", true, false},
		{"POST", "/admin/intents/{id}/cancel", "", "", true, false},
		{"POST", "/admin/intents/{id}/retry", "", "", true, false},
		{"GET", "/admin/dead", "", "", true, false},
		{"GET", "/admin/dead/{id}", "", "", true, false},
		{"GET", "/admin/dashboard", "Authorization: Basic YWRtaW46dGVzdC1kYXNo", "", false, false},
		{"GET", "/metrics", "Authorization: Bearer " + testMetric, "", false, false},
		{"HEAD", "/status/{id}", "", "", false, false},
		{"DELETE", "/claim", "", "", false, false},
		{"GET", "/nope/%zz?x=%", "", "", false, false},
		{"POST", "/intent", "Content-Length: 9000", strings.Repeat("x", 100), false, false},
	} {
		f.Add(s.method, s.target, s.hdrs, s.body, s.admin, s.alt)
	}
	h := &handlerFuzz{clk: newFakeClock()}
	for i, readings := range []map[string]string{nil, AlternateReadings()} {
		srv, err := Open(context.Background(), Config{DBPath: filepath.Join(f.TempDir(), "fuzz.db"), Secret: testSecret,
			AdminSecret: testAdmin, DashboardPassword: testDash, MetricsToken: testMetric, TimeScale: 1, Seed: 1,
			CleanupInterval: 1e9 * time.Second, Readings: readings, Clock: h.clk.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { srv.Close() })
		h.srv[i] = srv
	}
	f.Fuzz(func(t *testing.T, method, target, hdrs, body string, admin, alt bool) {
		srv := h.srv[0]
		if alt {
			srv = h.srv[1]
		}
		if strings.Contains(target+hdrs+body, "{id}") || strings.Contains(target+hdrs+body, "{token}") {
			id, token := h.fixture(t, srv)
			r := strings.NewReplacer("{id}", id, "{token}", token)
			target, hdrs, body = r.Replace(target), r.Replace(hdrs), r.Replace(body)
		}
		ts := strconv.FormatInt(h.clk.Now().Unix(), 10)
		target, hdrs, body = strings.ReplaceAll(target, "{ts}", ts), strings.ReplaceAll(hdrs, "{ts}", ts), strings.ReplaceAll(body, "{ts}", ts)
		var raw strings.Builder
		raw.WriteString(method + " " + target + " HTTP/1.1\r\nHost: bus\r\n")
		if !strings.Contains(strings.ToLower(hdrs), "x-api-key") {
			raw.WriteString(hdrAPIKey + ": " + testSecret + "\r\n")
		}
		if admin {
			raw.WriteString(hdrAdminToken + ": " + testAdmin + "\r\n")
		}
		for _, line := range strings.Split(hdrs, "\n") {
			if line = strings.TrimRight(line, "\r"); line != "" {
				raw.WriteString(line + "\r\n")
			}
		}
		if !strings.Contains(strings.ToLower(hdrs), "content-length") {
			raw.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
		}
		raw.WriteString("\r\n" + body)
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw.String())))
		if err != nil {
			return // net/http answers it (400) before any handler
		}
		req.RemoteAddr = "127.0.0.1:9"
		if req.Header.Get(hdrSignature) == "{sig}" {
			b, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(b))
			if cp, ok := canonicalPath(req.URL.EscapedPath(), req.URL.RawQuery, srv.rd.queryAsSent); ok {
				key := req.Header.Get(hdrAPIKey)
				mac := hmac.New(sha256.New, []byte(key))
				mac.Write(signingString(req.Method, cp, req.Header.Get(hdrTimestamp), req.Header.Get(hdrNonce), b))
				req.Header.Set(hdrSignature, hex.EncodeToString(mac.Sum(nil)))
			}
		}
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %q answered %d %s", method, target, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var e errorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("%s %q answered %d without the error shape: %q", method, target, rec.Code, rec.Body)
			}
		}
	})
}
