package atp

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type kat struct {
	Agent struct {
		Seed      string `json:"seed"`
		PublicKey string `json:"public_key"`
		X         string `json:"x"`
	} `json:"agent"`
	Site struct {
		Seed      string `json:"seed"`
		PublicKey string `json:"public_key"`
		X, Kid    string
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

func loadKAT(t *testing.T) kat {
	raw, err := os.ReadFile("testdata/kat.json")
	if err != nil {
		t.Fatal(err)
	}
	var k kat
	if err := json.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Intents) == 0 || len(k.Receipts) == 0 {
		t.Fatal("kat.json holds no vectors")
	}
	return k
}

func seedKey(t *testing.T, h string) ed25519.PrivateKey {
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != ed25519.SeedSize {
		t.Fatalf("bad seed %q", h)
	}
	return ed25519.NewKeyFromSeed(b)
}

// TestIntentKnownAnswers: the canonical form and signature of each intent
// are the ones OpenSSL and Python worked out (testdata/kat.py).
func TestIntentKnownAnswers(t *testing.T) {
	k := loadKAT(t)
	priv := seedKey(t, k.Agent.Seed)
	if got := hex.EncodeToString(priv.Public().(ed25519.PublicKey)); got != k.Agent.PublicKey {
		t.Fatalf("agent public key %s, want %s (RFC 8032 test 1)", got, k.Agent.PublicKey)
	}
	for i, v := range k.Intents {
		c, err := SignedBytes(v.Intent)
		if err != nil {
			t.Fatal(err)
		}
		if string(c) != v.Canonical {
			t.Errorf("intent %d: canonical\n%s\nwant\n%s", i, c, v.Canonical)
		}
		signed, err := SignIntent(v.Intent, priv)
		if err != nil {
			t.Fatal(err)
		}
		var s struct{ Signature string }
		json.Unmarshal(signed, &s)
		if s.Signature != v.Signature {
			t.Errorf("intent %d: signature %s, want %s", i, s.Signature, v.Signature)
		}
		jwk := JWK{Kty: "OKP", Crv: "Ed25519", X: k.Agent.X}
		pub, err := PublicKey(jwk)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyIntent(signed, pub); err != nil {
			t.Errorf("intent %d: %v", i, err)
		}
		// One changed member, one changed signature: both refused.
		tampered := strings.Replace(string(signed), `"agent_id":"agt_1"`, `"agent_id":"agt_2"`, 1)
		if VerifyIntent([]byte(tampered), pub) == nil {
			t.Errorf("intent %d: a changed agent_id still verifies", i)
		}
	}
}

// TestReceiptKnownAnswers: each receipt verifies with the site's public key
// alone (as a JWK Set), and any change to it makes it fail.
func TestReceiptKnownAnswers(t *testing.T) {
	k := loadKAT(t)
	keys := JWKSet{Keys: []JWK{{Kty: "OKP", Crv: "Ed25519", Kid: k.Site.Kid, X: k.Site.X}}}
	priv := seedKey(t, k.Site.Seed)
	for i, v := range k.Receipts {
		c, err := Canonical(v.Body)
		if err != nil {
			t.Fatal(err)
		}
		if string(c) != v.Canonical {
			t.Errorf("receipt %d: canonical\n%s\nwant\n%s", i, c, v.Canonical)
		}
		doc, _ := json.Marshal(Receipt{Body: v.Body, Alg: "Ed25519", Kid: k.Site.Kid, Signature: v.Signature})
		body, err := VerifyReceipt(doc, keys)
		if err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
		if body.IntentID == "" || body.State == "" {
			t.Errorf("receipt %d: body not read: %+v", i, body)
		}
		mine, err := SignReceipt(v.Body, k.Site.Kid, priv)
		if err != nil {
			t.Fatal(err)
		}
		var r Receipt
		json.Unmarshal(mine, &r)
		if r.Signature != v.Signature {
			t.Errorf("receipt %d: SignReceipt %s, want %s", i, r.Signature, v.Signature)
		}
		for name, bad := range map[string]string{
			"amount":    strings.Replace(string(doc), `"amount":`, `"amount":1`, 1),
			"kid":       strings.Replace(string(doc), `"kid":"site-1"`, `"kid":"site-2"`, 1),
			"signature": strings.Replace(string(doc), v.Signature[:4], "AAAA", 1),
			"alg":       strings.Replace(string(doc), `"alg":"Ed25519"`, `"alg":"HS256"`, 1),
		} {
			if _, err := VerifyReceipt([]byte(bad), keys); err == nil {
				t.Errorf("receipt %d: a changed %s still verifies", i, name)
			}
		}
		// Signing the body as sent (not canonical) is another signature: a
		// receipt signed so does not verify unless the body already was
		// canonical.
		ncSig := B64.EncodeToString(ed25519.Sign(priv, []byte(" "+string(v.Body))))
		nc, _ := json.Marshal(Receipt{Body: v.Body, Alg: "Ed25519", Kid: k.Site.Kid, Signature: ncSig})
		if _, err := VerifyReceipt(nc, keys); err == nil {
			t.Errorf("receipt %d: a signature over non-canonical bytes verifies", i)
		}
	}
}

// TestCanonicalRFC8785: the library gives the RFC's own examples.
func TestCanonicalRFC8785(t *testing.T) {
	for in, want := range map[string]string{
		// RFC 8785 §3.2.2 (number and literal forms).
		`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "literals": [null, true, false]}`: `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27]}`,
		// RFC 8785 §3.2.3 (sorting by UTF-16 code units).
		`{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}`: "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
	} {
		got, err := Canonical([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("JCS(%s)\n got %s\nwant %s", in, got, want)
		}
	}
}
