package realmw_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	idemv2 "github.com/gofiber/fiber/v2/middleware/idempotency"
	idemv3 "github.com/gofiber/fiber/v3/middleware/idempotency"

	"github.com/idscheck/idscheck/profiles/httpidem/realmw"
)

// TestFiberDefaultsByHand: the defaults the golden rests on, as the
// middlewares' config.go sets them.
func TestFiberDefaultsByHand(t *testing.T) {
	if idemv2.ConfigDefault.KeyHeader != "X-Idempotency-Key" || idemv3.ConfigDefault.KeyHeader != "X-Idempotency-Key" {
		t.Errorf("default KeyHeader: v2 %q, v3 %q; want X-Idempotency-Key", idemv2.ConfigDefault.KeyHeader, idemv3.ConfigDefault.KeyHeader)
	}
	if idemv2.ConfigDefault.Lifetime != 30*time.Minute || idemv3.ConfigDefault.Lifetime != 30*time.Minute {
		t.Errorf("default Lifetime: v2 %v, v3 %v; want 30m", idemv2.ConfigDefault.Lifetime, idemv3.ConfigDefault.Lifetime)
	}
	for _, k := range []string{strings.Repeat("k", 35), strings.Repeat("k", 37), strings.Repeat("k", 255)} {
		if idemv2.ConfigDefault.KeyHeaderValidate(k) == nil || idemv3.ConfigDefault.KeyHeaderValidate(k) == nil {
			t.Errorf("a key of %d characters passes the default KeyHeaderValidate", len(k))
		}
	}
}

// answer is one HTTP answer.
type answer struct {
	status int
	header http.Header
	body   string
}

// TestFiberDeviationsByHand checks, over plain HTTP and without idscheck,
// each behaviour the golden's deviations rest on, on both middlewares.
func TestFiberDeviationsByHand(t *testing.T) {
	for _, v := range realmw.Versions() {
		t.Run("fiber"+v, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv, err := realmw.Start(v, ln, realmw.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			hc := &http.Client{Timeout: 10 * time.Second}
			post := func(key, auth, body string) answer {
				t.Helper()
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				if key != "" {
					req.Header.Set(realmw.Header, key)
				}
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return answer{resp.StatusCode, resp.Header, string(b)}
			}
			count := func(path string) int {
				t.Helper()
				resp, err := hc.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var doc struct{ Count int }
				if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
					t.Fatal(err)
				}
				return doc.Count
			}
			n := 0
			uuid := func() string { n++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }
			pay := func(ref string, amount int) string {
				return fmt.Sprintf(`{"reference": %q, "amount": %d}`, ref, amount)
			}

			// A key that is not 36 characters long: a plain error, 500, nothing created.
			for _, k := range []string{strings.Repeat("a", 32), strings.Repeat("a", 255)} {
				a := post(k, "", pay("short", 1000))
				if a.status != 500 || !strings.Contains(a.body, "invalid idempotency key: invalid length") {
					t.Errorf("a key of %d characters: %d %s; want 500 invalid idempotency key", len(k), a.status, a.body)
				}
			}
			if c := count("/v1/payments?reference=short"); c != 0 {
				t.Errorf("refused keys created %d payments", c)
			}

			// A retry after completion: the same status, body and headers, one payment.
			k := uuid()
			first := post(k, "Bearer one", pay("r1", 1000))
			again := post(k, "Bearer one", pay("r1", 1000))
			if first.status != 201 || again.status != 201 || again.body != first.body {
				t.Errorf("retry: %d %s, then %d %s; want the same 201", first.status, first.body, again.status, again.body)
			}
			if c := count("/v1/payments?reference=r1"); c != 1 {
				t.Errorf("a request and its retry created %d payments, want 1", c)
			}
			// No replay header: the replay carries no header the first answer lacked.
			for h := range again.header {
				if first.header.Get(h) == "" {
					t.Errorf("the replay carries %s: %q, the first answer does not", h, again.header.Get(h))
				}
			}

			// No payload fingerprint: another amount under the used key gets the first answer.
			other := post(k, "Bearer one", pay("r1", 2000))
			if other.status != 201 || other.body != first.body {
				t.Errorf("another payload under a used key: %d %s; the middleware has no fingerprint, want the replay %s", other.status, other.body, first.body)
			}
			// Keys not scoped to the caller: another caller's request under the key gets the first caller's answer.
			theirs := post(k, "Bearer two", pay("r2", 1000))
			if theirs.status != 201 || theirs.body != first.body {
				t.Errorf("another caller under the key: %d %s; want the first caller's replay %s", theirs.status, theirs.body, first.body)
			}
			if c := count("/v1/payments?reference=r2"); c != 0 {
				t.Errorf("the second caller's request created %d payments; the key is shared, want 0", c)
			}

			// A rejection is stored: the corrected request under its key gets the 400 again.
			k = uuid()
			bad := post(k, "", pay("r3", 0))
			fixed := post(k, "", pay("r3", 1000))
			if bad.status != 400 || fixed.status != 400 || fixed.body != bad.body {
				t.Errorf("rejected, then corrected: %d %s, then %d %s; want the stored 400 twice", bad.status, bad.body, fixed.status, fixed.body)
			}
			if c := count("/v1/payments?reference=r3"); c != 0 {
				t.Errorf("the rejected key created %d payments, want 0", c)
			}

			// A duplicate in flight: whichever of two requests takes the key's
			// lock first runs (1.5 s); the other waits on the lock and gets its
			// answer. Both 201, one body, one payment, no 409, whatever the
			// order they arrive in.
			k = uuid()
			before := count("/v1/payments/count")
			var wg sync.WaitGroup
			got := make([]answer, 2)
			slow := `{"reference": "r4", "amount": 1000, "delay_ms": 1500}`
			for i := range got {
				wg.Add(1)
				go func() { defer wg.Done(); got[i] = post(k, "", slow) }()
			}
			wg.Wait()
			if got[0].status != 201 || got[1].status != 201 || got[0].body != got[1].body {
				t.Errorf("two at once: %d %s and %d %s; want one 201 twice", got[0].status, got[0].body, got[1].status, got[1].body)
			}
			if c := count("/v1/payments/count") - before; c != 1 {
				t.Errorf("two at once created %d payments, want 1", c)
			}
		})
	}
}
