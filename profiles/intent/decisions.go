package intent

import "github.com/idscheck/idscheck/spec"

// Decision IDs of the Intent Protocol that checks rest on (--reading ID=NAME).
const (
	DecisionLeaseExpiry     = "lease-expiry"
	DecisionExtend          = "extend"
	DecisionQueryRepeated   = "query-repeated-order"
	DecisionAdminResult     = "admin-result-access"
	DecisionNullPayload     = "null-payload"
	DecisionFulfillBody     = "fulfill-body"
	DecisionTimeScale       = "time-scale"
	DecisionMaintenance     = "maintenance"
	DecisionOpenCap         = "open-cap"
	DecisionAccess          = "access"
	DecisionValidation      = "validation"
	DecisionIdempotency     = "idempotency"
	DecisionAdminRetry      = "admin-retry"
	DecisionSignatureStatus = "signature-status"
)

// Decisions lists the places where seed 004 (Intent Protocol v2.1)
// contradicts itself or is silent where a check needs an answer. Those with
// readings are judged under each; the bundled reference server follows
// Readings[0] by default and Readings[1] with --readings alternate.
func Decisions() []spec.Decision {
	return []spec.Decision{
		{
			ID:       DecisionLeaseExpiry,
			Profile:  Name,
			Section:  "3.3, 7.3",
			Question: "When a lease expires with attempts left, is the intent requeued with a backoff delay, or claimable at once?",
			Readings: []spec.Reading{
				{Name: "backoff", Section: "3.3",
					Quote: "On lease expiry or explicit /fail, the bus MUST requeue the intent with a backoff delay: next_run = now + (backoff_base * (2 ^ claim_attempts)) + jitter",
					Means: "an expired intent becomes claimable again backoff_base*2^claim_attempts + [0,2) s after its lease ended"},
				{Name: "immediate", Section: "7.3",
					Quote: "Lease expiry does not require a background cleanup pass before an intent can be reclaimed; expired intents are eligible for immediate atomic selection.",
					Means: "an expired intent is claimable the moment its lease ends"},
			},
			Choice: "backoff: an expired lease is an implicit failure at claim_expires_at. At claim time the server draws the jitter in [0,2) s and " +
				"stores run_at = claim_expires_at + backoff_base*2^claim_attempts + jitter; the claim statement selects status IN ('open','claimed') " +
				"AND run_at <= now directly, with no cleanup pass. With --readings alternate: immediate (run_at = claim_expires_at).",
			Why: "Both can be read as binding: §3.3's MUST requeues with a backoff delay, and §7.3's MUST (\"The server MUST atomically select and lock " +
				"the highest-priority eligible intent. Eligible intents are those where: status = 'open' OR (status = 'claimed' AND lease expired)\") " +
				"makes an expired lease eligible at once. A target that follows either is not failed for it; the report names the reading it follows.",
		},
		{
			ID:       DecisionExtend,
			Profile:  Name,
			Section:  "7.4",
			Question: "Does an extension set the lease to end `seconds` from now, or add `seconds` to the current end?",
			Readings: []spec.Reading{
				{Name: "from-now", Section: "7.4",
					Quote: "Workers performing long-running tasks SHOULD call this periodically to avoid the job being requeued.",
					Means: "a renewal: the lease ends seconds after the extension (a heartbeat may shorten it)"},
				{Name: "added", Section: "7.4",
					Quote: "Extends the lease on a currently-held intent.",
					Means: "seconds are added to the current end of the lease"},
			},
			Choice: "from-now; with --readings alternate: added. Every check of an extension accepts both: the new end is at least " +
				"the extension's call + seconds.",
		},
		{
			ID:       DecisionQueryRepeated,
			Profile:  Name,
			Section:  "5.2",
			Question: "In CANONICAL_PATH, do repeated query parameters keep the order in which they were sent, or are they sorted by value too?",
			Readings: []spec.Reading{
				{Name: "by-value", Section: "5.2",
					Quote: "be sorted lexicographically by key - preserve repeated parameters",
					Means: "parameters sorted by key, then repeated ones by value"},
				{Name: "as-sent", Section: "5.2",
					Quote: "preserve repeated parameters - preserve blank values",
					Means: "parameters sorted by key with a stable sort: repeated ones keep the order in which they were sent"},
			},
			Choice: "by-value; with --readings alternate: as-sent. The canonical-path rule is judged on requests whose repeated " +
				"parameters are already in value order, where both readings agree; a separate check reports which reading the target follows.",
		},
		{
			ID:       DecisionAdminResult,
			Profile:  Name,
			Section:  "7, 7.7",
			Question: "May an admin read /result and /status with admin credentials alone, or must it present an X-API-KEY too?",
			Readings: []spec.Reading{
				{Name: "admin-alone", Section: "7.7",
					Quote: "Accessible by the publisher, the current claimer, or an admin.",
					Means: "admin credentials alone open /result and /status"},
				{Name: "with-api-key", Section: "7",
					Quote: "All regular endpoints require X-API-KEY authentication unless otherwise noted.",
					Means: "an admin also presents a valid X-API-KEY (of any key); admin credentials then grant access"},
			},
			Choice: "admin-alone; with --readings alternate: with-api-key (admin credentials without an X-API-KEY get 401).",
		},
		{
			ID:       DecisionNullPayload,
			Profile:  Name,
			Section:  "4.1, 7.2",
			Question: "Is an explicit JSON null payload a payload, or a missing one?",
			Readings: []spec.Reading{
				{Name: "a-payload", Section: "4.1",
					Quote: "Arbitrary JSON value passed to the worker.",
					Means: "null is a JSON value: the intent is published (201)"},
				{Name: "missing", Section: "7.2",
					Quote: "All fields except goal and payload are optional.",
					Means: "a null payload is no payload: 400"},
			},
			Choice: "a-payload; with --readings alternate: missing (400 invalid_request).",
		},
		{
			ID:       DecisionSignatureStatus,
			Profile:  Name,
			Section:  "5.2, 11",
			Question: "Which status answers a request whose signature, timestamp or nonce is refused?",
			Choice: "401 unauthorized. The text gives no status, so every check accepts any 4xx with the §11 error shape " +
				"(401 unauthorized and 403 invalid_signature alike).",
		},
		{
			ID:       DecisionFulfillBody,
			Profile:  Name,
			Section:  "7.5",
			Question: "§7.5 requires the claim token and also lets /fulfill be called with no body: where does the token come from?",
			Choice: "The claim token is always required (400 invalid_request without it; a token that does not match the current lease: 404). " +
				"It may come in the body or in the X-Claim-Token header (an extension); with the header, an empty body fulfils with no stored " +
				"result. The same holds for /fail and /extend_claim. Checks send the token in the body only.",
			Why: "§2 forbids lease hijacking and §17 makes claim_token verification a compliance condition.",
		},
		{
			ID:       DecisionTimeScale,
			Profile:  Name,
			Section:  "3.3, 4, 7, 14, 15",
			Question: "How can a harness see lease expiry and dead-lettering in seconds?",
			Choice: "With --time-scale F (an extension, default 1, reported as time_scale in GET /health) every protocol duration is divided " +
				"by F: claim timeout, extensions, backoff and jitter, delay, intent TTL, KV TTL, retention, idempotency retention, rate-limit " +
				"window, cleanup interval and its 60 s back-off. The ±300 s timestamp window and the 300 s nonce window stay in real " +
				"seconds. Field values on the wire stay in protocol units (claim_timeout: 60); timestamps are real Unix seconds.",
		},
		{
			ID:       DecisionMaintenance,
			Profile:  Name,
			Section:  "14",
			Question: "Which endpoints does BUS_MAINTENANCE_MODE block?",
			Choice:   "Every non-admin endpoint answers 503 maintenance, except GET /health (unauthenticated, reports maintenance: true) and GET /metrics.",
		},
		{
			ID:       DecisionOpenCap,
			Profile:  Name,
			Section:  "15",
			Question: "Which intents count towards the open-intent cap of a tester key?",
			Choice:   "Non-terminal intents (open and claimed) published by the tester key; the 2001st POST /intent answers 429 limit_exceeded with Retry-After.",
		},
		{
			ID:       DecisionAccess,
			Profile:  Name,
			Section:  "7.7, 7.8, 11",
			Question: "What does another valid key get from /result and /status of an intent it may not read?",
			Choice: "403 forbidden; an unknown id 404. Checks accept 403 or 404 (an implementation may hide that the intent exists). " +
				"The main BUS_SECRET key is not an admin.",
		},
		{
			ID:       DecisionValidation,
			Profile:  Name,
			Section:  "4.1, 7.2, 11",
			Question: "How are malformed publishes refused?",
			Choice: "A body that is not a JSON object: 400 invalid_payload. A missing goal or payload: 400 invalid_request. Each malformed field: " +
				"400 invalid_<field> (priority and max_attempts must be JSON integers; delay 0–86400; target_worker and required_capability " +
				"null or 1–256 characters, required_capability without commas or spaces). Unknown fields are ignored. A body over 8 KiB or a " +
				"payload over 7 KiB serialized: 413 payload_too_large. Checks use sizes on which every reading of \"KB\" (1,000 or 1,024 bytes) agrees.",
		},
		{
			ID:       DecisionIdempotency,
			Profile:  Name,
			Section:  "7.2",
			Question: "How long is an Idempotency-Key kept, and what does a rejected request do to it?",
			Choice: "The body is canonicalised (objects with sorted keys, no whitespace, numbers as written) and hashed; the key is scoped to the " +
				"API key and kept 24 h (scaled). A replay returns the stored status and body with Idempotent-Replayed: true; a different " +
				"canonical body answers 422 idempotency_conflict. Rejected requests (4xx) do not consume the key. The idempotency row is " +
				"written in the same transaction as the intent.",
		},
		{
			ID:       DecisionAdminRetry,
			Profile:  Name,
			Section:  "3.2, 8.5",
			Question: "Which states may an admin retry or cancel?",
			Choice:   "Retry applies to dead intents only (409 invalid_state otherwise); cancel applies to any state, fulfilled included.",
			Why:      "The transition table lists retry from dead only and cancel from any state.",
		},
	}
}

// DecisionByID returns the decision of the Intent Protocol with the given ID.
func DecisionByID(id string) (spec.Decision, bool) {
	for _, d := range Decisions() {
		if d.ID == id {
			return d, true
		}
	}
	return spec.Decision{}, false
}
