package ids

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"unicode/utf8"
)

// command is one entry of the registry (the CRCD declaration, IDS §VI,
// §VIII.C, §X, §XI).
type command struct {
	Name       string  `json:"command"`
	Class      string  `json:"class"`
	TTLSeconds *int64  `json:"ttl_seconds"` // nil: never expires
	Shielding  *string `json:"shielding"`
	Financial  bool    `json:"financial"`
	Confirm    bool    `json:"requires_confirmation"`
	// Effects says every execution makes one external effect at the sink
	// (docs/ids-binding.md, GET /registry); false: it changes the server's
	// own state only (I0, and I1/I2 under Config.InternalOnly).
	Effects bool `json:"effects"`
	// Examples are args the command accepts (two different ones, for the
	// harness to build commands from); Rejected, args it refuses with a
	// terminal 422 (nil: none declared).
	Examples []json.RawMessage `json:"args_examples,omitempty"`
	Rejected json.RawMessage   `json:"args_rejected,omitempty"`

	// validate checks the args: "" when they are acceptable, else the
	// reason of the terminal 422 rejected outcome.
	validate func(args map[string]json.RawMessage) string `json:"-"`
	// result builds the result of an executed command of key from the
	// sink's effect id (synchronous commands) or a fresh id (S2): the full
	// one, and the one a replay to another actor gets (no private details).
	result func(key, id string) (full, public json.RawMessage) `json:"-"`
}

func i64(v int64) *int64   { return &v }
func str(v string) *string { return &v }

// Command names and registry constants.
const (
	cmdPaymentCapture = "payment.capture"
	cmdRefundIssue    = "refund.issue"
	cmdOrderCancel    = "order.cancel"
	cmdMemberRemove   = "member.remove"
	cmdNoteAdd        = "note.add"
	cmdTagSet         = "tag.set"
	cmdBalanceGet     = "balance.get"

	// rateLimitMax duplicates of one (tenant, key) per rateLimitWindow
	// seconds (declared unscaled).
	rateLimitMax    = 100
	rateLimitWindow = 60
	// confirmationTTL is the life of a confirmation token, in seconds.
	confirmationTTL = 300
	bindingName     = "idscheck-ids/1"
)

// registry is the bundled server's registry, in the order GET /registry
// lists it.
var registry = []*command{
	{Name: cmdPaymentCapture, Class: "I3", TTLSeconds: i64(86400), Shielding: str("S1"), Financial: true, Effects: true,
		Examples: []json.RawMessage{json.RawMessage(`{"amount_minor":1250,"currency":"EUR"}`), json.RawMessage(`{"amount_minor":990,"currency":"USD"}`)},
		Rejected: json.RawMessage(`{"amount_minor":0,"currency":"EUR"}`),
		validate: validateAmount("currency"), result: paymentResult},
	{Name: cmdRefundIssue, Class: "I3", TTLSeconds: i64(86400), Shielding: str("S2"), Financial: true, Effects: true,
		Examples: []json.RawMessage{json.RawMessage(`{"amount_minor":500,"payment_ref":"pay-1"}`), json.RawMessage(`{"amount_minor":700,"payment_ref":"pay-2"}`)},
		Rejected: json.RawMessage(`{"amount_minor":-5,"payment_ref":"pay-1"}`),
		validate: validateAmount("payment_ref"), result: refundResult},
	{Name: cmdOrderCancel, Class: "I1", TTLSeconds: nil, Confirm: true, Effects: true,
		Examples: []json.RawMessage{json.RawMessage(`{"reason":"customer asked"}`), json.RawMessage(`{"reason":"out of stock"}`)},
		validate: validateOptionalString("reason", 0), result: effectResult},
	{Name: cmdMemberRemove, Class: "I2", TTLSeconds: i64(60), Confirm: true, Effects: true,
		Examples: []json.RawMessage{json.RawMessage(`{"member":"m-1"}`), json.RawMessage(`{"member":"m-2"}`)},
		validate: validateMember, result: effectResult},
	{Name: cmdNoteAdd, Class: "I2", TTLSeconds: i64(120), Effects: true,
		Examples: []json.RawMessage{json.RawMessage(`{"text":"call back"}`), json.RawMessage(`{"text":"sent the invoice"}`)},
		validate: validateNote, result: effectResult},
	// tag.set is a strict idempotent mutation (I1, the default class): its
	// record never expires and it needs no confirmation.
	{Name: cmdTagSet, Class: "I1", TTLSeconds: nil, Effects: true,
		Examples: []json.RawMessage{json.RawMessage(`{"tag":"vip"}`), json.RawMessage(`{"tag":"churn-risk"}`)},
		Rejected: json.RawMessage(`{"tag":""}`),
		validate: validateTag, result: effectResult},
	// balance.get is read-only (I0): no reservation, no window (declared 0,
	// not null: null would read "deduplicated forever").
	{Name: cmdBalanceGet, Class: "I0", TTLSeconds: i64(0)},
}

var commandsByName = func() map[string]*command {
	m := map[string]*command{}
	for _, c := range registry {
		m[c.Name] = c
	}
	return m
}()

func (c *command) s1() bool { return c.Shielding != nil && *c.Shielding == "S1" }
func (c *command) s2() bool { return c.Shielding != nil && *c.Shielding == "S2" }

// registryDoc is the body of GET /registry.
type registryDoc struct {
	Binding            string     `json:"binding"`
	DuplicateRateLimit rateDoc    `json:"duplicate_rate_limit"`
	ConfirmationTTL    int        `json:"confirmation_ttl_seconds"`
	Commands           []*command `json:"commands"`
}

type rateDoc struct {
	Max           int `json:"max"`
	WindowSeconds int `json:"window_seconds"`
}

var registryBody = registryBodyOf(false)

// registryBodyOf is GET /registry; internalOnly declares the I1 and I2
// commands without external effect (Config.InternalOnly).
func registryBodyOf(internalOnly bool) []byte {
	cmds := registry
	if internalOnly {
		cmds = nil
		for _, c := range registry {
			cp := *c
			if cp.internal(true) {
				cp.Effects = false
			}
			cmds = append(cmds, &cp)
		}
	}
	b, err := json.Marshal(registryDoc{Binding: bindingName, DuplicateRateLimit: rateDoc{rateLimitMax, rateLimitWindow},
		ConfirmationTTL: confirmationTTL, Commands: cmds})
	if err != nil {
		panic(err)
	}
	return b
}

// internal reports whether the command changes the server's state only
// (no sink call) when the server runs with InternalOnly.
func (c *command) internal(internalOnly bool) bool {
	return internalOnly && (c.Class == "I1" || c.Class == "I2")
}

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// jsonInt reads a JSON number that is an integer (1250 or 1250.0 or
// 1.25e3: the JCS of the key sees them as one number) within ±2^53.
func jsonInt(raw json.RawMessage) (int64, bool) {
	var f float64
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &f) != nil {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func onlyFields(args map[string]json.RawMessage, names ...string) string {
	for k := range args {
		known := false
		for _, n := range names {
			known = known || k == n
		}
		if !known {
			return fmt.Sprintf("unknown argument %q", k)
		}
	}
	return ""
}

// validateAmount: {amount_minor: integer > 0, other}; other is currency (3
// upper-case letters) or payment_ref (a non-empty string).
func validateAmount(other string) func(map[string]json.RawMessage) string {
	return func(args map[string]json.RawMessage) string {
		if r := onlyFields(args, "amount_minor", other); r != "" {
			return r
		}
		raw, ok := args["amount_minor"]
		if !ok {
			return "amount_minor is required"
		}
		n, ok := jsonInt(raw)
		if !ok {
			return "amount_minor must be an integer"
		}
		if n <= 0 {
			return "amount_minor must be > 0"
		}
		v, ok := jsonString(args[other])
		switch {
		case !ok:
			return other + " must be a string"
		case other == "currency" && !currencyRE.MatchString(v):
			return "currency must be three upper-case letters"
		case v == "":
			return other + " must not be empty"
		}
		return ""
	}
}

func validateOptionalString(name string, max int) func(map[string]json.RawMessage) string {
	return func(args map[string]json.RawMessage) string {
		if r := onlyFields(args, name); r != "" {
			return r
		}
		raw, ok := args[name]
		if !ok {
			return ""
		}
		v, ok := jsonString(raw)
		if !ok {
			return name + " must be a string"
		}
		if max > 0 && utf8.RuneCountInString(v) > max {
			return fmt.Sprintf("%s is longer than %d characters", name, max)
		}
		return ""
	}
}

func validateMember(args map[string]json.RawMessage) string {
	if r := onlyFields(args, "member"); r != "" {
		return r
	}
	v, ok := jsonString(args["member"])
	if !ok || v == "" {
		return "member must be a non-empty string"
	}
	return ""
}

func validateTag(args map[string]json.RawMessage) string {
	if r := onlyFields(args, "tag"); r != "" {
		return r
	}
	v, ok := jsonString(args["tag"])
	if !ok || v == "" || utf8.RuneCountInString(v) > 64 {
		return "tag must be a string of 1 to 64 characters"
	}
	return ""
}

func validateNote(args map[string]json.RawMessage) string {
	if _, ok := args["text"]; !ok {
		return "text is required"
	}
	return validateOptionalString("text", 1000)(args)
}

// paymentResult: the sink's effect id, and private details only the
// original actor sees again (IDS §XV).
func paymentResult(key, effectID string) (json.RawMessage, json.RawMessage) {
	type priv struct {
		PayerRef string `json:"payer_ref"`
	}
	full, _ := json.Marshal(struct {
		EffectID string `json:"effect_id"`
		Private  priv   `json:"private"`
	}{effectID, priv{payerRef(key)}})
	public, _ := json.Marshal(struct {
		EffectID string `json:"effect_id"`
	}{effectID})
	return full, public
}

func effectResult(key, effectID string) (json.RawMessage, json.RawMessage) {
	b, _ := json.Marshal(struct {
		EffectID string `json:"effect_id"`
	}{effectID})
	return b, b
}

// refundResult: the refund is queued in the outbox; effectID is the id of
// the refund (drawn by the server), not the sink's.
func refundResult(key, refundID string) (json.RawMessage, json.RawMessage) {
	b, _ := json.Marshal(struct {
		RefundID string `json:"refund_id"`
		Effect   string `json:"effect"`
	}{refundID, "queued"})
	return b, b
}

// payerRef is the private payer reference of a payment: deterministic from
// the key (so from tenant, principal and args), the same when the resumer
// finishes the command.
func payerRef(key string) string {
	h := sha256.Sum256([]byte("payer\x00" + key))
	return "pyr_" + hex.EncodeToString(h[:8])
}
