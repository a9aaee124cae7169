package atp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/sut/internal/groupcommit"
)

func TestHealthConfigKeys(t *testing.T) {
	e := newEnv(t, "", func(c *Config) { c.TimeScale = 20; c.APIKey = "secret" })
	if r := e.do("GET", pathHealth, nil, headerAPIKey, ""); r.status != 200 {
		t.Fatalf("health: %s", r)
	}
	cfg := e.do("GET", pathConfig, nil).json(t)
	if cfg["binding"] != Binding || cfg["reconcile_interval_seconds"] != 60.0 || cfg["action_dedup_window_seconds"] != 600.0 ||
		cfg["rail"] != e.railTS.URL {
		t.Fatalf("config declares %v (unscaled values wanted)", cfg)
	}
	if e.srv.sweepEvery != 3*time.Second || e.srv.dedupWindow != 30*time.Second {
		t.Fatalf("scaled sweep %v window %v", e.srv.sweepEvery, e.srv.dedupWindow)
	}
	var set struct {
		Keys []map[string]string `json:"keys"`
	}
	json.Unmarshal(e.do("GET", pathKeys, nil, headerAPIKey, "").body, &set)
	if len(set.Keys) != 1 || set.Keys[0]["kty"] != "OKP" || set.Keys[0]["crv"] != "Ed25519" || set.Keys[0]["kid"] != "site-1" ||
		len(set.Keys[0]["x"]) != 43 {
		t.Fatalf("keys: %v", set)
	}
	// Credentials: every route but health, keys, verify and the rail's
	// callbacks.
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", pathConfig, 401}, {"POST", pathAuthorize, 401}, {"POST", pathExecute, 401}, {"PUT", pathAgents + "a", 401},
		{"GET", pathIntents + "x", 401}, {"GET", pathHealth, 200}, {"GET", pathKeys, 200}, {"POST", pathVerify, 400},
		{"POST", pathRailEvents, 400},
	} {
		if r := e.do(c.method, c.path, nil, headerAPIKey, "wrong"); r.status != c.want {
			t.Errorf("%s %s with a wrong key: %s, want %d", c.method, c.path, r, c.want)
		}
	}
	off := newEnv(t, "", func(c *Config) { c.ActionDedupWindow = -1 })
	if cfg := off.do("GET", pathConfig, nil).json(t); cfg["action_dedup_window_seconds"] != nil {
		t.Fatalf("a site that does not opt in declares %v", cfg)
	}
}

func TestOpenRefuses(t *testing.T) {
	for name, c := range map[string]Config{
		"no db":         {RailURL: "http://127.0.0.1:1"},
		"no rail":       {DBPath: "x.db"},
		"bad rail":      {DBPath: "x.db", RailURL: "ftp://x"},
		"mutant":        {DBPath: "x.db", RailURL: "http://127.0.0.1:1", Mutant: "nope"},
		"reading":       {DBPath: "x.db", RailURL: "http://127.0.0.1:1", Readings: map[string]string{DecisionNonceSameKey: "maybe"}},
		"decision":      {DBPath: "x.db", RailURL: "http://127.0.0.1:1", Readings: map[string]string{"other": "row"}},
		"scale":         {DBPath: "x.db", RailURL: "http://127.0.0.1:1", TimeScale: -1},
		"site key seed": {DBPath: "x.db", RailURL: "http://127.0.0.1:1", SiteKeySeed: []byte("short")},
	} {
		if _, err := Open(context.Background(), c); err == nil {
			t.Errorf("%s: Open accepted %+v", name, c)
		}
	}
}

func TestAgents(t *testing.T) {
	e := newEnv(t, "")
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32)).Public().(ed25519.PublicKey)
	if r := e.register("agt_1", e.agent.Public().(ed25519.PublicKey)); r.status != 200 {
		t.Fatalf("the same key again: %s", r)
	}
	if r := e.register("agt_1", other); r.status != 409 || r.json(t)["error"] != codeAgentKeyConflict {
		t.Fatalf("another key: %s", r)
	}
	if r := e.register("agt_2", other); r.status != 201 {
		t.Fatalf("a second agent: %s", r)
	}
	for _, b := range []string{`{}`, `{"public_key":{"kty":"RSA","crv":"Ed25519","x":"AAAA"}}`, `{"public_key":{"kty":"OKP","crv":"Ed25519","x":"AAAA"}}`,
		`[]`, `{"public_key":1}`, `not json`} {
		if r := e.do("PUT", pathAgents+"agt_3", []byte(b)); r.status != 400 {
			t.Errorf("%s: %s", b, r)
		}
	}
	if r := e.register("bad/id", other); r.status != 400 {
		t.Fatalf("bad id: %s", r)
	}
}

// TestSettle is the path of §9: authorize, execute, settled with a signed
// receipt; every retry answers the same bytes and charges nothing.
func TestSettle(t *testing.T) {
	e := newEnv(t, "")
	in := e.intent("int_a")
	k := key("settle")
	a := e.authorize(k, in)
	if a.status != 200 {
		t.Fatalf("authorize: %s", a)
	}
	x := a.tx(t)
	if x.State != stateAuthorized || x.hasReceipt() || x.IntentID != "int_a" || x.IdempotencyKey != k {
		t.Fatalf("authorized row: %s", a)
	}
	if !jsonEqual(x.Body, in) {
		t.Fatalf("the row's body %s is not the signed intent %s", x.Body, in)
	}
	if r := e.poll(k, "int_a"); r.status != 200 || !bytes.Equal(r.body, a.body) {
		t.Fatalf("poll: %s", r)
	}
	e.clock.advance(time.Second)
	ex := e.execute(k, "int_a")
	if ex.status != 200 {
		t.Fatalf("execute: %s", ex)
	}
	y := ex.tx(t)
	if y.State != stateSettled || !y.hasReceipt() || y.CreatedAt != x.CreatedAt || y.UpdatedAt == x.UpdatedAt {
		t.Fatalf("settled row: %s", ex)
	}
	body := e.verifyReceipt(y.Receipt)
	pis := e.rail.PaymentIntents("int_a")
	if body["type"] != receiptSettlement || body["intent_id"] != "int_a" || body["idempotency_key"] != k || body["agent_id"] != "agt_1" ||
		body["amount"] != 1250.0 || body["currency"] != "EUR" || body["payee"] != "merchant_42" || body["state"] != stateSettled ||
		len(pis) != 1 || body["rail_reference"] != pis[0].ID || body["issued_at"] != y.UpdatedAt {
		t.Fatalf("receipt body %v (payment intents %v)", body, pis)
	}
	if v := e.do("POST", pathVerify, y.Receipt).json(t); v["valid"] != true || v["kid"] != "site-1" {
		t.Fatalf("verify: %v", v)
	}
	for i := range 3 {
		e.clock.advance(time.Second)
		if r := e.execute(k, "int_a"); r.status != 200 || !bytes.Equal(r.body, ex.body) {
			t.Fatalf("retry %d of execute: %s, want %s", i, r, ex.body)
		}
		if r := e.authorize(k, in); r.status != 200 || !bytes.Equal(r.body, ex.body) {
			t.Fatalf("retry %d of authorize: %s", i, r)
		}
		if r := e.poll(k, "int_a"); r.status != 200 || !bytes.Equal(r.body, ex.body) {
			t.Fatalf("poll %d: %s", i, r)
		}
	}
	if e.rail.Charges("int_a") != 1 || e.rail.Created("int_a") != 1 || e.rail.Confirms("int_a") != 1 {
		t.Fatalf("rail: %d charges %d created %d confirms", e.rail.Charges("int_a"), e.rail.Created("int_a"), e.rail.Confirms("int_a"))
	}
	hist := states(t, storeOf(e.cfg), "int_a", k)
	if strings.Join(hist, ",") != "created,authorized,executing,executed,settled" {
		t.Fatalf("history %v", hist)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return bytes.Equal(mustJSON(x), mustJSON(y))
}

func TestIdempotencyKeyRules(t *testing.T) {
	e := newEnv(t, "")
	for _, k := range []string{"", strings.Repeat("k", 15), strings.Repeat("k", 129)} {
		if r := e.authorize(k, e.intent("int_k")); r.status != 400 {
			t.Errorf("authorize with a key of %d: %s", len(k), r)
		}
		if r := e.execute(k, "int_k"); r.status != 400 {
			t.Errorf("execute with a key of %d: %s", len(k), r)
		}
	}
	if r := e.poll("", "int_k"); r.status != 400 {
		t.Errorf("poll without a key: %s", r)
	}
	if r := e.poll(key("nothing"), "int_k"); r.status != 404 {
		t.Errorf("poll of nothing: %s", r)
	}
	for i, k := range []string{strings.Repeat("k", 16), strings.Repeat("é", 128), "a!#$%&'*+-.^_`|~:;<=>?@[]{}/\\ 0123456789",
		strings.Repeat("0123456789abcdef", 8)} {
		id := "int_k" + string(rune('a'+i))
		if r := e.authorize(k, e.intent(id)); r.status != 200 {
			t.Fatalf("authorize with key %q: %s", k, r)
		}
		if r := e.execute(k, id); r.status != 200 || r.tx(t).State != stateSettled {
			t.Fatalf("execute with key %q: %s", k, r)
		}
	}
}

func TestIntentRefused(t *testing.T) {
	e := newEnv(t, "")
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, 32))
	k := key("refused")
	for name, c := range map[string]struct {
		body []byte
		want int
	}{
		"unknown member":     {e.intent("int_r", "memo", "hi"), 400},
		"no nonce":           {e.intent("int_r", "nonce", nil), 400},
		"no payee":           {e.intent("int_r", "payee", nil), 400},
		"amount 0":           {e.intent("int_r", "amount", 0), 400},
		"amount 1.5":         {e.intent("int_r", "amount", 1.5), 400},
		"amount string":      {e.intent("int_r", "amount", "12"), 400},
		"amount 10^12+1":     {e.intent("int_r", "amount", 1_000_000_000_001), 400},
		"currency":           {e.intent("int_r", "currency", "eur"), 400},
		"expires_at":         {e.intent("int_r", "expires_at", "tomorrow"), 400},
		"expires_at offset":  {e.intent("int_r", "expires_at", "2026-11-24T12:00:00+01:00"), 400},
		"intent_id chars":    {e.intent("int r"), 400},
		"precondition shape": {e.intent("int_r", "precondition", map[string]any{"intent_settled": "x", "more": 1}), 400},
		"dedup not string":   {e.intent("int_r", "action_dedup_key", 5), 400},
		"not an object":      {[]byte(`["int_r"]`), 400},
		"trailing data":      {append(e.intent("int_r"), []byte(" {}")...), 400},
		"duplicate member":   {[]byte(`{"intent_id":"int_r","intent_id":"int_s"}`), 400},
		"unknown agent":      {e.intent("int_r", "agent_id", "agt_9"), 403},
		"wrong key":          {signIntent(map[string]any{"intent_id": "int_r", "agent_id": "agt_1", "nonce": "n", "expires_at": "2026-11-24T12:00:00Z", "amount": 1, "currency": "EUR", "payee": "p"}, other), 403},
		"tampered":           {bytes.Replace(e.intent("int_r"), []byte(`1250`), []byte(`1251`), 1), 403},
		"signature garbage":  {bytes.Replace(e.intent("int_r"), []byte(`"signature":"`), []byte(`"signature":"!!`), 1), 400},
	} {
		r := e.authorize(k, c.body)
		if r.status != c.want {
			t.Errorf("%s: %s, want %d", name, r, c.want)
			continue
		}
		if m := r.json(t); m["error"] == nil || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: not an error document: %s", name, r)
		}
	}
	if r := e.poll(k, "int_r"); r.status != 404 {
		t.Fatalf("a refused authorize created %s", r)
	}
	// Nothing was consumed: the good intent goes through.
	if r := e.authorize(k, e.intent("int_r")); r.status != 200 {
		t.Fatalf("authorize after refusals: %s", r)
	}
}

func TestNonceSingleUse(t *testing.T) {
	for _, reading := range []string{ReadingRow, ReadingNonce} {
		t.Run(reading, func(t *testing.T) {
			e := newEnv(t, "", func(c *Config) { c.Readings = map[string]string{DecisionNonceSameKey: reading} })
			in := e.intent("int_n")
			a := e.authorize(key("first"), in)
			if a.status != 200 {
				t.Fatal(a)
			}
			created := a.tx(t).CreatedAt
			var firsts []string
			for i := range 3 {
				e.clock.advance(time.Minute)
				r := e.authorize(key("another"+string(rune('a'+i))), in)
				m := r.json(t)
				if r.status != 409 || m["error"] != codeNonceConsumed {
					t.Fatalf("replay under another key: %s", r)
				}
				firsts = append(firsts, m["first_consumed_at"].(string))
			}
			if firsts[0] != created || firsts[1] != created || firsts[2] != created {
				t.Fatalf("first_consumed_at %v, want %s every time", firsts, created)
			}
			same := e.authorize(key("first"), in)
			switch reading {
			case ReadingRow:
				if same.status != 200 || !bytes.Equal(same.body, a.body) {
					t.Fatalf("reading row: the same key answers %s, want the row %s", same, a.body)
				}
			case ReadingNonce:
				if same.status != 409 || same.json(t)["first_consumed_at"] != created {
					t.Fatalf("reading nonce: the same key answers %s", same)
				}
			}
			// Another intent with the consumed nonce.
			if r := e.authorize(key("third"), e.intent("int_n2", "nonce", "n_int_n")); r.status != 409 || r.json(t)["error"] != codeNonceConsumed {
				t.Fatalf("another intent with the nonce: %s", r)
			}
			// Another signed intent with the same intent_id and key but a
			// fresh nonce: a conflict, not the row.
			if r := e.authorize(key("first"), e.intent("int_n", "nonce", "n_fresh")); r.status != 409 {
				t.Fatalf("another intent under the key: %s", r)
			}
			if e.rail.Created("int_n") != 0 {
				t.Fatal("authorize touched the rail")
			}
		})
	}
}

func TestExpiry(t *testing.T) {
	e := newEnv(t, "")
	past := e.intent("int_p", "expires_at", testStart.Add(-time.Second).Format(time.RFC3339))
	if r := e.authorize(key("past"), past); r.status != 410 || r.json(t)["error"] != codeIntentExpired {
		t.Fatalf("authorize past expiry: %s", r)
	}
	if r := e.poll(key("past"), "int_p"); r.status != 404 {
		t.Fatalf("an expired authorize created %s", r)
	}
	in := e.intent("int_e")
	k := key("expiry")
	if r := e.authorize(k, in); r.status != 200 {
		t.Fatal(r)
	}
	e.clock.advance(10*time.Minute + time.Millisecond)
	for i := range 2 {
		if r := e.execute(k, "int_e"); r.status != 410 || r.json(t)["error"] != codeIntentExpired {
			t.Fatalf("execute %d past expiry: %s", i, r)
		}
	}
	if r := e.authorize(k, in); r.status != 410 {
		t.Fatalf("authorize retry past expiry: %s", r)
	}
	p := e.poll(k, "int_e")
	if x := p.tx(t); x.State != stateExpired || x.hasReceipt() {
		t.Fatalf("expired row: %s", p)
	}
	if e.rail.Created("int_e") != 0 {
		t.Fatal("an expired intent reached the rail")
	}
	// Retried authorize past expiry of a row never executed: expired too.
	e2 := newEnv(t, "")
	in2 := e2.intent("int_e2")
	e2.authorize(k, in2)
	e2.clock.advance(11 * time.Minute)
	if r := e2.authorize(k, in2); r.status != 410 {
		t.Fatalf("authorize retry past expiry: %s", r)
	}
	if r := e2.execute(k, "int_e2"); r.status != 410 {
		t.Fatalf("execute after the expiry: %s", r)
	}
	monotonic(t, states(t, storeOf(e2.cfg), "int_e2", k))
}

func TestPrecondition(t *testing.T) {
	e := newEnv(t, "")
	b := e.intent("int_b", "precondition", map[string]any{"intent_settled": "int_a"})
	if r := e.authorize(key("b"), b); r.status != 409 || r.json(t)["error"] != codePreconditionFailed {
		t.Fatalf("precondition on an unknown intent: %s", r)
	}
	if r := e.authorize(key("a"), e.intent("int_a")); r.status != 200 {
		t.Fatal(r)
	}
	if r := e.authorize(key("b"), b); r.status != 409 {
		t.Fatalf("precondition on an authorized intent: %s", r)
	}
	if r := e.poll(key("b"), "int_b"); r.status != 404 {
		t.Fatalf("an unmet precondition created %s", r)
	}
	if r := e.execute(key("a"), "int_a"); r.tx(t).State != stateSettled {
		t.Fatal(r)
	}
	if r := e.authorize(key("b"), b); r.status != 200 {
		t.Fatalf("precondition met: %s", r)
	}
	// An intent of another agent does not count.
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, 32))
	e.register("agt_2", other.Public().(ed25519.PublicKey))
	c := signIntent(map[string]any{"intent_id": "int_c", "agent_id": "agt_2", "nonce": "n_c", "amount": 5, "currency": "EUR",
		"payee": "p", "expires_at": testStart.Add(time.Hour).Format(time.RFC3339), "precondition": map[string]any{"intent_settled": "int_a"}}, other)
	if r := e.authorize(key("c"), c); r.status != 409 {
		t.Fatalf("precondition on another agent's intent: %s", r)
	}
}

func TestActionDedup(t *testing.T) {
	e := newEnv(t, "", func(c *Config) { c.TimeScale = 10 }) // the window is 60 s of real time
	if r := e.authorize(key("d1"), e.intent("int_d1", "action_dedup_key", "cart:1")); r.status != 200 {
		t.Fatal(r)
	}
	e.clock.advance(59 * time.Second)
	if r := e.authorize(key("d2"), e.intent("int_d2", "action_dedup_key", "cart:1")); r.status != 409 || r.json(t)["error"] != codeActionDedupConflict {
		t.Fatalf("duplicate within the window: %s", r)
	}
	if r := e.poll(key("d2"), "int_d2"); r.status != 404 {
		t.Fatalf("a duplicate created %s", r)
	}
	if r := e.authorize(key("d3"), e.intent("int_d3", "action_dedup_key", "cart:2")); r.status != 200 {
		t.Fatalf("another key: %s", r)
	}
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{4}, 32))
	e.register("agt_2", other.Public().(ed25519.PublicKey))
	o := signIntent(map[string]any{"intent_id": "int_o", "agent_id": "agt_2", "nonce": "n_o", "amount": 5, "currency": "EUR",
		"payee": "p", "expires_at": testStart.Add(time.Hour).Format(time.RFC3339), "action_dedup_key": "cart:1"}, other)
	if r := e.authorize(key("o"), o); r.status != 200 {
		t.Fatalf("the same key of another agent: %s", r)
	}
	e.clock.advance(time.Second + time.Millisecond)
	if r := e.authorize(key("d4"), e.intent("int_d4", "action_dedup_key", "cart:1")); r.status != 200 {
		t.Fatalf("after the window: %s", r)
	}
	if r := e.authorize(key("d5"), e.intent("int_d5", "action_dedup_key", "cart:1")); r.status != 409 {
		t.Fatalf("the window restarts at the new first: %s", r)
	}
}

// TestKeyBoundToIntent: one key on two intents is two transactions (§3).
func TestKeyBoundToIntent(t *testing.T) {
	e := newEnv(t, "")
	k := key("shared")
	for _, id := range []string{"int_x", "int_y"} {
		if r := e.authorize(k, e.intent(id)); r.status != 200 || r.tx(t).IntentID != id {
			t.Fatalf("authorize %s: %s", id, r)
		}
		if r := e.execute(k, id); r.status != 200 || r.tx(t).IntentID != id || r.tx(t).State != stateSettled {
			t.Fatalf("execute %s: %s", id, r)
		}
		if e.rail.Charges(id) != 1 {
			t.Fatalf("%s charged %d times", id, e.rail.Charges(id))
		}
	}
	if r := e.execute(k, "int_z"); r.status != 404 || r.json(t)["error"] != codeNotAuthorized {
		t.Fatalf("execute without authorize: %s", r)
	}
	for _, b := range []string{`{}`, `{"intent_id":5}`, `[]`, `x`} {
		if r := e.do("POST", pathExecute, []byte(b), headerKey, k); r.status != 400 {
			t.Fatalf("execute %s: %s", b, r)
		}
	}
}

func TestDeclineCompensates(t *testing.T) {
	e := newEnv(t, "")
	e.rail.Decline("int_dc")
	k := key("decline")
	e.authorize(k, e.intent("int_dc"))
	r := e.execute(k, "int_dc")
	x := r.tx(t)
	if r.status != 200 || x.State != stateCompensated || !x.hasReceipt() {
		t.Fatalf("declined: %s", r)
	}
	body := e.verifyReceipt(x.Receipt)
	if body["type"] != receiptCompensation || body["references_intent_id"] != "int_dc" || body["reason"] != "declined" ||
		body["state"] != stateCompensated || body["rail_reference"] != nil {
		t.Fatalf("compensation receipt %v", body)
	}
	if r2 := e.execute(k, "int_dc"); !bytes.Equal(r2.body, r.body) {
		t.Fatalf("retry: %s", r2)
	}
	if e.rail.Charges("int_dc") != 0 || e.rail.Confirms("int_dc") != 1 {
		t.Fatal("rail counts")
	}
	if h := states(t, storeOf(e.cfg), "int_dc", k); strings.Join(h, ",") != "created,authorized,executing,compensated" {
		t.Fatalf("history %v", h)
	}
}

// TestLostConfirm: the rail charged and lost its answer (§6): the row
// stays executing, retries charge nothing, the sweep settles it.
func TestLostConfirm(t *testing.T) {
	e := newEnv(t, "")
	k := key("lost")
	e.authorize(k, e.intent("int_l"))
	e.rail.LoseConfirms(1)
	r := e.execute(k, "int_l")
	if x := r.tx(t); r.status != 202 || x.State != stateExecuting || x.hasReceipt() {
		t.Fatalf("lost confirm: %s", r)
	}
	for range 2 {
		if r := e.execute(k, "int_l"); r.status != 202 || r.tx(t).State != stateExecuting {
			t.Fatalf("retry while executing: %s", r)
		}
		if r := e.poll(k, "int_l"); r.tx(t).State != stateExecuting {
			t.Fatalf("poll: %s", r)
		}
	}
	if e.rail.Confirms("int_l") != 1 || e.rail.Charges("int_l") != 1 {
		t.Fatalf("a retry reached the rail: %d confirms", e.rail.Confirms("int_l"))
	}
	if err := e.srv.ReconcileNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := e.poll(k, "int_l")
	if x := p.tx(t); x.State != stateSettled || !x.hasReceipt() {
		t.Fatalf("after the sweep: %s", p)
	}
	e.verifyReceipt(p.tx(t).Receipt)
	if r := e.execute(k, "int_l"); r.status != 200 || !bytes.Equal(r.body, p.body) {
		t.Fatalf("execute after the sweep: %s", r)
	}
	if e.rail.Charges("int_l") != 1 || e.rail.Created("int_l") != 1 {
		t.Fatal("charged again")
	}
	monotonic(t, states(t, storeOf(e.cfg), "int_l", k))
}

// TestRailDown: nothing reached the rail; the sweep keeps the row executing
// while the rail is down, then cancels and compensates it.
func TestRailDown(t *testing.T) {
	e := newEnv(t, "")
	k := key("down")
	e.authorize(k, e.intent("int_dn"))
	e.rail.SetDown(true)
	if r := e.execute(k, "int_dn"); r.status != 202 || r.tx(t).State != stateExecuting {
		t.Fatalf("rail down: %s", r)
	}
	if err := e.srv.ReconcileNow(context.Background()); err == nil {
		t.Fatal("the sweep says it resolved a row against a rail that is down")
	}
	if r := e.poll(k, "int_dn"); r.tx(t).State != stateExecuting {
		t.Fatalf("guessed: %s", r)
	}
	e.rail.SetDown(false)
	if err := e.srv.ReconcileNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := e.poll(k, "int_dn")
	x := p.tx(t)
	if x.State != stateCompensated || !x.hasReceipt() || e.rail.Charges("int_dn") != 0 {
		t.Fatalf("after the sweep: %s (charges %d)", p, e.rail.Charges("int_dn"))
	}
	if b := e.verifyReceipt(x.Receipt); b["reason"] != railCanceled {
		t.Fatalf("reason %v", b)
	}
	// The payment intent created by the sweep is canceled: a late confirm
	// charges nothing.
	for _, pi := range e.rail.PaymentIntents("int_dn") {
		if pi.Status != railCanceled {
			t.Fatalf("payment intent %+v", pi)
		}
	}
}

// TestLostCreate: the rail created the payment intent and lost its answer;
// the sweep finds it again by its Idempotency-Key.
func TestLostCreate(t *testing.T) {
	e := newEnv(t, "")
	k := key("lostcreate")
	e.authorize(k, e.intent("int_lc"))
	e.rail.LoseCreates(1)
	r := e.execute(k, "int_lc")
	if r.status != 200 && r.status != 202 {
		t.Fatalf("lost create: %s", r)
	}
	if err := e.srv.ReconcileNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	x := e.poll(k, "int_lc").tx(t)
	if (x.State != stateSettled && x.State != stateCompensated) || e.rail.Created("int_lc") != 1 || e.rail.Charges("int_lc") > 1 {
		t.Fatalf("state %s, %d payment intents, %d charges", x.State, e.rail.Created("int_lc"), e.rail.Charges("int_lc"))
	}
	if (x.State == stateSettled) != (e.rail.Charges("int_lc") == 1) {
		t.Fatalf("state %s with %d charges", x.State, e.rail.Charges("int_lc"))
	}
}

// TestCallback: the rail's callback resolves an executing row, after the
// site read the payment intent back; a forged one changes nothing.
func TestCallback(t *testing.T) {
	e := newEnv(t, "")
	k := key("callback")
	e.authorize(k, e.intent("int_cb"))
	e.rail.FailConfirms(1) // 503: nothing charged, the row stays executing
	if r := e.execute(k, "int_cb"); r.status != 202 {
		t.Fatal(r)
	}
	pi := e.rail.PaymentIntents("int_cb")[0]
	forged := mustJSON(map[string]any{"type": "payment_intent.succeeded", "payment_intent": map[string]any{"id": pi.ID,
		"intent_id": "int_cb", "status": "succeeded", "amount": 1250, "currency": "EUR", "charge_id": "ch_forged"}})
	if r := e.do("POST", pathRailEvents, forged); r.status/100 != 2 {
		t.Fatalf("callback: %s", r)
	}
	if x := e.poll(k, "int_cb").tx(t); x.State != stateExecuting {
		t.Fatalf("a forged callback moved the row to %s", x.State)
	}
	if r := e.do("POST", pathRailEvents, []byte(`{"type":"payment_intent.succeeded","payment_intent":{"id":"pi_nope"}}`)); r.status != 200 {
		t.Fatalf("unknown payment intent: %s", r)
	}
	// A real charge, its answer lost, its callback delivered.
	k2 := key("callback2")
	e.authorize(k2, e.intent("int_cb2"))
	e.rail.SetCallback(e.ts.URL)
	e.rail.LoseConfirms(1)
	// The callback races the execute's answer: the row is executing (202),
	// or already settled by the callback (200), both right.
	if r := e.execute(k2, "int_cb2"); r.status != 202 && (r.status != 200 || r.tx(t).State != stateSettled) {
		t.Fatal(r)
	}
	e.rail.WaitCallbacks()
	x := e.poll(k2, "int_cb2").tx(t)
	if x.State != stateSettled || !x.hasReceipt() {
		t.Fatalf("after the callback: %+v", x)
	}
	if e.rail.Charges("int_cb2") != 1 {
		t.Fatal("charges")
	}
}

// TestConcurrentExecutes: duplicates racing one row charge once (§0,
// §2): one wins the row, the others answer it as it is.
func TestConcurrentExecutes(t *testing.T) {
	e := newEnv(t, "")
	k := key("race")
	e.authorize(k, e.intent("int_race"))
	e.rail.HoldConfirms()
	var wg sync.WaitGroup
	answers := make([]resp, 8)
	for i := range answers {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = e.execute(k, "int_race") }()
	}
	if e.rail.WaitConfirms(1, 5*time.Second) != 1 {
		t.Fatal("no confirm arrived")
	}
	if e.rail.WaitConfirms(1, 200*time.Millisecond) != 0 {
		t.Fatal("a second confirm arrived")
	}
	e.rail.Release()
	wg.Wait()
	settled := 0
	for _, r := range answers {
		switch x := r.tx(t); {
		case r.status == 200 && x.State == stateSettled:
			settled++
		case r.status == 202 && x.State == stateExecuting && !x.hasReceipt():
		default:
			t.Fatalf("answer %s", r)
		}
	}
	if settled < 1 || e.rail.Charges("int_race") != 1 || e.rail.Created("int_race") != 1 {
		t.Fatalf("%d settled answers, %d charges, %d payment intents", settled, e.rail.Charges("int_race"), e.rail.Created("int_race"))
	}
}

func TestVerify(t *testing.T) {
	e := newEnv(t, "", func(c *Config) { c.APIKey = "secret" })
	k := key("verify")
	e.authorize(k, e.intent("int_v"))
	receipt := e.execute(k, "int_v").tx(t).Receipt
	post := func(b []byte) map[string]any {
		r := e.do("POST", pathVerify, b, headerAPIKey, "")
		if r.status != 200 && r.status != 400 {
			t.Fatalf("verify: %s", r)
		}
		return r.json(t)
	}
	if v := post(receipt); v["valid"] != true || v["kid"] != "site-1" {
		t.Fatalf("valid receipt: %v", v)
	}
	var doc map[string]any
	json.Unmarshal(receipt, &doc)
	// The same body re-encoded (another member order, whitespace) still
	// verifies: the signature is over its JCS form.
	var body map[string]any
	b, _ := json.Marshal(doc["body"])
	json.Unmarshal(b, &body)
	pretty, _ := json.MarshalIndent(map[string]any{"signature": doc["signature"], "kid": doc["kid"], "alg": doc["alg"], "body": body}, "", "  ")
	if v := post(pretty); v["valid"] != true {
		t.Fatalf("re-encoded receipt: %v", v)
	}
	for name, mod := range map[string]func(d map[string]any){
		"amount":    func(d map[string]any) { d["body"].(map[string]any)["amount"] = 1 },
		"kid":       func(d map[string]any) { d["kid"] = "site-9" },
		"alg":       func(d map[string]any) { d["alg"] = "HS256" },
		"signature": func(d map[string]any) { d["signature"] = "AAAA" },
		"no body":   func(d map[string]any) { delete(d, "body") },
	} {
		var d map[string]any
		json.Unmarshal(receipt, &d)
		mod(d)
		if v := post(mustJSON(d)); v["valid"] != false || v["reason"] == "" {
			t.Errorf("%s tampered: %v", name, v)
		}
	}
	if r := e.do("POST", pathVerify, []byte(`garbage`)); r.status == 200 && r.json(t)["valid"] != false {
		t.Fatalf("garbage: %s", r)
	}
}

// TestRestart: a row left executing (the rail's answer lost) is resolved
// by the sweep a new server runs at once on the same database.
func TestRestart(t *testing.T) {
	e := newEnv(t, "")
	k := key("restart")
	e.authorize(k, e.intent("int_rs"))
	e.rail.LoseConfirms(1)
	if r := e.execute(k, "int_rs"); r.status != 202 {
		t.Fatal(r)
	}
	e.srv.Close()
	if r := e.execute(k, "int_rs"); r.status != 503 {
		t.Fatalf("closed: %s", r)
	}
	srv, err := Open(context.Background(), e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	eventually(t, 5*time.Second, "the restarted server settles the row", func() bool {
		x, err := srv.readRow(context.Background(), "int_rs", k)
		return err == nil && x != nil && x.state == stateSettled
	})
	if e.rail.Charges("int_rs") != 1 {
		t.Fatal("charges")
	}
	monotonic(t, states(t, storeOf(e.cfg), "int_rs", k))
}

// TestSiteKeyRotation: a new site key is published beside the old one; a
// stored receipt still verifies.
func TestSiteKeyRotation(t *testing.T) {
	e := newEnv(t, "", func(c *Config) { c.Seed = 1 })
	k := key("rotate")
	e.authorize(k, e.intent("int_rot"))
	old := e.execute(k, "int_rot").body
	e.srv.Close()
	cfg := e.cfg
	cfg.Seed = 2
	srv, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if srv.site.kid != "site-2" || len(srv.site.pubs) != 2 {
		t.Fatalf("kid %s, %d keys", srv.site.kid, len(srv.site.pubs))
	}
	var x tx
	json.Unmarshal(old, &x)
	if kid, reason, err := srv.verifyReceipt(context.Background(), x.Receipt); err != nil || kid != "site-1" || reason != "" {
		t.Fatalf("the old receipt: %s %s", kid, reason)
	}
	srv.Close()
	cfg.Seed = 1
	srv1, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv1.Close()
	if srv1.site.kid != "site-1" {
		t.Fatalf("seed 1 again signs as %s", srv1.site.kid)
	}
}

func TestRoutes(t *testing.T) {
	e := newEnv(t, "")
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/nope", 404}, {"GET", pathAuthorize, 405}, {"POST", pathHealth, 405}, {"DELETE", pathAgents + "a", 405},
		{"POST", pathIntents + "x", 405}, {"GET", pathVerify, 405},
	} {
		r := e.do(c.method, c.path, nil)
		if r.status != c.want || r.json(t)["error"] == nil {
			t.Errorf("%s %s: %s, want %d", c.method, c.path, r, c.want)
		}
	}
	big := bytes.Repeat([]byte("x"), maxBody+1)
	if r := e.authorize(key("big"), big); r.status != 413 {
		t.Fatalf("big body: %s", r)
	}
}

func TestGroupCommitErrorsMap(t *testing.T) {
	e := newEnv(t, "")
	rec := &errRecorder{h: map[string][]string{}}
	e.srv.writeError(rec, groupcommit.ErrClosed)
	if rec.status != 503 {
		t.Fatalf("closed: %d", rec.status)
	}
	e.srv.writeError(rec, errors.New("boom"))
	if rec.status != 500 {
		t.Fatalf("internal: %d", rec.status)
	}
}

type errRecorder struct {
	h      map[string][]string
	status int
}

func (r *errRecorder) Header() http.Header         { return r.h }
func (r *errRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *errRecorder) WriteHeader(s int)           { r.status = s }
