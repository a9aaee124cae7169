package harness

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/client"
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

// TestProbeRefused: a call the protocol refuses that is answered 2xx says
// the target is not the protocol, naming the call and the answer; a 401 or
// 403 is a refused credential when one was sent; any other answer passes.
func TestProbeRefused(t *testing.T) {
	for _, tc := range []struct {
		status      int
		credential  bool
		notProtocol bool
	}{{200, false, true}, {201, false, true}, {404, false, false}, {400, false, false}, {500, false, false}, {401, true, false}, {403, true, false}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte(`{"id":"x1","status":"ok"}`))
		}))
		c, err := client.New(srv.URL, client.Options{APIKey: "k3y", Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = ProbeRefused(t.Context(), c, "the API key", client.Request{Method: http.MethodGet, Path: "/things/never"}, "a thing no one made", "the text says 404")
		srv.Close()
		var ce *CredentialError
		var np *NotProtocolError
		if errors.As(err, &ce) != tc.credential || errors.As(err, &np) != tc.notProtocol || (err == nil) != (!tc.credential && !tc.notProtocol) {
			t.Errorf("status %d: %v", tc.status, err)
		}
		if np != nil && !strings.Contains(err.Error(), `GET /things/never (a thing no one made) answered 200 {"id":"x1","status":"ok"}: the text says 404`) && tc.status == 200 {
			t.Errorf("status %d: %q does not name the call and the answer", tc.status, err)
		}
	}
}

// TestSettled: a wait for GET /health ends on an answer that waiting will
// not change, and waits on one a starting or busy server gives.
func TestSettled(t *testing.T) {
	for status, want := range map[int]bool{200: false, 204: true, 301: true, 401: true, 404: true, 405: true, 501: true,
		500: false, 502: false, 503: false, 504: false, 408: false, 425: false, 429: false} {
		if got := Settled(status); got != want {
			t.Errorf("Settled(%d) = %v, want %v", status, got, want)
		}
	}
}

// TestAnswer: a reply as a preflight error quotes it; a web server's HTML
// error page is its title, not 120 characters of markup.
func TestAnswer(t *testing.T) {
	for body, want := range map[string]string{
		"":                "404",
		`{"error": "no"}`: `404 {"error": "no"}`,
		"<!DOCTYPE HTML>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Error response</title></head><body><h1>Error response</h1></body></html>": `404, an HTML page titled "Error response"`,
		"<html><body>no title</body></html>": "404 <html><body>no title</body></html>",
	} {
		if got := Answer(&client.Response{Status: 404, Body: []byte(body)}); got != want {
			t.Errorf("Answer(404 %q) = %q, want %q", body, got, want)
		}
	}
}
