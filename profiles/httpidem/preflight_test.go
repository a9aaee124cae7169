package httpidem

import (
	"errors"
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
