package intent

import "github.com/idscheck/idscheck/spec"

import "strings"

// Source is the seed file of the Intent Protocol v2.1 (profile intent).
const Source = "004_b5f0a9c556f3c9c3.txt"

// Untestable reasons shared by several intent rules.
const (
	untestableWorker     = "a client obligation: workers and publishers are clients of the bus, and the harness certifies the bus"
	untestableDeployment = "a deployment concern: the harness cannot see how the target is run in production"
	untestableInternal   = "an implementation detail behind the API: only its consequence (atomic claiming) is observable, and scenarios check that"
	untestableChaos      = "exercised by idscheck chaos (crash faults), not by scenarios"
)

// bindSep, in the quote column of a row, separates the sentence whose keyword
// binds a quote that carries none (spec.Rule.Binding: a list heading such as
// "Implementations MUST NOT:") from the quote itself (spec.Rule.Quote). Both are
// verbatim; the seed has no "…" of its own.
const bindSep = " … "

// The list headings of seed 004 whose keyword binds the items under them.
const (
	bindShould   = "Implementations SHOULD:" + bindSep
	bindMustNot  = "Implementations MUST NOT:" + bindSep
	bindBackoff  = "On lease expiry or explicit /fail, the bus MUST requeue the intent with a backoff delay:" + bindSep
	bindServers  = "Servers MUST:" + bindSep
	bindQuery    = "Query parameters in CANONICAL_PATHMUST:" + bindSep
	bindAdmin    = "Servers MUST support the following methods in order of precedence:" + bindSep
	bindEligible = "The server MUST atomically select and lock the highest-priority eligible intent. Eligible intents are those where:" + bindSep
	bindHeaders  = "All responses MUST include:" + bindSep
	bindProvide  = "Implementations MUST provide:" + bindSep
)

// intentReadings names, by "section-slug", the rules whose check rests on a
// decision with readings (decisions.go): such a check is judged under
// every reading of the decision.
var intentReadings = map[string][]string{
	"3.3-expiry-backoff":    {DecisionLeaseExpiry},
	"7.3-immediate-reclaim": {DecisionLeaseExpiry},
	"7.4-extend":            {DecisionExtend},
	"5.2-query-canonical":   {DecisionQueryRepeated},
	"7.7-result-access":     {DecisionAdminResult},
	"7.8-status-access":     {DecisionAdminResult},
	"7.2-required-fields":   {DecisionNullPayload},
}

// intentRules is the catalog of seed 004 in the order of its text. Section
// numbers are those of the original document (seeds/README.md restores them).
// A row's level is MUST only when its quote, or the binding before bindSep,
// carries an uppercase MUST, MUST NOT, REQUIRED or SHALL that binds the bus;
// a table row, a list item or prose without one is a SHOULD at most. A
// keyword that binds a client or worker makes no rule for the bus: such a
// row is untestable unless the text states the bus's side, which then has a
// row of its own.
func rules() []spec.Rule {
	type row struct {
		section, slug string
		level         spec.Level
		quote, why    string
		untestable    string
	}
	rows := []row{
		// 2 Overview
		{"2", "workers-idempotent", spec.Must, "Because delivery is at-least-once, workers MUST be idempotent.", "a worker that is not idempotent repeats side effects on every redelivery", untestableWorker},
		{"2", "redelivery", spec.May, "The same intent MAY be executed more than once due to retries, lease expiry, network failures, or lost responses.", "a bus that never redelivers an intent after a lost lease loses the job instead", ""},
		{"2", "concurrent-requests", spec.Should, bindShould + "Support multi-threaded concurrent request handling", "a bus that serialises every request stalls all workers behind one slow call", ""},
		{"2", "atomic-isolation", spec.Should, bindShould + "Implement atomic transaction isolation at the database level", "without isolation two concurrent claims can read the same open row and both take it", ""},
		{"2", "metrics-endpoint", spec.Should, bindShould + "Provide an authenticated metrics endpoint for operational observability", "operators cannot see queue depth or dead letters, or anyone can", ""},
		{"2", "no-drop-on-shutdown", spec.Must, bindMustNot + "Silently drop jobs on shutdown", "an acknowledged intent vanishes when the bus restarts", untestableChaos},
		{"2", "no-lease-hijack", spec.Must, bindMustNot + "Allow lease hijacking between workers", "a second worker can complete or fail a job another worker holds, so the job's effect is lost or doubled", ""},
		{"2", "hmac-timestamp-validation", spec.Must, bindMustNot + "Process requests without timestamp validation when HMAC is enabled", "a captured signed request can be replayed forever", ""},

		// 3.1 States
		{"3.1", "states", spec.Must, "An Intent MUST exist in one of the following states", "a client cannot interpret a status outside open, claimed, fulfilled and dead", ""},
		{"3.1", "fulfilled-terminal", spec.Should, "Successfully completed (terminal)", "a fulfilled intent that can be claimed, failed or fulfilled again runs twice", ""},
		{"3.1", "dead-terminal", spec.Should, "Permanently failed; moved to dead-letter queue (terminal)", "a dead intent that is handed out again runs after it was declared failed", ""},
		{"3.1", "expired-open-not-dead", spec.Should, "Expired open intents are removed during cleanup and do not transition to dead.", "expired work floods the dead-letter queue, or stays claimable after its TTL", ""},

		// 3.2 State Transitions
		{"3.2", "claim-transition", spec.Should, "Worker claims the intent and receives a claim_token", "a claim that does not move the intent to claimed with a token leaves it claimable by others", ""},
		{"3.2", "fulfill-transition", spec.Should, "Worker calls /fulfill/<id> providing the valid claim_token", "completed work is not recorded as fulfilled", ""},
		{"3.2", "fail-requeue", spec.Should, "Worker calls /fail/<id> with claim_token and claim_attempts < max_attempts", "a failed intent with attempts left is never retried", ""},
		{"3.2", "fail-dead", spec.Should, "Worker calls /fail/<id> with claim_token and claim_attempts >= max_attempts", "an intent that exhausted its attempts is retried forever instead of dead-lettered", ""},
		{"3.2", "expiry-requeue", spec.Should, "Lease expires and claim_attempts < max_attempts", "a job whose worker vanished is lost instead of retried", ""},
		{"3.2", "expiry-dead", spec.Should, "Lease expires and claim_attempts >= max_attempts", "a job that keeps crashing its workers is retried forever", ""},
		{"3.2", "admin-retry", spec.Should, "Admin calls /admin/intents/<id>/retry", "an operator cannot give a dead intent another chance", ""},
		{"3.2", "admin-cancel", spec.Should, "Admin calls /admin/intents/<id>/cancel", "an operator cannot stop a poisonous intent", ""},

		// 3.3 Retry and Backoff Semantics
		{"3.3", "lease-expiry", spec.Must, "A claim lease MUST expire after claim_timeoutseconds (default: 60).", "a job held by a dead worker is never retried, or is taken from a live one early", ""},
		{"3.3", "attempts-increment", spec.Must, "claim_attemptsMUST increment atomically when the intent is successfully claimed.", "max_attempts and backoff are computed from a wrong count", ""},
		{"3.3", "fail-backoff", spec.Must, "explicit /fail, the bus MUST requeue the intent with a backoff delay", "a failing job is retried at once in a hot loop", ""},
		{"3.3", "expiry-backoff", spec.Must, "On lease expiry or explicit /fail, the bus MUST requeue the intent with a backoff delay", "a job whose worker crashed is retried in a hot loop", ""},
		{"3.3", "backoff-formula", spec.Must, bindBackoff + "next_run = now + (backoff_base * (2 ^ claim_attempts)) + jitter", "retries come earlier or later than publishers planned for", ""},
		{"3.3", "backoff-jitter", spec.Must, bindBackoff + "Where jitter is a random value in [0, 2) seconds to prevent thundering herd.", "retries of many intents land at the same instant, or far too late", ""},
		{"3.3", "dead-at-max-attempts", spec.Must, "A job MUST transition to deadwhenclaim_attempts >= max_attempts.", "a job is retried more often than its publisher allowed", ""},
		{"3.3", "expiry-dead-direct", spec.Must, "If a lease expires and the current claim_attempts >= max_attempts, the server MUST transition the intent directly to thedeadstate instead of requeuing it.", "an exhausted intent sits open but unclaimable, never dead-lettered", ""},
		{"3.3", "default-max-attempts", spec.Should, "Default max_attempts: 3", "intents published without max_attempts are retried a different number of times", ""},
		{"3.3", "default-backoff-base", spec.Should, "Default backoff_base: 5.0 seconds", "intents published without backoff_base are retried on a different schedule", ""},
		{"3.3", "token-overwritten-404", spec.Must, "overwritten by a subsequent claim, the server MUST reject the operation with a 404 Not Found.", "a worker whose lease was taken over can still complete or fail the job under the new holder", ""},
		{"3.3", "token-expired-404", spec.Must, "If a worker attempts to /fail, /extend_claim, or /fulfill an intent using a claim_token that has expired or been overwritten by a subsequent claim, the server MUST reject the operation with a 404 Not Found.", "a worker that lost its lease keeps mutating a job it no longer owns", ""},

		// 4.1 Publisher-Controlled fields
		{"4.1", "goal-length", spec.Should, "The task type. 1–256 characters.", "empty or oversized goals reach workers", ""},
		{"4.1", "payload-limit", spec.Should, "Arbitrary JSON value passed to the worker. Max 7KB (serialized UTF-8).", "oversized payloads are stored and handed to workers", ""},
		{"4.1", "namespace-format", spec.Should, "Alphanumeric, ., -, _. Max 64 chars.", "namespaces with arbitrary characters break routing, metrics labels and admin paths", ""},
		{"4.1", "namespace-default", spec.Should, "namespace | string | \"default\" | Logical partition.", "intents without a namespace land where default workers never look", ""},
		{"4.1", "visibility-values", spec.Should, "\"private\" or \"public\".", "an unknown visibility is stored and routing becomes undefined", ""},
		{"4.1", "visibility-default", spec.Should, "visibility | string | \"private\" |", "intents published without visibility can be claimed by other tenants' workers", ""},
		{"4.1", "priority-range", spec.Should, "0–1000. Higher values are claimed first.", "out-of-range priorities starve every other intent", ""},
		{"4.1", "delay", spec.Should, "Seconds before the intent becomes claimable.", "delayed work runs too early", ""},
		{"4.1", "max-attempts-range", spec.Should, "Maximum claim attempts before the intent is dead. 1–20.", "an intent is never attempted, or retried without bound", ""},
		{"4.1", "backoff-base-range", spec.Should, "Base for exponential backoff in seconds. 1.0–3600.0.", "a zero or huge backoff makes retries hot-loop or never happen", ""},

		// 4.2 Server-Controlled fields
		{"4.2", "id-format", spec.Should, "Hex token, 32 characters.", "clients that validate or route by id break; short ids collide", ""},
		{"4.2", "claim-attempts", spec.Should, "Number of times the intent has been claimed.", "clients and operators see a wrong attempt count", ""},
		{"4.2", "expires-at-default", spec.Should, "Unix timestamp of TTL expiry. Default: 24 hours.", "intents expire earlier or later than publishers expect", ""},
		{"4.2", "result-type-values", spec.Should, "result_type | string | \"json\" or \"text\". |", "readers cannot interpret a stored result whose result_type is neither \"json\" nor \"text\"", ""},

		// 5.1 Standard authentication
		{"5.1", "api-key-required", spec.Must, "Clients MUST include: X-API-KEY: <key>", "anyone can publish, claim or read intents without a key", "a client obligation: the client sends X-API-KEY. The bus's side, refusing a request without a valid key, is INTENT-7-auth-required, which carries no RFC 2119 keyword"},
		{"5.1", "https-in-production", spec.Must, "MUST be used over HTTPS in production", "API keys travel in clear text", untestableDeployment},

		// 5.2 Strict HMAC
		{"5.2", "signing-optional", spec.May, "Clients MAY use request signing for enhanced security.", "clients that sign their requests are refused by a bus that does not require signing", ""},
		{"5.2", "validate-if-present", spec.Should, "If signature headers are present, the server validates them", "a forged signature is accepted whenever signing is optional", ""},
		{"5.2", "require-signatures", spec.Must, "if BUS_REQUIRE_SIGNATURES=true, all client requests MUST be signed.", "an unsigned request gets through a bus that promises strict auth", "a client obligation: the keyword binds client requests. The bus's side, refusing an unsigned request when so configured, is INTENT-14-require-signatures, which carries no RFC 2119 keyword"},
		{"5.2", "signature-headers", spec.Should, "Required headers: X-API-KEY: <key> X-Timestamp: <unix timestamp> X-Nonce: <unique value> X-Signature: <lowercase hex digest>", "a signed request without its nonce or timestamp is accepted without replay protection", ""},
		{"5.2", "timestamp-window", spec.Must, bindServers + "Reject timestamps outside ±300 seconds of server time", "an old captured request is accepted again", ""},
		{"5.2", "nonce-replay", spec.Must, bindServers + "Reject reused nonces within the same 300-second window per API key", "a captured signed request can be replayed within the window", ""},
		{"5.2", "signature-valid", spec.Must, bindServers + "Validate the HMAC signature", "anyone who knows an API key's name forges requests", ""},
		{"5.2", "method-uppercase", spec.Must, "METHODMUST be uppercase", "client and server disagree on the signed string and valid requests are refused", ""},
		{"5.2", "body-exact-bytes", spec.Must, "BODYMUST be the exact, unmodified bytes transmitted over the network.", "a bus that signs a re-serialized body refuses correctly signed requests, or accepts altered ones", ""},
		{"5.2", "clients-no-reserialize", spec.Must, "Clients MUST NOT parse and re-serialize the payload before signing", "the client's signature does not match its own bytes", untestableWorker},
		{"5.2", "empty-body", spec.Must, "Empty bodies MUST serialize as an empty string", "signed GET requests are refused", ""},
		{"5.2", "query-canonical", spec.Must, bindQuery + "be sorted lexicographically by key - preserve repeated parameters - preserve blank values", "signed requests with several, repeated or blank query parameters are refused or forgeable", ""},
		{"5.2", "query-percent-encoding", spec.Must, bindQuery + "be strictly percent-encoded according to RFC 3986 (forward slashes /MUST be encoded as%2F)", "signed requests whose parameters contain reserved characters are refused", ""},
		{"5.2", "digest-lowercase-hex", spec.Must, "The resulting digest MUST be lowercase hexadecimal", "client and server compare differently encoded digests", "a client obligation: the client encodes the signature it sends. The bus's side, validating that signature, is INTENT-5.2-signature-valid"},

		// 5.3 Admin authentication
		{"5.3", "admin-methods", spec.Must, "Servers MUST support the following methods in order of precedence", "operators with one of the two credentials are locked out", ""},
		{"5.3", "admin-token", spec.Must, bindAdmin + "X-Admin-Token: <secret>ifBUS_ADMIN_SECRETis configured", "automation cannot use the admin API, or a wrong token gets in", ""},
		{"5.3", "admin-basic", spec.Must, bindAdmin + "HTTP Basic authentication with username adminand passwordDASHBOARD_PASSWORD", "the dashboard cannot be opened in a browser, or a wrong password gets in", ""},
		{"5.3", "no-fallback", spec.Should, "There is no fallback from X-Admin-Token to BUS_SECRET.", "every holder of the main API key is an administrator", ""},
		{"5.3", "separate-auth", spec.Should, "Admin endpoints are authenticated separately from regular API key auth.", "a client API key opens the admin API", ""},

		// 6 Routing
		{"6.1", "claim-namespace-default", spec.Must, "Workers MUST specify a namespace when claiming, defaulting to default.", "a worker without a namespace claims from the wrong partition", "a client obligation: the worker names the namespace it claims from. The bus's side, the namespace of a claim that names none, is INTENT-7.3-claim-namespace-default, which carries no RFC 2119 keyword"},
		{"6.1", "namespace-isolation", spec.Must, "Intents MUST NOT cross namespace boundaries.", "a worker of one partition runs another partition's jobs", ""},
		{"6.2", "private", spec.Should, "only workers authenticated using the same API key as the publisher can claim the intent", "another tenant's worker receives a private payload", ""},
		{"6.2", "public", spec.Should, "any authenticated worker in the same namespace can claim the intent", "public work is never picked up by shared workers", ""},
		{"6.3", "priority-order", spec.Should, "Intents are claimed in descending priority order (higher value = higher priority).", "urgent work waits behind bulk work", ""},
		{"6.3", "tie-breakers", spec.Should, "Within the same priority, intents are ordered by run_at ascending, then claim_attempts ascending, then created_at ascending, then id ascending.", "equal-priority work is served in an unpredictable order and old work starves", ""},
		{"6.4", "target-worker", spec.Should, "only a worker that presents a matching X-Worker-ID header (or worker_id query param) can claim it.", "a job pinned to one worker runs elsewhere, or never", ""},
		{"6.5", "capability", spec.Should, "only a worker that advertises the matching capability via X-Worker-Capabilities header (or capabilities query param, comma-separated) can claim it.", "a job runs on a worker that cannot do it", ""},
		{"6.5", "capability-exact", spec.Should, "Capability matching is case-sensitive and exact token matching.", "a worker advertising \"gpu-small\" or \"GPU\" receives a job needing \"gpu\"", ""},

		// 7 API Definition
		{"7", "auth-required", spec.Should, "All regular endpoints require X-API-KEY authentication unless otherwise noted.", "an endpoint leaks or changes data without a key", ""},
		{"7", "json-content-type", spec.Should, "All responses use Content-Type: application/json unless otherwise noted.", "clients cannot parse responses", ""},
		{"7", "client-content-type", spec.Should, "Clients sending JSON request bodies SHOULD use Content-Type: application/json.", "a client's body may be misread by proxies", untestableWorker},
		{"7.1", "health", spec.Should, "No authentication required. Response 200 OK:", "load balancers and the harness cannot probe the bus (the body shown after it is an example)", ""},
		{"7.2", "required-fields", spec.Should, "All fields except goal and payload are optional.", "minimal intents are refused, or intents without a goal or payload are stored", ""},
		{"7.2", "idem-replay", spec.Must, "If provided, the server MUST return the same response", "a retried publish creates a second intent: the job runs twice", ""},
		{"7.2", "idem-semantic", spec.Must, "If provided, the server MUST return the same response for the same API key and semantically identical JSON request body.", "a retry whose JSON differs only in key order or whitespace creates a second intent or a false 422", ""},
		{"7.2", "idem-per-key", spec.Must, "If provided, the server MUST return the same response for the same API key", "one tenant's Idempotency-Key collides with another's and leaks its intent id", ""},
		{"7.2", "idem-conflict", spec.Must, "Reuse of the same key with a different canonicalized JSON body MUST return 422 Unprocessable Entity.", "a different request silently gets the first request's intent", ""},
		{"7.2", "created-201", spec.Should, "201 Created | Intent published", "publishers cannot tell a stored intent from a refused one", ""},
		{"7.2", "bad-request-400", spec.Should, "400 Bad Request | Missing or invalid fields", "malformed intents are stored or crash the bus", ""},
		{"7.2", "body-limit-413", spec.Should, "413 Payload Too Large | Total request body exceeds 8KB limit", "oversized requests are stored or exhaust memory", ""},
		{"7.2", "too-many-429", spec.Should, "429 Too Many Requests | Open intent limit reached or rate limited", "a tester key floods the bus", ""},
		{"7.2", "publish-response", spec.Should, "Response body: { \"id\": \"<hex>\", \"status\": \"published\", \"namespace\": \"default\" }", "an example body, no keyword: publishers cannot learn the id of their intent", ""},
		{"7.3", "atomic-claim", spec.Must, "The server MUST atomically select and lock", "two workers receive the same intent at once", ""},
		{"7.3", "highest-priority", spec.Must, "The server MUST atomically select and lock the highest-priority eligible intent.", "urgent work waits behind bulk work: a claim returns an eligible intent while one of higher priority is eligible", ""},
		{"7.3", "eligible-status", spec.Must, bindEligible + "status = 'open'OR (status = 'claimed'AND lease expired)", "a fulfilled or dead intent, or one whose lease is still live, is handed out again", ""},
		{"7.3", "eligible-run-at", spec.Must, bindEligible + "run_at <= now", "delayed or backed-off intents are handed out early", ""},
		{"7.3", "eligible-expires", spec.Must, bindEligible + "expires_at > now", "an intent past its TTL is still handed out", ""},
		{"7.3", "eligible-attempts", spec.Must, bindEligible + "claim_attempts < max_attempts", "an exhausted intent is claimed once more", ""},
		{"7.3", "eligible-visibility", spec.Must, bindEligible + "Visibility or publisher matches", "a private intent goes to another key's worker, or a public one is withheld from the workers of other keys (Section 6.2 says what matches)", ""},
		{"7.3", "eligible-target", spec.Must, bindEligible + "target_workermatches (if set)", "a job pinned to one worker is handed to another (Section 6.4 says what matches)", ""},
		{"7.3", "eligible-capability", spec.Must, bindEligible + "required_capabilityis satisfied (if set)", "a job goes to a worker that does not advertise the capability it needs (Section 6.5 says what satisfies it)", ""},
		{"7.3", "selection-order", spec.Should, "Selection order: priority DESC, run_at ASC, claim_attempts ASC, created_at ASC, id ASC.", "workers receive intents in another order than the text promises", ""},
		{"7.3", "immediate-reclaim", spec.Should, "Lease expiry does not require a background cleanup pass before an intent can be reclaimed; expired intents are eligible for immediate atomic selection.", "jobs of dead workers wait for a cleanup pass that may be hours away", ""},
		{"7.3", "goal-filter", spec.Should, "Filter by goal string (optional)", "a worker receives a goal it cannot handle", ""},
		{"7.3", "claim-namespace-default", spec.Should, "namespace | Target namespace (default: \"default\") |", "a claim that names no namespace misses the intents published without one", ""},
		{"7.3", "publisher-filter", spec.Should, "Filter by publisher key (admin only, or own key)", "a worker filters by, and thus learns about, another tenant's key", ""},
		{"7.3", "claim-response", spec.Should, "\"claim_token\": \"<16-byte-hex-string>\", \"claim_timeout\": 60", "an example body, no keyword: a worker cannot mutate the intent it claimed or knows no lease length", ""},
		{"7.3", "no-content-204", spec.Should, "204 No Content | No eligible intent (worker should back off and retry)", "workers cannot tell an empty queue from an error", ""},
		{"7.3", "retry-after", spec.Must, "The 204 response MUST include Retry-After: 1.", "idle workers poll in a hot loop", ""},
		{"7.4", "extend", spec.Should, "Extends the lease on a currently-held intent.", "long-running jobs are requeued while still running", ""},
		{"7.4", "extend-seconds-range", spec.Must, "seconds MUST be between 10 and 3600.", "a worker holds a lease forever or extends it uselessly", "a client obligation: the worker chooses seconds, and the text does not say what the bus does with a value outside 10–3600 (it MAY refuse it with an invalid_* error, INTENT-11-invalid-specific)"},
		{"7.4", "extend-token-required", spec.Should, "claim_token is strictly required.", "anyone holding the intent id extends a lease (\"strictly required\" is no RFC 2119 keyword)", ""},
		{"7.4", "extend-404", spec.Should, "Intent not found, not owned by caller, or claim_token invalid/expired", "a stranger keeps another worker's lease alive (a table row; the bus's MUSTs are INTENT-3.3-token-expired-404, -token-overwritten-404 and INTENT-2-no-lease-hijack)", ""},
		{"7.4", "extend-expired-lease", spec.Must, "A lease extension MUST fail if the existing lease has already expired.", "a worker revives a lease the bus already gave up, while another worker may hold the job", ""},
		{"7.4", "extend-periodically", spec.Should, "Workers performing long-running tasks SHOULD call this periodically to avoid the job being requeued.", "a long job is requeued and runs twice", untestableWorker},
		{"7.4", "reclaim-after-expiry", spec.Must, "Workers MUST call /claim again to re-acquire the intent.", "a worker keeps running a job it lost", untestableWorker},
		{"7.4", "lease-loss-permanent", spec.Must, "MUST treat it as a permanent lease loss (the job was reclaimed or deleted) and MUST NOT retry the mutation.", "a worker keeps retrying a mutation on a job now held by someone else (the same words close 7.5 and 7.6)", untestableWorker},
		{"7.5", "fulfill", spec.Should, "Marks an intent as fulfilled. Optionally stores a result.", "results of completed jobs are lost", ""},
		{"7.5", "fulfill-token-required", spec.Should, "claim_token is strictly required.", "anyone holding the intent id completes the job (\"strictly required\" is no RFC 2119 keyword)", ""},
		{"7.5", "result-type", spec.Must, "result_type MUST be \"json\" or \"text\".", "results are stored with a type readers cannot interpret", "a client obligation: the worker chooses result_type. The bus's side, the result_type it stores, is INTENT-4.2-result-type-values, which carries no RFC 2119 keyword"},
		{"7.5", "result-type-default", spec.Should, "If omitted, it defaults to \"json\" when a result is provided.", "readers misinterpret results fulfilled without a type", ""},
		{"7.5", "fulfill-without-result", spec.Should, "Body is optional — calling with no body marks the intent fulfilled with no stored result.", "a worker with nothing to report cannot complete its job, or an old result survives", ""},
		{"7.5", "fulfill-404", spec.Should, "200 OK | Intent fulfilled | 404 Not Found | Not found, not the current claimer, or claim_token invalid/expired |", "a worker that is not the current claimer completes the job (a table row; the MUST after it binds workers. The bus's MUSTs are INTENT-3.3-token-expired-404, -token-overwritten-404 and INTENT-2-no-lease-hijack)", ""},
		{"7.6", "fail", spec.Should, "Explicitly fails a claimed intent. The bus applies backoff and requeues if attempts remain, or moves to dead if exhausted.", "a worker cannot hand back a job it could not do", ""},
		{"7.6", "fail-token-required", spec.Should, "claim_token is strictly required.", "anyone holding the intent id fails another worker's job (\"strictly required\" is no RFC 2119 keyword)", ""},
		{"7.6", "fail-404", spec.Should, "200 OK | Processed | 404 Not Found | Not found, not the current claimer, or claim_token invalid/expired |", "a worker that is not the current claimer fails the job (a table row; the MUST after it binds workers. The bus's MUSTs are INTENT-3.3-token-expired-404, -token-overwritten-404 and INTENT-2-no-lease-hijack)", ""},
		{"7.7", "result-access", spec.Should, "Accessible by the publisher, the current claimer, or an admin.", "any key can read any tenant's results", ""},
		{"7.7", "result-fields", spec.Should, "Retrieves the stored result and full status of an intent.", "publishers cannot poll for results", ""},
		{"7.7", "result-error-field", spec.Must, "The response MUST include error when last_error is present.", "publishers cannot see why an intent failed", ""},
		{"7.8", "status", spec.Should, "Lightweight status check without the result body.", "status polling downloads whole results", ""},
		{"7.8", "status-access", spec.Should, "Same access control as /result.", "any key can read any tenant's intent status", ""},
		{"7.9", "kv-isolation", spec.Should, "Keys are isolated per API key.", "one tenant reads or overwrites another's coordination values", ""},
		{"7.9", "kv-ttl", spec.Should, "ttl defaults to 600 seconds. Maximum 86400.", "values live forever or vanish too early", ""},
		{"7.9", "kv-get", spec.Should, "Returns 200 { \"value\": \"...\" } or 404.", "a reader cannot tell a missing value from an empty one", ""},

		// 8 Admin API
		{"8", "admin-auth", spec.Should, "All admin endpoints require admin authentication (Section 5.3).", "anyone can purge, cancel or read every tenant's intents", ""},
		{"8", "admin-exempt-limits", spec.Should, "Admin routes are exempt from tester rate limits and the open-intent cap.", "operators are locked out while a tester key is throttled", ""},
		{"8.1", "dashboard", spec.Should, "Returns an HTML dashboard with live queue stats, recent intents, tester keys, and dead letters.", "operators have no view of the bus", ""},
		{"8.1", "dashboard-basic-prompt", spec.Should, "Triggers browser Basic auth prompt if credentials are not provided.", "a browser user cannot log in to the dashboard", ""},
		{"8.2", "generate-key", spec.Should, "Returns 201 { \"api_key\": \"tk_...\", \"owner\": \"alice\" }.", "an example body, no keyword (the tk_ prefix and the owner echo are the example's): operators cannot hand out tester keys", ""},
		{"8.2", "revoke-key", spec.Should, "Revokes the key and clears all associated rate limits, idempotency keys, and nonces.", "a leaked tester key keeps working", ""},
		{"8.3", "purge-confirm", spec.Should, "confirm: true is required.", "one stray request wipes the bus", ""},
		{"8.3", "purge-namespace", spec.Should, "If provided, purges intents and dead letters in that namespace only.", "purging one namespace destroys others", ""},
		{"8.3", "purge-all", spec.Should, "if omitted, purges all intents, dead letters, and housekeeping tables.", "a full purge leaves stale intents behind", ""},
		{"8.4", "cleanup", spec.Should, "Runs the background cleanup pass immediately. Returns stats:", "the stats are an example, no keyword (their keys are the example's): operators cannot force housekeeping or see what it did", ""},
		{"8.5", "admin-detail", spec.Should, "Full intent detail including payload.", "operators cannot inspect a stuck intent", ""},
		{"8.5", "admin-cancel", spec.Should, "Forces intent to dead and archives to dead-letter queue.", "a cancelled intent keeps running or leaves no record", ""},
		{"8.5", "admin-retry", spec.Should, "Resets the intent to open with claim_attempts = 0, clears the current lease, clears stored result and error state, and removes any matching dead-letter row.", "a retried intent is still dead, keeps stale state, or is listed dead and open at once", ""},
		{"8.6", "dead-list", spec.Should, "Lists the 100 most recent dead letters.", "operators cannot find failed work", ""},
		{"8.6", "dead-detail", spec.Should, "Full detail for a dead letter including original payload.", "operators cannot see what a failed job was asked to do", ""},

		// 9 Metrics
		{"9", "metrics-auth", spec.Should, "Requires either a Bearer <METRICS_TOKEN> Authorization header or valid admin credentials (X-Admin-Token or HTTP Basic auth).", "anyone reads queue sizes and namespaces, or monitoring is locked out", ""},
		{"9", "metrics-format", spec.Should, "Returns Prometheus-compatible text format:", "the text shown is an example, no keyword (the metric names are the example's): monitoring cannot scrape the bus", ""},

		// 10 Response Headers
		{"10", "x-frame-options", spec.Must, bindHeaders + "X-Frame-Options | DENY", "the dashboard can be framed (clickjacking)", ""},
		{"10", "x-content-type-options", spec.Must, bindHeaders + "X-Content-Type-Options | nosniff", "browsers sniff JSON or error bodies as HTML", ""},
		{"10", "referrer-policy", spec.Must, bindHeaders + "Referrer-Policy | no-referrer", "URLs with intent ids leak to third parties", ""},
		{"10", "cache-control", spec.Must, bindHeaders + "Cache-Control | no-store", "intermediaries cache results, claim tokens or admin pages", ""},
		{"10", "version-header", spec.Must, bindHeaders + "X-Intent-Version | 2.1", "clients cannot detect which protocol version they speak to", ""},

		// 11 Error Format
		{"11", "error-shape", spec.Must, "All error responses MUST use the following shape:", "clients cannot tell one error from another", ""},
		{"11", "code-unauthorized", spec.Should, "unauthorized | 401 | Missing or invalid API key", "clients cannot tell a bad key from other errors", ""},
		{"11", "code-forbidden", spec.Should, "forbidden | 403 | Valid key but insufficient permission", "clients cannot tell missing permission from a bad key", ""},
		{"11", "code-not-found", spec.Should, "not_found | 404 | Intent or resource not found", "clients cannot tell a lost lease or unknown id from other errors", ""},
		{"11", "code-invalid-request", spec.Should, "invalid_request | 400 | Missing required fields", "clients cannot tell which request was malformed", ""},
		{"11", "code-invalid-payload", spec.Should, "invalid_payload | 400 | Malformed payload", "clients cannot tell a malformed body from other errors", ""},
		{"11", "code-payload-too-large", spec.Should, "payload_too_large | 413 |", "clients cannot tell an oversized request from other errors", ""},
		{"11", "code-idempotency-conflict", spec.Should, "idempotency_conflict | 422 | Key reused with different body", "clients cannot recognise a reused key", ""},
		{"11", "code-rate-limited", spec.Should, "rate_limited | 429 | Too many requests", "clients cannot tell throttling from the open cap", ""},
		{"11", "code-limit-exceeded", spec.Should, "limit_exceeded | 429 | Open intent cap reached", "clients cannot tell the open cap from throttling", ""},
		{"11", "code-database-busy", spec.Should, "database_busy | 503 | SQLite contention", "clients cannot tell contention (retry) from other errors", "needs storage contention that a client cannot cause through the API; exercised by idscheck chaos"},
		{"11", "code-maintenance", spec.Should, "maintenance | 503 | Server in maintenance mode", "clients cannot tell maintenance from an outage", "needs the target restarted with BUS_MAINTENANCE_MODE=true, which scenarios cannot do"},
		{"11", "invalid-specific", spec.May, "Additional specific invalid_* errors MAY be returned for malformed fields.", "clients cannot tell which field was wrong", ""},

		// 12 Guarantees
		{"12", "at-least-once", spec.Must, bindProvide + "At-least-once delivery", "a published intent is never delivered", ""},
		{"12", "atomic-claiming", spec.Must, bindProvide + "Atomic job claiming", "one intent is held by two live leases", ""},
		{"12", "isolated-claim-locks", spec.Must, bindProvide + "Cryptographically isolated claim locks", "a claim token can be guessed or reused across claims", ""},
		{"12", "retry-backoff", spec.Must, bindProvide + "Retry with exponential backoff", "failing jobs are retried without backoff", ""},
		{"12", "dead-letter-archival", spec.Must, bindProvide + "Dead-letter archival after max attempts", "exhausted jobs vanish without a record", ""},
		{"12", "isolation", spec.Must, bindProvide + "Per-namespace and per-key isolation", "tenants see or take each other's work", ""},

		// 14 Server Configuration
		{"14", "require-signatures", spec.Should, "Require HMAC signing on all requests.", "an unsigned request gets through a bus that promises strict auth", ""},

		// 15 Security Considerations
		{"15", "secret-not-default", spec.Must, "BUS_SECRETMUST be kept secret and MUST NOT be the defaultdev_secretin production", "anyone knowing the default key owns the bus", untestableDeployment},
		{"15", "https-enforced", spec.Must, "HTTPS MUST be enforced in production", "keys and payloads travel in clear text", untestableDeployment},
		{"15", "replay-mitigation", spec.Should, "Replay attacks are mitigated by Strict Auth (nonce + timestamp window)", "signed requests can be replayed", ""},
		{"15", "claim-token-validation", spec.Should, "Concurrency attacks are mitigated by ephemeral claim_tokenvalidation", "a racing worker mutates an intent it does not hold", ""},
		{"15", "rate-limit", spec.Should, "Rate limiting: 60 requests/minute per tester key", "one tester key floods the bus", ""},
		{"15", "size-limits", spec.Should, "Payload field content limit: 7KB. Total request body limit: 8KB.", "oversized intents are stored", ""},
		{"15", "open-cap", spec.Should, "Open intent cap: 2000 open intents per tester key", "one tester key fills the queue", ""},
		{"15", "open-cap-main-exempt", spec.Should, "(the main BUS_SECRETkey is exempt)", "the operator's own key is throttled by the tester cap", ""},
		{"15", "dead-retention", spec.Should, "Dead letters are retained for 7 days", "dead letters vanish before operators look, or pile up forever", ""},
		{"15", "fulfilled-retention", spec.Should, "Fulfilled intents are retained for 7 days", "results vanish before publishers poll, or pile up forever", ""},

		// 16 Implementation Notes
		{"16", "sqlite-version", spec.Must, "SQLite version 3.35.0 or higher is STRICTLY REQUIRED", "the atomic claim statement is unavailable", untestableInternal},
		{"16", "sqlite-wal", spec.Should, "SQLite WAL mode is required; journal_modemust be set toWAL", "readers block the writer and claims stall", untestableInternal},
		{"16", "begin-immediate", spec.Must, "Atomic claiming MUST use BEGIN IMMEDIATEwithUPDATE ... RETURNING", "two transactions claim the same row", untestableInternal},
		{"16", "lazy-cleanup", spec.Should, "Cleanup is lazy: triggered by request traffic, not a background thread", "cleanup competes with traffic for the writer", untestableInternal},
		{"16", "cleanup-failure-backoff", spec.Should, "If cleanup fails (e.g., database lock), the server enforces a 60-second backoff before retrying to prevent thrashing", "a locked database is hammered by cleanup retries", "needs a storage lock that a client cannot cause through the API; exercised by idscheck chaos"},
		{"16", "single-process", spec.Should, "Multiple gunicorn workers will cause SQLite write contention; use --workers 1 --threads N", "write contention makes requests fail with database_busy", untestableDeployment},

		// 17 Versioning
		{"17", "version-advertised", spec.Should, "The X-Intent-Versionresponse header advertises the protocol version, which is 2.1.", "clients cannot detect the protocol version", ""},
		{"17", "breaking-major", spec.Must, "Breaking changes MUST increment the major version", "clients upgrade into incompatible behaviour unknowingly", "a rule for the evolution of the text and its implementations, not a behaviour of one target"},
		{"17", "additive-compatible", spec.Should, "Additive changes SHOULD be backward-compatible", "existing clients break on a minor release", "a rule for the evolution of the text and its implementations, not a behaviour of one target"},
	}
	out := make([]spec.Rule, 0, len(rows))
	used := 0
	for _, r := range rows {
		binding, quote, ok := strings.Cut(r.quote, bindSep)
		if !ok {
			binding, quote = "", r.quote
		}
		key := r.section + "-" + r.slug
		var readings []string
		if ds, ok := intentReadings[key]; ok {
			readings = append(readings, ds...)
			used++
		}
		out = append(out, spec.Rule{
			ID:          "INTENT-" + key,
			Profile:     Name,
			Source:      Source,
			Section:     r.section,
			Level:       r.level,
			Quote:       quote,
			Explanation: r.why,
			Binding:     binding,
			Untestable:  r.untestable,
			Readings:    readings,
		})
	}
	if used != len(intentReadings) {
		panic("spec: intentReadings names a rule the catalog does not have")
	}
	return out
}

func init() { spec.RegisterRules(rules) }

// Rules returns the catalog of the Intent Protocol, in the order of its text.
func Rules() []spec.Rule { return rules() }
