package intent

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

func testWorld() *intentWorld {
	return newIntentWorld(&features.Env{Rand: rand.New(rand.NewPCG(1, 2)), Target: features.Target{APIKey: "main", TimeScale: 60}})
}

func TestIntentExpand(t *testing.T) {
	w := testWorld()
	w.register("A", "0123", actorMain)
	w.tokens["A"] = []string{"t1", "t2"}
	w.keys["alice"] = "tk_a"
	cases := []struct {
		in, want string
		fails    bool
	}{
		{"/status/{id:A}", "/status/0123", false},
		{`{"claim_token": "{token:A}", "old": "{token1:A}"}`, `{"claim_token": "t2", "old": "t1"}`, false},
		{"publisher={key:alice}", "publisher=tk_a", false},
		{"{x:3}", "xxx", false},
		{`{"a": {}, "b": {"c": 1}}`, `{"a": {}, "b": {"c": 1}}`, false},
		{"{ns}|{ns2}|{goal}", w.ns + "|" + w.ns2 + "|" + w.goal, false},
		{"{id:B}", "", true},
		{"{token:B}", "", true},
		{"{key:bob}", "", true},
		{"{nope}", "", true},
		{"{x:abc}", "", true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := w.expand(c.in)
			if (err != nil) != c.fails {
				t.Fatalf("expand(%q) error %v, want failure %v", c.in, err, c.fails)
			}
			if !c.fails && got != c.want {
				t.Fatalf("expand(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
	if !strings.HasPrefix(w.ns, "s-") || !strings.HasPrefix(w.ns2, "t-") || len(w.ns) > 64 {
		t.Fatalf("namespaces %q, %q", w.ns, w.ns2)
	}
}

func TestCheckErrorShape(t *testing.T) {
	cases := []struct {
		body  string
		code  string
		fails bool
	}{
		{`{"error": {"code": "not_found", "message": "no such intent"}}`, "not_found", false},
		{`{"error": {"code": "NotFound", "message": "x"}}`, "", true},
		{`{"error": {"code": "not_found", "message": ""}}`, "", true},
		{`{"error": "not_found"}`, "", true},
		{`{"code": "not_found", "message": "x"}`, "", true},
		{`not json`, "", true},
		{``, "", true},
	}
	for _, c := range cases {
		t.Run(c.body, func(t *testing.T) {
			code, err := checkErrorShape(&client.Response{Status: 404, Body: []byte(c.body), Header: http.Header{}})
			if (err != nil) != c.fails || code != c.code {
				t.Fatalf("checkErrorShape = %q, %v; want %q, failure %v", code, err, c.code, c.fails)
			}
		})
	}
}

func TestSameJSONAndField(t *testing.T) {
	if !sameJSON([]byte(`{"a":1,"b":[1,2]}`), []byte(` { "b": [1, 2], "a": 1.0 } `)) {
		t.Fatal("key order and whitespace must not matter")
	}
	if sameJSON([]byte(`{"a":1}`), []byte(`{"a":2}`)) {
		t.Fatal("different values compared equal")
	}
	m := map[string]any{"error": map[string]any{"code": "x"}, "n": 2.5}
	if v, ok := field(m, "error.code"); !ok || v != "x" {
		t.Fatalf("field error.code = %v, %v", v, ok)
	}
	if _, ok := field(m, "error.code.deeper"); ok {
		t.Fatal("field found a path through a string")
	}
	if f, ok := numberField(m, "n"); !ok || f != 2.5 {
		t.Fatalf("numberField = %v, %v", f, ok)
	}
	if _, ok := numberField(m, "error"); ok {
		t.Fatal("an object is not a number")
	}
}

// TestSecurityHeadersStep: the header check the §10 scenario runs once per
// header holds on the right value and names the header it misses.
func TestSecurityHeadersStep(t *testing.T) {
	w := testWorld()
	good := http.Header{}
	for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store", "X-Intent-Version": "2.1"} {
		good.Set(k, v)
	}
	for _, name := range []string{"X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy", "Cache-Control", "X-Intent-Version"} {
		w.last = &client.Response{Status: 200, Header: good}
		if err := w.headerIs(name, good.Get(name)); err != nil {
			t.Fatalf("good %s refused: %v", name, err)
		}
		h := good.Clone()
		h.Del(name)
		w.last = &client.Response{Status: 200, Header: h}
		if err := w.headerIs(name, good.Get(name)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("missing %s not reported: %v", name, err)
		}
	}
}

func TestSleepIsBoundedByTheBudget(t *testing.T) {
	w := testWorld()
	w.env.Budget = 50_000_000 // 50 ms
	err := w.sleep(t.Context(), 2*w.env.Budget, "a long lease")
	if err == nil || !strings.Contains(err.Error(), "not applicable") {
		t.Fatalf("a wait beyond the budget must be N/A, got %v", err)
	}
}
