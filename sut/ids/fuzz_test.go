package ids

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzHandler sends arbitrary bodies to POST /commands and POST
// /confirmations (and arbitrary query strings to the GET routes): no answer
// is ever 5xx, and every refusal is a problem document.
func FuzzHandler(f *testing.F) {
	for _, env := range []map[string]any{
		workedExample(), note("x"), payment(1), payment(0), refund(5), cancel(), member(),
		cancel("confirmation_token", "cft_x"), note("x", "idempotency_key", "00"),
		mkEnv(cmdBalanceGet, map[string]any{}), mkEnv("no.such", map[string]any{"a": []any{1, "b", nil}}),
	} {
		f.Add(uint8(0), mustJSON(env))
	}
	f.Add(uint8(1), []byte(`{"tenant_id":"acme","actor_id":"a","command_id":"c","idempotency_key":"k"}`))
	f.Add(uint8(2), []byte(`tenant_id=acme&idempotency_key=k`))
	f.Add(uint8(3), []byte(`cmd-1?tenant_id=acme`))
	f.Add(uint8(0), []byte(`{"command_id":"c","tenant_id":"t","actor_id":"a","intent":{"entity":"note","action":"add"},"args":{"text":"\ud800"}}`))
	f.Add(uint8(0), []byte(`{"command_id":"c","tenant_id":"t","actor_id":"a","intent":{"entity":"note","action":"add"},"args":{"text":1e308}}`))
	f.Add(uint8(0), []byte(`{"command_id":null,"tenant_id":"t","actor_id":"a","intent":null,"args":{}}`))
	e := newEnv(f, "")
	h := e.srv.Handler()
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		var req *http.Request
		switch route % 4 {
		case 0:
			req = httptest.NewRequest("POST", "/commands", bytes.NewReader(body))
		case 1:
			req = httptest.NewRequest("POST", "/confirmations", bytes.NewReader(body))
		case 2:
			req = httptest.NewRequest("GET", "/evidence", nil)
			req.URL.RawQuery = string(body)
		default:
			req = httptest.NewRequest("GET", "/commands/x", nil)
			req.URL.RawPath = "/commands/" + string(body)
			req.URL.Path = "/commands/" + string(body)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", req.Method, req.URL.Path, body, w.Code, w.Body)
		}
		if w.Code >= 400 && w.Code != 409 && w.Code != 422 && w.Code != 428 && w.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%q: %d is not a problem document: %s", body, w.Code, w.Body)
		}
	})
}
