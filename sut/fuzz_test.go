package sut

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeIntent: decoding never panics; a rejection is a 400 with an
// invalid_* code (or 413 payload_too_large); an acceptance is within every
// limit of §4.1; the canonical hash ignores key order and whitespace.
func FuzzDecodeIntent(f *testing.F) {
	for _, s := range []string{
		`{"goal":"g","payload":1}`,
		`{"goal":"send","payload":{"m":"hi"},"namespace":"a.b-c_d","visibility":"public","priority":1000,"delay":1.5,"max_attempts":20,"backoff_base":1,"target_worker":"w","required_capability":"gpu"}`,
		`{"goal":"","payload":null}`, `[]`, `null`, `{"goal":"g","payload":1,"priority":1e3}`, `{"goal":"g","payload":1,"priority":"5"}`,
		`{"goal":"\u00e9","payload":"x","delay":-0}`, `{"goal":"g","payload":1} x`, `{"payload":1,"goal":"g","goal":"h"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := decodeIntent(body, true); err != nil {
			var he *httpError
			if !errors.As(err, &he) || he.status != 400 && he.status != 413 {
				t.Fatalf("rejection under null-payload=missing: %v", err)
			}
		}
		n, err := decodeIntent(body, false)
		if err != nil {
			var he *httpError
			if !errors.As(err, &he) {
				t.Fatalf("error without status: %v", err)
			}
			if !(he.status == 400 && strings.HasPrefix(he.code, "invalid_")) && !(he.status == 413 && he.code == codePayloadTooLarge) {
				t.Fatalf("rejection %d %s", he.status, he.code)
			}
			return
		}
		if l := utf8.RuneCountInString(n.goal); l < 1 || l > maxGoalLen {
			t.Fatalf("goal length %d", l)
		}
		if !validNamespace(n.namespace) || (n.visibility != "private" && n.visibility != "public") {
			t.Fatalf("namespace %q visibility %q", n.namespace, n.visibility)
		}
		if n.priority < minPriority || n.priority > maxPriority || n.maxAttempts < minMaxAttempts || n.maxAttempts > maxMaxAttempts {
			t.Fatalf("priority %d max_attempts %d", n.priority, n.maxAttempts)
		}
		if n.delay < 0 || n.backoffBase < minBackoffBase || n.backoffBase > maxBackoffBase {
			t.Fatalf("delay %v backoff %v", n.delay, n.backoffBase)
		}
		if !json.Valid(n.payload) || len(n.payload) > maxPayloadBytes {
			t.Fatalf("payload %q", n.payload)
		}
		var v any
		if json.Unmarshal(body, &v) == nil {
			again, _ := json.MarshalIndent(v, "", "  ")
			if canonicalHash(again) != canonicalHash(body) && !strings.Contains(string(body), "e") && !strings.Contains(string(body), ".") {
				t.Fatalf("canonical hash differs after re-encoding")
			}
		}
	})
}
