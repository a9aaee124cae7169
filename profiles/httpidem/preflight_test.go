package httpidem

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// TestPreflightHoldsTheCountReadToItsDeclaration: a count read the target
// file misdeclares (a pointer to nothing, a path that 404s) is a
// configuration answer before any scenario, not a verdict on the
// endpoint; one declared right passes, whatever form its count takes.
func TestPreflightHoldsTheCountReadToItsDeclaration(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/payments":
			w.WriteHeader(http.StatusBadRequest) // the preflight's body is not JSON
		case "/v1/payments/count":
			w.Write([]byte(`{"count": 3, "data": {"a": 1}, "list": [1, 2]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		path, pointer, want string
	}{
		{"/v1/payments/count", "/count", ""},
		{"/v1/payments/count", "/data", ""},
		{"/v1/payments/count", "/list", ""},
		{"/v1/payments/count", "/total", "no member \"total\""},
		{"/v1/payments/count", "", ""},
		{"/v1/payments/count", "/count/x", "has a number where pointer"},
		{"/v1/payment-count", "/count", "must answer 2xx"},
	} {
		e := &Endpoint{Path: "/v1/payments", Body: map[string]any{"a": 1}, Count: &CountRead{Path: tc.path, Pointer: tc.pointer, Difference: true}}
		err := preflight(t.Context(), features.Target{BaseURL: srv.URL, Described: e}, 2*time.Second)
		var np *harness.NotProtocolError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: %v, want it accepted", tc.path, tc.pointer, err)
		case tc.want != "" && (!errors.As(err, &np) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: %v, want a NotProtocolError saying %q", tc.path, tc.pointer, err, tc.want)
		}
	}
}

// TestPreflightFindsTheDeclaredEndpoint (issue 28, case 3): a plain web
// server described as the endpoint (it answers 501, 405 or 404 to the
// declared method and path) is not an endpoint to certify: the preflight
// says so, naming the call and the answer, before any scenario (on main
// every scenario ran and the run ended exit 4). An endpoint that refuses
// the preflight's body that is not JSON, or takes it, passes; one that
// refuses the caller's headers is a refused credential.
func TestPreflightFindsTheDeclaredEndpoint(t *testing.T) {
	for _, tc := range []struct {
		status      int
		notProtocol bool
		credential  bool
	}{{501, true, false}, {405, true, false}, {404, true, false}, {400, false, false}, {422, false, false}, {201, false, false}, {500, false, false}, {401, false, true}} {
		var got struct {
			method, key, ctype, auth string
			body                     []byte
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/health" {
				w.Write([]byte(`{"status":"ok"}`))
				return
			}
			got.method, got.key, got.ctype, got.auth = r.Method, r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), r.Header.Get("Authorization")
			got.body, _ = io.ReadAll(r.Body)
			w.WriteHeader(tc.status)
			w.Write([]byte("<html><body>Error response</body></html>"))
		}))
		e := &Endpoint{Path: "/v1/payments", Body: map[string]any{"amount": 1, "reference": "{{unique}}"},
			Callers: []Caller{{Headers: map[string]string{"Authorization": "Bearer one"}}}}
		e.Defaults()
		err := preflight(t.Context(), features.Target{BaseURL: srv.URL, Described: e}, 2*time.Second)
		srv.Close()
		var np *harness.NotProtocolError
		var ce *harness.CredentialError
		if errors.As(err, &np) != tc.notProtocol || errors.As(err, &ce) != tc.credential || (err == nil) != (!tc.notProtocol && !tc.credential) {
			t.Errorf("the endpoint answers %d: preflight %v", tc.status, err)
		}
		if tc.notProtocol && err != nil && !strings.Contains(err.Error(), fmt.Sprintf("POST /v1/payments (a body that is not JSON) answered %d <html>", tc.status)) {
			t.Errorf("the endpoint answers %d: %q does not name the call and the answer", tc.status, err)
		}
		// The call: the declared method, the caller's headers, a fresh key
		// (an sf-string under ietf), a body no endpoint can take.
		if got.method != "POST" || got.auth != "Bearer one" || !strings.HasPrefix(got.key, `"`) || got.ctype != "application/json" || json.Valid(got.body) {
			t.Errorf("the preflight sent %s, key %s, %s, %q, %q", got.method, got.key, got.ctype, got.auth, got.body)
		}
	}
}

// TestPreflightCountReadCountsNothingUnmade: a count read that counts
// something for a unique value no request used (it ignores its filter, or
// its pointer finds an object of fixed members) cannot count one request's
// creations: a configuration answer before any scenario. A read that
// counts everything (difference) is not held to 0.
func TestPreflightCountReadCountsNothingUnmade(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/payments":
			if r.Method == http.MethodPost {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			if r.URL.Query().Get("reference") == "" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Write([]byte(`{"count": 0, "reference": "` + r.URL.Query().Get("reference") + `"}`))
		case "/v1/all":
			w.Write([]byte(`{"count": 7}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		count CountRead
		ok    bool
	}{
		{CountRead{Path: "/v1/payments?reference={{unique}}", Pointer: "/count"}, true},
		{CountRead{Path: "/v1/payments?reference={{unique}}"}, false},               // the whole object: 2 members
		{CountRead{Path: "/v1/all?reference={{unique}}", Pointer: "/count"}, false}, // ignores its filter
		{CountRead{Path: "/v1/all", Pointer: "/count", Difference: true}, true},
	} {
		e := &Endpoint{Path: "/v1/payments", Body: map[string]any{"reference": "{{unique}}"}, Count: &tc.count}
		e.Defaults()
		err := preflight(t.Context(), features.Target{BaseURL: srv.URL, Described: e}, 2*time.Second)
		var np *harness.NotProtocolError
		switch {
		case tc.ok && err != nil:
			t.Errorf("%+v: %v, want it accepted", tc.count, err)
		case !tc.ok && (!errors.As(err, &np) || !strings.Contains(err.Error(), "where no request was made")):
			t.Errorf("%+v: %v, want a NotProtocolError saying it counts what no request made", tc.count, err)
		}
	}
}
