package atp

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// The binding's wire (docs/atp-binding.md): paths, headers, states, codes
// and documents. The reference server has its own copy (sut/atp): the
// harness and the server do not share an oracle.
const (
	Binding = "idscheck-atp/1"

	PathHealth     = "/health"
	PathConfig     = "/api/atp/config"
	PathKeys       = "/api/atp/keys"
	PathAgents     = "/api/atp/agents/" // PUT /api/atp/agents/{agent_id}
	PathAuthorize  = "/api/atp/authorize"
	PathExecute    = "/api/atp/execute"
	PathIntents    = "/api/atp/intents/" // GET /api/atp/intents/{intent_id}, Idempotency-Key header
	PathVerify     = "/api/atp/receipts/verify"
	PathRailEvents = "/api/atp/rail/events" // the rail's callbacks, on the site

	HeaderKey    = "Idempotency-Key"
	HeaderAPIKey = "X-API-Key"

	// KeyMin and KeyMax bound an idempotency key (§3: "any 16–128 char string").
	KeyMin, KeyMax = 16, 128
)

// States of a transaction (§1, §4).
const (
	StateCreated     = "created"
	StateAuthorized  = "authorized"
	StateExecuting   = "executing"
	StateExecuted    = "executed"
	StateSettled     = "settled"
	StateCompensated = "compensated"
	StateExpired     = "expired"
)

// States lists the states in the order of the state machine: a row's
// state never moves to an earlier one. Compensated and expired are the
// other ends: settled, compensated and expired are terminal.
var States = []string{StateCreated, StateAuthorized, StateExecuting, StateExecuted, StateSettled, StateCompensated, StateExpired}

// Rank is a state's place in the state machine (-1: not a state). Settled,
// compensated and expired share the last rank: none follows another.
func Rank(state string) int {
	switch state {
	case StateCreated:
		return 0
	case StateAuthorized:
		return 1
	case StateExecuting:
		return 2
	case StateExecuted:
		return 3
	case StateSettled, StateCompensated, StateExpired:
		return 4
	}
	return -1
}

// Terminal reports whether a state is terminal (§2: "until they observe a
// terminal state").
func Terminal(state string) bool {
	return state == StateSettled || state == StateCompensated || state == StateExpired
}

// Error codes the text fixes (§5, §7, §9).
const (
	ErrNonceConsumed = "nonce_consumed"
	ErrIntentExpired = "intent_expired"
)

// Receipt types (docs/atp-binding.md, "Receipts").
const (
	ReceiptSettlement   = "atp.settlement"
	ReceiptCompensation = "atp.compensation"
)

// Config is GET /api/atp/config.
type Config struct {
	Binding                  string   `json:"binding"`
	ReconcileIntervalSeconds *float64 `json:"reconcile_interval_seconds"`
	ActionDedupWindowSeconds *float64 `json:"action_dedup_window_seconds"`
	Rail                     string   `json:"rail"`
}

// Precondition is an intent's optional precondition (§8).
type Precondition struct {
	IntentSettled string `json:"intent_settled"`
}

// Intent is a signed intent (docs/atp-binding.md): the body of
// POST /api/atp/authorize.
type Intent struct {
	IntentID       string        `json:"intent_id"`
	AgentID        string        `json:"agent_id"`
	Nonce          string        `json:"nonce"`
	ExpiresAt      string        `json:"expires_at"`
	Amount         int64         `json:"amount"`
	Currency       string        `json:"currency"`
	Payee          string        `json:"payee"`
	ActionDedupKey string        `json:"action_dedup_key,omitempty"`
	Precondition   *Precondition `json:"precondition,omitempty"`
	Signature      string        `json:"signature,omitempty"`
}

// Execute is the body of POST /api/atp/execute.
type Execute struct {
	IntentID string `json:"intent_id"`
}

// Transaction is the row of §2, as every answer that carries one carries
// it. Body and Receipt are kept as sent: a retry must return them byte for
// byte.
type Transaction struct {
	IntentID       string          `json:"intent_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	State          string          `json:"state"`
	Body           json.RawMessage `json:"body"`
	Receipt        json.RawMessage `json:"receipt"`
	CreatedAt      string          `json:"created_at"`
	UpdatedAt      string          `json:"updated_at"`
}

// HasReceipt reports whether the row carries a receipt (not absent, not null).
func (t Transaction) HasReceipt() bool {
	return len(t.Receipt) > 0 && string(t.Receipt) != "null"
}

// Receipt is a receipt document: a body and the site's signature over its
// JCS canonical form.
type Receipt struct {
	Body      json.RawMessage `json:"body"`
	Alg       string          `json:"alg"`
	Kid       string          `json:"kid"`
	Signature string          `json:"signature"`
}

// ReceiptBody is what the harness reads of a receipt's body (every member
// is signed, these and any other).
type ReceiptBody struct {
	Type               string `json:"type"`
	IntentID           string `json:"intent_id"`
	IdempotencyKey     string `json:"idempotency_key"`
	AgentID            string `json:"agent_id"`
	Amount             int64  `json:"amount"`
	Currency           string `json:"currency"`
	Payee              string `json:"payee"`
	RailReference      string `json:"rail_reference"`
	ReferencesIntentID string `json:"references_intent_id"`
	Reason             string `json:"reason"`
	State              string `json:"state"`
	IssuedAt           string `json:"issued_at"`
}

// Error is an error answer: {"error": code, …}.
type Error struct {
	Error           string `json:"error"`
	FirstConsumedAt string `json:"first_consumed_at"`
	Detail          string `json:"detail"`
}

// JWK is one Ed25519 public key (RFC 8037).
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	Kid string `json:"kid,omitempty"`
	X   string `json:"x"`
}

// JWKSet is GET /api/atp/keys.
type JWKSet struct {
	Keys []JWK `json:"keys"`
}

// AgentRegistration is the body of PUT /api/atp/agents/{agent_id}.
type AgentRegistration struct {
	PublicKey JWK `json:"public_key"`
}

// VerifyAnswer is the answer of POST /api/atp/receipts/verify.
type VerifyAnswer struct {
	Valid  *bool  `json:"valid"`
	Kid    string `json:"kid"`
	Reason string `json:"reason"`
}

// The rail (docs/atp-binding.md, "The rail"), hosted by the harness.
const (
	RailPathPaymentIntents = "/rail/payment_intents" // POST; GET/POST …/{id}[/confirm|/cancel]

	RailRequiresConfirmation = "requires_confirmation"
	RailSucceeded            = "succeeded"
	RailDeclined             = "declined"
	RailCanceled             = "canceled"
	RailRefunded             = "refunded"

	RailEventSucceeded = "payment_intent.succeeded"
	RailEventDeclined  = "payment_intent.declined"
)

// RailPaymentIntent is the rail's payment intent document.
type RailPaymentIntent struct {
	ID       string `json:"id"`
	IntentID string `json:"intent_id"`
	Status   string `json:"status"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Payee    string `json:"payee,omitempty"`
	ChargeID string `json:"charge_id,omitempty"`
}

// RailEvent is a callback of the rail to the site.
type RailEvent struct {
	Type          string            `json:"type"`
	PaymentIntent RailPaymentIntent `json:"payment_intent"`
}

var idChars = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// ValidID reports whether s is a valid intent_id, agent_id, nonce or payee.
func ValidID(s string) bool { return idChars.MatchString(s) }

// FormatTime is the binding's time format (RFC 3339, UTC, milliseconds).
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// ParseTime reads an RFC 3339 time.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("not an RFC 3339 time: %q", s)
	}
	return t, nil
}
