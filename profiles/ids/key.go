package ids

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Intent is the envelope's intent: entity and action name the command,
// target is optional (docs/ids-binding.md).
type Intent struct {
	Entity string `json:"entity"`
	Action string `json:"action"`
	Target string `json:"target,omitempty"`
}

// Envelope is a command envelope as the binding defines it. Args stays raw
// so that a test can send any spelling of it (member order, number form).
type Envelope struct {
	CommandID         string          `json:"command_id"`
	TenantID          string          `json:"tenant_id"`
	ActorID           string          `json:"actor_id"`
	EffectiveActorID  string          `json:"effective_actor_id,omitempty"`
	Intent            Intent          `json:"intent"`
	Args              json.RawMessage `json:"args"`
	CommandKind       string          `json:"command_kind,omitempty"`
	IdempotencyKey    string          `json:"idempotency_key,omitempty"`
	ConfirmationToken string          `json:"confirmation_token,omitempty"`
	Timestamp         string          `json:"timestamp,omitempty"`
	MessageID         string          `json:"message_id,omitempty"`
	TraceID           string          `json:"trace_id,omitempty"`
}

// Command is the envelope's registry name, entity.action.
func (e Envelope) Command() string { return e.Intent.Entity + "." + e.Intent.Action }

// Principal is the key's principal (IDS §VII.E): the effective actor when
// one is named, else the actor.
func (e Envelope) Principal() string {
	if e.EffectiveActorID != "" {
		return e.EffectiveActorID
	}
	return e.ActorID
}

// keyInputs is the object the key is the hash of (binding: "The
// idempotency key").
type keyInputs struct {
	TenantID    string          `json:"tenant_id"`
	Principal   string          `json:"principal"`
	Intent      Intent          `json:"intent"`
	Args        json.RawMessage `json:"args"`
	CommandKind string          `json:"command_kind,omitempty"`
}

// KeyInputsJCS returns the RFC 8785 canonical form of the envelope's key
// inputs.
func (e Envelope) KeyInputsJCS() ([]byte, error) {
	args := e.Args
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	raw, err := json.Marshal(keyInputs{TenantID: e.TenantID, Principal: e.Principal(), Intent: e.Intent, Args: args, CommandKind: e.CommandKind})
	if err != nil {
		return nil, fmt.Errorf("ids: key inputs: %w", err)
	}
	return Canonical(raw)
}

// Key returns the envelope's idempotency key: the lowercase hex SHA-256 of
// the JCS of its key inputs (IDS §VII.D with the binding's HASH and
// CANONICAL).
func (e Envelope) Key() (string, error) {
	c, err := e.KeyInputsJCS()
	if err != nil {
		return "", err
	}
	return digest(c), nil
}

// MustKey is Key for envelopes the harness built itself (args are valid
// JSON): it panics on an error, a bug of the caller.
func (e Envelope) MustKey() string {
	k, err := e.Key()
	if err != nil {
		panic(err)
	}
	return k
}

// Fingerprint returns the binding's envelope fingerprint: SHA-256 of the
// JCS of the envelope without command_id, idempotency_key,
// confirmation_token and the ephemeral fields.
func (e Envelope) Fingerprint() (string, error) {
	e.CommandID, e.IdempotencyKey, e.ConfirmationToken = "", "", ""
	e.Timestamp, e.MessageID, e.TraceID = "", "", ""
	if len(e.Args) == 0 {
		e.Args = json.RawMessage("{}")
	}
	raw, err := json.Marshal(struct {
		TenantID         string          `json:"tenant_id"`
		ActorID          string          `json:"actor_id"`
		EffectiveActorID string          `json:"effective_actor_id,omitempty"`
		Intent           Intent          `json:"intent"`
		Args             json.RawMessage `json:"args"`
		CommandKind      string          `json:"command_kind,omitempty"`
	}{e.TenantID, e.ActorID, e.EffectiveActorID, e.Intent, e.Args, e.CommandKind})
	if err != nil {
		return "", fmt.Errorf("ids: fingerprint: %w", err)
	}
	c, err := Canonical(raw)
	if err != nil {
		return "", err
	}
	return digest(c), nil
}

// Canonical returns the RFC 8785 (JCS) form of a JSON text.
func Canonical(raw []byte) ([]byte, error) {
	c, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("ids: JCS: %w", err)
	}
	return c, nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
