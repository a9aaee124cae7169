package intent

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// Strict HMAC signing of seed 004 §5.2, written for the server on its own:
// the harness signs with profiles/intent/hmac.go, and the two must agree only through
// the text (and the known answers of profiles/intent/testdata/hmac_kat.json), never by
// sharing code.
//
// §5.2: the signature is HMAC-SHA256 under the API key over
//
//	METHOD \n CANONICAL_PATH \n TIMESTAMP \n NONCE \n BODY
//
// "METHOD MUST be uppercase", "BODY MUST be the exact, unmodified bytes
// transmitted over the network", "Empty bodies MUST serialize as an empty
// string", "The resulting digest MUST be lowercase hexadecimal". Query
// parameters in CANONICAL_PATH "MUST: be sorted lexicographically by key -
// preserve repeated parameters - preserve blank values - be strictly
// percent-encoded according to RFC 3986 (forward slashes / MUST be encoded
// as %2F)".
//
// Where the text is open the server follows the wire binding of idscheck:
// path segments are decoded and re-encoded like the query; '+' in the query
// is a space (form encoding, as most clients send a space); a parameter
// without '=' has a blank value; empty parameters ("&&") are dropped; keys
// are compared as decoded bytes; an escape that is not '%' and two hex digits
// makes the request unsignable. Repeated keys are ordered by value (reading
// "by-value" of decision query-repeated-order) or kept in the order they
// were sent (reading "as-sent").

// Reading names of decision query-repeated-order (ReadingQueryRepeated).
const (
	queryByValue = "by-value"
	queryAsSent  = "as-sent"
)

// pctDecode undoes percent-encoding; plus turns '+' into a space. ok is
// false on a '%' not followed by two hex digits.
func pctDecode(s string, plus bool) (string, bool) {
	if !strings.ContainsAny(s, "%+") {
		return s, true
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			if i+2 >= len(s) {
				return "", false
			}
			hi, ok1 := hexVal(s[i+1])
			lo, ok2 := hexVal(s[i+2])
			if !ok1 || !ok2 {
				return "", false
			}
			out = append(out, hi<<4|lo)
			i += 2
		case c == '+' && plus:
			out = append(out, ' ')
		default:
			out = append(out, c)
		}
	}
	return string(out), true
}

func hexVal(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// rfc3986Unreserved reports whether c is ALPHA / DIGIT / "-" / "." / "_" / "~".
func rfc3986Unreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("-._~", c) >= 0
}

// pctEncode encodes every byte outside the unreserved set as %XX, upper case.
func pctEncode(s string) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 0, len(s)*3)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if rfc3986Unreserved(c) {
			out = append(out, c)
			continue
		}
		out = append(out, '%', digits[c>>4], digits[c&0x0f])
	}
	return string(out)
}

type queryParam struct{ key, value string }

// canonicalPath is CANONICAL_PATH of a request whose path is escapedPath (as
// on the wire) and whose query is rawQuery. asSent keeps repeated keys in
// the order they were sent; otherwise they are ordered by value. ok is false
// when the path or the query cannot be decoded.
func canonicalPath(escapedPath, rawQuery string, asSent bool) (string, bool) {
	var b strings.Builder
	for i, seg := range strings.Split(escapedPath, "/") {
		if i > 0 {
			b.WriteByte('/')
		}
		d, ok := pctDecode(seg, false)
		if !ok {
			return "", false
		}
		b.WriteString(pctEncode(d))
	}
	var params []queryParam
	for _, field := range strings.Split(rawQuery, "&") {
		if field == "" {
			continue
		}
		k, v := field, ""
		if i := strings.IndexByte(field, '='); i >= 0 {
			k, v = field[:i], field[i+1:]
		}
		dk, ok1 := pctDecode(k, true)
		dv, ok2 := pctDecode(v, true)
		if !ok1 || !ok2 {
			return "", false
		}
		params = append(params, queryParam{dk, dv})
	}
	byKey := func(a, b queryParam) int { return strings.Compare(a.key, b.key) }
	if asSent {
		slices.SortStableFunc(params, byKey)
	} else {
		slices.SortFunc(params, func(a, b queryParam) int {
			if c := byKey(a, b); c != 0 {
				return c
			}
			return strings.Compare(a.value, b.value)
		})
	}
	for i, p := range params {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(pctEncode(p.key))
		b.WriteByte('=')
		b.WriteString(pctEncode(p.value))
	}
	return b.String(), true
}

// signingString joins the five lines of §5.2. The method is upper-cased
// (ASCII only: methods are tokens).
func signingString(method, canonical, timestamp, nonce string, body []byte) []byte {
	up := []byte(method)
	for i, c := range up {
		if 'a' <= c && c <= 'z' {
			up[i] = c - 'a' + 'A'
		}
	}
	msg := make([]byte, 0, len(up)+len(canonical)+len(timestamp)+len(nonce)+len(body)+4)
	for _, part := range [][]byte{up, []byte(canonical), []byte(timestamp), []byte(nonce)} {
		msg = append(msg, part...)
		msg = append(msg, '\n')
	}
	return append(msg, body...)
}

// signatureValid reports whether sig is the lower-case hex HMAC-SHA256 of
// msg under key. Upper-case hex is refused ("The resulting digest MUST be
// lowercase hexadecimal"); the comparison of the digests is constant-time.
func signatureValid(key string, msg []byte, sig string) bool {
	if len(sig) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(sig); i++ {
		if c := sig[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	got, err := hex.DecodeString(sig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(msg)
	return hmac.Equal(mac.Sum(nil), got)
}

// CanonicalPath is canonicalPath, exported for one test only: the fuzz test
// in cmd/idscheck that holds the server's reading of §5.2 against the
// harness's (profiles/intent.CanonicalPath), two implementations that share no code.
// The server itself never calls it.
func CanonicalPath(escapedPath, rawQuery string, asSent bool) (string, bool) {
	return canonicalPath(escapedPath, rawQuery, asSent)
}
