package intent

import "encoding/json"

// The wire of the Intent Protocol v2.1 (seed 004) as the reference server
// reads it: header names, paths, states, error codes, limits and the JSON
// shapes of its answers. They are written here from the text, not taken
// from the harness (spec/), so that harness and server meet only on the
// wire: a misreading on either side shows up as a failed rule, never as
// two sides agreeing through one shared constant. Section numbers are those
// of the original document (the seeds' README restores them). Everything here
// is unexported: the harness cannot borrow it either.

// Versions (§7.1, §10, §17): "Version: 2.1 (Server API v7.61)"; "The
// X-Intent-Version response header advertises the protocol version, which
// is 2.1."
const (
	intentVersion = "2.1"
	serverVersion = "7.61"
)

// Request and response headers.
const (
	// §5.1 "Clients MUST include: X-API-KEY: <key>".
	hdrAPIKey = "X-API-KEY"
	// §5.2 "Required headers: X-API-KEY: <key> X-Timestamp: <unix
	// timestamp> X-Nonce: <unique value> X-Signature: <lowercase hex digest>".
	hdrTimestamp = "X-Timestamp"
	hdrNonce     = "X-Nonce"
	hdrSignature = "X-Signature"
	// §7.2 "Idempotency-Key: <string>".
	hdrIdempotencyKey = "Idempotency-Key"
	// §6.4 "a matching X-Worker-ID header (or worker_id query param)".
	hdrWorkerID = "X-Worker-ID"
	// §6.5 "advertises the matching capability via X-Worker-Capabilities
	// header (or capabilities query param, comma-separated)".
	hdrWorkerCapabilities = "X-Worker-Capabilities"
	// §5.3 "X-Admin-Token: <secret> if BUS_ADMIN_SECRET is configured".
	hdrAdminToken = "X-Admin-Token"
	// §10 "X-Intent-Version | 2.1".
	hdrIntentVersion = "X-Intent-Version"
	// §7.3 "The 204 response MUST include Retry-After: 1."
	hdrRetryAfter = "Retry-After"
	// hdrClaimToken is the server's extension: the claim token of /fulfill,
	// /fail and /extend_claim may come in this header instead of the body
	// (§7.5 "claim_token is strictly required" and "Body is optional").
	hdrClaimToken = "X-Claim-Token"
	// hdrIdempotentReplay is the server's extension: "true" on a replayed
	// POST /intent answer.
	hdrIdempotentReplay = "Idempotent-Replayed"
)

// securityHeaders: §10 "All responses MUST include:" these five.
var securityHeaders = [][2]string{
	{"X-Frame-Options", "DENY"},
	{"X-Content-Type-Options", "nosniff"},
	{"Referrer-Policy", "no-referrer"},
	{"Cache-Control", "no-store"},
	{hdrIntentVersion, intentVersion},
}

// Endpoint paths (§7, §8, §9; the seeds' README restores the path parameters
// the extraction dropped). A trailing "/" takes one path parameter.
const (
	pathHealth       = "/health"
	pathIntent       = "/intent"
	pathClaim        = "/claim"
	pathExtendClaim  = "/extend_claim/" // + id
	pathFulfill      = "/fulfill/"      // + id
	pathFail         = "/fail/"         // + id
	pathResult       = "/result/"       // + id
	pathStatus       = "/status/"       // + id
	pathSet          = "/set/"          // + key
	pathGet          = "/get/"          // + key
	pathDashboard    = "/admin/dashboard"
	pathGenerateKey  = "/admin/generate_key"
	pathRevokeKey    = "/admin/revoke_key"
	pathPurge        = "/admin/purge"
	pathCleanup      = "/admin/cleanup"
	pathAdminIntents = "/admin/intents/" // + id, + id/cancel, + id/retry
	pathDead         = "/admin/dead"
	pathDeadLetter   = "/admin/dead/" // + intent id
	pathMetrics      = "/metrics"
)

// Intent states (§3.1 "An Intent MUST exist in one of the following
// states: open, claimed, fulfilled, dead"), and the "status" of a POST
// /intent answer (§7.2 `{ "id": "<hex>", "status": "published", ... }`).
const (
	stateOpen      = "open"
	stateClaimed   = "claimed"
	stateFulfilled = "fulfilled"
	stateDead      = "dead"
	statePublished = "published"
)

// Error codes. §11 names the common ones; "Additional specific invalid_*
// errors MAY be returned for malformed fields." The codes after the first
// group are the server's own names where the text gives none.
const (
	codeUnauthorized        = "unauthorized"         // 401 Missing or invalid API key
	codeForbidden           = "forbidden"            // 403 Valid key but insufficient permission
	codeNotFound            = "not_found"            // 404 Intent or resource not found
	codeInvalidRequest      = "invalid_request"      // 400 Missing required fields
	codeInvalidPayload      = "invalid_payload"      // 400 Malformed payload
	codePayloadTooLarge     = "payload_too_large"    // 413
	codeIdempotencyConflict = "idempotency_conflict" // 422 Key reused with different body
	codeRateLimited         = "rate_limited"         // 429 Too many requests
	codeLimitExceeded       = "limit_exceeded"       // 429 Open intent cap reached
	codeDatabaseBusy        = "database_busy"        // 503 SQLite contention
	codeMaintenance         = "maintenance"          // 503 Server in maintenance mode

	codeMethodNotAllowed = "method_not_allowed"
	codeInternal         = "internal_error"
	codeHTTPSRequired    = "https_required"
	codeInvalidState     = "invalid_state"

	// §5.2 "Servers MUST: - Reject timestamps outside ±300 seconds of
	// server time - Reject reused nonces within the same 300-second window
	// per API key - Validate the HMAC signature".
	codeSignatureRequired = "signature_required"
	codeInvalidSignature  = "invalid_signature"
	codeInvalidTimestamp  = "invalid_timestamp"
	codeNonceReused       = "nonce_reused"

	// One invalid_<field> per malformed field.
	codeInvalidGoal               = "invalid_goal"
	codeInvalidNamespace          = "invalid_namespace"
	codeInvalidVisibility         = "invalid_visibility"
	codeInvalidPriority           = "invalid_priority"
	codeInvalidDelay              = "invalid_delay"
	codeInvalidMaxAttempts        = "invalid_max_attempts"
	codeInvalidBackoffBase        = "invalid_backoff_base"
	codeInvalidTargetWorker       = "invalid_target_worker"
	codeInvalidRequiredCapability = "invalid_required_capability"
	codeInvalidIdempotencyKey     = "invalid_idempotency_key"
	codeInvalidClaimToken         = "invalid_claim_token"
	codeInvalidSeconds            = "invalid_seconds"
	codeInvalidResult             = "invalid_result"
	codeInvalidResultType         = "invalid_result_type"
	codeInvalidError              = "invalid_error"
	codeInvalidKey                = "invalid_key"
	codeInvalidValue              = "invalid_value"
	codeInvalidTTL                = "invalid_ttl"
	codeInvalidOwner              = "invalid_owner"
	codeInvalidAPIKey             = "invalid_api_key"
	codeInvalidConfirm            = "invalid_confirm"
	codeInvalidWorkerID           = "invalid_worker_id"
	codeInvalidCapabilities       = "invalid_capabilities"
)

// Limits and defaults. "KB" is read as 1,024 bytes.
const (
	// §15 "Payload field content limit: 7KB. Total request body limit: 8KB."
	maxBodyBytes    = 8 * 1024
	maxPayloadBytes = 7 * 1024
	// §4.1 goal "1–256 characters"; namespace "Max 64 chars."
	maxGoalLen      = 256
	maxNamespaceLen = 64
	// §4.1 priority "100 | 0–1000"; max_attempts "3 | ... 1–20";
	// backoff_base "5.0 | ... 1.0–3600.0".
	minPriority        = 0
	maxPriority        = 1000
	defaultPriority    = 100
	minMaxAttempts     = 1
	maxMaxAttempts     = 20
	defaultMaxAttempts = 3
	minBackoffBase     = 1.0
	maxBackoffBase     = 3600.0
	defaultBackoffBase = 5.0
	// §3.3 "A claim lease MUST expire after claim_timeout seconds (default: 60)."
	defaultClaimTimeout = 60
	// §7.4 "seconds MUST be between 10 and 3600."
	minExtendSeconds = 10
	maxExtendSeconds = 3600
	// §7.9 "ttl defaults to 600 seconds. Maximum 86400."
	defaultKVTTL = 600
	maxKVTTL     = 86400
	// §4.2 expires_at "Default: 24 hours."
	defaultIntentTTL = 86400
	// §5.2 "Reject timestamps outside ±300 seconds of server time": real
	// seconds even under a time scale.
	timestampWindow = 300
	// §15 "Rate limiting: 60 requests/minute per tester key" and "Open
	// intent cap: 2000 open intents per tester key".
	testerRateLimit = 60
	testerOpenCap   = 2000
)

// errorBody is the shape of every error answer (§11 "All error responses
// MUST use the following shape").
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// healthBody is the body of GET /health (§7.1 `{ "ok": true, "ts":
// 1234567890.0, "version": "7.61" }`). time_scale, maintenance and readings
// are the server's extensions: the divisor of every protocol duration,
// BUS_MAINTENANCE_MODE, and the reading it follows at each key of
// ReadingKeys.
type healthBody struct {
	OK          bool              `json:"ok"`
	TS          float64           `json:"ts"`
	Version     string            `json:"version"`
	TimeScale   float64           `json:"time_scale"`
	Maintenance bool              `json:"maintenance,omitempty"`
	Readings    map[string]string `json:"readings"`
}

// createIntentResponse is the 201 body of POST /intent (§7.2).
type createIntentResponse struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Namespace string `json:"namespace"`
}

// claimResponse is the 200 body of POST /claim (§7.3). claim_timeout is in
// protocol seconds; claim_expires_at, max_attempts and visibility are
// extensions (claim_expires_at is the real Unix time the lease ends).
type claimResponse struct {
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

// mutationResponse is the 200 body of /extend_claim, /fulfill and /fail, and
// of the admin cancel and retry (the text shows none: the server's own).
type mutationResponse struct {
	ID             string   `json:"id"`
	Status         string   `json:"status"`
	ClaimAttempts  int      `json:"claim_attempts"`
	ClaimExpiresAt *float64 `json:"claim_expires_at,omitempty"`
	RunAt          *float64 `json:"run_at,omitempty"`
}

// intentView is the body of GET /result/<id> (§7.7) and GET /status/<id>
// (without result, §7.8), and of GET /admin/intents/<id> (with the payload
// and the lease, §8.5). §7.7: "The response MUST include error when
// last_error is present."
type intentView struct {
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

// getResponse is the 200 body of GET /get/<key> (§7.9 `200 { "value":
// "..." }`).
type getResponse struct {
	Value json.RawMessage `json:"value"`
}

// generateKeyResponse is the 201 body of POST /admin/generate_key (§8.2
// `201 { "api_key": "tk_...", "owner": "alice" }`).
type generateKeyResponse struct {
	APIKey string `json:"api_key"`
	Owner  string `json:"owner"`
}

// cleanupStats is the body of POST /admin/cleanup (§8.4).
type cleanupStats struct {
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

// deadLetter is one row of GET /admin/dead and the body of GET
// /admin/dead/<intent_id> (with the payload, §8.6 "Full detail for a dead
// letter including original payload").
type deadLetter struct {
	IntentID      string          `json:"intent_id"`
	Namespace     string          `json:"namespace"`
	Goal          string          `json:"goal"`
	Reason        string          `json:"reason"`
	ClaimAttempts int             `json:"claim_attempts"`
	LastError     *string         `json:"last_error"`
	DiedAt        float64         `json:"died_at"`
	Payload       json.RawMessage `json:"payload,omitempty"`
}

// deadLetters is the body of GET /admin/dead (§8.6 "Lists the 100 most
// recent dead letters").
type deadLetters struct {
	DeadLetters []deadLetter `json:"dead_letters"`
}
