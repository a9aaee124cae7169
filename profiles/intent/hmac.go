package intent

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"sort"
	"strings"
)

// HMAC request signing of the Intent Protocol (seed 004 §5.2).
//
// Binding decisions (the text leaves these open):
//   - CANONICAL_PATH is the request path, each segment percent-decoded and
//     re-encoded with RFC 3986 (only unreserved characters stay literal; '/'
//     inside a segment becomes %2F), followed, when the query is not empty,
//     by '?' and the query parameters sorted by key and then by value
//     (repeated parameters and blank values kept), each key and value encoded
//     the same way and joined with '&' and '='.
//   - In the query, '+' is a space (form encoding), a parameter without '='
//     has a blank value, and empty parameters ("&&") are dropped. Keys and
//     values are compared as decoded bytes.
//   - Repeated parameters sent out of value order are the decision
//     "query-repeated-order": CanonicalPath orders them by value (reading
//     "by-value"), CanonicalPathAsSent keeps the order they were sent in
//     (reading "as-sent"). Both agree when they are already in value order.
//   - A path or query that cannot be percent-decoded has no canonical form;
//     servers reject such requests with invalid_signature.
//
// profiles/intent/testdata/hmac_kat.json holds known answers worked out without this
// code (hmac_kat.py, python3 hmac and openssl); the reference server's own
// implementation (sut/signature.go) is tested against the same file.

// Headers of strict HMAC signing.
const (
	HeaderAPIKey    = "X-API-KEY"
	HeaderTimestamp = "X-Timestamp"
	HeaderNonce     = "X-Nonce"
	HeaderSignature = "X-Signature"
)

// Escape percent-encodes s strictly per RFC 3986: every byte but the
// unreserved set (ALPHA / DIGIT / "-" / "." / "_" / "~") becomes %XX with
// upper-case hex digits.
func Escape(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// CanonicalPath returns the CANONICAL_PATH line of the signing string for an
// escaped request path (as on the wire, e.g. URL.EscapedPath()) and a raw
// query (URL.RawQuery). It returns ok=false when the path or the query
// cannot be decoded; such a request cannot carry a valid signature.
// Repeated parameters are sorted by value (reading "by-value").
func CanonicalPath(escapedPath, rawQuery string) (string, bool) {
	return canonicalPath(escapedPath, rawQuery, false)
}

// CanonicalPathAsSent is CanonicalPath under the reading "as-sent" of the
// decision "query-repeated-order": parameters are sorted by key with a
// stable sort, so repeated ones keep the order in which they were sent.
func CanonicalPathAsSent(escapedPath, rawQuery string) (string, bool) {
	return canonicalPath(escapedPath, rawQuery, true)
}

func canonicalPath(escapedPath, rawQuery string, asSent bool) (string, bool) {
	segs := strings.Split(escapedPath, "/")
	for i, s := range segs {
		d, err := url.PathUnescape(s)
		if err != nil {
			return "", false
		}
		segs[i] = Escape(d)
	}
	p := strings.Join(segs, "/")
	if rawQuery == "" {
		return p, true
	}
	type kv struct{ k, v string }
	var params []kv
	for _, part := range strings.Split(rawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		dk, err1 := url.QueryUnescape(k)
		dv, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return "", false
		}
		params = append(params, kv{dk, dv})
	}
	if len(params) == 0 {
		return p, true
	}
	sort.SliceStable(params, func(i, j int) bool {
		if params[i].k != params[j].k || asSent {
			return params[i].k < params[j].k
		}
		return params[i].v < params[j].v
	})
	var b strings.Builder
	b.WriteString(p)
	for i, kv := range params {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(Escape(kv.k))
		b.WriteByte('=')
		b.WriteString(Escape(kv.v))
	}
	return b.String(), true
}

// SigningString is the canonical string of §5.2: METHOD, CANONICAL_PATH,
// TIMESTAMP, NONCE and BODY joined by '\n'. BODY is the exact bytes on the wire.
func SigningString(method, canonicalPath, timestamp, nonce string, body []byte) []byte {
	var b []byte
	b = append(b, strings.ToUpper(method)...)
	b = append(b, '\n')
	b = append(b, canonicalPath...)
	b = append(b, '\n')
	b = append(b, timestamp...)
	b = append(b, '\n')
	b = append(b, nonce...)
	b = append(b, '\n')
	b = append(b, body...)
	return b
}

// Sign returns the lower-case hex HMAC-SHA256 of msg under key.
func Sign(key string, msg []byte) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write(msg)
	return hex.EncodeToString(m.Sum(nil))
}

// VerifySignature reports whether sig is the signature of msg under key,
// in constant time.
func VerifySignature(key string, msg []byte, sig string) bool {
	want := Sign(key, msg)
	return hmac.Equal([]byte(want), []byte(sig))
}
