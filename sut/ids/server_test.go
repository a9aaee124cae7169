package ids

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// workedExample is the binding's worked example, as an envelope.
func workedExample(kv ...any) map[string]any {
	m := map[string]any{
		"command_id": "cmd-7f3a9c", "tenant_id": "acme", "actor_id": "alice", "effective_actor_id": "alice",
		"intent":       map[string]any{"entity": "payment", "action": "capture", "target": "order-42"},
		"args":         map[string]any{"amount_minor": 1250, "currency": "EUR"},
		"command_kind": "I3", "timestamp": "2026-11-24T10:00:00Z", "message_id": "wamid.HBgL", "trace_id": "4bf92f3577b34da6",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// The JCS of the worked example's key inputs, copied from the binding page.
const workedJCS = `{"args":{"amount_minor":1250,"currency":"EUR"},"command_kind":"I3","intent":{"action":"capture","entity":"payment","target":"order-42"},"principal":"alice","tenant_id":"acme"}`

func TestKeyWorkedExample(t *testing.T) {
	e := newEnv(t, "")
	want := sha(workedJCS)
	r := e.send(workedExample())
	if r.status != 201 || keyOf(t, r) != want {
		t.Fatalf("got %s, want 201 with key %s", r, want)
	}
	// The client may send the key; the same key with a reordered, respelled
	// envelope (number 1250.0, other ephemeral fields) is the same command.
	raw := `{"trace_id":"x","args":{"currency":"EUR","amount_minor":1250.0},"intent":{"target":"order-42","action":"capture","entity":"payment"},
	 "command_kind":"I3","effective_actor_id":"alice","actor_id":"alice","tenant_id":"acme","command_id":"cmd-other","idempotency_key":"` + want + `"}`
	r2 := e.do("POST", "/commands", []byte(raw))
	if r2.status != 201 || !bytes.Equal(r2.body, r.body) || r2.decision() != decReplayed {
		t.Fatalf("respelled duplicate: %s %q, want the replay of %s", r2, r2.decision(), r)
	}
	// Unit: the derivation itself.
	env, _, err := parseEnvelope([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got := env.key(""); got != want {
		t.Fatalf("key %s, want %s", got, want)
	}
	// The fingerprint: the envelope without the excluded fields, JCS'd.
	wantFP := sha(`{"actor_id":"alice","args":{"amount_minor":1250,"currency":"EUR"},"command_kind":"I3","effective_actor_id":"alice","intent":{"action":"capture","entity":"payment","target":"order-42"},"tenant_id":"acme"}`)
	if got := env.fingerprint(); got != wantFP {
		t.Fatalf("fingerprint %s, want %s", got, wantFP)
	}
	if e.sink.totalEffects() != 1 {
		t.Fatalf("effects %d, want 1", e.sink.totalEffects())
	}
}

func TestKeyInputs(t *testing.T) {
	base, _, err := parseEnvelope(mustJSON(workedExample()))
	if err != nil {
		t.Fatal(err)
	}
	k0 := base.key("")
	for name, mod := range map[string][]any{
		"tenant":    {"tenant_id", "other"},
		"principal": {"effective_actor_id", "bob"},
		"target":    {"intent", map[string]any{"entity": "payment", "action": "capture", "target": "order-43"}},
		"args":      {"args", map[string]any{"amount_minor": 1251, "currency": "EUR"}},
		"kind":      {"command_kind", "I2"},
	} {
		env, _, err := parseEnvelope(mustJSON(workedExample(mod...)))
		if err != nil {
			t.Fatal(err)
		}
		if env.key("") == k0 {
			t.Errorf("%s: same key", name)
		}
	}
	for name, mod := range map[string][]any{
		"command_id": {"command_id", "c2"}, "timestamp": {"timestamp", "2030-01-01T00:00:00Z"}, "message_id": {"message_id", "m2"},
		"trace_id": {"trace_id", "t2"}, "token": {"confirmation_token", "cft_x"}, "actor with an effective actor": {"actor_id", "system"},
	} {
		env, _, err := parseEnvelope(mustJSON(workedExample(mod...)))
		if err != nil {
			t.Fatal(err)
		}
		if env.key("") != k0 {
			t.Errorf("%s changed the key", name)
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestReplayByteIdentical(t *testing.T) {
	e := newEnv(t, "")
	r1 := e.send(payment(500))
	if r1.status != 201 || r1.decision() != decFirstSeen {
		t.Fatalf("first: %s %q", r1, r1.decision())
	}
	doc := r1.json(t)
	res := doc["result"].(map[string]any)
	if doc["status"] != "executed" || doc["command_id"] != "cmd-1" || doc["status_url"] != "/commands/cmd-1" ||
		!strings.HasPrefix(res["effect_id"].(string), "eff_") || res["private"].(map[string]any)["payer_ref"] == "" {
		t.Fatalf("outcome document: %s", r1.body)
	}
	key := keyOf(t, r1)
	if ev := r1.header.Get(hdrEvidence); ev != "/evidence?tenant_id=acme&idempotency_key="+key {
		t.Fatalf("IDS-Evidence %q", ev)
	}
	for i := range 3 {
		r := e.send(payment(500, "command_id", fmt.Sprintf("cmd-dup-%d", i), "message_id", fmt.Sprint(i), "timestamp", "2030-01-01T00:00:00Z"))
		if r.status != 201 || !bytes.Equal(r.body, r1.body) || r.decision() != decReplayed {
			t.Fatalf("replay %d: %s %q, want byte-identical %s", i, r, r.decision(), r1.body)
		}
	}
	if n := e.sink.postsOf(key); n != 1 {
		t.Fatalf("sink POSTs %d, want 1", n)
	}
	ev := e.evidence("acme", key)
	if len(ev) != 4 || ev[0]["decision"] != decFirstSeen || ev[0]["executed"] != true || ev[0]["outcome_ref"] != doc["outcome_ref"] {
		t.Fatalf("evidence: %v", ev)
	}
	for _, it := range ev[1:] {
		if it["decision"] != decReplayed || it["executed"] != false || it["original_command_id"] != "cmd-1" ||
			it["outcome_ref"] != doc["outcome_ref"] || !strings.HasPrefix(it["command_id"].(string), "cmd-dup-") {
			t.Fatalf("replay evidence: %v", it)
		}
	}
	// GET /commands/{id}: the stored fields (IDS §VIII.B).
	st := e.get("/commands/cmd-1").json(t)
	if st["status"] != "executed" || st["idempotency_key"] != key || st["outcome_ref"] != doc["outcome_ref"] || st["tenant_id"] != "acme" ||
		st["created_at"] != "2026-11-24T10:00:00.000Z" || st["ttl_expires_at"] != "2026-11-25T10:00:00.000Z" {
		t.Fatalf("status: %v", st)
	}
	if r := e.get("/commands/cmd-dup-0"); r.status != 404 || r.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a duplicate's command_id: %s", r)
	}
}

func TestRejectedOutcomeIsTerminal(t *testing.T) {
	e := newEnv(t, "")
	r1 := e.send(payment(0))
	doc := r1.json(t)
	if r1.status != 422 || doc["status"] != "rejected" || doc["result"].(map[string]any)["reason"] == "" || r1.decision() != decFirstSeen {
		t.Fatalf("first: %s", r1)
	}
	r2 := e.send(payment(0, "command_id", "cmd-2"))
	if r2.status != 422 || !bytes.Equal(r2.body, r1.body) || r2.decision() != decReplayed {
		t.Fatalf("replay: %s", r2)
	}
	if e.sink.totalEffects() != 0 {
		t.Fatal("a rejected command made an effect")
	}
	if s := e.commandStatus("cmd-1"); s != "rejected" {
		t.Fatalf("status %s", s)
	}
}

func TestInProgressDuplicate(t *testing.T) {
	e := newEnv(t, "")
	e.sink.holdPosts()
	first := make(chan resp, 1)
	go func() { first <- e.send(note("hello")) }()
	if e.sink.waitArrivals(1, 5*time.Second) != 1 {
		t.Fatal("the first POST did not reach the sink")
	}
	key := e.srv.keyOfNote(t, "hello")
	if s := e.commandStatus("cmd-1"); s != "in_progress" {
		t.Fatalf("status while held: %s", s)
	}
	for i := range 3 {
		r := e.send(note("hello", "command_id", fmt.Sprintf("cmd-%d", i+2)))
		doc := r.json(t)
		if r.status != 202 || doc["status"] != "processing" || doc["command_id"] != "cmd-1" || doc["idempotency_key"] != key ||
			doc["status_url"] != "/commands/cmd-1" || r.decision() != decReplayed {
			t.Fatalf("in-progress duplicate: %s %q", r, r.decision())
		}
	}
	if e.sink.waitArrivals(1, 100*time.Millisecond) != 0 {
		t.Fatal("a duplicate reached the sink")
	}
	e.sink.release()
	r := <-first
	if r.status != 201 {
		t.Fatalf("first: %s", r)
	}
	if e.sink.postsOf(key) != 1 {
		t.Fatalf("POSTs %d", e.sink.postsOf(key))
	}
	ev := e.evidence("acme", key)
	if len(ev) != 4 || ev[1]["outcome_ref"] != nil || ev[0]["outcome_ref"] != r.json(t)["outcome_ref"] {
		t.Fatalf("evidence: %v", ev)
	}
}

// keyOfNote derives the key of note(text) as the server does.
func (s *Server) keyOfNote(t *testing.T, text string, kv ...any) string {
	env, _, err := parseEnvelope(mustJSON(note(text, kv...)))
	if err != nil {
		t.Fatal(err)
	}
	return env.key(s.mutant)
}

func TestConcurrentStorm(t *testing.T) {
	e := newEnv(t, "")
	const n = 200
	start := make(chan struct{})
	out := make([]resp, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := mustJSON(note("storm", "command_id", fmt.Sprintf("cmd-%d", i), "message_id", fmt.Sprint(i)))
			<-start
			out[i] = e.do("POST", "/commands", b)
		}()
	}
	close(start)
	wg.Wait()
	firsts, limited := 0, 0
	for _, r := range out {
		switch {
		case r.status == 201 && r.decision() == decFirstSeen:
			firsts++
		case r.status == 201 || r.status == 202:
			if r.decision() != decReplayed {
				t.Fatalf("duplicate answered %s with %q", r, r.decision())
			}
		case r.status == 429:
			limited++
		default:
			t.Fatalf("unexpected answer %s", r)
		}
	}
	key := e.srv.keyOfNote(t, "storm")
	if firsts != 1 || e.sink.postsOf(key) != 1 || limited > n-1-rateLimitMax {
		t.Fatalf("first_seen %d, sink POSTs %d, 429s %d", firsts, e.sink.postsOf(key), limited)
	}
}

func TestCollision(t *testing.T) {
	e := newEnv(t, "")
	r1 := e.send(note("one"))
	k1 := keyOf(t, r1)
	e2 := note("two", "command_id", "cmd-2", "idempotency_key", k1)
	r2 := e.send(e2)
	doc := r2.json(t)
	if r2.status != 409 || doc["event"] != "execution.rejected" || doc["reason"] != "idempotency_conflict" || doc["command_id"] != "cmd-2" ||
		doc["original_command_id"] != "cmd-1" || doc["idempotency_key"] != k1 || doc["evidence_url"] != r1.header.Get(hdrEvidence) ||
		r2.decision() != decConflict {
		t.Fatalf("collision: %s %q", r2, r2.decision())
	}
	ev := e.evidence("acme", k1)
	last := ev[len(ev)-1]
	fps, _ := last["fingerprints"].(map[string]any)
	env1, _, _ := parseEnvelope(mustJSON(note("one")))
	env2, _, _ := parseEnvelope(mustJSON(e2))
	if last["decision"] != decConflict || last["executed"] != false || last["outcome_ref"] != nil || fps == nil ||
		fps["stored"] != env1.fingerprint() || fps["received"] != env2.fingerprint() || fps["stored"] == fps["received"] {
		t.Fatalf("conflict evidence: %v", last)
	}
	// A client key that is stored nowhere and is not the envelope's: 400.
	r3 := e.send(note("three", "idempotency_key", strings.Repeat("ab", 32)))
	if r3.status != 400 || r3.json(t)["code"] != codeKeyMismatch {
		t.Fatalf("mismatch: %s", r3)
	}
	if e.sink.totalEffects() != 1 {
		t.Fatalf("effects %d", e.sink.totalEffects())
	}
}

func TestReplayToAnotherActor(t *testing.T) {
	e := newEnv(t, "")
	r1 := e.send(payment(700, "actor_id", "system", "effective_actor_id", "alice"))
	r2 := e.send(payment(700, "actor_id", "retrier", "effective_actor_id", "alice", "command_id", "cmd-2"))
	r3 := e.send(payment(700, "actor_id", "alice", "command_id", "cmd-3")) // the principal itself, no effective actor
	d1, d2 := r1.json(t), r2.json(t)
	if r1.status != 201 || r2.status != 201 || r2.decision() != decReplayed || d2["outcome_ref"] != d1["outcome_ref"] ||
		d2["command_id"] != "cmd-1" || r3.status != 201 || r3.decision() != decReplayed {
		t.Fatalf("replays: %s / %s / %s", r1, r2, r3)
	}
	if _, ok := d1["result"].(map[string]any)["private"]; !ok {
		t.Fatalf("original lacks private: %s", r1.body)
	}
	for _, r := range []resp{r2, r3} {
		res := r.json(t)["result"].(map[string]any)
		if _, ok := res["private"]; ok || res["effect_id"] != d1["result"].(map[string]any)["effect_id"] {
			t.Fatalf("replay to another actor: %s", r.body)
		}
	}
	if e.sink.totalEffects() != 1 {
		t.Fatalf("effects %d", e.sink.totalEffects())
	}
}

func (e *testEnv) confirm(tenant, commandID, key string) string {
	e.t.Helper()
	r := e.do("POST", "/confirmations", mustJSON(map[string]any{"tenant_id": tenant, "actor_id": "alice", "command_id": commandID, "idempotency_key": key}))
	doc := r.json(e.t)
	if r.status != 201 || doc["command_id"] != commandID || doc["idempotency_key"] != key || !strings.HasPrefix(doc["token"].(string), "cft_") {
		e.t.Fatalf("confirmation: %s", r)
	}
	return doc["token"].(string)
}

func cancel(kv ...any) map[string]any {
	return mkEnv(cmdOrderCancel, map[string]any{"reason": "customer"}, kv...)
}

func member(kv ...any) map[string]any {
	return mkEnv(cmdMemberRemove, map[string]any{"member": "bob"}, kv...)
}

func TestConfirmations(t *testing.T) {
	e := newEnv(t, "")
	r := e.send(cancel())
	doc := r.json(t)
	if r.status != 428 || doc["status"] != "confirmation_required" || doc["confirm_url"] != "/confirmations" || doc["command_id"] != "cmd-1" {
		t.Fatalf("no token: %s", r)
	}
	key := doc["idempotency_key"].(string)
	if len(e.evidence("acme", key)) != 0 || e.commandStatus("cmd-1") != "404" {
		t.Fatal("a 428 reserved or recorded something")
	}
	tok := e.confirm("acme", "cmd-1", key)
	// Bound to command_id and key, and to the tenant.
	for name, env := range map[string]map[string]any{
		"another command_id": cancel("command_id", "cmd-9", "confirmation_token", tok),
		"another key":        mkEnv(cmdOrderCancel, map[string]any{"reason": "other"}, "confirmation_token", tok),
		"another tenant":     cancel("tenant_id", "globex", "confirmation_token", tok),
		"unknown":            cancel("confirmation_token", "cft_nope"),
	} {
		if r := e.send(env); r.status != 403 || r.json(t)["code"] != codeConfirmationInvalid {
			t.Fatalf("%s: %s", name, r)
		}
	}
	r1 := e.send(cancel("confirmation_token", tok))
	if r1.status != 201 {
		t.Fatalf("confirmed: %s", r1)
	}
	// A duplicate needs no new confirmation; one with the used token replays too.
	for _, env := range []map[string]any{cancel("command_id", "cmd-2"), cancel("confirmation_token", tok)} {
		if r := e.send(env); r.status != 201 || !bytes.Equal(r.body, r1.body) {
			t.Fatalf("duplicate of a confirmed command: %s", r)
		}
	}
	// order.cancel never expires.
	e.clock.advance(10 * 365 * 24 * time.Hour)
	if r := e.send(cancel("command_id", "cmd-3")); r.status != 201 || !bytes.Equal(r.body, r1.body) {
		t.Fatalf("after ten years: %s", r)
	}
	if e.sink.effectsOf(key) != 1 {
		t.Fatalf("effects %d", e.sink.effectsOf(key))
	}

	// Single use: member.remove (window 60 s) executed, its window expires,
	// the same token is refused.
	r = e.send(member())
	mkey := keyOf(t, r)
	mtok := e.confirm("acme", "cmd-1", mkey)
	if r := e.send(member("confirmation_token", mtok)); r.status != 201 {
		t.Fatalf("member.remove: %s", r)
	}
	e.clock.advance(61 * time.Second)
	if r := e.send(member("confirmation_token", mtok)); r.status != 403 {
		t.Fatalf("reused token: %s", r)
	}
	// Short-lived: a token past confirmation_ttl_seconds is refused.
	tok2 := e.confirm("acme", "cmd-1", mkey)
	e.clock.advance(301 * time.Second)
	if r := e.send(member("confirmation_token", tok2)); r.status != 403 {
		t.Fatalf("expired token: %s", r)
	}
	tok3 := e.confirm("acme", "cmd-1", mkey)
	if r := e.send(member("confirmation_token", tok3)); r.status != 201 || r.decision() != decFirstSeen {
		t.Fatalf("fresh token after the window: %s", r)
	}
	if e.sink.effectsOf(mkey) != 2 {
		t.Fatalf("member.remove effects %d, want 2 (two windows)", e.sink.effectsOf(mkey))
	}
}

func TestTenantScope(t *testing.T) {
	e := newEnv(t, "")
	ra := e.send(note("same"))
	rb := e.send(note("same", "tenant_id", "globex"))
	if ra.status != 201 || rb.status != 201 || rb.decision() != decFirstSeen || keyOf(t, ra) == keyOf(t, rb) {
		t.Fatalf("two tenants: %s / %s", ra, rb)
	}
	if e.sink.totalEffects() != 2 {
		t.Fatalf("effects %d, want 2", e.sink.totalEffects())
	}
	if ev := e.evidence("globex", keyOf(t, ra)); len(ev) != 0 {
		t.Fatalf("tenant globex sees acme's evidence: %v", ev)
	}
	// A client key of another tenant is not stored for this one.
	if r := e.send(note("x", "tenant_id", "globex", "idempotency_key", keyOf(t, ra))); r.status != 400 {
		t.Fatalf("another tenant's key: %s", r)
	}
}

func TestRateLimit(t *testing.T) {
	e := newEnv(t, "")
	if r := e.send(note("rl")); r.status != 201 {
		t.Fatal(r)
	}
	for i := range rateLimitMax {
		if r := e.send(note("rl", "command_id", fmt.Sprint("d", i))); r.status != 201 {
			t.Fatalf("duplicate %d: %s", i, r)
		}
	}
	r := e.send(note("rl", "command_id", "over"))
	if r.status != 429 || r.json(t)["code"] != codeDuplicateRateLimited || r.header.Get("Retry-After") != "60" {
		t.Fatalf("over the limit: %s %v", r, r.header)
	}
	// First deliveries are never limited.
	if r := e.send(note("other")); r.status != 201 {
		t.Fatalf("another key: %s", r)
	}
	e.clock.advance(30 * time.Second)
	if r := e.send(note("rl", "command_id", "over2")); r.status != 429 || r.header.Get("Retry-After") != "30" {
		t.Fatalf("later: %s", r)
	}
	e.clock.advance(30 * time.Second)
	if r := e.send(note("rl", "command_id", "next-window")); r.status != 201 {
		t.Fatalf("next window: %s", r)
	}
	if n := len(e.evidence("acme", e.srv.keyOfNote(t, "rl"))); n != 1+rateLimitMax+1 {
		t.Fatalf("evidence items %d: a 429 left an item", n)
	}
}

func TestWindowExpiry(t *testing.T) {
	e := newEnv(t, "")
	r1 := e.send(note("w"))
	key := keyOf(t, r1)
	e.clock.advance(119 * time.Second)
	if r := e.send(note("w", "command_id", "cmd-2")); r.status != 201 || r.decision() != decReplayed {
		t.Fatalf("inside the window: %s", r)
	}
	e.clock.advance(1 * time.Second)
	r2 := e.send(note("w", "command_id", "cmd-3"))
	if r2.status != 201 || r2.decision() != decFirstSeen || r2.json(t)["outcome_ref"] == r1.json(t)["outcome_ref"] || r2.json(t)["command_id"] != "cmd-3" {
		t.Fatalf("after the window: %s", r2)
	}
	if e.sink.effectsOf(key) != 2 {
		t.Fatalf("effects %d, want 2", e.sink.effectsOf(key))
	}
	// TimeScale divides the window.
	f := newEnv(t, "", func(c *Config) { c.TimeScale = 10 })
	f.send(note("w"))
	f.clock.advance(12 * time.Second)
	if r := f.send(note("w", "command_id", "cmd-2")); r.decision() != decFirstSeen {
		t.Fatalf("scaled window: %s", r)
	}
	if body := f.get("/registry").body; !bytes.Contains(body, []byte(`"ttl_seconds":120`)) {
		t.Fatalf("registry not unscaled: %s", body)
	}
}

func TestS1LostReply(t *testing.T) {
	e := newEnv(t, "")
	e.sink.set(func(k *fakeSink) { k.loseNext = 1 })
	r := e.send(payment(900))
	doc := r.json(t)
	if r.status != 202 || doc["status"] != "processing" || r.decision() != decFirstSeen {
		t.Fatalf("lost reply: %s", r)
	}
	key := doc["idempotency_key"].(string)
	eventually(t, 10*time.Second, "the resumer finishes the command", func() bool { return e.commandStatus("cmd-1") == "executed" })
	if e.sink.effectsOf(key) != 1 || e.sink.postsOf(key) != 2 {
		t.Fatalf("effects %d POSTs %d, want 1 effect of 2 POSTs with one Idempotency-Key", e.sink.effectsOf(key), e.sink.postsOf(key))
	}
	r2 := e.send(payment(900, "command_id", "cmd-2"))
	if r2.status != 201 || r2.json(t)["result"].(map[string]any)["effect_id"] != "eff_1" {
		t.Fatalf("replay: %s", r2)
	}
	if ev := e.evidence("acme", key); ev[0]["outcome_ref"] != r2.json(t)["outcome_ref"] {
		t.Fatalf("first_seen evidence lacks the outcome: %v", ev)
	}
}

func TestNonS1LostReplyReconciles(t *testing.T) {
	e := newEnv(t, "")
	e.sink.set(func(k *fakeSink) { k.loseNext = 1 })
	r := e.send(note("lost"))
	if r.status != 202 {
		t.Fatalf("lost reply: %s", r)
	}
	key := keyOf(t, r)
	eventually(t, 10*time.Second, "the resumer finishes the command", func() bool { return e.commandStatus("cmd-1") == "executed" })
	if e.sink.postsOf(key) != 1 || e.sink.effectsOf(key) != 1 {
		t.Fatalf("POSTs %d, want 1 (reconciled with GET, not posted again)", e.sink.postsOf(key))
	}
}

func TestSinkDown(t *testing.T) {
	e := newEnv(t, "")
	e.sink.set(func(k *fakeSink) { k.failNext = 1 << 30 })
	r := e.send(note("down"))
	if r.status != 202 {
		t.Fatalf("sink down: %s", r)
	}
	if d := e.send(note("down", "command_id", "cmd-2")); d.status != 202 || d.decision() != decReplayed {
		t.Fatalf("duplicate while unfinished: %s", d)
	}
	key := keyOf(t, r)
	eventually(t, 10*time.Second, "the resumer retries", func() bool { return e.sink.postsOf(key) >= 3 })
	e.sink.set(func(k *fakeSink) { k.failNext = 0 })
	eventually(t, 10*time.Second, "the resumer finishes the command", func() bool { return e.commandStatus("cmd-1") == "executed" })
	if e.sink.effectsOf(key) != 1 {
		t.Fatalf("effects %d", e.sink.effectsOf(key))
	}
}

func TestOutbox(t *testing.T) {
	e := newEnv(t, "")
	e.sink.set(func(k *fakeSink) { k.loseNext = 1 })
	r := e.send(refund(300))
	doc := r.json(t)
	res := doc["result"].(map[string]any)
	if r.status != 201 || res["effect"] != "queued" || !strings.HasPrefix(res["refund_id"].(string), "rfd_") {
		t.Fatalf("refund: %s", r)
	}
	key := keyOf(t, r)
	for i := range 20 {
		e.send(refund(300+i+1, "command_id", fmt.Sprint("r", i)))
	}
	eventually(t, 10*time.Second, "the outbox drains", func() bool { return e.sink.totalEffects() == 21 && e.srv.outboxOpen(t) == 0 })
	if e.sink.postsOf(key) != 1 || e.sink.effectsOf(key) != 1 {
		t.Fatalf("refund POSTs %d, want 1 (reconciled)", e.sink.postsOf(key))
	}
	if r2 := e.send(refund(300, "command_id", "again")); r2.status != 201 || !bytes.Equal(r2.body, r.body) {
		t.Fatalf("replay: %s", r2)
	}
}

func (s *Server) outboxOpen(t *testing.T) int {
	var n int
	if err := s.rdb.QueryRow(`SELECT COUNT(*) FROM outbox WHERE state <> 'sent'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRegistryAndRoutes(t *testing.T) {
	e := newEnv(t, "", func(c *Config) { c.APIKey = "k" })
	r := e.get("/registry")
	var doc struct {
		Binding  string `json:"binding"`
		Commands []struct {
			Command   string            `json:"command"`
			Class     string            `json:"class"`
			TTL       *int64            `json:"ttl_seconds"`
			Shielding *string           `json:"shielding"`
			Examples  []json.RawMessage `json:"args_examples"`
			Rejected  json.RawMessage   `json:"args_rejected"`
		} `json:"commands"`
	}
	if r.status != 200 || json.Unmarshal(r.body, &doc) != nil || doc.Binding != "idscheck-ids/1" || len(doc.Commands) != len(registry) {
		t.Fatalf("registry: %s", r)
	}
	for _, c := range doc.Commands {
		cmd := commandsByName[c.Command]
		if cmd == nil || c.Class != cmd.Class || (c.TTL == nil) != (cmd.TTLSeconds == nil) || (c.Shielding == nil) != (cmd.Shielding == nil) {
			t.Fatalf("registry entry %+v is not the server's", c)
		}
		if cmd.validate == nil {
			continue
		}
		if len(c.Examples) != 2 || string(c.Examples[0]) == string(c.Examples[1]) {
			t.Fatalf("%s: want two different args examples, got %s", c.Command, c.Examples)
		}
		for _, ex := range append(c.Examples, c.Rejected) {
			if len(ex) == 0 {
				continue
			}
			var args map[string]json.RawMessage
			json.Unmarshal(ex, &args)
			if why := cmd.validate(args); (why == "") != (string(ex) != string(c.Rejected)) {
				t.Fatalf("%s: args %s validate to %q", c.Command, ex, why)
			}
		}
	}
	for i := range 3 {
		r := e.send(mkEnv(cmdBalanceGet, map[string]any{}, "command_id", fmt.Sprint(i)))
		if r.status != 200 || string(r.body) != `{"result":{"balance_minor":0}}` {
			t.Fatalf("balance.get: %s", r)
		}
	}
	if e.sink.totalEffects() != 0 {
		t.Fatal("balance.get made an effect")
	}
	// Authentication.
	req, _ := http.NewRequest("GET", e.ts.URL+"/registry", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 401 || res.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("no API key: %d", res.StatusCode)
	}
	res, err = http.Get(e.ts.URL + "/health")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("health: %v %v", res, err)
	}
	res.Body.Close()
	for _, c := range []struct {
		method, path string
		status       int
	}{{"GET", "/nope", 404}, {"DELETE", "/commands", 405}, {"GET", "/commands/none", 404}, {"GET", "/evidence?tenant_id=a", 400}} {
		if r := e.do(c.method, c.path, nil); r.status != c.status || r.header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %s: %s", c.method, c.path, r)
		}
	}
	if r := e.get("/evidence?tenant_id=a&idempotency_key=b"); r.status != 200 || string(r.body) != `{"evidence":[]}` {
		t.Fatalf("empty evidence: %s", r)
	}
}

func TestMalformed(t *testing.T) {
	e := newEnv(t, "")
	good := string(mustJSON(note("x")))
	cases := map[string]string{
		"not json":           `{`,
		"array":              `[]`,
		"empty":              ``,
		"trailing":           good + `{}`,
		"unknown field":      strings.Replace(good, `"args"`, `"extra":1,"args"`, 1),
		"missing tenant":     string(mustJSON(note("x", "tenant_id", nil))),
		"empty actor":        string(mustJSON(note("x", "actor_id", ""))),
		"long command_id":    string(mustJSON(note("x", "command_id", strings.Repeat("c", 129)))),
		"args not object":    string(mustJSON(note("x", "args", []int{1}))),
		"args null":          strings.Replace(good, `"args":{"text":"x"}`, `"args":null`, 1),
		"intent missing":     string(mustJSON(note("x", "intent", nil))),
		"intent extra field": string(mustJSON(note("x", "intent", map[string]any{"entity": "note", "action": "add", "x": 1}))),
		"target number":      string(mustJSON(note("x", "intent", map[string]any{"entity": "note", "action": "add", "target": 5}))),
		"kind bad":           string(mustJSON(note("x", "command_kind", "I9"))),
		"tenant number":      string(mustJSON(note("x", "tenant_id", 5))),
		"duplicate member":   strings.Replace(good, `"args":{"text":"x"}`, `"args":{"text":"x","text":"y"}`, 1),
		"duplicate top":      strings.Replace(good, `"tenant_id":"acme"`, `"tenant_id":"acme","tenant_id":"evil"`, 1),
		"huge number":        strings.Replace(good, `"args":{"text":"x"}`, `"args":{"text":"x","n":1e999}`, 1),
		"bad utf8":           strings.Replace(good, "x", "\xff", 1),
		"too big":            strings.Replace(good, `"x"`, `"`+strings.Repeat("a", 70000)+`"`, 1),
	}
	for name, body := range cases {
		r := e.do("POST", "/commands", []byte(body))
		if r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" || r.json(t)["code"] != codeInvalidEnvelope {
			t.Errorf("%s: %s", name, r)
		}
	}
	if r := e.send(mkEnv("ship.launch", map[string]any{})); r.status != 422 || r.json(t)["code"] != codeUnknownCommand {
		t.Fatalf("unknown command: %s", r)
	}
	if r := e.send(note(strings.Repeat("é", 1001))); r.status != 422 || r.json(t)["status"] != "rejected" {
		t.Fatalf("long note: %s", r)
	}
	for _, body := range []string{`{}`, `{"tenant_id":"a","actor_id":"b","command_id":"c"}`, `{"tenant_id":"a","actor_id":"b","command_id":"c","idempotency_key":"k","x":1}`} {
		if r := e.do("POST", "/confirmations", []byte(body)); r.status != 400 {
			t.Fatalf("confirmation %s: %s", body, r)
		}
	}
	if e.sink.totalEffects() != 0 {
		t.Fatal("a refused request made an effect")
	}
}

func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []Config{{DBPath: dir + "/a.db"}, {DBPath: dir + "/a.db", SinkURL: "ftp://x"}, {DBPath: dir + "/a.db", SinkURL: "http://x", Mutant: "nope"}} {
		if s, err := Open(t.Context(), c); err == nil {
			s.Close()
			t.Fatalf("Open(%+v) accepted", c)
		}
	}
}

func TestStatusURLAnswers(t *testing.T) {
	e := newEnv(t, "")
	for _, id := range []string{"a b/c?d#e", "ünï", "%2F"} {
		r := e.send(note(id, "command_id", id))
		u := r.json(t)["status_url"].(string)
		st := e.get(u)
		if r.status != 201 || st.status != 200 || st.json(t)["command_id"] != id || st.json(t)["status"] != "executed" {
			t.Fatalf("%q: %s → %s %s", id, r, u, st)
		}
	}
	// Two tenants may use one command_id: ?tenant_id= narrows the lookup.
	e.send(note("x", "command_id", "same"))
	e.clock.advance(time.Second)
	e.send(note("y", "command_id", "same", "tenant_id", "globex"))
	if st := e.get("/commands/same?tenant_id=acme").json(t); st["tenant_id"] != "acme" {
		t.Fatalf("narrowed: %v", st)
	}
	if st := e.get("/commands/same").json(t); st["tenant_id"] != "globex" {
		t.Fatalf("newest: %v", st)
	}
}

// TestReplayByReference: with ReplayForm reference a duplicate of a
// terminal command is answered with the original HTTP status and a
// reference document (IDS §IX.A's second form): the original command_id,
// key, status and outcome_ref, the status and evidence URLs, no result;
// nothing executes again. An unknown form is refused at Open.
func TestReplayByReference(t *testing.T) {
	e := newEnv(t, "", func(c *Config) { c.ReplayForm = ReplayReference })
	r1 := e.send(payment(500))
	d1 := r1.json(t)
	key := keyOf(t, r1)
	r2 := e.send(payment(500, "command_id", "cmd-dup"))
	d2 := r2.json(t)
	if r2.status != r1.status || r2.decision() != decReplayed || d2["command_id"] != "cmd-1" || d2["outcome_ref"] != d1["outcome_ref"] ||
		d2["status"] != "executed" || d2["idempotency_key"] != key || d2["status_url"] != "/commands/cmd-1" ||
		d2["evidence_url"] != "/evidence?tenant_id=acme&idempotency_key="+key {
		t.Fatalf("reference replay: %s (first %s)", r2, r1)
	}
	if _, ok := d2["result"]; ok {
		t.Fatalf("a reference carries no result: %s", r2.body)
	}
	if n := e.sink.postsOf(key); n != 1 {
		t.Fatalf("sink POSTs %d, want 1", n)
	}
	if _, err := Open(context.Background(), Config{DBPath: filepath.Join(t.TempDir(), "x.db"), SinkURL: "http://127.0.0.1:1", ReplayForm: "summary"}); err == nil {
		t.Fatal("an unknown replay form was accepted")
	}
}
