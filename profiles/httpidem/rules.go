// Package httpidem is the http-idempotency profile's texts made checkable:
// any HTTP endpoint that takes an idempotency key, judged under the
// variant its target declares: "ietf" (the default), the IETF draft "The
// Idempotency-Key HTTP Header Field"; "t0", t-0's receiver rules (seed
// 002); "stripe", Stripe's documented conventions. A rule belongs to the
// variant of its text (Variant); the rules of the other variants are N/A
// for a target, with the reason, since the texts disagree on exactly the
// points that matter (an in-flight duplicate: 409, or wait and replay; a
// rejection that does or does not consume the key).
//
// The package is the whole profile: its rules (rules.go), what a target
// declares of its endpoint (endpoint.go) and its part of the target file
// (target.go), its feature file and steps (http_idempotency.feature,
// steps.go), the checks and model of its chaos histories (checks.go), its
// chaos workload (workload.go, chaos.go), and its bundled endpoint, as
// the harness starts it (profile.go) and as a process (serve.go).
package httpidem

import "github.com/idscheck/idscheck/spec"

// Name is the profile's name (--profile http-idempotency).
const Name spec.Profile = "http-idempotency"

// The texts of the profile (spec.SeedText finds each).
const (
	SourceIETF   = "draft-ietf-httpapi-idempotency-key-header.txt"
	SourceT0     = "002_58f6d1c48bb6cfb8.txt"
	SourceStripe = "stripe-idempotent-requests.txt"
	// SourceHTTP is RFC 9110's 5xx class: the finding of every variant.
	SourceHTTP = "rfc9110-server-error.txt"
)

// RuleServerError judges, under every variant, that no well-formed
// request is answered with a 5xx: a check that reads such an answer is
// BLOCKED by it, never passed.
const RuleServerError = "RFC9110-15.6-server-error"

// Variants, in the order --variant lists them; the first is the default.
const (
	VariantIETF   = "ietf"
	VariantT0     = "t0"
	VariantStripe = "stripe"
)

// Variants lists the variants.
func Variants() []string { return []string{VariantIETF, VariantT0, VariantStripe} }

// Variant is the variant a rule belongs to: the one of its text; "" for
// the finding every variant judges (RuleServerError).
func Variant(r spec.Rule) string {
	switch r.Source {
	case SourceHTTP:
		return ""
	case SourceT0:
		return VariantT0
	case SourceStripe:
		return VariantStripe
	}
	return VariantIETF
}

// Untestable reasons.
const (
	untestableClient = "an obligation of the client, not the server; idscheck's requests keep it"
	untestableDocs   = "documentation: idscheck reads the endpoint's published policy from the target file, and cannot judge the prose"
)

func init() { spec.RegisterRules(Rules) }

// Rules returns the catalog: the IETF draft, then t-0's text, then
// Stripe's, each in the order of its text.
func Rules() []spec.Rule {
	r := func(id, source, section string, level spec.Level, quote, explanation string) spec.Rule {
		return spec.Rule{ID: id, Profile: Name, Source: source, Section: section, Level: level,
			Quote: quote, Explanation: explanation}
	}
	untestable := func(rule spec.Rule, why string) spec.Rule { rule.Untestable = why; return rule }
	readings := func(rule spec.Rule, decisions ...string) spec.Rule { rule.Readings = decisions; return rule }
	// guarantee makes a rule of a text without RFC 2119 keywords a MUST:
	// words, verbatim in its quote, are the guarantee the text states.
	guarantee := func(words string, rule spec.Rule) spec.Rule {
		rule.Level, rule.Guarantee = spec.Must, words
		return rule
	}
	I, T, S := SourceIETF, SourceT0, SourceStripe
	return []spec.Rule{
		// Every variant: a server error to a well-formed request.
		r(RuleServerError, SourceHTTP, "15.6", spec.Should,
			"The 5xx (Server Error) class of status code indicates that the server is aware that it has erred or is incapable of performing the requested method.",
			"a well-formed request (a valid body, a key of the published format or, where none is published, a plain one) makes the endpoint err: the caller cannot tell whether it took effect, and the check its request was making is not decided"),

		// The IETF draft.
		r("IETF-2.1-string-key", I, "2.1", spec.Should,
			"`Idempotency-Key` is an Item Structured Header {{!RFC8941}}. Its value MUST be a String.",
			"a client that sends its key as the draft says (a quoted sf-string) is refused, or its retries are not recognized"),
		untestable(r("IETF-2.1-one-header", I, "2.1", spec.Must,
			"Clients MUST NOT include more than one `Idempotency-Key` header field in the same request.",
			"a server cannot tell which of two keys names the request"), untestableClient),
		untestable(r("IETF-2.2-unique", I, "2.2", spec.Must,
			"The idempotency key that is supplied as part of every `POST` request MUST be unique and MUST NOT be reused with another request with a different request payload.",
			"a client that reuses a key for another payload gets the first payload's result"), untestableClient),
		untestable(r("IETF-2.2-uniqueness-defined", I, "2.2", spec.Must,
			"Uniqueness of the key MUST be defined by the resource owner and MUST be implemented by the clients of the resource server.",
			"clients cannot make keys the server tells apart"), untestableDocs+"; the clients' half binds them"),
		untestable(r("IETF-2.2-uuid-recommended", I, "2.2", spec.Should,
			"It is RECOMMENDED that `UUID` {{!RFC4122}} or a similar random identifier be used as an idempotency key.",
			"keys that collide or can be guessed"), untestableClient),
		untestable(r("IETF-2.3-expiry-published", I, "2.3", spec.Should,
			"The resource server SHOULD define such expiration policy and publish it in the documentation.",
			"clients cannot tell how long a retry stays safe"), untestableDocs),
		untestable(r("IETF-2.3-expiry-kept", I, "2.3", spec.May,
			"The resource MAY enforce time based idempotency keys, thus, be able to purge or delete a key upon its expiry.",
			"informational: after its published expiry a key may be forgotten; within it, a retry is still a retry"),
			"a permission (MAY): either answer after the expiry is allowed, so nothing can fail"),
		untestable(r("IETF-2.4-fingerprint", I, "2.4", spec.May,
			"An idempotency fingerprint MAY be used in conjunction with an idempotency key to determine the uniqueness of a request.",
			"informational: a fingerprint is how a server tells another payload under the same key (judged under IETF-2.7-mismatch-422)"),
			"a permission (MAY): a server with or without a fingerprint is allowed; what a fingerprint is for is judged under IETF-2.7-mismatch-422"),
		untestable(r("IETF-2.5-client-understands", I, "2.5", spec.Should,
			"Clients of HTTP API requiring idempotency, SHOULD understand the idempotency related requirements as published by the server and use appropriate algorithm to generate idempotency keys.",
			"a client whose keys the server refuses or confuses"), untestableClient),
		untestable(r("IETF-2.5-client-unique-key", I, "2.5", spec.Should,
			"Send a unique idempotency key in the HTTP `Idempotency-Key` request header field.",
			"a client that reuses a key for another request").WithBinding("For each request, client SHOULD"), untestableClient),
		untestable(r("IETF-2.5-publish", I, "2.5", spec.Must,
			"Resource server MUST publish idempotency related specification. This specification MUST include expiration related policy if applicable.",
			"clients cannot know which operations deduplicate, or for how long"), untestableDocs),
		readings(r("IETF-2.5-identify-key", I, "2.5", spec.Should,
			"Identify idempotency key from the HTTP `Idempotency-Key` request header field.",
			"the server deduplicates on something else than the key (the payload alone): a genuinely new request under a new key is taken for a retry").WithBinding("For each request, server SHOULD"),
			DecisionNewKeySeenPayload),
		untestable(r("IETF-2.5-fingerprint-if-required", I, "2.5", spec.Should,
			"Generate idempotency fingerprint if required.",
			"a server that needs a fingerprint to tell payloads apart and makes none").WithBinding("For each request, server SHOULD"),
			"internal: whether a server needs a fingerprint is its own design; its effect, refusing another payload under one key, is judged under IETF-2.7-mismatch-422"),
		untestable(r("IETF-2.5-check-scenarios", I, "2.5", spec.Should,
			"Check for idempotency considering various scenarios including the ones described in section below.",
			"a scenario of §2.6 or §2.7 handled wrongly").WithBinding("For each request, server SHOULD"),
			"a summary of §2.6 and §2.7: each scenario it names is judged under its own rule"),
		untestable(r("IETF-2.7-client-other-errors", I, "2.7", spec.Should,
			"For other 4xx/5xx errors, such as 401, 403, 500, 502, 503, 504, 429, or any other HTTP error code that is not listed here, the client SHOULD act appropriately by following the resource server's documentation.",
			"a client that retries what it should not"), untestableClient),
		r("IETF-2.6-first-request", I, "2.6", spec.Should,
			"The resource server SHOULD process the request normally and respond with an appropriate response and status code.",
			"a first request with a key is refused or answered as a duplicate"),
		r("IETF-2.6-retry-result", I, "2.6", spec.Should,
			"The request was retried after the original request completed. The resource server SHOULD respond with the result of the previously completed operation, success or an error.",
			"a retry after completion executes again, or gets another answer than the original"),
		r("IETF-2.6-concurrent-conflict", I, "2.6", spec.Must,
			"The request was retried before the original request completed. The resource server MUST respond with a resource conflict error.",
			"a retry that arrives while the original runs is executed in parallel, or answered as if it were the original"),
		r("IETF-2.7-missing-400", I, "2.7", spec.Should,
			"If the `Idempotency-Key` request header is missing for a documented idempotent operation requiring this header, the resource server SHOULD reply with an HTTP `400` status code with body containing a link pointing to relevant documentation.",
			"a request without its required key executes, and its retry executes again"),
		r("IETF-2.7-mismatch-422", I, "2.7", spec.Should,
			"If there is an attempt to reuse an idempotency key with a different request payload, the resource server SHOULD reply with a HTTP `422` status code with body containing a link pointing to relevant documentation.",
			"a key reused with another payload silently returns the first payload's result, or executes the second"),
		r("IETF-2.7-concurrent-409", I, "2.7", spec.Should,
			"If the request is retried, while the original request is still being processed, the resource server SHOULD reply with an HTTP `409` status code with body containing problem description.",
			"the client cannot tell a retry in flight from another error"),
		r("IETF-2.7-fail-uncorrected", I, "2.7", spec.Must,
			"or the the resource server MUST fail the request and return one of the above errors.",
			"an uncorrected retry of a refused request (no key, another payload) executes"),
		untestable(r("IETF-5-fixed-format", I, "5", spec.Should,
			"Establish a fixed format for the idempotency key and publish the key’s specification.",
			"clients cannot make keys the server accepts, and the server cannot validate them").WithBinding("To prevent such situations, the specification recommends the following best practices for idempotency key implementation in the resource server."),
			untestableDocs+"; a published format declared as key_spec is held to IETF-5-validate-key"),
		r("IETF-5-validate-key", I, "5", spec.Should,
			"Always validate the key as per its published specification before processing any request.",
			"a key outside the published format is processed (or makes the server err): the cache lookup is open to injection").WithBinding("To prevent such situations, the specification recommends the following best practices for idempotency key implementation in the resource server."),
		r("IETF-5-composite-key", I, "5", spec.Should,
			"On the resource server, implement a unique composite key as the idempotent cache lookup key. For example, a composite key MAY be implemented by combining the idempotency key sent by the client with other client specific attributes known only to the resource server.",
			"two clients that pick the same key share one result: the second never executes, and sees the first's data"),

		// t-0's receiver rules (seed 002): no RFC 2119 keyword; each states a
		// guarantee (the three receiver rules are imperatives binding the
		// receiver: "Both t-0 and every role must hold their side of the
		// contract"), a MUST whose Guarantee holds its words.
		guarantee("a repeat with the same key returns the original result and causes no further side effect",
			r("T0-0-no-further-effect", T, "0", spec.Must,
				"a repeat with the same key returns the original result and causes no further side effect.",
				"a retried payment is made twice")),
		guarantee("scoped to the authenticated caller",
			r("T0-KEYS-caller-scope", T, "KEYS", spec.Must,
				"Each state-changing call carries a designated key, scoped to the authenticated caller:",
				"two callers that pick the same business key share one result: the second caller's payment never happens")),
		guarantee("retrying produces the same outcome as the first call",
			r("T0-CAT-same-outcome", T, "CAT", spec.Must,
				"Deduplicate on the business key in the request body; retrying produces the same outcome as the first call.",
				"a retry of a state-changing call produces another outcome")),
		guarantee("return the stored response",
			r("T0-R1-original-response", T, "R1", spec.Must,
				"When a request arrives with a key you have already processed, return the stored response — the caller needs the outcome, not a “duplicate” error.",
				"the caller of a completed request gets a duplicate error instead of its outcome, and the flow strands")),
		guarantee("wait for it to complete and return the same response to both. Do not reject the duplicate, and do not return an error",
			r("T0-R2-wait-in-flight", T, "R2", spec.Must,
				"If you have not finished the original request when a duplicate arrives, wait for it to complete and return the same response to both. Do not reject the duplicate, and do not return an error.",
				"a duplicate of a request in flight is rejected (or executed in parallel) instead of waiting for the same response")),
		guarantee("A duplicate is a normal retry, not a fault. Returning an error for it breaks the contract",
			r("T0-R3-no-duplicate-error", T, "R3", spec.Must,
				"A duplicate is a normal retry, not a fault. Returning an error for it breaks the contract and stalls the payment.",
				"a duplicate is answered with an error")),
		guarantee("Use the request’s key (such as paymentRef) to tell a repeat apart from a genuinely new request",
			r("T0-R3-key-tells-new", T, "R3", spec.Must,
				"Use the request’s key (such as paymentRef) to tell a repeat apart from a genuinely new request.",
				"a genuinely new request under a new key is taken for a repeat of an earlier one with the same fields, and never happens")),
		guarantee("it never consumes the key: to fix the problem the sender resubmits the same key with corrected fields, which t-0 re-evaluates from scratch",
			r("T0-REPLAY-rejection-keeps-key", T, "REPLAY", spec.Must,
				"A rejection is itself an acknowledgment, so the sender stops retrying — but it never consumes the key: to fix the problem the sender resubmits the same key with corrected fields, which t-0 re-evaluates from scratch.",
				"a corrected resubmission under the key of a rejected call is refused or answered with the old rejection")),
		guarantee("a rejected or declined call commits nothing to replay",
			r("T0-REPLAY-accepted-only", T, "REPLAY", spec.Must,
				"Idempotent replay — returning the original result with no new side effect — applies only to an accepted call; a rejected or declined call commits nothing to replay.",
				"a rejected call leaves something behind (an effect, or a stored rejection replayed to the corrected call)")),

		// Stripe's documented conventions: no RFC 2119 keyword; what the page
		// states as a guarantee is a MUST whose Guarantee holds its words,
		// a limit or a permission stays a SHOULD.
		guarantee("saving the resulting status code and body of the first request made for any given idempotency key, regardless of whether it succeeds or fails. Subsequent requests with the same key return the same result, including 500 errors",
			r("STRIPE-IDEM-same-result", S, "IDEM", spec.Must,
				"Stripe’s idempotency works by saving the resulting status code and body of the first request made for any given idempotency key, regardless of whether it succeeds or fails. Subsequent requests with the same key return the same result, including 500 errors.",
				"a retry gets another status or body than the first request, or executes again")),
		r("STRIPE-IDEM-key-255", S, "IDEM", spec.Should,
			"Idempotency keys are up to 255 characters long.",
			"a valid key of up to 255 characters is refused"),
		guarantee("compares incoming parameters to those of the original request and errors if they’re not the same",
			r("STRIPE-IDEM-params-compared", S, "IDEM", spec.Must,
				"The idempotency layer compares incoming parameters to those of the original request and errors if they’re not the same to prevent accidental misuse.",
				"a key reused with other parameters returns the first result, or executes the second request")),
		r("STRIPE-IDEM-kept-24h", S, "IDEM", spec.Should,
			"You can remove keys from the system automatically after they’re at least 24 hours old.",
			"a retry within a day of the original executes again"),
		guarantee("we don’t save the idempotent result because no API endpoint initiates the execution. You can retry these requests",
			r("STRIPE-IDEM-not-saved", S, "IDEM", spec.Must,
				"If incoming parameters fail validation, or the request conflicts with another request that’s executing concurrently, we don’t save the idempotent result because no API endpoint initiates the execution. You can retry these requests.",
				"a request that failed validation, or met a concurrent one, poisons its key: the corrected retry is refused")),
		untestable(r("STRIPE-IDEM-client-keys", S, "IDEM", spec.Should,
			"A client generates an idempotency key, which is a unique key that the server uses to recognize subsequent retries of the same request.",
			"a server that makes its own keys cannot recognize a client's retries"), untestableClient),
		untestable(r("STRIPE-IDEM-pruned-new", S, "IDEM", spec.Should,
			"We generate a new request if a key is reused after the original is pruned.",
			"informational: after pruning, a reused key is a new request"),
			"describes what follows a pruning the page permits but does not require (keys may be kept longer): no answer after it can be wrong"),
		untestable(r("STRIPE-IDEM-no-get-delete", S, "IDEM", spec.Should,
			"Don’t send idempotency keys in GET and DELETE requests because it has no effect.",
			"a client that relies on a key for GET or DELETE"), untestableClient),
		guarantee("All POST requests accept idempotency keys",
			r("STRIPE-IDEM-post-accepts-keys", S, "IDEM", spec.Must,
				"All POST requests accept idempotency keys.",
				"a POST with a key is refused because of the key")),
	}
}
