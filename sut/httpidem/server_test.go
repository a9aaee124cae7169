package httpidem

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOpenRefuses(t *testing.T) {
	sink := newFakeSink(t)
	dir := t.TempDir()
	for name, c := range map[string]Config{
		"no db":        {SinkURL: sink.ts.URL, Callers: []string{tokA}},
		"no sink":      {DBPath: filepath.Join(dir, "a.db"), Callers: []string{tokA}},
		"bad sink":     {DBPath: filepath.Join(dir, "a.db"), SinkURL: "ftp://x", Callers: []string{tokA}},
		"no callers":   {DBPath: filepath.Join(dir, "a.db"), SinkURL: sink.ts.URL},
		"twice":        {DBPath: filepath.Join(dir, "a.db"), SinkURL: sink.ts.URL, Callers: []string{tokA, tokA}},
		"variant":      {DBPath: filepath.Join(dir, "a.db"), SinkURL: sink.ts.URL, Callers: []string{tokA}, Variant: "paypal"},
		"mutant":       {DBPath: filepath.Join(dir, "a.db"), SinkURL: sink.ts.URL, Callers: []string{tokA}, Mutant: "nope"},
		"time scale":   {DBPath: filepath.Join(dir, "a.db"), SinkURL: sink.ts.URL, Callers: []string{tokA}, TimeScale: -1},
		"negative ttl": {DBPath: filepath.Join(dir, "a.db"), SinkURL: sink.ts.URL, Callers: []string{tokA}, KeyTTL: -time.Second},
	} {
		if srv, err := Open(context.Background(), c); err == nil {
			srv.Close()
			t.Errorf("%s: opened", name)
		}
	}
}

// TestRoutes: health, auth, unknown routes and methods, listing.
func TestRoutes(t *testing.T) {
	e := newEnv(t, "", "")
	if r := e.do("GET", pathHealth, "", nil); r.status != 200 || r.json(t)["variant"] != VariantIETF {
		t.Fatalf("health: %s", r)
	}
	isProblem(t, e.do("POST", pathPayments, "", mustJSON(body("r1")), headerKey, `"k"`), 401, codeUnauthorized)
	isProblem(t, e.do("POST", pathPayments, "nope", mustJSON(body("r1")), headerKey, `"k"`), 401, codeUnauthorized)
	isProblem(t, e.do("GET", pathPayments, "", nil), 401, codeUnauthorized)
	isProblem(t, e.do("GET", "/v1/refunds", tokA, nil), 404, codeNotFound)
	r := e.do("DELETE", pathPayments, tokA, nil)
	isProblem(t, r, 405, codeMethodNotAllowed)
	if r.header.Get("Allow") != "GET, POST" {
		t.Fatalf("Allow: %q", r.header.Get("Allow"))
	}
	isProblem(t, e.do("GET", pathPayments+"?reference=", tokA, nil), 400, codeInvalidRequest)
	if got := e.list(tokA, "r1"); len(got) != 0 {
		t.Fatalf("list before: %v", got)
	}
	p := e.pay(tokA, "k1", body("r1"))
	e.pay(tokA, "k2", body("r2"))
	e.pay(tokB, "k3", body("r1"))
	got := e.list(tokA, "r1")
	if len(got) != 1 || got[0]["id"] != p.json(t)["id"] {
		t.Fatalf("list of alice r1: %v", got)
	}
	all := e.do("GET", pathPayments, tokA, nil)
	if all.status != 200 || strings.Count(string(all.body), `"id"`) != 2 {
		t.Fatalf("every payment of alice: %s", all)
	}
	// The listed payment is the 201 body, byte for byte.
	if !bytes.Contains(all.body, p.body) {
		t.Fatalf("listing %s does not hold %s", all.body, p.body)
	}
}

// TestValidation: every malformed body is a 400 problem naming the member,
// and nothing is paid.
func TestValidation(t *testing.T) {
	for _, v := range []string{VariantIETF, VariantT0, VariantStripe} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "")
			for i, b := range []map[string]any{
				body("r", "amount", 0), body("r", "amount", 1e9+1), body("r", "amount", 1.5), body("r", "amount", "12"),
				body("r", "amount", nil), body("r", "currency", "JPY"), body("r", "currency", nil), body("r", "reference", ""),
				body(strings.Repeat("x", 129)), body("r", "reference", nil), body("r", "description", 5), body("r", "extra", 1),
			} {
				r := e.pay(tokA, "v"+string(rune('a'+i)), b)
				m := isProblem(t, r, 400, codeInvalidRequest)
				if m["invalid_params"] == nil {
					t.Fatalf("%v: no invalid_params: %s", b, r)
				}
			}
			for i, raw := range []string{`null`, `[]`, `{"amount":1250,"amount":1,"currency":"EUR","reference":"r"}`, `{`, "\xff"} {
				key := "w" + string(rune('a'+i))
				var r resp
				switch v {
				case VariantIETF:
					r = e.do("POST", pathPayments, tokA, []byte(raw), headerKey, sfString(key))
				default:
					r = e.do("POST", pathPayments, tokA, []byte(raw), headerKey, key)
				}
				isProblem(t, r, 400, codeInvalidRequest)
			}
			if n := e.sink.totalEffects(); n != 0 {
				t.Fatalf("%d effects", n)
			}
			// 1e3 is 1000: a valid amount; description is optional.
			if r := e.pay(tokA, "ok", body("r", "amount", 1e3, "description", "<b>tea</b> & cake")); r.status != 201 ||
				!bytes.Contains(r.body, []byte(`"description":"<b>tea</b> & cake"`)) {
				t.Fatalf("valid body: %s", r)
			}
		})
	}
}

func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t, VariantStripe, "")
	big := mustJSON(body("r", "description", strings.Repeat("d", maxBody)))
	isProblem(t, e.do("POST", pathPayments, tokA, big, headerKey, "k"), 413, codeTooLarge)
}

// TestIETFKey: the key is an sf-string, parsed per RFC 8941.
func TestIETFKey(t *testing.T) {
	e := newEnv(t, VariantIETF, "")
	r := e.do("POST", pathPayments, tokA, mustJSON(body("r")))
	isProblem(t, r, 400, codeKeyMissing)
	if !hasLink(r) {
		t.Fatalf("missing key without Link: %v", r.header)
	}
	for _, bad := range []string{`abc`, `"abc`, `"a\b"`, `""`, `"abc" x`, `"é"`, `"a";`, `"a";X=1`, `"a";k=`, `"a",  "b"`,
		`1`, `:YWJj:`, `"` + strings.Repeat("k", 256) + `"`} {
		r := e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, bad)
		isProblem(t, r, 400, codeKeyInvalid)
		if !hasLink(r) {
			t.Fatalf("invalid key %s without Link", bad)
		}
	}
	r = e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, `"a"`, headerKey, `"b"`)
	isProblem(t, r, 400, codeKeyMultiple)
	if n := e.sink.totalEffects(); n != 0 {
		t.Fatalf("%d effects", n)
	}
	// Escapes, spaces and parameters: the key is the string's content.
	first := e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, `"a\"b\\c";v=1;w;x="y";z=?1;d=-1.5;t=tok/x;b=:YQ==:`)
	if first.status != 201 {
		t.Fatalf("first: %s", first)
	}
	again := e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, ` "a\"b\\c" `)
	if again.status != 201 || !bytes.Equal(again.body, first.body) || !again.replayed() {
		t.Fatalf("the same key written otherwise: %s", again)
	}
	if n := e.sink.effectsOf(sinkKey(tokA, `a"b\c`)); n != 1 {
		t.Fatalf("%d effects under the unescaped key", n)
	}
	if r := e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, `"`+strings.Repeat("k", 255)+`"`); r.status != 201 {
		t.Fatalf("a 255-character key: %s", r)
	}
}

func TestParseSFString(t *testing.T) {
	for in, want := range map[string]string{`"x"`: "x", `"a b"`: "a b", `"\\"`: `\`, `  "q";a=1.25`: "q", `"x";a;b=?0`: "x"} {
		if got, err := parseSFStringItem(in); err != nil || got != want {
			t.Errorf("%s: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`x`, `"x"y`, `"x";a=1.2345`, `"x";a=1234567890123456`, `"x";a=1.`, `"x";a=?2`, `"x";a=:a`, "\"\t\"", `"x";a="`, `"x" ;a`} {
		if got, err := parseSFStringItem(in); err == nil {
			t.Errorf("%s: parsed %q", in, got)
		}
	}
}

// TestFirstAndRetry: every variant: a first request is processed (one sink
// call, without an Idempotency-Key header, the payment's id its
// command_id); its retry gets the stored status and body byte for byte,
// with Idempotent-Replayed, and no second call.
func TestFirstAndRetry(t *testing.T) {
	for _, v := range []string{VariantIETF, VariantT0, VariantStripe} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "")
			first := e.pay(tokA, "order-1", body("inv-1", "description", "tea"))
			if first.status != 201 || first.replayed() || first.header.Get("Content-Type") != contentJSON {
				t.Fatalf("first: %s", first)
			}
			p := first.json(t)
			if !strings.HasPrefix(p["id"].(string), "pay_") || p["amount"] != 1250.0 || p["currency"] != "EUR" ||
				p["reference"] != "inv-1" || p["status"] != "succeeded" || p["created_at"] != "2026-11-24T10:00:00.000Z" {
				t.Fatalf("payment %s", first.body)
			}
			e.clock.advance(time.Hour)
			for range 2 {
				r := e.pay(tokA, "order-1", body("inv-1", "description", "tea"))
				if r.status != 201 || !bytes.Equal(r.body, first.body) || !r.replayed() {
					t.Fatalf("retry: %s, want %s", r, first.body)
				}
			}
			k := sinkKey(tokA, "order-1")
			if e.sink.postsOf(k) != 1 || e.sink.effectsOf(k) != 1 {
				t.Fatalf("%d posts, %d effects", e.sink.postsOf(k), e.sink.effectsOf(k))
			}
			call := e.sink.bodies[0]
			if call.TenantID != CallerID(tokA) || call.CommandID != p["id"] || call.Args != (effectArgs{1250, "EUR", "inv-1"}) ||
				e.sink.headers[0] != "" {
				t.Fatalf("sink call %+v, header %q", call, e.sink.headers[0])
			}
			if got := e.list(tokA, "inv-1"); len(got) != 1 {
				t.Fatalf("%d payments", len(got))
			}
		})
	}
}

// TestMismatch: another payload under a used key: 422 (ietf, t0) or 400
// idempotency_key_mismatch (stripe), with the Link; nothing paid.
func TestMismatch(t *testing.T) {
	for v, status := range map[string]int{VariantIETF: 422, VariantT0: 422, VariantStripe: 400} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "")
			e.pay(tokA, "k", body("r"))
			r := e.pay(tokA, "k", body("r", "amount", 9999))
			isProblem(t, r, status, codeKeyMismatch)
			if !hasLink(r) {
				t.Fatal("no Link")
			}
			if n := e.sink.effectsOf(sinkKey(tokA, "k")); n != 1 {
				t.Fatalf("%d effects", n)
			}
			// A member order or spacing change is the same payload (JCS).
			raw := []byte(`{ "reference" : "r", "currency":"EUR", "amount": 1250 }`)
			var same resp
			switch v {
			case VariantIETF:
				same = e.do("POST", pathPayments, tokA, raw, headerKey, `"k"`)
			case VariantStripe:
				same = e.do("POST", pathPayments, tokA, raw, headerKey, "k")
			default:
				same = e.do("POST", pathPayments, tokA, []byte(`{ "paymentRef":"k", "reference" : "r", "currency":"EUR", "amount": 1250.0 }`))
			}
			if same.status != 201 || !same.replayed() {
				t.Fatalf("the same payload, written otherwise: %s", same)
			}
		})
	}
}

// TestCallerScope: the same key from two callers is two requests.
func TestCallerScope(t *testing.T) {
	for _, v := range []string{VariantIETF, VariantT0, VariantStripe} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "")
			a := e.pay(tokA, "shared", body("r"))
			b := e.pay(tokB, "shared", body("r"))
			if a.status != 201 || b.status != 201 || b.replayed() || a.json(t)["id"] == b.json(t)["id"] {
				t.Fatalf("alice %s, bob %s", a, b)
			}
			if len(e.list(tokA, "r")) != 1 || len(e.list(tokB, "r")) != 1 {
				t.Fatal("one payment each")
			}
			if e.sink.effectsOf(sinkKey(tokA, "shared")) != 1 || e.sink.effectsOf(sinkKey(tokB, "shared")) != 1 {
				t.Fatal("one effect each")
			}
		})
	}
}

// TestInFlightConflict: ietf and stripe: a duplicate while the original is
// in flight (its sink call held) is 409, not stored: after the original
// completes, the retry gets its result.
func TestInFlightConflict(t *testing.T) {
	for _, v := range []string{VariantIETF, VariantStripe} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "")
			release := e.sink.hold(sinkKey(tokA, "k"))
			orig := e.payAsync(tokA, "k", body("r"))
			e.sink.waitArrival(t)
			r := e.pay(tokA, "k", body("r"))
			isProblem(t, r, 409, codeKeyInUse)
			if !hasLink(r) {
				t.Fatal("no Link")
			}
			// Another payload while in flight: the mismatch first.
			if r := e.pay(tokA, "k", body("r", "amount", 1)); r.status == 409 || r.status < 400 {
				t.Fatalf("another payload in flight: %s", r)
			}
			release()
			first := receive(t, orig)
			if first.status != 201 {
				t.Fatalf("original: %s", first)
			}
			if r := e.pay(tokA, "k", body("r")); r.status != 201 || !bytes.Equal(r.body, first.body) {
				t.Fatalf("retry after completion: %s", r)
			}
			if n := e.sink.effectsOf(sinkKey(tokA, "k")); n != 1 {
				t.Fatalf("%d effects", n)
			}
		})
	}
}

// TestT0WaitsInFlight: t0: duplicates of a request in flight wait for it
// and get the same status and body; one effect.
func TestT0WaitsInFlight(t *testing.T) {
	e := newEnv(t, VariantT0, "")
	release := e.sink.hold(sinkKey(tokA, "ref-1"))
	orig := e.payAsync(tokA, "ref-1", body("r"))
	e.sink.waitArrival(t)
	dup1 := e.payAsync(tokA, "ref-1", body("r"))
	dup2 := e.payAsync(tokA, "ref-1", body("r"))
	e.waiting(t)
	e.waiting(t)
	release()
	first := receive(t, orig)
	if first.status != 201 || first.replayed() {
		t.Fatalf("original: %s", first)
	}
	for _, ch := range []<-chan resp{dup1, dup2} {
		if r := receive(t, ch); r.status != 201 || !bytes.Equal(r.body, first.body) || !r.replayed() {
			t.Fatalf("duplicate: %s, want %s", r, first.body)
		}
	}
	if n := e.sink.postsOf(sinkKey(tokA, "ref-1")); n != 1 {
		t.Fatalf("%d sink calls", n)
	}
}

// TestT0WaitShares502: t0: the waiting duplicate gets the original's
// failure too, and the key is not consumed: the next retry pays.
func TestT0WaitShares502(t *testing.T) {
	e := newEnv(t, VariantT0, "")
	k := sinkKey(tokA, "ref-f")
	release := e.sink.hold(k)
	e.sink.set(func(k *fakeSink) { k.failNext = 1 })
	orig := e.payAsync(tokA, "ref-f", body("r"))
	e.sink.waitArrival(t)
	dup := e.payAsync(tokA, "ref-f", body("r"))
	e.waiting(t)
	release()
	first := receive(t, orig)
	isProblem(t, first, 502, codeProcessorFailed)
	if r := receive(t, dup); r.status != 502 || !bytes.Equal(r.body, first.body) {
		t.Fatalf("duplicate: %s", r)
	}
	if r := e.pay(tokA, "ref-f", body("r")); r.status != 201 || r.replayed() {
		t.Fatalf("retry after the failure: %s", r)
	}
	if e.sink.effectsOf(k) != 1 {
		t.Fatalf("%d effects", e.sink.effectsOf(k))
	}
}

// TestT0WaitBounded: the wait for an original that does not complete is
// bounded: 503 in_flight_timeout with Retry-After.
func TestT0WaitBounded(t *testing.T) {
	e := newEnv(t, VariantT0, "", func(c *Config) { c.InFlightWait = 100 * time.Millisecond })
	release := e.sink.hold(sinkKey(tokA, "slow"))
	orig := e.payAsync(tokA, "slow", body("r"))
	e.sink.waitArrival(t)
	r := e.pay(tokA, "slow", body("r"))
	isProblem(t, r, 503, codeInFlightTimeout)
	if r.header.Get("Retry-After") != "1" {
		t.Fatal("no Retry-After")
	}
	release()
	if r := receive(t, orig); r.status != 201 {
		t.Fatalf("original: %s", r)
	}
}

// TestRejections: a validation error under a key is stored under ietf
// (the retry gets it again, the corrected body is another payload) and
// not under t0 and stripe (the corrected request executes).
func TestRejections(t *testing.T) {
	bad := body("r", "currency", "XXX")
	t.Run("ietf", func(t *testing.T) {
		e := newEnv(t, VariantIETF, "")
		first := e.pay(tokA, "k", bad)
		isProblem(t, first, 400, codeInvalidRequest)
		again := e.pay(tokA, "k", bad)
		if again.status != 400 || !bytes.Equal(again.body, first.body) || !again.replayed() {
			t.Fatalf("retry of the rejected request: %s", again)
		}
		isProblem(t, e.pay(tokA, "k", body("r")), 422, codeKeyMismatch)
		// Not JSON at all is stored too.
		raw := e.do("POST", pathPayments, tokA, []byte("{oops"), headerKey, `"k2"`)
		if r := e.do("POST", pathPayments, tokA, []byte("{oops"), headerKey, `"k2"`); !bytes.Equal(r.body, raw.body) || !r.replayed() {
			t.Fatalf("replay of a non-JSON body's rejection: %s", r)
		}
		if e.sink.totalEffects() != 0 {
			t.Fatal("effects")
		}
	})
	for _, v := range []string{VariantT0, VariantStripe} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "")
			isProblem(t, e.pay(tokA, "k", bad), 400, codeInvalidRequest)
			if r := e.pay(tokA, "k", bad); r.replayed() || r.status != 400 {
				t.Fatalf("retry of the rejected request: %s", r)
			}
			if r := e.pay(tokA, "k", body("r")); r.status != 201 || r.replayed() {
				t.Fatalf("the corrected request: %s", r)
			}
			if e.sink.effectsOf(sinkKey(tokA, "k")) != 1 {
				t.Fatal("one effect")
			}
		})
	}
	t.Run("t0 key missing", func(t *testing.T) {
		e := newEnv(t, VariantT0, "")
		r := e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, `"ignored"`)
		m := isProblem(t, r, 400, codeInvalidRequest)
		if !strings.Contains(m["detail"].(string), "paymentRef") {
			t.Fatalf("detail: %v", m["detail"])
		}
	})
}

// TestSinkFailure: the sink answers 500 without paying: 502; stored under
// ietf and stripe (the retry gets the 502 again, no second call), not under
// t0 (the retry pays).
func TestSinkFailure(t *testing.T) {
	for v, stored := range map[string]bool{VariantIETF: true, VariantT0: false, VariantStripe: true} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "")
			e.sink.set(func(k *fakeSink) { k.failNext = 1 })
			first := e.pay(tokA, "k", body("r"))
			isProblem(t, first, 502, codeProcessorFailed)
			r := e.pay(tokA, "k", body("r"))
			k := sinkKey(tokA, "k")
			if stored {
				if r.status != 502 || !bytes.Equal(r.body, first.body) || !r.replayed() || e.sink.postsOf(k) != 1 {
					t.Fatalf("retry: %s, %d posts", r, e.sink.postsOf(k))
				}
				return
			}
			if r.status != 201 || e.sink.effectsOf(k) != 1 {
				t.Fatalf("retry: %s, %d effects", r, e.sink.effectsOf(k))
			}
		})
	}
}

// TestLostReply: the sink pays and loses its reply: the server asks it
// (GET /effects/{key}) and answers 201; one effect.
func TestLostReply(t *testing.T) {
	for _, v := range []string{VariantIETF, VariantT0, VariantStripe} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "")
			e.sink.set(func(k *fakeSink) { k.loseNext = 1 })
			first := e.pay(tokA, "k", body("r"))
			if first.status != 201 {
				t.Fatalf("first: %s", first)
			}
			if r := e.pay(tokA, "k", body("r")); !bytes.Equal(r.body, first.body) {
				t.Fatalf("retry: %s", r)
			}
			if e.sink.effectsOf(sinkKey(tokA, "k")) != 1 || len(e.list(tokA, "r")) != 1 {
				t.Fatal("one effect, one payment")
			}
		})
	}
}

// TestT0UnknownResolved: t0: the sink pays, loses its reply and does not
// answer the GET either: 502, the key stays unknown; the retry resolves
// it first (the sink has the payment) and answers it: one effect.
func TestT0UnknownResolved(t *testing.T) {
	e := newEnv(t, VariantT0, "")
	e.sink.set(func(k *fakeSink) { k.loseNext, k.getsDown = 1, true })
	isProblem(t, e.pay(tokA, "k", body("r")), 502, codeProcessorFailed)
	// Still down: 502 again, nothing paid again.
	isProblem(t, e.pay(tokA, "k", body("r")), 502, codeProcessorFailed)
	e.sink.set(func(k *fakeSink) { k.getsDown = false })
	r := e.pay(tokA, "k", body("r"))
	if r.status != 201 || !r.replayed() {
		t.Fatalf("retry: %s", r)
	}
	if again := e.pay(tokA, "k", body("r")); !bytes.Equal(again.body, r.body) {
		t.Fatalf("again: %s", again)
	}
	if e.sink.effectsOf(sinkKey(tokA, "k")) != 1 || e.sink.postsOf(sinkKey(tokA, "k")) != 1 || len(e.list(tokA, "r")) != 1 {
		t.Fatal("one call, one effect, one payment")
	}
	// Unknown, then found not to have paid: the corrected request pays.
	e.sink.set(func(k *fakeSink) { k.failNext, k.getsDown = 1, true })
	isProblem(t, e.pay(tokA, "k2", body("r2")), 502, codeProcessorFailed)
	e.sink.set(func(k *fakeSink) { k.getsDown = false })
	if r := e.pay(tokA, "k2", body("r2", "amount", 7)); r.status != 201 || r.replayed() || r.json(t)["amount"] != 7.0 {
		t.Fatalf("after a failed unknown: %s", r)
	}
}

// TestStripeKeys: the raw header, 1..255 characters, optional.
func TestStripeKeys(t *testing.T) {
	e := newEnv(t, VariantStripe, "")
	for _, k := range []string{strings.Repeat("k", 255), `"quoted"`, "ключ-ü"} {
		if r := e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, k); r.status != 201 {
			t.Fatalf("key %q: %s", k, r)
		}
	}
	isProblem(t, e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, strings.Repeat("k", 256)), 400, codeKeyInvalid)
	isProblem(t, e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, ""), 400, codeKeyInvalid)
	isProblem(t, e.do("POST", pathPayments, tokA, mustJSON(body("r")), headerKey, "a", headerKey, "b"), 400, codeKeyMultiple)
	// No key: processed, no deduplication.
	a := e.do("POST", pathPayments, tokA, mustJSON(body("nokey")))
	b := e.do("POST", pathPayments, tokA, mustJSON(body("nokey")))
	if a.status != 201 || b.status != 201 || bytes.Equal(a.body, b.body) || len(e.list(tokA, "nokey")) != 2 {
		t.Fatalf("without a key: %s, %s", a, b)
	}
}

// TestExpiry: a key is kept KeyTTL/TimeScale, then forgotten.
func TestExpiry(t *testing.T) {
	for _, v := range []string{VariantIETF, VariantT0, VariantStripe} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "", func(c *Config) { c.TimeScale = 24 }) // a day is an hour
			first := e.pay(tokA, "k", body("r"))
			e.clock.advance(59 * time.Minute)
			if r := e.pay(tokA, "k", body("r")); !bytes.Equal(r.body, first.body) {
				t.Fatalf("within the TTL: %s", r)
			}
			e.clock.advance(time.Minute)
			r := e.pay(tokA, "k", body("r", "amount", 5))
			if r.status != 201 || r.replayed() || e.sink.effectsOf(sinkKey(tokA, "k")) != 2 {
				t.Fatalf("after the TTL: %s", r)
			}
		})
	}
}

// TestRecoveryAtOpen: keys a dead process left in flight are resolved
// against the sink when the server opens.
func TestRecoveryAtOpen(t *testing.T) {
	e := newEnv(t, VariantIETF, "")
	path := e.cfg.DBPath
	e.ts.Close()
	e.srv.Close()
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	req := `{"amount":500,"currency":"GBP","reference":"rec"}`
	for _, k := range []string{"paid", "unpaid"} {
		if _, err := db.Exec(`INSERT INTO idempotency(`+rowCols+`) VALUES(?,?,'in_progress',?,?,?,?,NULL,NULL,NULL)`,
			CallerID(tokA), k, fingerprint([]byte(req)), "pay_"+k, req, testStart.UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	e.sink.set(func(s *fakeSink) { s.effects[sinkKey(tokA, "paid")] = 1 })
	e2 := newEnv(t, VariantIETF, "", func(c *Config) { c.DBPath = path; c.SinkURL = e.sink.ts.URL })
	raw := []byte(req)
	paid := e2.do("POST", pathPayments, tokA, raw, headerKey, `"paid"`)
	if paid.status != 201 || !paid.replayed() || paid.json(t)["id"] != "pay_paid" {
		t.Fatalf("the paid key: %s", paid)
	}
	if got := e2.list(tokA, "rec"); len(got) != 1 || got[0]["id"] != "pay_paid" {
		t.Fatalf("payments %v", got)
	}
	e2.sink = e.sink
	unpaid := e2.do("POST", pathPayments, tokA, raw, headerKey, `"unpaid"`)
	if unpaid.status != 201 || unpaid.replayed() || e.sink.effectsOf(sinkKey(tokA, "unpaid")) != 1 {
		t.Fatalf("the unpaid key: %s", unpaid)
	}
}

// TestStorm: 64 identical requests at once, under each variant: one
// effect, one payment; every answer is the payment (byte for byte) or,
// under ietf and stripe, 409.
func TestStorm(t *testing.T) {
	for _, v := range []string{VariantIETF, VariantT0, VariantStripe} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t, v, "")
			var chans []<-chan resp
			for range 64 {
				chans = append(chans, e.payAsync(tokA, "storm", body("r")))
			}
			var created []byte
			for _, ch := range chans {
				r := receive(t, ch)
				switch {
				case r.status == 409 && v != VariantT0:
				case r.status == 201 && (created == nil || bytes.Equal(r.body, created)):
					created = r.body
				default:
					t.Fatalf("answer %s (the payment: %s)", r, created)
				}
			}
			if e.sink.effectsOf(sinkKey(tokA, "storm")) != 1 || len(e.list(tokA, "r")) != 1 {
				t.Fatal("one effect, one payment")
			}
		})
	}
}
