package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/idscheck/idscheck/conformance/probe"
)

// TestRun: the CLI measures an endpoint, prints the table as JSON, and
// compares it with a result.json: exit 0 when the run agrees, 1 when it
// does not, 2 for a usage error.
func TestRun(t *testing.T) {
	// An endpoint with no idempotency at all: every POST makes a payment.
	var mu sync.Mutex
	n, byRef := 0, map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodGet {
			json.NewEncoder(w).Encode(map[string]int{"count": byRef[r.URL.Query().Get("reference")]})
			return
		}
		var req struct{ Reference string }
		json.NewDecoder(r.Body).Decode(&req)
		n++
		byRef[req.Reference]++
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"id": "pay_%d"}`, n)
	}))
	defer srv.Close()
	dir := t.TempDir()
	target := filepath.Join(dir, "target.json")
	os.WriteFile(target, []byte(`{"http_idempotency": {"path": "/v1/payments", "body": {"reference": "{{unique}}", "amount": 1}, "key_format": "token", "id": "id",
	  "count": {"path": "/v1/payments?reference={{unique}}", "pointer": "/count"}}}`), 0o600)
	result := func(verdict string) string {
		p := filepath.Join(dir, verdict+".json")
		rules := ""
		for _, id := range []string{"STRIPE-IDEM-post-accepts-keys", "STRIPE-IDEM-key-255", "RFC9110-15.6-server-error"} {
			rules += `{"rule": {"id": "` + id + `"}, "result": {"verdict": "PASS"}}, `
		}
		os.WriteFile(p, []byte(`{"target": {"variant": "stripe"}, "rules": [`+rules+`{"rule": {"id": "STRIPE-IDEM-same-result"}, "result": {"verdict": "`+verdict+`"}}]}`), 0o600)
		return p
	}
	call := func(args ...string) int {
		t.Helper()
		old, oldOut := os.Args, os.Stdout
		defer func() { os.Args, os.Stdout = old, oldOut }()
		out, _ := os.Create(filepath.Join(dir, "out.json"))
		defer out.Close()
		os.Args, os.Stdout = append([]string{"probe"}, args...), out
		return run()
	}
	if code := call("--target", srv.URL); code != 2 {
		t.Errorf("without --target-file: exit %d, want 2", code)
	}
	if code := call("--target", srv.URL, "--target-file", target, "--json", "--result", result("FAIL")); code != 0 {
		t.Errorf("a run that fails STRIPE-IDEM-same-result: exit %d, want 0 (it agrees)", code)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "out.json"))
	var tab probe.Table
	if err := json.Unmarshal(b, &tab); err != nil || len(tab.Behaviours) == 0 {
		t.Fatalf("--json printed %q: %v", b, err)
	}
	if code := call("--target", srv.URL, "--target-file", target, "--json", "--result", result("PASS")); code != 1 {
		t.Errorf("a run that passes STRIPE-IDEM-same-result on an endpoint that charges every retry: exit %d, want 1", code)
	}
}
