package ids

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// maxBody is the largest request body (the binding: "a body over 64 KiB" is
// invalid_envelope).
const maxBody = 64 << 10

// envelope is a command envelope as the binding defines it. Optional
// fields are pointers: nil when absent. A JSON null in an optional field
// reads as absent (in the key, the fingerprint and everywhere else); a null
// in a required field is refused like a missing one.
type envelope struct {
	CommandID         string          `json:"command_id"`
	TenantID          string          `json:"tenant_id"`
	ActorID           string          `json:"actor_id"`
	EffectiveActorID  *string         `json:"effective_actor_id,omitempty"`
	Intent            intent          `json:"intent"`
	Args              json.RawMessage `json:"args"`
	CommandKind       *string         `json:"command_kind,omitempty"`
	IdempotencyKey    *string         `json:"idempotency_key,omitempty"`
	ConfirmationToken *string         `json:"confirmation_token,omitempty"`
	Timestamp         *string         `json:"timestamp,omitempty"`
	MessageID         *string         `json:"message_id,omitempty"`
	TraceID           *string         `json:"trace_id,omitempty"`
}

type intent struct {
	Entity string  `json:"entity"`
	Action string  `json:"action"`
	Target *string `json:"target,omitempty"`
}

// envelopeError is a refused envelope: 400 invalid_envelope.
type envelopeError struct{ msg string }

func (e *envelopeError) Error() string { return e.msg }

func badEnvelope(format string, a ...any) error { return &envelopeError{fmt.Sprintf(format, a...)} }

// decodeStrict decodes one JSON object into v: unknown members, trailing
// data, duplicate member names (anywhere: RFC 8785 needs I-JSON) and
// invalid UTF-8 are refused.
func decodeStrict(body []byte, v any) error {
	if !utf8.Valid(body) {
		return badEnvelope("the body is not UTF-8")
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return badEnvelope("the body is not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badEnvelope("%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return badEnvelope("data after the JSON object")
	}
	if _, err := jcs.Transform(trimmed); err != nil {
		return badEnvelope("not I-JSON: %v", err)
	}
	return nil
}

func checkLen(name, v string, lo, hi int) error {
	if n := utf8.RuneCountInString(v); n < lo || n > hi {
		return badEnvelope("%s must be %d–%d characters", name, lo, hi)
	}
	return nil
}

// parseEnvelope reads and checks a POST /commands body.
func parseEnvelope(body []byte) (*envelope, map[string]json.RawMessage, error) {
	var e envelope
	if err := decodeStrict(body, &e); err != nil {
		return nil, nil, err
	}
	for _, f := range []struct {
		name string
		v    string
	}{{"command_id", e.CommandID}, {"tenant_id", e.TenantID}, {"actor_id", e.ActorID}} {
		if err := checkLen(f.name, f.v, 1, 128); err != nil {
			return nil, nil, err
		}
	}
	if e.EffectiveActorID != nil {
		if err := checkLen("effective_actor_id", *e.EffectiveActorID, 1, 128); err != nil {
			return nil, nil, err
		}
	}
	if e.Intent.Entity == "" || e.Intent.Action == "" {
		return nil, nil, badEnvelope("intent.entity and intent.action are required strings")
	}
	var args map[string]json.RawMessage
	if len(e.Args) == 0 || e.Args[0] != '{' || json.Unmarshal(e.Args, &args) != nil || args == nil {
		return nil, nil, badEnvelope("args is required and must be a JSON object")
	}
	if e.CommandKind != nil {
		switch *e.CommandKind {
		case "I0", "I1", "I2", "I3":
		default:
			return nil, nil, badEnvelope("command_kind must be one of I0, I1, I2, I3")
		}
	}
	return &e, args, nil
}

// principal is the key's principal (IDS §VII.E): effective_actor_id when
// present, else actor_id. The effective-actor-ignored mutant uses actor_id.
func (e *envelope) principal(mutant string) string {
	if e.EffectiveActorID != nil && mutant != MutantEffectiveActorIgnored {
		return *e.EffectiveActorID
	}
	return e.ActorID
}

// keyInputs is the binding's key_inputs object. MessageID is set only by the
// ephemeral-in-key mutant; TenantID is nil only under tenant-not-in-key.
type keyInputs struct {
	TenantID    *string         `json:"tenant_id,omitempty"`
	Principal   string          `json:"principal"`
	Intent      intent          `json:"intent"`
	Args        json.RawMessage `json:"args"`
	CommandKind *string         `json:"command_kind,omitempty"`
	MessageID   *string         `json:"message_id,omitempty"`
}

// digest is lowercase hex of SHA-256 of the JCS (RFC 8785) of v's JSON.
func digest(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // every input was decoded from JSON
	}
	c, err := jcs.Transform(b)
	if err != nil {
		panic(err) // the envelope passed jcs.Transform already
	}
	h := sha256.Sum256(c)
	return hex.EncodeToString(h[:])
}

// key is the idempotency key of the envelope as this server derives it
// (mutants change the inputs).
func (e *envelope) key(mutant string) string {
	in := keyInputs{TenantID: &e.TenantID, Principal: e.principal(mutant), Intent: e.Intent, Args: e.Args, CommandKind: e.CommandKind}
	if mutant == MutantTenantNotInKey {
		in.TenantID = nil
	}
	if mutant == MutantEphemeralInKey {
		in.MessageID = e.MessageID
	}
	return digest(in)
}

// match is what the store compares a duplicate with: the digest of the key
// inputs (never an ephemeral field). Two envelopes with the same key are
// one logical command; the only way a delivery meets a stored record with
// another match is a client-sent idempotency_key that another envelope owns:
// a collision. The binding's fingerprint is not compared: it also differs
// when only actor_id differs while the principal (effective_actor_id) is the
// same, and that is a replay to another actor, not a collision. The
// fingerprint is stored for the evidence of a collision.
func (e *envelope) match(mutant string) string {
	in := keyInputs{TenantID: &e.TenantID, Principal: e.principal(mutant), Intent: e.Intent, Args: e.Args, CommandKind: e.CommandKind}
	if mutant == MutantTenantNotInKey {
		in.TenantID = nil
	}
	return digest(in)
}

// fingerprintInputs is the envelope without command_id, idempotency_key,
// confirmation_token, timestamp, message_id and trace_id.
type fingerprintInputs struct {
	TenantID         string          `json:"tenant_id"`
	ActorID          string          `json:"actor_id"`
	EffectiveActorID *string         `json:"effective_actor_id,omitempty"`
	Intent           intent          `json:"intent"`
	Args             json.RawMessage `json:"args"`
	CommandKind      *string         `json:"command_kind,omitempty"`
}

// fingerprint is the binding's envelope fingerprint.
func (e *envelope) fingerprint() string {
	return digest(fingerprintInputs{e.TenantID, e.ActorID, e.EffectiveActorID, e.Intent, e.Args, e.CommandKind})
}

func (e *envelope) name() string { return e.Intent.Entity + "." + e.Intent.Action }
