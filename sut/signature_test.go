package sut

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/spec"
)

// The known answers the harness (spec/hmac.go) is tested against too; they
// were worked out by neither Go implementation (see hmac_kat.py).
const katPath = "../spec/testdata/hmac_kat.json"

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
	d, _ := spec.IntentDecision(spec.DecisionQueryRepeated)
	if len(d.Readings) != 2 || d.Readings[0].Name != queryByValue || d.Readings[1].Name != queryAsSent {
		t.Fatalf("readings of %s: %+v", spec.DecisionQueryRepeated, d.Readings)
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

// FuzzCanonicalPathAgrees: the server's canonical path (written from §5.2)
// and the harness's (spec.CanonicalPath, spec.CanonicalPathAsSent) agree on
// every input, and neither panics. They share no code; a disagreement is a
// bug in one of them.
func FuzzCanonicalPathAgrees(f *testing.F) {
	for _, v := range [][2]string{{"/intent", ""}, {"/claim", "namespace=x&goal=a"}, {"/get/a%2Fb", "x=1&x=&y"},
		{"/get/%zz", ""}, {"/a b", "k=v w"}, {"/", "&&="}, {"/claim", "a=%2F&a=%2f"}, {"/claim", "t=z&t=a&%C3%A9=1&~=2"},
		{"/get/%e2%82%ac+x", "a+b=c+d&a+b=%20"}} {
		f.Add(v[0], v[1])
	}
	f.Fuzz(func(t *testing.T, path, query string) {
		for _, asSent := range []bool{false, true} {
			got, ok := canonicalPath(path, query, asSent)
			harness := spec.CanonicalPath
			if asSent {
				harness = spec.CanonicalPathAsSent
			}
			want, wantOK := harness(path, query)
			if ok != wantOK || got != want {
				t.Fatalf("%q ? %q (as-sent %v): server %q (%v), harness %q (%v)", path, query, asSent, got, ok, want, wantOK)
			}
		}
	})
}
