package ids

import "encoding/json"

// The binding's wire (docs/ids-binding.md): paths, headers, decisions,
// statuses and codes. The reference server has its own copy (sut/ids): the
// harness and the server do not share an oracle.
const (
	Binding = "idscheck-ids/1"

	PathHealth        = "/health"
	PathRegistry      = "/registry"
	PathCommands      = "/commands" // POST; GET /commands/{command_id}
	PathEvidence      = "/evidence" // GET ?tenant_id=&idempotency_key=
	PathConfirmations = "/confirmations"

	HeaderDecision = "IDS-Decision"
	HeaderEvidence = "IDS-Evidence"
	HeaderAPIKey   = "X-API-Key"
)

// Dedupe decisions (IDS §XII).
const (
	DecisionFirstSeen  = "first_seen"
	DecisionReplayed   = "duplicate_replayed"
	DecisionConflicted = "conflict_rejected"
)

// Store statuses (IDS §VIII.B) and the in-progress answer (§IX.B).
const (
	StatusInProgress  = "in_progress"
	StatusExecuted    = "executed"
	StatusFailed      = "failed"
	StatusRejected    = "rejected"
	StatusCompensated = "compensated"
	StatusProcessing  = "processing"
	StatusConfirm     = "confirmation_required"
)

// The collision answer (IDS §VIII.D).
const (
	EventRejected  = "execution.rejected"
	ReasonConflict = "idempotency_conflict"
)

// Registry is GET /registry.
type Registry struct {
	Binding            string `json:"binding"`
	DuplicateRateLimit *struct {
		Max           int     `json:"max"`
		WindowSeconds float64 `json:"window_seconds"`
	} `json:"duplicate_rate_limit"`
	ConfirmationTTLSeconds *float64        `json:"confirmation_ttl_seconds"`
	Commands               []RegistryEntry `json:"commands"`
}

// RegistryEntry is one command of the registry (the CRCD declaration).
// Pointers tell a member that is absent from one that is null.
type RegistryEntry struct {
	Command              string   `json:"command"`
	Class                string   `json:"class"`
	TTLSeconds           *float64 `json:"ttl_seconds"`
	HasTTL               bool     `json:"-"` // the member is present (null included)
	Shielding            *string  `json:"shielding"`
	Financial            bool     `json:"financial"`
	RequiresConfirmation bool     `json:"requires_confirmation"`
	// ArgsExamples are args the command accepts (the binding asks for two
	// different ones); ArgsRejected, args it refuses with a terminal 422.
	ArgsExamples []json.RawMessage `json:"args_examples"`
	ArgsRejected json.RawMessage   `json:"args_rejected"`
	// Effects says whether every execution makes one external effect at
	// the effect sink (nil: not declared; see HasEffects).
	Effects *bool `json:"effects"`
}

// HasEffects reports whether the command makes an external effect at the
// sink per execution: as its registry entry declares ("effects"), else as
// the binding says of its class: an I3 command does (IDS §VI: it
// "triggers non-idempotent external calls"), an I0, I1 or I2 command does
// not (the text never says a mutation has an external effect; "Every
// external side effect of a command goes to the effect sink" says where
// the ones it has go). Only effects so declared are counted.
func (e RegistryEntry) HasEffects() bool {
	if e.Effects != nil {
		return *e.Effects
	}
	return e.Class == "I3"
}

// Outcome is the outcome document (and the processing and
// confirmation-required documents, which share its members).
type Outcome struct {
	CommandID      string         `json:"command_id"`
	IdempotencyKey string         `json:"idempotency_key"`
	Status         string         `json:"status"`
	OutcomeRef     *string        `json:"outcome_ref"`
	Result         map[string]any `json:"result"`
	StatusURL      string         `json:"status_url"`
	// The collision answer's members.
	Event             string `json:"event"`
	Reason            string `json:"reason"`
	OriginalCommandID string `json:"original_command_id"`
	EvidenceURL       string `json:"evidence_url"`
	ConfirmURL        string `json:"confirm_url"`
	// A problem document's code (RFC 9457 extension member).
	Code string `json:"code"`
}

// CommandStatus is GET /commands/{command_id}.
type CommandStatus struct {
	CommandID      string  `json:"command_id"`
	TenantID       string  `json:"tenant_id"`
	IdempotencyKey string  `json:"idempotency_key"`
	Status         string  `json:"status"`
	OutcomeRef     *string `json:"outcome_ref"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
	TTLExpiresAt   *string `json:"ttl_expires_at"`
}

// Evidence is one item of GET /evidence.
type Evidence struct {
	EvidenceID        string  `json:"evidence_id"`
	Decision          string  `json:"decision"`
	Executed          *bool   `json:"executed"`
	CommandID         string  `json:"command_id"`
	OriginalCommandID string  `json:"original_command_id"`
	IdempotencyKey    string  `json:"idempotency_key"`
	OutcomeRef        *string `json:"outcome_ref"`
	At                string  `json:"at"`
	Fingerprints      *struct {
		Stored   string `json:"stored"`
		Received string `json:"received"`
	} `json:"fingerprints"`
}

// UnmarshalJSON records whether ttl_seconds is present (null declares a
// window that never ends; absent declares nothing).
func (e *RegistryEntry) UnmarshalJSON(b []byte) error {
	type plain RegistryEntry
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return err
	}
	_, p.HasTTL = members["ttl_seconds"]
	if string(p.ArgsRejected) == "null" {
		p.ArgsRejected = nil
	}
	*e = RegistryEntry(p)
	return nil
}
