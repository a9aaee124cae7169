package harness

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
)

// TestProbeRoute: a 2xx passes; a 401 or 403 is a refused credential; any
// other answer says the target is not the protocol.
func TestProbeRoute(t *testing.T) {
	for _, tc := range []struct {
		status      int
		credential  bool
		notProtocol bool
	}{{200, false, false}, {204, false, false}, {401, true, false}, {403, true, false}, {404, false, true}, {500, false, true}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/registry" || r.Header.Get("X-Api-Key") != "k3y" {
				w.WriteHeader(http.StatusTeapot)
				return
			}
			w.WriteHeader(tc.status)
		}))
		err := ProbeRoute(t.Context(), features.Target{BaseURL: srv.URL, APIKey: "k3y"}, time.Second, "/registry", "is this it?")
		srv.Close()
		var ce *CredentialError
		var np *NotProtocolError
		if errors.As(err, &ce) != tc.credential || errors.As(err, &np) != tc.notProtocol || (err == nil) != (!tc.credential && !tc.notProtocol) {
			t.Errorf("status %d: %v", tc.status, err)
		}
	}
}
