package httpidem

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/idscheck/idscheck/harness"
)

// SectionKey is the target file's key of the endpoint (Endpoint).
const SectionKey = "http_idempotency"

// sectionHelp is the schema of the section, for -h.
const sectionHelp = `
http_idempotency (--profile http-idempotency): the endpoint the target offers
(docs/http-idempotency.md). What it leaves out makes the rules that need it
N/A, with the reason. --variant overrides its variant.

  field              value
  variant            ietf (default), t0 or stripe: the text the endpoint follows (--variant)
  method             the method of one request (default POST)
  path               its absolute path, e.g. /v1/payments
  body               the JSON object of one request; "{{unique}}" in a string is replaced
                     by a value no other request of the run uses; a whole "{{unique:int}}"
                     by a unique JSON number, "{{unique:uuid}}" by a fresh UUID
  vary               members that, put over body, make another payload under the same key
  invalid            members that, put over body, make a request the endpoint rejects
  slow               members that, put over body, make a request the endpoint takes
                     long to process (>= 300 ms), or true (or {}) when the body as
                     declared is: in-flight duplicates without the sink
  key                where the key travels: {"header": "Idempotency-Key"} (default) or
                     {"body": "paymentRef"}
  key_format         sf-string (an RFC 8941 String: the ietf default) or token
  key_spec           the published key format: {"uuid": true}, {"min_length": 1,
                     "max_length": 255}, {"pattern": "[A-Za-z0-9-]+"}; idscheck's keys
                     follow it, and a key outside it must be refused
  requires_key       true: a request without a key is refused
  key_ttl_seconds    the published expiry of a key in seconds, or "never"
  key_scope          caller (default: a key is scoped to the authenticated caller),
                     global (keys shared by all callers) or none (the endpoint
                     authenticates no caller: no callers with it)
  id                 the member of a 2xx answer that names what was created
  count              a GET that counts what requests created: {"path":
                     "/v1/payments?reference={{unique}}", "pointer": "/data"}; the value at
                     pointer (RFC 6901) is a number, an array (its length) or an object
                     (its size); "difference": true when the path counts everything
                     (before and after each request)
  documented         the endpoint's published choices where its variant names others:
                     {"mismatch_status": 409, "in_flight_status": 409,
                     "missing_key_status": 400, "replay_header": "Idempotent-Replayed"
                     (or "none"), "key_echo": true (every answer echoes the key)}
  callers            [{"headers": {...}} or {"headers_env": {"Authorization": "VAR"}}, ...]:
                     the headers of each authenticated caller, or the NAMEs of the
                     variables holding them (the first caller is the main one; the
                     rules on keys scoped to the caller need two)
`

// Section is the profile's part of the target description: the target
// file's "http_idempotency" object and --variant. Its value is the
// *Endpoint the target declares (its callers' headers_env resolved into
// headers), as the file gave it (Defaults not applied), its variant
// overridden by --variant; nil when neither was given. Its secrets are the
// callers' header values (and the token of each "Bearer <token>").
func Section() *harness.TargetSection {
	return &harness.TargetSection{Key: SectionKey, Help: sectionHelp, Flags: sectionFlags,
		Check: checkSection, Variant: sectionVariant, Encode: encodeSection,
		Published: []harness.SectionParam{{Name: "key_ttl_seconds", Get: keyTTLOf, Set: withKeyTTL}}}
}

// keyTTLOf is the key lifetime the endpoint declares (0: none).
func keyTTLOf(v any) float64 {
	if e, ok := v.(*Endpoint); ok && e != nil {
		return float64(e.KeyTTLSeconds)
	}
	return 0
}

// withKeyTTL is a copy of the endpoint declaring the key lifetime the
// target publishes (nil when no endpoint is described: nothing holds it).
func withKeyTTL(v any, ttl float64) any {
	e, ok := v.(*Endpoint)
	if !ok || e == nil {
		return v
	}
	c := *e
	c.KeyTTLSeconds = Lifetime(ttl)
	return &c
}

// sectionFlags registers --variant; the function it returns merges the
// file's section with it.
func sectionFlags(fs *flag.FlagSet) func(raw json.RawMessage, getenv func(string) string) (any, []string, error) {
	variant := fs.String("variant", "", "http-idempotency: the text the endpoint follows, ietf (default), t0 or stripe (http_idempotency.variant in the target file)")
	return func(raw json.RawMessage, getenv func(string) string) (any, []string, error) {
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "variant" })
		e, err := ParseEndpoint(raw, getenv)
		if err != nil {
			return nil, nil, err
		}
		if given {
			if e == nil {
				e = &Endpoint{}
			}
			e.Variant = *variant
		}
		if e == nil {
			return nil, nil, nil
		}
		d := *e
		d.Defaults()
		switch {
		case !slices.Contains(Variants(), d.Variant) && given:
			return nil, nil, fmt.Errorf("--variant is %q: want %s", d.Variant, strings.Join(Variants(), ", "))
		case !slices.Contains(Variants(), d.Variant):
			return nil, nil, fmt.Errorf("%q is %q: want %s", SectionKey+".variant", d.Variant, strings.Join(Variants(), ", "))
		case d.Path != "":
			if err := d.Validate(); err != nil {
				return nil, nil, fmt.Errorf("%w (docs/http-idempotency.md)", err)
			}
		}
		return e, e.Secrets(), nil
	}
}

// envName is the name of an environment variable.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ParseEndpoint reads the target file's "http_idempotency" object (nil or
// null: none, and a nil *Endpoint): every member must be one Endpoint
// knows, and each caller's headers_env names a variable that getenv finds
// set; its value becomes the header's.
func ParseEndpoint(raw json.RawMessage, getenv func(string) string) (*Endpoint, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var e Endpoint
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("%q: want a JSON %s, got a JSON %s", SectionKey+"."+te.Field, te.Type.Kind(), te.Value)
		}
		return nil, fmt.Errorf("%q: %v", SectionKey, err)
	}
	// Callers' headers named by variables: secrets stay out of files.
	for i, c := range e.Callers {
		for h, env := range c.HeadersEnv {
			if !envName.MatchString(env) {
				shown := env
				if len(shown) > 4 {
					shown = shown[:2] + "…"
				}
				return nil, fmt.Errorf("%q of caller %d is %q: want the NAME of an environment variable", "headers_env."+h, i+1, shown)
			}
			v := getenv(env)
			if v == "" {
				return nil, fmt.Errorf("%q of caller %d names $%s, which is not set (or empty)", "headers_env."+h, i+1, env)
			}
			if e.Callers[i].Headers == nil {
				e.Callers[i].Headers = map[string]string{}
			}
			e.Callers[i].Headers[h] = v
		}
	}
	return &e, nil
}

// Secrets lists the secrets of the description: every caller's header
// values, and the token of each "<scheme> <token>" among them.
func (e *Endpoint) Secrets() []string {
	var out []string
	for _, c := range e.Callers {
		for _, v := range c.Headers {
			out = append(out, v)
			if _, tok, ok := strings.Cut(v, " "); ok {
				out = append(out, tok)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// checkSection: an endpoint a target describes has its path at least (the
// bundled endpoint describes itself). A target that describes none has
// every rule N/A, and the run, having judged nothing, says what to declare.
func checkSection(v any, target bool) error {
	e, _ := v.(*Endpoint)
	if !target || e == nil {
		return nil
	}
	if e.Path == "" {
		return fmt.Errorf("a target needs the endpoint it offers: %q with at least its \"path\" in the target file (docs/http-idempotency.md)", SectionKey)
	}
	d := *e
	d.Defaults()
	if err := d.Validate(); err != nil {
		return fmt.Errorf("%w (docs/http-idempotency.md)", err)
	}
	return nil
}

// sectionVariant is the variant the endpoint declares ("": the default).
func sectionVariant(v any) string {
	if e, _ := v.(*Endpoint); e != nil {
		return e.Variant
	}
	return ""
}

// encodeSection writes the endpoint back as the section's JSON, its
// callers' headers replaced by variables (IDSCHECK_CALLER_<i>_HEADER_<n>),
// for a child run handed the same description.
func encodeSection(v any) (json.RawMessage, []string, error) {
	e, _ := v.(*Endpoint)
	if e == nil {
		return nil, nil, errors.New("no endpoint to encode")
	}
	out := *e
	var vars []string
	out.Callers = make([]Caller, len(e.Callers))
	for i, c := range e.Callers {
		out.Callers[i].HeadersEnv = map[string]string{}
		n := 0
		for _, h := range slices.Sorted(maps.Keys(c.Headers)) {
			n++
			name := fmt.Sprintf("IDSCHECK_CALLER_%d_HEADER_%d", i+1, n)
			out.Callers[i].HeadersEnv[h] = name
			vars = append(vars, name+"="+c.Headers[h])
		}
	}
	raw, err := json.Marshal(out)
	return raw, vars, err
}
