package intent

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// The known answers the harness (profiles/intent/hmac.go) is tested against too; they
// were worked out by neither Go implementation (see hmac_kat.py).
const katPath = "../../profiles/intent/testdata/hmac_kat.json"

type katVector struct {
	Name, Key, Method, Path, Query, Timestamp, Nonce, Body string
	ReadingNeutral                                         bool              `json:"reading_neutral"`
	CanonicalPath                                          map[string]string `json:"canonical_path"`
	SigningString                                          map[string]string `json:"signing_string"`
	Signature                                              map[string]string `json:"signature"`
}

func loadKAT(t *testing.T) []katVector {
	t.Helper()
	raw, err := os.ReadFile(katPath)
	if err != nil {
		t.Fatal(err)
	}
	var kat struct{ Vectors []katVector }
	if err := json.Unmarshal(raw, &kat); err != nil {
		t.Fatal(err)
	}
	if len(kat.Vectors) < 8 {
		t.Fatalf("%d known-answer vectors, want at least 8", len(kat.Vectors))
	}
	return kat.Vectors
}

func TestSignatureKnownAnswers(t *testing.T) {
	for _, k := range ReadingKeys() {
		if k.Key == ReadingQueryRepeated && !slices.Equal(k.Names, []string{queryByValue, queryAsSent}) {
			t.Fatalf("names of %s: %q", k.Key, k.Names)
		}
	}
	for _, v := range loadKAT(t) {
		for _, reading := range []string{queryByValue, queryAsSent} {
			t.Run(v.Name+"/"+reading, func(t *testing.T) {
				cp, ok := canonicalPath(v.Path, v.Query, reading == queryAsSent)
				if !ok || cp != v.CanonicalPath[reading] {
					t.Fatalf("canonical path %q (%v), want %q", cp, ok, v.CanonicalPath[reading])
				}
				msg := signingString(v.Method, cp, v.Timestamp, v.Nonce, []byte(v.Body))
				if string(msg) != v.SigningString[reading] {
					t.Fatalf("signing string %q, want %q", msg, v.SigningString[reading])
				}
				sig := v.Signature[reading]
				if !signatureValid(v.Key, msg, sig) {
					t.Fatal("the known signature does not verify")
				}
				if signatureValid(v.Key, msg, strings.ToUpper(sig)) {
					t.Fatal("upper-case hex accepted")
				}
				if signatureValid(v.Key+"x", msg, sig) || signatureValid(v.Key, append(msg, ' '), sig) {
					t.Fatal("a wrong key or message verifies")
				}
				if !v.ReadingNeutral {
					other := queryAsSent
					if reading == queryAsSent {
						other = queryByValue
					}
					if signatureValid(v.Key, []byte(v.SigningString[other]), sig) {
						t.Fatal("the signature of one reading verifies the other")
					}
				}
			})
		}
	}
}

func TestCanonicalPathRefuses(t *testing.T) {
	for _, tc := range [][2]string{{"/get/%zz", ""}, {"/get/%4", ""}, {"/get/%", ""}, {"/claim", "goal=%g1"}, {"/claim", "a%=1"}} {
		if cp, ok := canonicalPath(tc[0], tc[1], false); ok {
			t.Errorf("%q ? %q: canonical %q, want none", tc[0], tc[1], cp)
		}
	}
	for _, sig := range []string{"", "abc", strings.Repeat("g", 64), strings.Repeat("0", 63), strings.Repeat("0", 65)} {
		if signatureValid("k", []byte("m"), sig) {
			t.Errorf("signature %q accepted", sig)
		}
	}
}
