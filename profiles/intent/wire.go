package intent

import "encoding/json"

// Wire types of the Intent Protocol v2.1 (seed 004 §7–§11), as the harness
// speaks them. The bundled reference server (sut) has its own, written from
// the text apart, so the two never share an oracle. Standard library only.

// Version is the value of the X-Intent-Version header (§10, §17).
const Version = "2.1"

// ServerVersion is the "version" field of GET /health (§7.1).
const ServerVersion = "7.61"

// Headers of the Intent Protocol besides the HMAC ones in hmac.go.
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderWorkerID           = "X-Worker-ID"
	HeaderWorkerCapabilities = "X-Worker-Capabilities"
	HeaderAdminToken         = "X-Admin-Token"
	HeaderIntentVersion      = "X-Intent-Version"
	HeaderRetryAfter         = "Retry-After"
	// HeaderClaimToken is an extension of the reference server: the claim
	// token of /fulfill, /fail and /extend_claim may come in this header
	// instead of the body (see decisions.go, DecisionFulfillBody).
	HeaderClaimToken = "X-Claim-Token"
	// HeaderIdempotentReplay is set to "true" on a replayed POST /intent response.
	HeaderIdempotentReplay = "Idempotent-Replayed"
)

// SecurityHeaders are the five headers every response carries (§10).
var SecurityHeaders = [][2]string{
	{"X-Frame-Options", "DENY"},
	{"X-Content-Type-Options", "nosniff"},
	{"Referrer-Policy", "no-referrer"},
	{"Cache-Control", "no-store"},
	{HeaderIntentVersion, Version},
}

// Endpoint paths (§7, §8, §9). A trailing "/" takes one path parameter.
const (
	PathHealth       = "/health"
	PathIntent       = "/intent"
	PathClaim        = "/claim"
	PathExtendClaim  = "/extend_claim/" // + id
	PathFulfill      = "/fulfill/"      // + id
	PathFail         = "/fail/"         // + id
	PathResult       = "/result/"       // + id
	PathStatus       = "/status/"       // + id
	PathSet          = "/set/"          // + key
	PathGet          = "/get/"          // + key
	PathDashboard    = "/admin/dashboard"
	PathGenerateKey  = "/admin/generate_key"
	PathRevokeKey    = "/admin/revoke_key"
	PathPurge        = "/admin/purge"
	PathCleanup      = "/admin/cleanup"
	PathAdminIntents = "/admin/intents/" // + id, + id/cancel, + id/retry
	PathDead         = "/admin/dead"
	PathDeadLetter   = "/admin/dead/" // + intent id
	PathMetrics      = "/metrics"
)

// Intent states (§3.1).
const (
	StatusOpen      = "open"
	StatusClaimed   = "claimed"
	StatusFulfilled = "fulfilled"
	StatusDead      = "dead"
	// StatusPublished is the status of a POST /intent response (§7.2).
	StatusPublished = "published"
)

// Error codes (§11). The invalid_* codes name the malformed field.
const (
	ErrUnauthorized        = "unauthorized"
	ErrForbidden           = "forbidden"
	ErrNotFound            = "not_found"
	ErrMethodNotAllowed    = "method_not_allowed"
	ErrInvalidRequest      = "invalid_request"
	ErrInvalidPayload      = "invalid_payload"
	ErrPayloadTooLarge     = "payload_too_large"
	ErrIdempotencyConflict = "idempotency_conflict"
	ErrRateLimited         = "rate_limited"
	ErrLimitExceeded       = "limit_exceeded"
	ErrDatabaseBusy        = "database_busy"
	ErrMaintenance         = "maintenance"
	ErrInternal            = "internal_error"
	ErrHTTPSRequired       = "https_required"
	ErrInvalidState        = "invalid_state"

	ErrSignatureRequired = "signature_required"
	ErrInvalidSignature  = "invalid_signature"
	ErrInvalidTimestamp  = "invalid_timestamp"
	ErrNonceReused       = "nonce_reused"

	ErrInvalidGoal               = "invalid_goal"
	ErrInvalidNamespace          = "invalid_namespace"
	ErrInvalidVisibility         = "invalid_visibility"
	ErrInvalidPriority           = "invalid_priority"
	ErrInvalidDelay              = "invalid_delay"
	ErrInvalidMaxAttempts        = "invalid_max_attempts"
	ErrInvalidBackoffBase        = "invalid_backoff_base"
	ErrInvalidTargetWorker       = "invalid_target_worker"
	ErrInvalidRequiredCapability = "invalid_required_capability"
	ErrInvalidIdempotencyKey     = "invalid_idempotency_key"
	ErrInvalidClaimToken         = "invalid_claim_token"
	ErrInvalidSeconds            = "invalid_seconds"
	ErrInvalidResult             = "invalid_result"
	ErrInvalidResultType         = "invalid_result_type"
	ErrInvalidError              = "invalid_error"
	ErrInvalidKey                = "invalid_key"
	ErrInvalidValue              = "invalid_value"
	ErrInvalidTTL                = "invalid_ttl"
	ErrInvalidOwner              = "invalid_owner"
	ErrInvalidAPIKey             = "invalid_api_key"
	ErrInvalidConfirm            = "invalid_confirm"
	ErrInvalidWorkerID           = "invalid_worker_id"
	ErrInvalidCapabilities       = "invalid_capabilities"
	ErrInvalidPublisher          = "invalid_publisher"
)

// Limits of §4.1 and §15.
const (
	MaxBodyBytes        = 8 * 1024 // total request body (413 above)
	MaxPayloadBytes     = 7 * 1024 // serialized "payload" field (413 above)
	MaxGoalLen          = 256
	MaxNamespaceLen     = 64
	MinPriority         = 0
	MaxPriority         = 1000
	DefaultPriority     = 100
	MinMaxAttempts      = 1
	MaxMaxAttempts      = 20
	DefaultMaxAttempts  = 3
	MinBackoffBase      = 1.0
	MaxBackoffBase      = 3600.0
	DefaultBackoffBase  = 5.0
	DefaultClaimTimeout = 60 // seconds
	MinExtendSeconds    = 10
	MaxExtendSeconds    = 3600
	DefaultKVTTL        = 600
	MaxKVTTL            = 86400
	DefaultIntentTTL    = 86400 // seconds (24 h)
	TimestampWindow     = 300   // ± seconds, real time even under a time scale
	TesterRateLimit     = 60    // requests per minute per tester key
	TesterOpenCap       = 2000  // open intents per tester key
)

// ErrorBody is the shape of every error response (§11).
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Health is the body of GET /health. TimeScale is an extension: the server
// divides every protocol duration by it.
type Health struct {
	OK          bool    `json:"ok"`
	TS          float64 `json:"ts"`
	Version     string  `json:"version"`
	TimeScale   float64 `json:"time_scale"`
	Maintenance bool    `json:"maintenance,omitempty"`
}

// CreateIntentRequest is the body of POST /intent. Pointers tell an absent
// field from a zero one.
type CreateIntentRequest struct {
	Goal               string          `json:"goal"`
	Payload            json.RawMessage `json:"payload"`
	Namespace          string          `json:"namespace,omitempty"`
	Visibility         string          `json:"visibility,omitempty"`
	Priority           *int            `json:"priority,omitempty"`
	Delay              *float64        `json:"delay,omitempty"`
	MaxAttempts        *int            `json:"max_attempts,omitempty"`
	BackoffBase        *float64        `json:"backoff_base,omitempty"`
	TargetWorker       *string         `json:"target_worker,omitempty"`
	RequiredCapability *string         `json:"required_capability,omitempty"`
}

// CreateIntentResponse is the 201 body of POST /intent.
type CreateIntentResponse struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Namespace string `json:"namespace"`
}

// ClaimResponse is the 200 body of POST /claim. ClaimTimeout is in protocol
// seconds; ClaimExpiresAt (an extension) is the real Unix time the lease ends.
type ClaimResponse struct {
	ID                 string          `json:"id"`
	Namespace          string          `json:"namespace"`
	Goal               string          `json:"goal"`
	Payload            json.RawMessage `json:"payload"`
	ClaimAttempts      int             `json:"claim_attempts"`
	MaxAttempts        int             `json:"max_attempts"`
	Priority           int             `json:"priority"`
	Visibility         string          `json:"visibility"`
	TargetWorker       *string         `json:"target_worker"`
	RequiredCapability *string         `json:"required_capability"`
	ClaimToken         string          `json:"claim_token"`
	ClaimTimeout       int             `json:"claim_timeout"`
	ClaimExpiresAt     float64         `json:"claim_expires_at"`
}

// ExtendClaimRequest is the body of POST /extend_claim/<id>.
type ExtendClaimRequest struct {
	Seconds    float64 `json:"seconds"`
	ClaimToken string  `json:"claim_token"`
}

// FulfillRequest is the body of POST /fulfill/<id>.
type FulfillRequest struct {
	ClaimToken string          `json:"claim_token"`
	Result     json.RawMessage `json:"result,omitempty"`
	ResultType string          `json:"result_type,omitempty"`
}

// FailRequest is the body of POST /fail/<id>.
type FailRequest struct {
	ClaimToken string `json:"claim_token"`
	Error      string `json:"error,omitempty"`
}

// MutationResponse is the 200 body of /extend_claim, /fulfill and /fail, and
// of the admin cancel and retry.
type MutationResponse struct {
	ID             string   `json:"id"`
	Status         string   `json:"status"`
	ClaimAttempts  int      `json:"claim_attempts"`
	ClaimExpiresAt *float64 `json:"claim_expires_at,omitempty"`
	RunAt          *float64 `json:"run_at,omitempty"`
}

// IntentView is the body of GET /result/<id> and GET /status/<id> (without
// Result), and of GET /admin/intents/<id> (with Payload and the lease).
type IntentView struct {
	ID                 string          `json:"id"`
	Namespace          string          `json:"namespace"`
	Goal               string          `json:"goal"`
	Status             string          `json:"status"`
	Priority           int             `json:"priority"`
	Visibility         string          `json:"visibility"`
	ClaimAttempts      int             `json:"claim_attempts"`
	MaxAttempts        int             `json:"max_attempts"`
	BackoffBase        float64         `json:"backoff_base"`
	RunAt              float64         `json:"run_at"`
	CreatedAt          float64         `json:"created_at"`
	ExpiresAt          float64         `json:"expires_at"`
	ClaimedAt          *float64        `json:"claimed_at"`
	ClaimExpiresAt     *float64        `json:"claim_expires_at"`
	TargetWorker       *string         `json:"target_worker"`
	RequiredCapability *string         `json:"required_capability"`
	ResultType         *string         `json:"result_type"`
	Result             json.RawMessage `json:"result,omitempty"`
	CompletedAt        *float64        `json:"completed_at"`
	Error              *string         `json:"error,omitempty"`
	// Admin only.
	Payload    json.RawMessage `json:"payload,omitempty"`
	Publisher  string          `json:"publisher,omitempty"`
	ClaimedBy  *string         `json:"claimed_by,omitempty"`
	ClaimToken *string         `json:"claim_token,omitempty"`
}

// SetRequest is the body of POST /set/<key>.
type SetRequest struct {
	Value json.RawMessage `json:"value"`
	TTL   *float64        `json:"ttl,omitempty"`
}

// GetResponse is the 200 body of GET /get/<key>.
type GetResponse struct {
	Value json.RawMessage `json:"value"`
}

// GenerateKeyRequest / GenerateKeyResponse are POST /admin/generate_key.
type GenerateKeyRequest struct {
	Owner string `json:"owner"`
}

// GenerateKeyResponse is the 201 body of POST /admin/generate_key.
type GenerateKeyResponse struct {
	APIKey string `json:"api_key"`
	Owner  string `json:"owner"`
}

// RevokeKeyRequest is the body of POST /admin/revoke_key.
type RevokeKeyRequest struct {
	APIKey string `json:"api_key"`
}

// PurgeRequest is the body of POST /admin/purge.
type PurgeRequest struct {
	Confirm   bool   `json:"confirm"`
	Namespace string `json:"namespace,omitempty"`
}

// CleanupStats is the body of POST /admin/cleanup (§8.4).
type CleanupStats struct {
	ExpiredOpenDeleted    int64 `json:"expired_open_deleted"`
	ExpiredClaimsRequeued int64 `json:"expired_claims_requeued"`
	ExpiredClaimsDead     int64 `json:"expired_claims_dead"`
	FulfilledDeleted      int64 `json:"fulfilled_deleted"`
	DeadDeleted           int64 `json:"dead_deleted"`
	DeadLettersDeleted    int64 `json:"dead_letters_deleted"`
	StoreDeleted          int64 `json:"store_deleted"`
	RateLimitsDeleted     int64 `json:"rate_limits_deleted"`
	IdempotencyDeleted    int64 `json:"idempotency_deleted"`
	NoncesDeleted         int64 `json:"nonces_deleted"`
}

// DeadLetter is one row of GET /admin/dead and the body of GET /admin/dead/<id>
// (with Payload).
type DeadLetter struct {
	IntentID      string          `json:"intent_id"`
	Namespace     string          `json:"namespace"`
	Goal          string          `json:"goal"`
	Reason        string          `json:"reason"`
	ClaimAttempts int             `json:"claim_attempts"`
	LastError     *string         `json:"last_error"`
	DiedAt        float64         `json:"died_at"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// DeadLetters is the body of GET /admin/dead.
type DeadLetters struct {
	DeadLetters []DeadLetter `json:"dead_letters"`
}
