package httpidem

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
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
	// Body is the body of one logical request: a string member
	// "{{unique}}" is replaced by a value no other request of the run uses
	// (inside a longer string too); "{{unique:int}}", the whole member, by
	// a JSON number no other request uses, "{{unique:uuid}}" by a fresh
	// UUID string.
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
	// KeySpec is the format of a key the endpoint publishes (IETF §5:
	// "Establish a fixed format for the idempotency key and publish the
	// key's specification"): idscheck's keys follow it, and a key outside
	// it must be refused. nil: any key of up to 64 characters.
	KeySpec *KeySpec `json:"key_spec,omitempty"`
	// RequiresKey says a request without a key is refused (the ietf
	// missing-key rules need it).
	RequiresKey bool `json:"requires_key,omitempty"`
	// KeyTTLSeconds is the published expiry of a key (0: not published;
	// "never" in the file, +Inf here: keys never expire).
	KeyTTLSeconds Lifetime `json:"key_ttl_seconds,omitempty"`
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
	// Slow declares a request the endpoint takes long to process (at
	// least a few hundred milliseconds): a duplicate sent while it runs is
	// in flight without the effect sink. nil: none declared.
	Slow *SlowRequest `json:"slow,omitempty"`
	// Documented are the endpoint's own published choices where its
	// variant's text names another (a mismatch status, a replay header):
	// reported beside the variant's rule, and held to what they say.
	Documented *Documented `json:"documented,omitempty"`
}

// KeySpec is a key format an endpoint publishes.
type KeySpec struct {
	// UUID: a key is a UUID in its 36-character text form.
	UUID bool `json:"uuid,omitempty"`
	// MinLength and MaxLength bound a key's length in characters (0: no bound).
	MinLength int `json:"min_length,omitempty"`
	MaxLength int `json:"max_length,omitempty"`
	// Pattern is a regular expression (Go's RE2 syntax) a whole key matches.
	Pattern string `json:"pattern,omitempty"`
}

// Documented are an endpoint's published choices.
type Documented struct {
	// MismatchStatus answers a key reused with another payload.
	MismatchStatus int `json:"mismatch_status,omitempty"`
	// InFlightStatus answers a duplicate of a request still in flight.
	InFlightStatus int `json:"in_flight_status,omitempty"`
	// MissingKeyStatus answers a request without its required key.
	MissingKeyStatus int `json:"missing_key_status,omitempty"`
	// ReplayHeader is a header a replayed answer carries and a first
	// answer does not ("Idempotent-Replayed", or "X-Cache: HIT" to name
	// its value too); "none": the endpoint documents no replay header.
	ReplayHeader string `json:"replay_header,omitempty"`
	// KeyEcho says every answer echoes the key's header (first answers
	// and replays alike): an echo is no replay marker.
	KeyEcho bool `json:"key_echo,omitempty"`
}

// NoReplayHeader is documented.replay_header for an endpoint that
// documents none.
const NoReplayHeader = "none"

// KeyScopeNone is key_scope for an endpoint that authenticates no caller:
// its keys are scoped to nothing (one key space for every request).
const KeyScopeNone = "none"

// SlowRequest is the target's slow request: Members put over the body
// (none: the body as declared is slow). In the file, an object of members
// ({"delay_ms": 1500}), or true or {} for the body as declared.
type SlowRequest struct {
	Members map[string]any
}

// UnmarshalJSON reads true, {} or an object of members.
func (s *SlowRequest) UnmarshalJSON(b []byte) error {
	switch t := strings.TrimSpace(string(b)); t {
	case "true":
		s.Members = map[string]any{}
		return nil
	case "false":
		return errors.New(`slow: false declares nothing; leave slow out, or give true (the body as declared is slow) or the members that make a request slow`)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return errors.New(`slow: want true or {} (the body as declared is slow), or an object of members that make a request slow such as {"delay_ms": 1500}`)
	}
	s.Members = m
	return nil
}

// MarshalJSON writes true for the body as declared, else the members.
func (s SlowRequest) MarshalJSON() ([]byte, error) {
	if len(s.Members) == 0 {
		return []byte("true"), nil
	}
	return json.Marshal(s.Members)
}

// Lifetime is a key's published lifetime in seconds; +Inf ("never" in
// the file) says keys never expire.
type Lifetime float64

// Never reports whether keys never expire.
func (l Lifetime) Never() bool { return math.IsInf(float64(l), 1) }

// UnmarshalJSON reads a number of seconds or "never".
func (l *Lifetime) UnmarshalJSON(b []byte) error {
	if strings.TrimSpace(string(b)) == `"never"` {
		*l = Lifetime(math.Inf(1))
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New(`key_ttl_seconds: want a number of seconds > 0, or "never" (keys never expire)`)
	}
	*l = Lifetime(f)
	return nil
}

// MarshalJSON writes the seconds, or "never".
func (l Lifetime) MarshalJSON() ([]byte, error) {
	if l.Never() {
		return []byte(`"never"`), nil
	}
	return json.Marshal(float64(l))
}

// KeyPlace is where the idempotency key travels.
type KeyPlace struct {
	Header string `json:"header,omitempty"`
	Body   string `json:"body,omitempty"`
}

// CountRead is a GET that counts what requests created: Path, with
// "{{unique}}" replaced by one logical request's unique value, answers a
// JSON document; Pointer (RFC 6901) finds the count in it: a number, an
// array (its length) or an object (its number of members). With
// Difference, the read counts everything the endpoint created (its path
// names no request): what one request created is the count after it less
// the count before it, which holds while idscheck is the endpoint's only
// client.
type CountRead struct {
	Path    string `json:"path"`
	Pointer string `json:"pointer,omitempty"`
	// Items is the older form of Pointer: the member holding the array.
	Items      string `json:"items,omitempty"`
	Difference bool   `json:"difference,omitempty"`
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
	} else if e.Count != nil && !e.Count.Difference && !hasUnique(e.Body) {
		bad = append(bad, `body: a count read needs "{{unique}}" in the body to find one request's creations (or count.difference)`)
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
	if e.Count != nil && e.Count.Pointer != "" && !strings.HasPrefix(e.Count.Pointer, "/") {
		bad = append(bad, fmt.Sprintf("count.pointer %q: want a JSON pointer such as /data or /count (RFC 6901), or none for the whole document", e.Count.Pointer))
	}
	if e.Count != nil && e.Count.Pointer != "" && e.Count.Items != "" {
		bad = append(bad, "count: pointer or items, not both")
	}
	if e.Count != nil && e.Count.Difference && strings.Contains(e.Count.Path, "{{unique}}") {
		bad = append(bad, `count.difference: a read that counts everything names no request; drop "{{unique}}" from count.path, or drop difference`)
	}
	if ks := e.KeySpec; ks != nil {
		if ks.MinLength < 0 || ks.MaxLength < 0 || (ks.MaxLength > 0 && ks.MinLength > ks.MaxLength) {
			bad = append(bad, fmt.Sprintf("key_spec: min_length %d, max_length %d: want 0 <= min_length <= max_length", ks.MinLength, ks.MaxLength))
		}
		if ks.Pattern != "" {
			if _, err := regexp.Compile(ks.Pattern); err != nil {
				bad = append(bad, fmt.Sprintf("key_spec.pattern: %v", err))
			}
		}
		if _, err := ks.NewKey(func() uint32 { return 0x5eed1234 }); err != nil {
			bad = append(bad, "key_spec: "+err.Error())
		}
	}
	if d := e.Documented; d != nil {
		for name, st := range map[string]int{"mismatch_status": d.MismatchStatus, "in_flight_status": d.InFlightStatus, "missing_key_status": d.MissingKeyStatus} {
			if st != 0 && (st < 400 || st > 599) {
				bad = append(bad, fmt.Sprintf("documented.%s %d: want the error status the endpoint documents (4xx or 5xx)", name, st))
			}
		}
	}
	if e.KeyScope != "" && e.KeyScope != "caller" && e.KeyScope != "global" && e.KeyScope != KeyScopeNone {
		bad = append(bad, fmt.Sprintf("key_scope %q: want caller, global or none", e.KeyScope))
	}
	if e.KeyScope == KeyScopeNone && len(e.Callers) > 0 {
		bad = append(bad, "key_scope none says the endpoint authenticates no caller, and callers lists some: declare one or the other")
	}
	if d := e.Documented; d != nil && d.KeyEcho && d.ReplayHeader != "" && d.ReplayHeader != NoReplayHeader {
		if name, _, _ := strings.Cut(d.ReplayHeader, ":"); e.Key.Header != "" && strings.EqualFold(strings.TrimSpace(name), e.Key.Header) {
			bad = append(bad, fmt.Sprintf("documented.replay_header %q: with key_echo every answer carries %s, so it marks no replay", d.ReplayHeader, e.Key.Header))
		}
	}
	if d := e.Documented; d != nil && d.KeyEcho && e.Key.Header == "" {
		bad = append(bad, "documented.key_echo: the key travels in the body, not in a header to echo")
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

// pointer is the count's JSON pointer: Pointer, or the older Items as one.
func (c *CountRead) pointer() string {
	if c.Items != "" {
		return "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(c.Items)
	}
	return c.Pointer
}

// PathFor is the count read's path for the request whose unique values
// are u.
func (c *CountRead) PathFor(u Unique) string {
	return strings.NewReplacer("{{unique}}", u.Text, "{{unique:int}}", strconv.FormatInt(u.Int, 10), "{{unique:uuid}}", u.UUID).Replace(c.Path)
}

// Extract reads the count from the read's answer: the value at the
// pointer is a whole number, an array (its length) or an object (its
// number of members).
func (c *CountRead) Extract(body []byte) (int, error) {
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, fmt.Errorf("the count read's answer is not JSON: %v", err)
	}
	ptr := c.pointer()
	v, err := jsonPointer(doc, ptr)
	if err != nil {
		return 0, err
	}
	where := "the document"
	if ptr != "" {
		where = fmt.Sprintf("%q", ptr)
	}
	switch t := v.(type) {
	case []any:
		return len(t), nil
	case map[string]any:
		return len(t), nil
	case float64:
		if t < 0 || t != float64(int(t)) {
			return 0, fmt.Errorf("the count at %s is %v: want a whole number >= 0", where, t)
		}
		return int(t), nil
	}
	return 0, fmt.Errorf("the count at %s is %s: want a number, an array or an object", where, jsonKind(v))
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// jsonPointer resolves an RFC 6901 pointer in a decoded JSON document.
func jsonPointer(doc any, ptr string) (any, error) {
	if ptr == "" {
		return doc, nil
	}
	cur := doc
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch t := cur.(type) {
		case map[string]any:
			v, ok := t[tok]
			if !ok {
				return nil, fmt.Errorf("the count read's answer has no member %q (pointer %q)", tok, ptr)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil, fmt.Errorf("the count read's answer has no element %q (pointer %q)", tok, ptr)
			}
			cur = t[i]
		default:
			return nil, fmt.Errorf("the count read's answer has %s where pointer %q goes on", jsonKind(cur), ptr)
		}
	}
	return cur, nil
}

// defaultKeyMax bounds the keys idscheck makes when the endpoint publishes
// no key format.
const defaultKeyMax = 64

var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Allows says whether key follows the published format ("" when it does,
// else how it does not).
func (ks *KeySpec) Allows(key string) string {
	if ks == nil {
		return ""
	}
	switch {
	case ks.UUID && !uuidText.MatchString(key):
		return "not a UUID"
	case ks.MinLength > 0 && len(key) < ks.MinLength:
		return fmt.Sprintf("%d characters, under min_length %d", len(key), ks.MinLength)
	case ks.MaxLength > 0 && len(key) > ks.MaxLength:
		return fmt.Sprintf("%d characters, over max_length %d", len(key), ks.MaxLength)
	case ks.Pattern != "" && !regexp.MustCompile(`^(?:`+ks.Pattern+`)$`).MatchString(key):
		return "does not match pattern " + ks.Pattern
	}
	return ""
}

// NewKey makes a fresh key in the published format from rnd: a UUID (v4),
// or lower-case hex of a length the format allows; an error when neither
// fits the pattern.
func (ks *KeySpec) NewKey(rnd func() uint32) (string, error) {
	var b [32]byte
	for i := range b {
		b[i] = byte(rnd())
	}
	u := b[:16]
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u)
	uuid := h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	if ks == nil {
		return hex.EncodeToString(b[:16]), nil
	}
	if ks.UUID {
		if why := ks.Allows(uuid); why != "" {
			return "", fmt.Errorf("a UUID key %s", why)
		}
		return uuid, nil
	}
	n := 32
	if ks.MaxLength > 0 && ks.MaxLength < n {
		n = ks.MaxLength
	}
	if ks.MinLength > n {
		n = ks.MinLength
	}
	long := strings.Repeat(hex.EncodeToString(b[:]), n/64+1)[:n]
	for _, k := range []string{long, uuid} {
		if ks.Allows(k) == "" {
			return k, nil
		}
	}
	return "", errors.New("idscheck makes keys of hex digits or UUIDs, and neither fits the published format; widen pattern")
}

// Outside makes a key that is a well-formed header value but outside the
// published format (ok false when every printable key fits it): too long,
// too short, or not a UUID.
func (ks *KeySpec) Outside(rnd func() uint32) (string, bool) {
	if ks == nil {
		return "", false
	}
	base, err := ks.NewKey(rnd)
	if err != nil {
		return "", false
	}
	// A key too long is judged on its own (one over max_length): this one
	// is outside the format another way where the format has one.
	cands := []string{}
	if ks.MinLength > 1 {
		cands = append(cands, base[:ks.MinLength-1])
	}
	cands = append(cands, base[:len(base)/2], base+base, "key_"+base+"!")
	if ks.MaxLength > 0 {
		cands = append(cands, strings.Repeat(base, ks.MaxLength/len(base)+2)[:ks.MaxLength+1])
	}
	for _, k := range cands {
		if k != "" && ks.Allows(k) != "" {
			return k, true
		}
	}
	return "", false
}

// Unique are the values of one logical request that no other request of
// the run has: "{{unique}}" (Text), "{{unique:int}}" (Int, a JSON number
// in a body) and "{{unique:uuid}}" (UUID).
type Unique struct {
	Text string
	Int  int64
	UUID string
}

// NewUnique makes the unique values of request number n of run runID
// (a run's own prefix), with rnd for the random part.
func NewUnique(runID string, n int64, rnd func() uint32) Unique {
	var b [16]byte
	for i := range b {
		b[i] = byte(rnd())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	// Int: n under random high digits (distinct requests of a run differ
	// in n), within a JSON number's exact integers (2^53).
	base := int64(rnd()%(1<<20)) * 1_000_000_000
	return Unique{Text: fmt.Sprintf("%s-%s-%d", runID, h[:8], n), Int: base + n,
		UUID: h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]}
}

// Fill replaces the unique placeholders in every string of v:
// "{{unique}}" within a string by u.Text, a whole "{{unique:int}}" by
// u.Int (a JSON number), a whole "{{unique:uuid}}" by u.UUID.
func Fill(v any, u Unique) any {
	switch t := v.(type) {
	case string:
		switch t {
		case "{{unique:int}}":
			return float64(u.Int)
		case "{{unique:uuid}}":
			return u.UUID
		}
		return strings.ReplaceAll(t, "{{unique}}", u.Text)
	case map[string]any:
		out := map[string]any{}
		for k, x := range t {
			out[k] = Fill(x, u)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = Fill(x, u)
		}
		return out
	}
	return v
}

// hasUnique says whether v holds a unique placeholder of any type.
func hasUnique(v any) bool {
	raw, _ := json.Marshal(v)
	return strings.Contains(string(raw), "{{unique")
}
