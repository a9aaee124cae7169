package atp

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// b64 is the binding's encoding of signatures and keys: base64url without
// padding.
var b64 = base64.RawURLEncoding

// Idempotency keys: any string of 16 to 128 characters (§3).
const keyMin, keyMax = 16, 128

// shortKeyMax is the limit of the short-keys-only mutant.
const shortKeyMax = 64

// idempotencyKey reads and checks the Idempotency-Key header.
func (s *Server) idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(headerKey)
	if len(vals) == 0 || vals[0] == "" {
		return "", errorf(400, codeKeyRequired, "the Idempotency-Key header is required")
	}
	if len(vals) > 1 {
		return "", errorf(400, codeKeyInvalid, "one Idempotency-Key header, not %d", len(vals))
	}
	k := vals[0]
	n := len(k)
	if utf8.ValidString(k) {
		n = utf8.RuneCountInString(k)
	}
	limit := keyMax
	if s.mutant == MutantShortKeysOnly {
		limit = shortKeyMax
	}
	if n < keyMin || n > limit {
		return "", errorf(400, codeKeyInvalid, "the Idempotency-Key has %d characters, not %d to %d", n, keyMin, limit)
	}
	return k, nil
}

var (
	idChars  = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	currency = regexp.MustCompile(`^[A-Z]{3}$`)
	amountRe = regexp.MustCompile(`^[1-9][0-9]{0,12}$`)
)

const maxAmount = 1_000_000_000_000

// maxDedupKey bounds an action_dedup_key (the binding gives no bound).
const maxDedupKey = 512

// intent is a parsed signed intent.
type intent struct {
	IntentID, AgentID, Nonce, Payee, Currency string
	ExpiresAt                                 time.Time
	Amount                                    int64
	ActionDedupKey                            string // "" when absent
	Precondition                              string // intent_settled, "" when absent
	Signature                                 []byte
	// signed is the JCS form of the intent without its signature.
	signed []byte
	// compact is the intent as received, compacted: the body of its row.
	compact []byte
}

var intentMembers = map[string]bool{"intent_id": true, "agent_id": true, "nonce": true, "expires_at": true, "amount": true,
	"currency": true, "payee": true, "action_dedup_key": true, "precondition": true, "signature": true}

func badIntent(format string, args ...any) error {
	return errorf(400, codeInvalidIntent, format, args...)
}

// objectMembers reads a JSON object strictly: one object, no duplicate
// member, nothing after it.
func objectMembers(b []byte) ([]string, map[string]json.RawMessage, error) {
	if !utf8.Valid(b) {
		return nil, nil, errors.New("the body is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	t, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("not JSON: %v", err)
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return nil, nil, errors.New("not a JSON object")
	}
	var names []string
	members := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("not JSON: %v", err)
		}
		name, ok := t.(string)
		if !ok {
			return nil, nil, errors.New("not a JSON object")
		}
		if _, dup := members[name]; dup {
			return nil, nil, fmt.Errorf("member %q appears twice", name)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("not JSON: %v", err)
		}
		names = append(names, name)
		members[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("data after the JSON object")
	}
	return names, members, nil
}

func stringMember(m map[string]json.RawMessage, name string) (string, bool, error) {
	raw, ok := m[name]
	if !ok {
		return "", false, nil
	}
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", true, fmt.Errorf("%s is not a string", name)
	}
	return s, true, nil
}

// parseIntent reads the body of POST /api/atp/authorize: the flat signed
// intent of the binding, every member checked, no other member.
func parseIntent(b []byte) (*intent, error) {
	names, m, err := objectMembers(b)
	if err != nil {
		return nil, badIntent("the intent: %v", err)
	}
	for _, n := range names {
		if !intentMembers[n] {
			return nil, badIntent("member %q is not one of the binding's (a signed intent says exactly what it means)", n)
		}
	}
	in := &intent{}
	for _, f := range []struct {
		name string
		dst  *string
		re   *regexp.Regexp
	}{
		{"intent_id", &in.IntentID, idChars}, {"agent_id", &in.AgentID, idChars}, {"nonce", &in.Nonce, idChars},
		{"payee", &in.Payee, idChars}, {"currency", &in.Currency, currency},
	} {
		v, ok, err := stringMember(m, f.name)
		if err != nil {
			return nil, badIntent("%v", err)
		}
		if !ok {
			return nil, badIntent("%s is required", f.name)
		}
		if !f.re.MatchString(v) {
			return nil, badIntent("%s %q does not match %s", f.name, v, f.re)
		}
		*f.dst = v
	}
	exp, ok, err := stringMember(m, "expires_at")
	if err != nil || !ok {
		return nil, badIntent("expires_at is required, an RFC 3339 string")
	}
	t, err := time.Parse(time.RFC3339Nano, exp)
	if _, off := t.Zone(); err != nil || off != 0 {
		return nil, badIntent("expires_at %q is not an RFC 3339 time in UTC", exp)
	}
	in.ExpiresAt = t
	raw, ok := m["amount"]
	if !ok {
		return nil, badIntent("amount is required")
	}
	if !amountRe.Match(raw) {
		return nil, badIntent("amount %s is not an integer from 1 to 10^12", raw)
	}
	in.Amount, _ = strconv.ParseInt(string(raw), 10, 64)
	if in.Amount > maxAmount {
		return nil, badIntent("amount %s is not an integer from 1 to 10^12", raw)
	}
	if v, ok, err := stringMember(m, "action_dedup_key"); err != nil {
		return nil, badIntent("%v", err)
	} else if ok {
		if v == "" || utf8.RuneCountInString(v) > maxDedupKey {
			return nil, badIntent("action_dedup_key has 0 or more than %d characters", maxDedupKey)
		}
		in.ActionDedupKey = v
	}
	if raw, ok := m["precondition"]; ok {
		pn, pm, err := objectMembers(raw)
		if err != nil {
			return nil, badIntent("precondition: %v", err)
		}
		if len(pn) != 1 || pn[0] != "intent_settled" {
			return nil, badIntent(`precondition is {"intent_settled": "<intent_id>"} and nothing else`)
		}
		v, _, err := stringMember(pm, "intent_settled")
		if err != nil || !idChars.MatchString(v) {
			return nil, badIntent("precondition.intent_settled is not an intent_id")
		}
		in.Precondition = v
	}
	sig, ok, err := stringMember(m, "signature")
	if err != nil || !ok {
		return nil, badIntent("signature is required, a string")
	}
	if in.Signature, err = b64.DecodeString(sig); err != nil || len(in.Signature) != ed25519.SignatureSize {
		return nil, errorf(400, codeInvalidSignature, "the signature is not 64 bytes of base64url without padding")
	}
	delete(m, "signature")
	if in.signed, err = canonical(m); err != nil {
		return nil, badIntent("%v", err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return nil, badIntent("not JSON: %v", err)
	}
	in.compact = c.Bytes()
	return in, nil
}

// canonical is the RFC 8785 (JCS) form of a JSON value (a map of raw
// members is an object).
func canonical(v any) (out []byte, err error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return canonicalBytes(raw)
}

func canonicalBytes(raw []byte) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("JCS: %v", p)
		}
	}()
	out, err = jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("JCS: %v", err)
	}
	return out, nil
}

// verify checks the intent's signature against the agent's key.
func (in *intent) verify(pub ed25519.PublicKey) bool {
	return ed25519.Verify(pub, in.signed, in.Signature)
}

// sameIntent reports whether a stored body is this signed intent (its JCS
// form, signature included, is the same).
func (in *intent) sameIntent(stored []byte) bool {
	if bytes.Equal(stored, in.compact) {
		return true
	}
	a, err1 := canonicalBytes(stored)
	b, err2 := canonicalBytes(in.compact)
	return err1 == nil && err2 == nil && bytes.Equal(a, b)
}
