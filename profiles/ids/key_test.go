package ids_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/idscheck/idscheck/profiles/ids"
)

// TestKeyKnownAnswers checks the key and the fingerprint against vectors
// worked out from the binding page by Python's json and hashlib
// (testdata/key_kat.py), not by this package.
func TestKeyKnownAnswers(t *testing.T) {
	raw, err := os.ReadFile("testdata/key_kat.json")
	if err != nil {
		t.Fatal(err)
	}
	var kat struct {
		Vectors []struct {
			Name, Envelope, Key, Fingerprint string
			KeyInputsJCS                     string `json:"key_inputs_jcs"`
			FingerprintJCS                   string `json:"fingerprint_jcs"`
		}
	}
	if err := json.Unmarshal(raw, &kat); err != nil {
		t.Fatal(err)
	}
	if len(kat.Vectors) < 8 {
		t.Fatalf("%d vectors", len(kat.Vectors))
	}
	for _, v := range kat.Vectors {
		var e ids.Envelope
		if err := json.Unmarshal([]byte(v.Envelope), &e); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		c, err := e.KeyInputsJCS()
		if err != nil || string(c) != v.KeyInputsJCS {
			t.Errorf("%s: key inputs JCS\n got %s (%v)\nwant %s", v.Name, c, err, v.KeyInputsJCS)
		}
		if k, err := e.Key(); err != nil || k != v.Key {
			t.Errorf("%s: key %s (%v), want %s", v.Name, k, err, v.Key)
		}
		if f, err := e.Fingerprint(); err != nil || f != v.Fingerprint {
			t.Errorf("%s: fingerprint %s (%v), want %s", v.Name, f, err, v.Fingerprint)
		}
	}
	// The vectors say what the binding says: spelling and ephemeral fields
	// do not change the key; the effective actor is the principal; the
	// tenant does.
	key := map[string]string{}
	for _, v := range kat.Vectors {
		key[v.Name] = v.Key
	}
	if key["spelled-otherwise"] != key["worked-example"] || key["ephemeral-fields"] != key["worked-example"] || key["effective-actor"] != key["worked-example"] {
		t.Error("the vectors disagree with the binding: spelling, ephemeral fields or an effective actor changed the key")
	}
	if key["other-tenant"] == key["worked-example"] {
		t.Error("the vectors disagree with the binding: the tenant did not change the key")
	}
}

// TestCanonicalRFC8785 checks the JCS library against the examples of
// RFC 8785 itself (§3.2.2, §3.2.3 and Appendix B).
func TestCanonicalRFC8785(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// §3.2.2
		{`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// §3.2.3: members sorted by UTF-16 code units
		{`{"\u20ac": "Euro Sign", "\r": "Carriage Return", "\ufb33": "Hebrew Letter Dalet With Dagesh", "1": "One", "\ud83d\ude00": "Emoji: Grinning Face", "\u0080": "Control", "\u00f6": "Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		// Appendix B
		{`[-0.0, 5e-324, 1.7976931348623157e+308, 9007199254740992, 295147905179352830000, 1e+21, 1e+20, 0.000001, 1e-7]`,
			`[0,5e-324,1.7976931348623157e+308,9007199254740992,295147905179352830000,1e+21,100000000000000000000,0.000001,1e-7]`},
	} {
		got, err := ids.Canonical([]byte(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("JCS(%s)\n got %s (%v)\nwant %s", c.in, got, err, c.want)
		}
	}
	if _, err := ids.Canonical([]byte(`{"a":`)); err == nil {
		t.Error("JCS accepted a broken JSON text")
	}
}
