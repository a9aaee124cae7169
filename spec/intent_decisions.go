package spec

// Decision is a binding reading of a place where seed 004 (Intent Protocol
// v2.1) contradicts itself or leaves a choice open. The bundled reference
// server (sut) follows every decision listed by IntentDecisions.
type Decision struct {
	ID      string   // stable name
	Section string   // seed 004 sections involved
	Quotes  []string // the text, verbatim
	Choice  string   // what the reference server does
	Why     string
}

// IntentDecisions lists the decisions the reference server follows.
func IntentDecisions() []Decision {
	return []Decision{
		{
			ID:      "lease-expiry",
			Section: "3.3, 7.3",
			Quotes: []string{
				"On lease expiry or explicit /fail, the bus MUST requeue the intent with a backoff delay: next_run = now + (backoff_base * (2 ^ claim_attempts)) + jitter",
				"Lease expiry does not require a background cleanup pass before an intent can be reclaimed; expired intents are eligible for immediate atomic selection.",
			},
			Choice: "An expired lease is an implicit failure at claim_expires_at. At claim time the server draws the jitter in [0,2) s and stores " +
				"run_at = claim_expires_at + backoff_base*2^claim_attempts + jitter (claim_attempts after the increment): while the lease " +
				"runs, run_at is the moment the intent becomes claimable again should the lease lapse. The claim statement selects " +
				"status IN ('open','claimed') AND run_at <= now directly, with no cleanup pass; an extension moves run_at with the lease. " +
				"When the lease expires with claim_attempts >= max_attempts the intent is dead at claim_expires_at: status and result report " +
				"\"dead\" from that moment, the claim never selects it, and the write (status, dead-letter row) lands lazily in the next " +
				"cleanup pass, in /admin/dead, or in any mutation that touches it. Between claim_expires_at and run_at an expired intent " +
				"with attempts left reports \"open\" (it waits out its backoff).",
			Why: "Both sentences hold: the backoff of §3.3 is applied, and selection needs no cleanup pass (§7.3 'immediate' is read " +
				"as 'no pass needed', the backoff still counts). Storing the jitter at claim time makes the expiry deterministic and " +
				"observable through run_at.",
		},
		{
			ID:      "fulfill-body",
			Section: "7.5",
			Quotes: []string{
				"claim_token is strictly required.",
				"Body is optional — calling with no body marks the intent fulfilled with no stored result.",
			},
			Choice: "The claim token is always required (400 invalid_request without it; a token that does not match the current lease: 404). " +
				"It may come in the body or in the X-Claim-Token header; with the header, the body is optional and an empty body fulfils " +
				"with no stored result. The same holds for /fail and /extend_claim.",
			Why: "§2 forbids lease hijacking and §17 makes claim_token verification a compliance condition; the header keeps the " +
				"'no body' call possible without weakening the lock.",
		},
		{
			ID:      "time-scale",
			Section: "3.3, 4, 7, 14, 15",
			Quotes:  []string{"claim_timeout seconds (default: 60)", "Reject timestamps outside ±300 seconds of server time"},
			Choice: "With --time-scale F (an extension, default 1, reported as time_scale in GET /health) every protocol duration is divided " +
				"by F: claim timeout, extensions, backoff and jitter, delay, intent TTL, KV TTL, retention, idempotency retention, rate-limit " +
				"window, cleanup interval and its 60 s back-off. The ±300 s timestamp window and the 300 s nonce window stay in real " +
				"seconds. Field values on the wire stay in protocol units (claim_timeout: 60); timestamps are real Unix seconds.",
			Why: "A harness must see lease expiry and dead-lettering in seconds; clocks of signing clients are real.",
		},
		{
			ID:      "extend",
			Section: "7.4",
			Quotes:  []string{"seconds MUST be between 10 and 3600.", "A lease extension MUST fail if the existing lease has already expired."},
			Choice:  "The new lease ends at now + seconds (a renewal, which may shorten it); an expired lease answers 404.",
			Why:     "A renewal bounds a worker's lease by its latest promise; the text does not say 'added to'.",
		},
		{
			ID:      "maintenance",
			Section: "14",
			Quotes:  []string{"BUS_MAINTENANCE_MODE: Block all non-admin traffic."},
			Choice:  "Every non-admin endpoint answers 503 maintenance, except GET /health (unauthenticated, reports maintenance: true) and GET /metrics.",
			Why:     "A health probe and monitoring must keep working during maintenance.",
		},
		{
			ID:      "open-cap",
			Section: "15",
			Quotes:  []string{"Open intent cap: 2000 open intents per tester key"},
			Choice:  "Counted over non-terminal intents (open and claimed) published by the tester key; the 2001st POST /intent answers 429 limit_exceeded with Retry-After.",
			Why:     "A claimed intent can return to open; counting it keeps the cap a real bound.",
		},
		{
			ID:      "access",
			Section: "7.7, 7.8, 11",
			Quotes:  []string{"Accessible by the publisher, the current claimer, or an admin.", "forbidden | 403 | Valid key but insufficient permission"},
			Choice:  "Another valid key gets 403 forbidden; an unknown id 404. Admin credentials (X-Admin-Token or Basic) are accepted in place of an API key. The main BUS_SECRET key is not an admin.",
			Why:     "§5.3: no fallback between admin and client credentials.",
		},
		{
			ID:      "validation",
			Section: "4.1, 7.2, 11",
			Quotes:  []string{"Additional specific invalid_* errors MAY be returned for malformed fields."},
			Choice: "A body that is not a JSON object: 400 invalid_payload. A missing goal or payload: 400 invalid_request. Each malformed field: " +
				"400 invalid_<field> (priority and max_attempts must be JSON integers; delay 0–86400; target_worker and required_capability " +
				"null or 1–256 characters, required_capability without commas or spaces). Unknown fields are ignored. A body over 8 KiB or a " +
				"payload over 7 KiB serialized: 413 payload_too_large. An explicit JSON null payload is a payload.",
			Why: "Each rejection names its cause; nothing malformed reaches the store.",
		},
		{
			ID:      "idempotency",
			Section: "7.2",
			Quotes:  []string{"the server MUST return the same response for the same API key and semantically identical JSON request body"},
			Choice: "The body is canonicalised (objects with sorted keys, no whitespace, numbers as written) and hashed; the key is scoped to the " +
				"API key and kept 24 h (scaled). A replay returns the stored status and body with Idempotent-Replayed: true; a different " +
				"canonical body answers 422 idempotency_conflict. Rejected requests (4xx) do not consume the key. The idempotency row is " +
				"written in the same transaction as the intent.",
			Why: "Exactly one intent per (API key, Idempotency-Key) even under concurrent duplicates and crashes.",
		},
		{
			ID:      "admin-retry",
			Section: "3.2, 8.5",
			Quotes:  []string{"dead → open: Admin calls /admin/intents/<id>/retry", "any → dead: Admin calls /admin/intents/<id>/cancel"},
			Choice:  "Retry applies to dead intents only (409 invalid_state otherwise); cancel applies to any state, fulfilled included.",
			Why:     "The transition table lists retry from dead only and cancel from any state.",
		},
	}
}
