package httpidem

import "github.com/idscheck/idscheck/spec"

// Decision IDs of the http-idempotency profile that checks rest on
// (--reading ID=NAME).
const (
	// DecisionNewKeySeenPayload: is a request under a new key whose
	// payload was already seen a first-time request?
	DecisionNewKeySeenPayload = "new-key-seen-payload"
)

// Decisions lists the places where a text of the profile leaves a choice
// open that a check needs an answer to.
func Decisions() []spec.Decision {
	return []spec.Decision{
		{
			ID:       DecisionNewKeySeenPayload,
			Profile:  Name,
			Section:  "2.4, 2.6",
			Question: "Under the IETF draft, is a request under a new key with the payload (the fingerprint) of an earlier request a first-time request (processed: a new thing) or may it be refused (a 4xx, nothing created)?",
			Readings: []spec.Reading{
				{Name: "pair", Section: "2.6", Quote: "Duplicate request (idempotency key and fingerprint has been seen)",
					Means: "the key and the fingerprint together identify a request: one whose key was not seen is a first-time request, processed normally (a 2xx, and it creates its own thing) whatever its payload"},
				{Name: "fingerprint", Section: "2.6", Quote: "First time request (idempotency key and fingerprint has not been seen)",
					Means: "a request is first-time only when neither its key nor its fingerprint has been seen: one under a new key with a seen payload may be refused (a 4xx that creates nothing)"},
			},
			Choice: "pair: the bundled endpoint identifies a request by its key (its fingerprint only tells another payload under a used key, §2.7's 422): a new key is processed, whatever its payload. It has no --readings alternate.",
			Why: "§2.4 says \"An idempotency fingerprint MAY be used in conjunction with an idempotency key to determine the uniqueness of a request\" without saying how the two combine; §2.6 calls a request a duplicate when its \"idempotency key and fingerprint has been seen\" and first-time when its \"idempotency key and fingerprint has not been seen\", which leaves a new key with a seen fingerprint in neither case. " +
				"Under both readings, answering it with the earlier request's result (a 2xx that creates nothing: deduplicating on the payload alone) breaks §2.5's \"Identify idempotency key from the HTTP `Idempotency-Key` request header field\".",
		},
	}
}

// DecisionByID returns the decision of the profile with the given ID.
func DecisionByID(id string) (spec.Decision, bool) {
	for _, d := range Decisions() {
		if d.ID == id {
			return d, true
		}
	}
	return spec.Decision{}, false
}
