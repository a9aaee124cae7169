package probe

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// spec is what the probe reads of a target file's "http_idempotency"
// section (docs/http-idempotency.md, "The target file"); anything else
// in the file is left alone.
type spec struct {
	Variant       string                        `json:"variant"`
	Method        string                        `json:"method"`
	Path          string                        `json:"path"`
	Body          map[string]any                `json:"body"`
	Vary          map[string]any                `json:"vary"`
	Invalid       map[string]any                `json:"invalid"`
	Slow          json.RawMessage               `json:"slow"`
	Key           struct{ Header, Body string } `json:"key"`
	KeyFormat     string                        `json:"key_format"`
	KeySpec       *keySpec                      `json:"key_spec"`
	RequiresKey   bool                          `json:"requires_key"`
	KeyTTLSeconds float64                       `json:"key_ttl_seconds"`
	ID            string                        `json:"id"`
	Count         *countRead                    `json:"count"`
	Callers       []caller                      `json:"callers"`
	KeyScope      string                        `json:"key_scope"`
	Documented    map[string]any                `json:"documented"`

	slow     map[string]any // the members that make a request slow; nil: none declared
	pattern  *regexp.Regexp
	keyBody  bool // the key travels in the body
	sfString bool // the key header's value is an RFC 8941 String
}

type keySpec struct {
	UUID      bool   `json:"uuid"`
	MinLength int    `json:"min_length"`
	MaxLength int    `json:"max_length"`
	Pattern   string `json:"pattern"`
}

type countRead struct {
	Path       string `json:"path"`
	Pointer    string `json:"pointer"`
	Items      string `json:"items"`
	Difference bool   `json:"difference"`
}

type caller struct {
	Headers    map[string]string `json:"headers"`
	HeadersEnv map[string]string `json:"headers_env"`
}

func parseTarget(b []byte) (*spec, error) {
	var doc struct {
		H *spec `json:"http_idempotency"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("the target file: %v", err)
	}
	sp := doc.H
	if sp == nil {
		return nil, errors.New(`the target file has no "http_idempotency" section`)
	}
	if !strings.HasPrefix(sp.Path, "/") {
		return nil, fmt.Errorf("http_idempotency.path %q: want an absolute path", sp.Path)
	}
	if len(sp.Body) == 0 {
		return nil, errors.New("http_idempotency.body: want the JSON object of one request")
	}
	if sp.Method == "" {
		sp.Method = "POST"
	}
	if sp.Key.Header == "" && sp.Key.Body == "" {
		sp.Key.Header = "Idempotency-Key"
	}
	sp.keyBody = sp.Key.Body != ""
	switch sp.KeyFormat {
	case "sf-string":
		sp.sfString = !sp.keyBody
	case "token":
	case "":
		// idscheck's default: sf-string for ietf (the default variant) with a header key.
		sp.sfString = (sp.Variant == "" || sp.Variant == "ietf") && !sp.keyBody
	default:
		return nil, fmt.Errorf("http_idempotency.key_format %q: want sf-string or token", sp.KeyFormat)
	}
	if len(sp.Slow) > 0 && string(sp.Slow) != "null" && string(sp.Slow) != "false" {
		var m map[string]any
		if string(sp.Slow) == "true" {
			m = map[string]any{}
		} else if err := json.Unmarshal(sp.Slow, &m); err != nil {
			return nil, fmt.Errorf("http_idempotency.slow: want an object of members (or {} when every request is slow): %v", err)
		}
		if m == nil {
			m = map[string]any{}
		}
		sp.slow = m
	}
	if ks := sp.KeySpec; ks != nil && ks.Pattern != "" {
		re, err := regexp.Compile(`^(?:` + ks.Pattern + `)$`)
		if err != nil {
			return nil, fmt.Errorf("http_idempotency.key_spec.pattern: %v", err)
		}
		sp.pattern = re
	}
	if sp.Count != nil && !strings.HasPrefix(sp.Count.Path, "/") {
		return nil, fmt.Errorf("http_idempotency.count.path %q: want an absolute path", sp.Count.Path)
	}
	return sp, nil
}

// headers are caller i's headers (headers_env read from the environment).
func (sp *spec) headers(i int) map[string]string {
	out := map[string]string{}
	if i >= len(sp.Callers) {
		return out
	}
	c := sp.Callers[i]
	for k, v := range c.Headers {
		out[k] = v
	}
	for k, env := range c.HeadersEnv {
		out[k] = os.Getenv(env)
	}
	return out
}

// documented is the endpoint's documented choice name ("replay_header"),
// or "".
func (sp *spec) documented(name string) string {
	if v, ok := sp.Documented[name]; ok && v != nil {
		return fmt.Sprint(v)
	}
	return ""
}

// unique is one logical request's unique values.
type unique struct {
	Text string
	Int  int64
	UUID string
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func randHex(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// fill copies v with the unique markers replaced.
func fill(v any, u unique) any {
	switch x := v.(type) {
	case string:
		switch x {
		case "{{unique:int}}":
			return u.Int
		case "{{unique:uuid}}":
			return u.UUID
		}
		return strings.ReplaceAll(x, "{{unique}}", u.Text)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = fill(e, u)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = fill(e, u)
		}
		return out
	}
	return v
}

// bodyOf is the body with the members of each over put over it, filled for u.
func (sp *spec) bodyOf(u unique, over ...map[string]any) map[string]any {
	m := map[string]any{}
	for k, v := range sp.Body {
		m[k] = v
	}
	for _, o := range over {
		for k, v := range o {
			m[k] = v
		}
	}
	return fill(m, u).(map[string]any)
}

func (c *countRead) pathFor(u unique) string {
	return strings.NewReplacer("{{unique}}", u.Text, "{{unique:int}}", strconv.FormatInt(u.Int, 10), "{{unique:uuid}}", u.UUID).Replace(c.Path)
}

// extract reads the count at the pointer: a number, an array's length or
// an object's number of members.
func (c *countRead) extract(body []byte) (int, error) {
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, fmt.Errorf("the count read's answer is not JSON: %v", err)
	}
	ptr := c.Pointer
	if c.Items != "" {
		ptr = "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(c.Items)
	}
	v, err := pointerAt(doc, ptr)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float64:
		if x != float64(int(x)) || x < 0 {
			return 0, fmt.Errorf("the count %v is not a whole number", x)
		}
		return int(x), nil
	case []any:
		return len(x), nil
	case map[string]any:
		return len(x), nil
	}
	return 0, fmt.Errorf("the value at %q is not a number, an array or an object", ptr)
}

// pointerAt resolves an RFC 6901 pointer ("": the whole document).
func pointerAt(doc any, ptr string) (any, error) {
	if ptr == "" {
		return doc, nil
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch x := doc.(type) {
		case map[string]any:
			v, ok := x[tok]
			if !ok {
				return nil, fmt.Errorf("no member %q at %q", tok, ptr)
			}
			doc = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("no element %q at %q", tok, ptr)
			}
			doc = x[i]
		default:
			return nil, fmt.Errorf("nothing at %q", ptr)
		}
	}
	return doc, nil
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// inFormat says whether key follows the published key format (any key
// does when none is published).
func (sp *spec) inFormat(key string) bool {
	ks := sp.KeySpec
	if ks == nil {
		return true
	}
	if ks.UUID && !uuidRE.MatchString(key) {
		return false
	}
	if ks.MinLength > 0 && len(key) < ks.MinLength || ks.MaxLength > 0 && len(key) > ks.MaxLength {
		return false
	}
	return sp.pattern == nil || sp.pattern.MatchString(key)
}

// goodKey is a fresh key in the published format (32 hex digits where none
// is published); ok is false when the probe finds none.
func (sp *spec) goodKey() (string, bool) {
	ks := sp.KeySpec
	if ks == nil {
		return randHex(32), true
	}
	if ks.UUID {
		k := newUUID()
		return k, sp.inFormat(k)
	}
	n := 32
	if ks.MaxLength > 0 && ks.MaxLength < n {
		n = ks.MaxLength
	}
	if ks.MinLength > n {
		n = ks.MinLength
	}
	h := randHex(n)
	for _, k := range []string{h, strings.ToUpper(h), digitsOf(h), lettersOf(h), newUUID()} {
		if sp.inFormat(k) {
			return k, true
		}
	}
	return "", false
}

func digitsOf(h string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' {
			return '0' + (r-'a')%10
		}
		return r
	}, h)
}

func lettersOf(h string) string {
	return strings.Map(func(r rune) rune {
		if r <= '9' {
			return 'g' + (r - '0')
		}
		return r
	}, h)
}

// keyOfLength is a fresh key of n characters made like goodKey's (a UUID
// key grows with hex digits).
func (sp *spec) keyOfLength(n int) string {
	k, ok := sp.goodKey()
	if !ok || k == "" {
		k = randHex(32)
	}
	for len(k) < n {
		k += randHex(min(32, n-len(k)))
	}
	return k[:n]
}

// outsideKey is a fresh key of an allowed length but outside the
// published format (a pattern or a UUID); ok is false when there is none
// to try.
func (sp *spec) outsideKey() (string, bool) {
	ks := sp.KeySpec
	if ks == nil || (!ks.UUID && ks.Pattern == "") {
		return "", false
	}
	good, ok := sp.goodKey()
	if !ok {
		return "", false
	}
	n := len(good)
	if ks.UUID {
		// The shape of a UUID, with letters that are not hex digits.
		k := []byte(newUUID())
		for i := range k {
			if k[i] != '-' {
				k[i] = 'g' + k[i]%20
			}
		}
		return string(k), !sp.inFormat(string(k))
	}
	for _, pre := range []string{"~!", "..", "-_", "~", " x", "::"} {
		k := (pre + randHex(n))[:n]
		if k[len(k)-1] == ' ' {
			continue
		}
		if !sp.inFormat(k) {
			return k, true
		}
	}
	return "", false
}

// keyHeaderValue is the key as the header carries it.
func (sp *spec) keyHeaderValue(key string) string {
	if !sp.sfString {
		return key
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
}
