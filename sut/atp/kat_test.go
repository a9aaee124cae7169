package atp

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// kat is profiles/atp/testdata/kat.json, the binding's known answers (worked
// out with OpenSSL and Python, not with idscheck's code). The file is read,
// not the spec package imported: the server and the harness share no code.
type kat struct {
	Agent struct {
		Seed, X   string
		PublicKey string `json:"public_key"`
	} `json:"agent"`
	Site struct {
		Seed, X, Kid string
		PublicKey    string `json:"public_key"`
	} `json:"site"`
	Intents []struct {
		Intent    json.RawMessage `json:"intent"`
		Canonical string          `json:"canonical"`
		Signature string          `json:"signature"`
	} `json:"intents"`
	Receipts []struct {
		Body      json.RawMessage `json:"body"`
		Canonical string          `json:"canonical"`
		Signature string          `json:"signature"`
	} `json:"receipts"`
}

func readKAT(t *testing.T) kat {
	t.Helper()
	b, err := os.ReadFile("../../profiles/atp/testdata/kat.json")
	if err != nil {
		t.Fatal(err)
	}
	var k kat
	if err := json.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Intents) == 0 || len(k.Receipts) == 0 {
		t.Fatal("kat.json has no intents or receipts")
	}
	return k
}

func hexSeed(t *testing.T, s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != ed25519.SeedSize {
		t.Fatalf("seed %q", s)
	}
	return b
}

// withSignature adds the signature member to an intent object.
func withSignature(t *testing.T, intent json.RawMessage, sig string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(intent, &m); err != nil {
		t.Fatal(err)
	}
	m["signature"] = mustJSON(sig)
	return mustJSON(m)
}

// TestKATIntents: the server's canonical form and signature check of every
// known intent, and the known signatures from the agent seed.
func TestKATIntents(t *testing.T) {
	k := readKAT(t)
	agent := ed25519.NewKeyFromSeed(hexSeed(t, k.Agent.Seed))
	pub := agent.Public().(ed25519.PublicKey)
	if hex.EncodeToString(pub) != k.Agent.PublicKey || b64.EncodeToString(pub) != k.Agent.X {
		t.Fatalf("agent public key %x", pub)
	}
	for i, c := range k.Intents {
		var m map[string]json.RawMessage
		json.Unmarshal(c.Intent, &m)
		got, err := canonical(m)
		if err != nil || string(got) != c.Canonical {
			t.Fatalf("intent %d: canonical %s (%v), want %s", i, got, err, c.Canonical)
		}
		if sig := b64.EncodeToString(ed25519.Sign(agent, got)); sig != c.Signature {
			t.Fatalf("intent %d: signature %s, want %s", i, sig, c.Signature)
		}
		// parseIntent checks the binding's character set, which the third
		// intent (non-ASCII intent_id and payee, a JCS test) is outside of;
		// its signature is checked over the canonical form alone.
		in, err := parseIntent(withSignature(t, c.Intent, c.Signature))
		if i == 2 {
			if err == nil {
				t.Fatalf("intent %d with a non-ASCII intent_id was accepted", i)
			}
			continue
		}
		if err != nil {
			t.Fatalf("intent %d: %v", i, err)
		}
		if string(in.signed) != c.Canonical || !in.verify(pub) {
			t.Fatalf("intent %d: signed bytes %s, verify %v", i, in.signed, in.verify(pub))
		}
		bad, _ := parseIntent(withSignature(t, c.Intent, k.Intents[(i+1)%len(k.Intents)].Signature))
		if bad.verify(pub) {
			t.Fatalf("intent %d verifies with another intent's signature", i)
		}
	}
}

// TestKATAuthorize: the known intents go through the server: int_abc is
// authorized and settled, then int_def (precondition int_abc settled,
// an action_dedup_key) is authorized.
func TestKATAuthorize(t *testing.T) {
	k := readKAT(t)
	e := newEnv(t, "", func(c *Config) { c.SiteKeySeed = hexSeed(t, k.Site.Seed) })
	e.clock.advance(time.Date(2026, 5, 25, 11, 58, 0, 0, time.UTC).Sub(e.clock.now()))
	agent := ed25519.NewKeyFromSeed(hexSeed(t, k.Agent.Seed))
	e.register("agt_1", agent.Public().(ed25519.PublicKey))
	abc := withSignature(t, k.Intents[0].Intent, k.Intents[0].Signature)
	def := withSignature(t, k.Intents[1].Intent, k.Intents[1].Signature)
	if r := e.authorize(key("kat-def"), def); r.status != 409 || r.json(t)["error"] != codePreconditionFailed {
		t.Fatalf("int_def before int_abc settled: %s", r)
	}
	if r := e.authorize(key("kat-abc"), abc); r.status != 200 {
		t.Fatalf("int_abc: %s", r)
	}
	x := e.execute(key("kat-abc"), "int_abc").tx(t)
	if x.State != stateSettled {
		t.Fatalf("int_abc: %+v", x)
	}
	if r := e.authorize(key("kat-def"), def); r.status != 200 {
		t.Fatalf("int_def: %s", r)
	}
	if r := e.authorize(key("kat-def"), withSignature(t, k.Intents[1].Intent, k.Intents[0].Signature)); r.status != 403 {
		t.Fatalf("int_def with int_abc's signature: %s", r)
	}
}

// TestKATReceipts: with the known site seed, the server publishes the
// known key, signs the known receipt bodies with the known signatures, and
// verifies the known receipts.
func TestKATReceipts(t *testing.T) {
	k := readKAT(t)
	e := newEnv(t, "", func(c *Config) { c.SiteKeySeed = hexSeed(t, k.Site.Seed) })
	var set struct {
		Keys []struct{ Kid, X string } `json:"keys"`
	}
	json.Unmarshal(e.do("GET", pathKeys, nil).body, &set)
	if len(set.Keys) != 1 || set.Keys[0].Kid != k.Site.Kid || set.Keys[0].X != k.Site.X {
		t.Fatalf("keys %+v, want kid %s x %s", set, k.Site.Kid, k.Site.X)
	}
	for i, c := range k.Receipts {
		doc := mustJSON(map[string]any{"body": c.Body, "alg": "Ed25519", "kid": k.Site.Kid, "signature": c.Signature})
		if v := e.do("POST", pathVerify, doc).json(t); v["valid"] != true || v["kid"] != k.Site.Kid {
			t.Fatalf("receipt %d: %v", i, v)
		}
		// The server's own signing of the same body gives the known bytes.
		var body receiptBody
		if err := json.Unmarshal(c.Body, &body); err != nil {
			t.Fatal(err)
		}
		signed, err := e.srv.sign(body)
		if err != nil {
			t.Fatal(err)
		}
		var got receiptDoc
		json.Unmarshal(signed, &got)
		canon, _ := canonicalBytes(got.Body)
		if string(canon) != c.Canonical || got.Signature != c.Signature || got.Kid != k.Site.Kid {
			t.Fatalf("receipt %d: canonical %s signature %s, want %s %s", i, canon, got.Signature, c.Canonical, c.Signature)
		}
		tampered := bytes.Replace(doc, []byte(`"amount":`), []byte(`"amount":1`), 1)
		if v := e.do("POST", pathVerify, tampered).json(t); v["valid"] != false {
			t.Fatalf("tampered receipt %d: %v", i, v)
		}
	}
}
