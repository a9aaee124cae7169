package httpidem

import (
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"
)

// Key limits: the published format of a key.
const (
	maxKey        = 255 // ietf (the sf-string's content) and stripe ("up to 255 characters")
	maxPaymentRef = 128 // t0's paymentRef
	shortKey      = 64  // the short-stripe-keys mutant's limit
)

// headerKey reads the Idempotency-Key header (variants ietf and stripe):
// the key, whether there was one, or the problem with it.
func (s *Server) headerKey(r *http.Request) (string, bool, *problem) {
	vals := r.Header.Values(headerKey)
	switch {
	case len(vals) == 0:
		return "", false, nil
	case len(vals) > 1:
		return "", true, problemf(400, codeKeyMultiple, "the request has %d Idempotency-Key header fields; send exactly one", len(vals))
	}
	v := vals[0]
	if s.variant == VariantStripe {
		n := chars(v)
		limit := maxKey
		if s.mutant == MutantShortStripeKeys {
			limit = shortKey
		}
		if n < 1 || n > limit {
			return "", true, problemf(400, codeKeyInvalid, "an idempotency key has 1 to %d characters, this one %d", limit, n)
		}
		return v, true, nil
	}
	k, err := parseSFStringItem(v)
	if err != nil {
		return "", true, problemf(400, codeKeyInvalid,
			`Idempotency-Key must be an RFC 8941 sf-string (a quoted string such as "8e03978e-40d5-43e8-bc93-6894a57f9324"): %v`, err)
	}
	if n := len(k); n < 1 || n > maxKey {
		return "", true, problemf(400, codeKeyInvalid, "an idempotency key has 1 to %d characters, this one %d", maxKey, n)
	}
	return k, true, nil
}

// chars counts the characters of s: runes when it is UTF-8, else bytes.
func chars(s string) int {
	if utf8.ValidString(s) {
		return utf8.RuneCountInString(s)
	}
	return len(s)
}

// parseSFStringItem parses a field value as an RFC 8941 Item (§4.2: a bare
// item and its parameters, surrounded by spaces) whose bare item must be a
// String (§4.2.5); the parameters are parsed and ignored. It returns the
// string's content, unescaped.
func parseSFStringItem(v string) (string, error) {
	p := &sfParser{s: v}
	p.skipSP()
	if p.empty() || p.peek() != '"' {
		return "", errors.New("the value is not a quoted string")
	}
	str, err := p.str()
	if err != nil {
		return "", err
	}
	if err := p.params(); err != nil {
		return "", err
	}
	p.skipSP()
	if !p.empty() {
		return "", errors.New("unexpected characters after the item")
	}
	return str, nil
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) empty() bool { return p.i >= len(p.s) }
func (p *sfParser) peek() byte  { return p.s[p.i] }

func (p *sfParser) skipSP() {
	for !p.empty() && p.peek() == ' ' {
		p.i++
	}
}

// str parses an sf-string (§4.2.5): DQUOTE, printable ASCII with \" and \\
// escapes, DQUOTE.
func (p *sfParser) str() (string, error) {
	p.i++ // the opening quote
	var b strings.Builder
	for {
		if p.empty() {
			return "", errors.New("the string has no closing quote")
		}
		c := p.peek()
		p.i++
		switch {
		case c == '\\':
			if p.empty() {
				return "", errors.New("the string ends with a backslash")
			}
			n := p.peek()
			p.i++
			if n != '"' && n != '\\' {
				return "", errors.New(`only \" and \\ may be escaped in a string`)
			}
			b.WriteByte(n)
		case c == '"':
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", errors.New("a string holds printable ASCII only")
		default:
			b.WriteByte(c)
		}
	}
}

// params parses parameters (§4.2.3.2): ;key[=bare-item] ...
func (p *sfParser) params() error {
	for !p.empty() && p.peek() == ';' {
		p.i++
		p.skipSP()
		if err := p.key(); err != nil {
			return err
		}
		if !p.empty() && p.peek() == '=' {
			p.i++
			if err := p.bareItem(); err != nil {
				return err
			}
		}
	}
	return nil
}

func isLCAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool   { return c >= '0' && c <= '9' }

// key parses a parameter key (§4.2.3.3).
func (p *sfParser) key() error {
	if p.empty() || !(isLCAlpha(p.peek()) || p.peek() == '*') {
		return errors.New("a parameter key must start with a lowercase letter or *")
	}
	for !p.empty() {
		c := p.peek()
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return nil
}

// bareItem parses a parameter's value (§4.2.3.1).
func (p *sfParser) bareItem() error {
	if p.empty() {
		return errors.New("a parameter has no value after =")
	}
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		_, err := p.str()
		return err
	case c == '*' || isAlpha(c):
		p.token()
		return nil
	case c == ':':
		return p.bytes()
	case c == '?':
		p.i++
		if p.empty() || (p.peek() != '0' && p.peek() != '1') {
			return errors.New("a boolean is ?0 or ?1")
		}
		p.i++
		return nil
	}
	return errors.New("a parameter value is not a bare item")
}

// number parses an Integer or a Decimal (§4.2.4).
func (p *sfParser) number() error {
	if p.peek() == '-' {
		p.i++
	}
	if p.empty() || !isDigit(p.peek()) {
		return errors.New("a number needs a digit")
	}
	digits, dot, frac := 0, false, 0
	for !p.empty() {
		c := p.peek()
		switch {
		case isDigit(c):
			if dot {
				frac++
			} else {
				digits++
			}
		case c == '.' && !dot:
			if digits > 12 {
				return errors.New("a decimal has at most 12 integer digits")
			}
			dot = true
		default:
			goto end
		}
		p.i++
		if !dot && digits > 15 {
			return errors.New("an integer has at most 15 digits")
		}
	}
end:
	if dot && (frac == 0 || frac > 3) {
		return errors.New("a decimal has 1 to 3 fraction digits")
	}
	return nil
}

// token parses a Token (§4.2.6).
func (p *sfParser) token() {
	p.i++
	for !p.empty() {
		c := p.peek()
		if !(isTChar(c) || c == ':' || c == '/') {
			return
		}
		p.i++
	}
}

func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// bytes parses a Byte Sequence (§4.2.7): :base64:
func (p *sfParser) bytes() error {
	p.i++
	for {
		if p.empty() {
			return errors.New("a byte sequence has no closing colon")
		}
		c := p.peek()
		p.i++
		if c == ':' {
			return nil
		}
		if !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=') {
			return errors.New("a byte sequence holds base64 only")
		}
	}
}
