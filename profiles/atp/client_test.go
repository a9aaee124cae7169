package atp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/verdict"
)

type seen struct {
	method, path, key, apiKey string
	body                      []byte
}

// TestAgentSpeaksTheBinding: every route, its headers (the idempotency key;
// X-API-Key except on keys and verify), the signed intent, and the parsing
// of rows and error documents; exchanges are recorded.
func TestAgentSpeaksTheBinding(t *testing.T) {
	var got []seen
	row := `{"intent_id":"int_1","idempotency_key":"key-0123456789abcdef","state":"authorized","body":{"a":1},"receipt":null,"created_at":"x","updated_at":"x"}`
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.Method, r.URL.EscapedPath(), r.Header.Get(HeaderKey), r.Header.Get(HeaderAPIKey), b})
		switch {
		case r.URL.Path == PathConfig:
			io.WriteString(w, `{"binding":"idscheck-atp/1","reconcile_interval_seconds":60,"action_dedup_window_seconds":null}`)
		case r.URL.Path == PathKeys:
			io.WriteString(w, `{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"site-1","x":"PUAXw-hDiVqStwqnTRt-vJyYLM8uxJaMwM1V8Sr0Zgw"}]}`)
		case r.URL.Path == PathVerify:
			io.WriteString(w, `{"valid":true,"kid":"site-1"}`)
		case strings.HasPrefix(r.URL.Path, PathAgents):
			w.WriteHeader(201)
		case r.URL.Path == PathAuthorize:
			io.WriteString(w, row)
		case r.URL.Path == PathExecute:
			w.WriteHeader(409)
			io.WriteString(w, `{"error":"nonce_consumed","first_consumed_at":"2026-05-25T12:00:00Z"}`)
		case strings.HasPrefix(r.URL.Path, PathIntents):
			w.Header().Set("Content-Length", "1000")
			io.WriteString(w, `{"intent_id":`) // cut short
		}
	}))
	defer hs.Close()
	rec := &client.Recorder{}
	c, err := client.New(hs.URL, client.Options{APIKey: "secret", Recorder: rec, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := KeyFromSeed(bytes.NewReader(bytes.Repeat([]byte{7}, 32)))
	ag := NewAgent(NewSite(c), "agt_1", key)
	ctx := context.Background()

	if a, err := ag.Register(ctx); err != nil || a.Status != 201 {
		t.Fatalf("register: %v %+v", err, a)
	}
	var reg AgentRegistration
	json.Unmarshal(got[0].body, &reg)
	if pk, err := PublicKey(reg.PublicKey); err != nil || !pk.Equal(key.Public().(ed25519.PublicKey)) || got[0].method != "PUT" || got[0].path != "/api/atp/agents/agt_1" {
		t.Fatalf("registration %+v: %v", got[0], err)
	}
	exp := time.Date(2026, 5, 25, 12, 0, 0, 0, time.UTC)
	intent, err := ag.NewIntent(IntentParams{IntentID: "int_1", Nonce: "n1", ExpiresAt: exp, Amount: 1250, Currency: "EUR", Payee: "m_1",
		Precondition: &Precondition{IntentSettled: "int_0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyIntent(intent, key.Public().(ed25519.PublicKey)); err != nil {
		t.Fatalf("the intent does not verify: %v", err)
	}
	var in Intent
	json.Unmarshal(intent, &in)
	if in.AgentID != "agt_1" || in.ExpiresAt != "2026-05-25T12:00:00.000Z" || in.Precondition.IntentSettled != "int_0" || in.ActionDedupKey != "" {
		t.Fatalf("intent %s", intent)
	}
	a, err := ag.Authorize(ctx, intent, "key-0123456789abcdef")
	if err != nil || a.State() != "authorized" || a.Tx.IntentID != "int_1" || string(a.Tx.Body) != `{"a":1}` || a.Tx.HasReceipt() || a.Outcome != verdict.OutcomeOK {
		t.Fatalf("authorize: %v %+v", err, a)
	}
	if s := got[1]; s.key != "key-0123456789abcdef" || s.apiKey != "secret" || !bytes.Equal(s.body, intent) {
		t.Fatalf("authorize sent %+v", s)
	}
	a, err = ag.Execute(ctx, "int_1", "key-0123456789abcdef")
	if err != nil || a.Status != 409 || a.Code() != ErrNonceConsumed || a.Error.FirstConsumedAt == "" || a.Tx != nil {
		t.Fatalf("execute: %v %+v", err, a)
	}
	if s := got[2]; string(s.body) != `{"intent_id":"int_1"}` || s.key != "key-0123456789abcdef" {
		t.Fatalf("execute sent %+v", s)
	}
	a, err = ag.Get(ctx, "int:1/x", "key-0123456789abcdef")
	if !errors.Is(err, ErrCutShort) || a.Outcome != verdict.OutcomeUnknown || a.Status != 200 {
		t.Fatalf("a body cut short: %v %+v", err, a)
	}
	if s := got[3]; s.path != "/api/atp/intents/int:1%2Fx" || s.method != "GET" {
		t.Fatalf("get sent %+v", s)
	}
	cfg, _, err := ag.Config(ctx)
	if err != nil || *cfg.ReconcileIntervalSeconds != 60 || cfg.ActionDedupWindowSeconds != nil {
		t.Fatalf("config %+v %v", cfg, err)
	}
	keys, _, err := ag.Keys(ctx)
	if err != nil || len(keys.Keys) != 1 || got[5].apiKey != "" {
		t.Fatalf("keys %+v %v (api key %q)", keys, err, got[5].apiKey)
	}
	v, _, err := ag.Verify(ctx, []byte(`{"body":{}}`))
	if err != nil || v.Valid == nil || !*v.Valid || got[6].apiKey != "" {
		t.Fatalf("verify %+v %v (api key %q)", v, err, got[6].apiKey)
	}
	if rec.Len() != 7 {
		t.Fatalf("%d exchanges recorded, want 7", rec.Len())
	}
	hs.Close()
	a, err = ag.Execute(ctx, "int_1", "key-0123456789abcdef")
	if err == nil || a.Outcome == verdict.OutcomeOK || a.Status != 0 {
		t.Fatalf("a closed site: %v %+v", err, a)
	}
}
