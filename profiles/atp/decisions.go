package atp

import "github.com/idscheck/idscheck/spec"

// Decision IDs of ATP that checks rest on (--reading ID=NAME).
const (
	DecisionNonceSameKey = "nonce-same-key"
)

// Decisions lists the places where seed 000 leaves a choice open that a
// check needs an answer to.
func Decisions() []spec.Decision {
	return []spec.Decision{
		{
			ID:       DecisionNonceSameKey,
			Profile:  Name,
			Section:  "2, 7",
			Question: "Is a second POST /api/atp/authorize of the same signed intent under the key it was authorized with a retry (the existing row) or a replay of the nonce (409 nonce_consumed)?",
			Readings: []spec.Reading{
				{Name: "row", Section: "2", Quote: "A retry with the same (intent_id, idempotency_key) returns the existing row verbatim",
					Means: "the same signed intent under the same key gets the existing row; 409 nonce_consumed only under another key"},
				{Name: "nonce", Section: "7", Quote: "an agent that replays the same signed intent gets a deterministic409 nonce_consumed",
					Means: "the nonce is consumed by the first authorize: every replay of the signed intent, under its own key too, gets 409 nonce_consumed"},
			},
			Choice: "row: the bundled server answers a retry under the same key with the stored row, and 409 nonce_consumed under any other key (--readings alternate: 409 under every key).",
			Why:    "§2 promises the row to any retry of (intent_id, idempotency_key), on every step; §7 and the §9 example answer every replay of the signed intent with 409. Under another key both readings answer 409.",
		},
	}
}
