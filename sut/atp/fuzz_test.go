package atp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzHandler sends arbitrary bodies to every POST and PUT route (and
// arbitrary paths and keys to the GET routes): no answer is ever 5xx,
// and every refusal is a JSON error document.
func FuzzHandler(f *testing.F) {
	e := newEnv(f, "")
	good := e.intent("int_f")
	for _, b := range [][]byte{
		good, e.intent("int_g", "precondition", map[string]any{"intent_settled": "int_f"}),
		e.intent("int_h", "action_dedup_key", "cart:1"), e.intent("int_i", "amount", 1e12), e.intent("int_j", "memo", nil),
		[]byte(`{"intent_id":"int_f"}`), []byte(`{"intent_id":"\ud800"}`), []byte(`{"intent_id":1e308}`), []byte(`null`),
		[]byte(`{"public_key":{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}}`),
		[]byte(`{"body":{"a":1},"alg":"Ed25519","kid":"site-1","signature":"AA"}`),
		[]byte(`{"type":"payment_intent.succeeded","payment_intent":{"id":"pi_000001"}}`),
		[]byte(`{"amount":01}`), []byte(`{"a":{"b":{"c":[1,2,{"d":"\u0000"}]}}}`), []byte("\xff\xfe"),
	} {
		for route := range uint8(7) {
			f.Add(route, key("fuzz"), b)
		}
	}
	f.Add(uint8(0), "", good)
	f.Add(uint8(1), "short", []byte(`{"intent_id":"int_f"}`))
	h := e.srv.Handler()
	f.Fuzz(func(t *testing.T, route uint8, k string, body []byte) {
		var req *http.Request
		switch route % 7 {
		case 0:
			req = httptest.NewRequest("POST", pathAuthorize, bytes.NewReader(body))
		case 1:
			req = httptest.NewRequest("POST", pathExecute, bytes.NewReader(body))
		case 2:
			req = httptest.NewRequest("POST", pathVerify, bytes.NewReader(body))
		case 3:
			req = httptest.NewRequest("POST", pathRailEvents, bytes.NewReader(body))
		case 4:
			req = httptest.NewRequest("PUT", pathAgents+"agt_f", bytes.NewReader(body))
		case 5:
			req = httptest.NewRequest("GET", pathIntents+"x", nil)
			req.URL.Path = pathIntents + string(body)
		default:
			req = httptest.NewRequest("PUT", pathAgents+"x", bytes.NewReader(body))
			req.URL.Path = pathAgents + k
		}
		if k != "" {
			req.Header[headerKey] = []string{k}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", req.Method, req.URL.Path, body, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var doc struct {
				Error string `json:"error"`
			}
			if json.Unmarshal(w.Body.Bytes(), &doc) != nil || doc.Error == "" || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%s %s %q: %d is not an error document: %s", req.Method, req.URL.Path, body, w.Code, w.Body)
			}
		}
	})
}
