package httpidem

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Endpoint is what a target declares of the mutating endpoint it offers
// (the target file's "http_idempotency" object, docs/http-idempotency.md).
// What it does not declare makes the rules that need it N/A, with the
// reason.
type Endpoint struct {
	// Variant is the text the endpoint follows: ietf (default), t0, stripe.
	Variant string `json:"variant,omitempty"`
	Method  string `json:"method,omitempty"` // default POST
	Path    string `json:"path"`
	// Body is the body of one logical request: a string member "{{unique}}"
	// is replaced by a value no other request of the run uses.
	Body map[string]any `json:"body"`
	// Vary are members that, put over Body, make another payload under the
	// same key (default: none; the payload rules are then N/A).
	Vary map[string]any `json:"vary,omitempty"`
	// Invalid are members that, put over Body, make a request the endpoint
	// rejects (a 4xx that creates nothing); nil: the rejection rules are N/A.
	Invalid map[string]any `json:"invalid,omitempty"`
	// Key says where the key travels: {"header": "Idempotency-Key"} (the
	// default) or {"body": "paymentRef"}.
	Key KeyPlace `json:"key"`
	// KeyFormat is "sf-string" (an RFC 8941 String, quoted: the ietf
	// default) or "token" (the raw value: the default of t0 and stripe).
	KeyFormat string `json:"key_format,omitempty"`
	// RequiresKey says a request without a key is refused (the ietf
	// missing-key rules need it).
	RequiresKey bool `json:"requires_key,omitempty"`
	// KeyTTLSeconds is the published expiry of a key (0: not published).
	KeyTTLSeconds float64 `json:"key_ttl_seconds,omitempty"`
	// ID names the member of a 2xx answer that identifies what was created
	// ("" : none declared; a replay is then compared on the whole body).
	ID string `json:"id,omitempty"`
	// Count is a read that lists what one logical request created.
	Count *CountRead `json:"count,omitempty"`
	// Callers are the authenticated callers (the first is the main one):
	// headers each request of that caller carries. Two are needed for the
	// rules on keys scoped to the caller.
	Callers []Caller `json:"callers,omitempty"`
	// KeyScope is "caller" (the default: a key is scoped to the
	// authenticated caller) or "global": a key unique by construction
	// across callers, as t-0's key table gives its t-0-minted ids
	// ("paymentIntentId | 5, 6, 7, 14, 15 | t-0 | global"). The rules on
	// caller scope are N/A for a global key.
	KeyScope string `json:"key_scope,omitempty"`
}

// KeyPlace is where the idempotency key travels.
type KeyPlace struct {
	Header string `json:"header,omitempty"`
	Body   string `json:"body,omitempty"`
}

// CountRead is a GET that lists what one logical request created: Path,
// with "{{unique}}" replaced by that request's unique value, answers a JSON
// document whose member Items is an array (or, Items empty, is itself one).
type CountRead struct {
	Path  string `json:"path"`
	Items string `json:"items,omitempty"`
}

// Caller is one authenticated caller: the headers of its requests, given
// or named by the variables that hold them (secrets stay out of files).
type Caller struct {
	Headers    map[string]string `json:"headers,omitempty"`
	HeadersEnv map[string]string `json:"headers_env,omitempty"`
}

// Defaults fills what the target left out.
func (e *Endpoint) Defaults() {
	if e.Variant == "" {
		e.Variant = VariantIETF
	}
	if e.Method == "" {
		e.Method = "POST"
	}
	if e.Key.Header == "" && e.Key.Body == "" {
		e.Key.Header = "Idempotency-Key"
	}
	if e.KeyFormat == "" {
		e.KeyFormat = "token"
		if e.Variant == VariantIETF && e.Key.Header != "" {
			e.KeyFormat = "sf-string"
		}
	}
}

// Validate says what is wrong with a description, field by field.
func (e *Endpoint) Validate() error {
	var bad []string
	if !strings.Contains(strings.Join(Variants(), " "), e.Variant) || e.Variant == "" {
		bad = append(bad, fmt.Sprintf("variant %q: want %s", e.Variant, strings.Join(Variants(), ", ")))
	}
	if !strings.HasPrefix(e.Path, "/") {
		bad = append(bad, fmt.Sprintf("path %q: want an absolute path such as /v1/payments", e.Path))
	}
	if len(e.Body) == 0 {
		bad = append(bad, `body: want the JSON object of one request, with "{{unique}}" where a value must differ per request`)
	} else if raw, _ := json.Marshal(e.Body); !strings.Contains(string(raw), "{{unique}}") && e.Count != nil {
		bad = append(bad, `body: a count read needs "{{unique}}" in the body to find one request's creations`)
	}
	if e.Key.Header != "" && e.Key.Body != "" {
		bad = append(bad, "key: a header or a body member, not both")
	}
	if e.KeyFormat != "sf-string" && e.KeyFormat != "token" {
		bad = append(bad, fmt.Sprintf("key_format %q: want sf-string or token", e.KeyFormat))
	}
	if e.KeyFormat == "sf-string" && e.Key.Body != "" {
		bad = append(bad, "key_format sf-string is for a header key")
	}
	if e.Count != nil && !strings.HasPrefix(e.Count.Path, "/") {
		bad = append(bad, fmt.Sprintf("count.path %q: want an absolute path", e.Count.Path))
	}
	if e.KeyScope != "" && e.KeyScope != "caller" && e.KeyScope != "global" {
		bad = append(bad, fmt.Sprintf("key_scope %q: want caller or global", e.KeyScope))
	}
	if e.KeyTTLSeconds < 0 {
		bad = append(bad, "key_ttl_seconds: want a number of seconds > 0")
	}
	if len(bad) > 0 {
		return fmt.Errorf("http_idempotency: %s", strings.Join(bad, "; "))
	}
	return nil
}

// SFString encodes a key as an RFC 8941 sf-string: quoted, with " and \
// escaped. ok is false when the key holds a character an sf-string cannot
// (outside printable ASCII).
func SFString(key string) (string, bool) {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < 0x20 || c > 0x7e {
			return "", false
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), true
}
