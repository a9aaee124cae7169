package httpidem

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzHandler sends arbitrary bodies, keys and query strings to every
// route of each variant: no answer is ever 5xx but the processor's 502 (a
// stored one included), and every refusal is a problem document.
func FuzzHandler(f *testing.F) {
	for _, b := range [][]byte{
		mustJSON(body("r")), mustJSON(body("r", "paymentRef", "ref-1")), mustJSON(body("r", "description", "x", "paymentRef", "p")),
		mustJSON(body("r", "amount", 1e308)), mustJSON(body("r", "amount", -0.0)), mustJSON(body("\u2028", "paymentRef", "\ud7ff")),
		[]byte(`{"amount":1250,"currency":"EUR","reference":"\ud800"}`), []byte(`{"amount":1e400,"currency":"EUR","reference":"r"}`),
		[]byte(`{"amount":01,"currency":"EUR","reference":"r"}`), []byte(`{"paymentRef":null}`), []byte(`null`), []byte(`"x"`),
		[]byte(`{"a":{"b":[1,2,{"c":"\u0000"}]}}`), []byte("\xff\xfe"), []byte(`{"amount":1,"amount":2}`), nil,
		[]byte(`{"amount":99999999999999999999999,"currency":"GBP","reference":"r","paymentRef":"` + strings.Repeat("p", 129) + `"}`),
	} {
		for route := range uint8(4) {
			f.Add(route, `"fuzz"`, b)
			f.Add(route, "fuzz", b)
		}
	}
	f.Add(uint8(0), `"a";b=?1`, mustJSON(body("r")))
	f.Add(uint8(0), `"\q"`, mustJSON(body("r")))
	f.Add(uint8(3), "", []byte("reference=r&reference=s"))
	f.Add(uint8(3), "", []byte("reference=%zz"))
	envs := map[string]*testEnv{}
	for _, v := range []string{VariantIETF, VariantT0, VariantStripe} {
		envs[v] = newEnv(f, v, "")
	}
	f.Fuzz(func(t *testing.T, route uint8, key string, b []byte) {
		var e *testEnv
		switch route % 3 {
		case 0:
			e = envs[VariantIETF]
		case 1:
			e = envs[VariantT0]
		default:
			e = envs[VariantStripe]
		}
		var req *http.Request
		if route%4 == 3 {
			req = httptest.NewRequest("GET", pathPayments, nil)
			req.URL.RawQuery = string(b)
		} else {
			req = httptest.NewRequest("POST", pathPayments, bytes.NewReader(b))
			if key != "" {
				req.Header[headerKey] = []string{key}
			}
		}
		req.Header.Set("Authorization", "Bearer "+tokA)
		w := httptest.NewRecorder()
		e.srv.Handler().ServeHTTP(w, req)
		if w.Code >= 500 && w.Code != 502 {
			t.Fatalf("%s %q %q: %d %s", req.Method, key, b, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var p struct {
				Type, Title, Code string
				Status            int
			}
			if w.Header().Get("Content-Type") != contentProblem || json.Unmarshal(w.Body.Bytes(), &p) != nil ||
				p.Status != w.Code || p.Code == "" || p.Title == "" || !strings.HasPrefix(p.Type, DocsURL) {
				t.Fatalf("%s %q %q: %d is not a problem document: %s", req.Method, key, b, w.Code, w.Body)
			}
		}
	})
}
