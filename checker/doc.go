// Package checker checks recorded histories for the exactly-once promise:
// at-least-once delivery, exactly-once effect. It is pure: no network, no
// clock, no goroutines of its own beyond porcupine's.
//
// Inputs are a History (every operation of a run with its call and return
// times and an outcome of ok, fail or unknown) and a Ledger (every effect
// observed where it lands). Check runs
//
//   - two porcupine models, partitioned by key: the idempotency record (per
//     API key and idempotency key: the first accepted body fixes the
//     response, the same body replays it, another body is a conflict) and
//     the intent lease (per intent: claims, tokens, extend, fulfill, fail,
//     expiry, status reads; see leasemodel.go). Idempotency partitions are
//     decided exactly in linear time (idemDecide, held equal to porcupine's
//     search by a test), lease partitions whose operations are ordered in
//     time by stepping the model, the rest by porcupine;
//   - named checks that say in plain words what the models can only call
//     illegal: double lease, stale token accepted, fulfilled twice,
//     attempts exceeded, dead too early, an intent seen before any publish
//     could create it, idempotency violation. Each is proven with its
//     model's semantics, and stands only where its model found the
//     partition illegal (or could not decide it): a named finding never
//     contradicts its model;
//   - queue checks in the manner of Jepsen's total-queue: lost, duplicated,
//     unexpected, recovered, per acknowledged intent and per key.
//
// Time: every operation takes effect at one instant, within [Call, Return]
// when it got an answer, at any instant from its Call on (or never) when its
// outcome is unknown; an order of operations is an order of instants, equal
// instants overlap. The lease model keeps what the operations placed so far
// prove about the instant of the last one and the lease's expiry (a zone,
// zone.go), so every fact a history proves is used: the order attempt
// numbers fix, the bounds every answered read, extend and 404 give, and the
// real-time order of calls and returns. Durations the server measures
// (lease, extension) are taken within Options.ClockSlack.
//
// Readings (spec/intent_decisions.go): extend sets the expiry to now +
// seconds or adds seconds to it; one reading holds for the whole history
// (from-now first, "added" when it explains more; Report.ExtendReading).
// Lease expiry is lazy, and an expired lease is claimable at once or after a
// backoff: the publisher's backoff_base and the target's time scale are not
// recorded, so backoff is taken at its least, which allows both.
//
// What the models cannot see from one partition is gathered first (see
// creation.go): which publish can have created each intent (one answered
// with its id, one of the same scope and body whose answer was lost, or, for
// an intent no answer names, a scope no answer names, one intent per scope,
// matched to the intents), when, and with which max_attempts; and the claims
// whose answer and intent were lost, which a partition uses earliest first
// (each takes one intent: hiddenBudget holds the partitions to their
// number).
//
// An operation with an unknown outcome may or may not have happened: the
// models allow both, it is never an anomaly by itself, and it explains
// effects (recovered), from its call on. A porcupine timeout is LinUnknown,
// never LinOk.
//
// Recording conventions (what a recorder puts into an Operation):
//   - Outcome: OutcomeOK when an answer came back, OutcomeFailed when the
//     request certainly did nothing (never sent), OutcomeUnknown on a timeout
//     or a reset after sending. Output.Status is the HTTP status whenever one
//     came back; Operation.Effective reads it: a 5xx is unknown (the server
//     may have applied it before failing), a 4xx a refusal (the models read
//     404 as "lease lost" and Options.ConflictStatus as a conflict), a 404 on
//     a status read an answer (Output.State = StateGone). A claim answered
//     204 has no Key.
//   - KeyID names the API key a request carried (a label or a digest, never
//     the key): idempotency records are scoped per API key. Empty: the
//     run's one key.
//   - Bodies are digests of canonical JSON: equal for semantically identical
//     bodies. Output.Body of a publish is the digest of the response body a
//     replay must repeat. Input.MaxAttempts of a publish is its
//     max_attempts (3 when the body leaves it out; 0 when not recorded).
//   - Output.LeaseNs of a claim is the lease the server grants, in the
//     harness's time (claim_timeout divided by any time scale); 0 if unknown
//     (then the lease may be of any length).
//   - Times are nanoseconds since the run started, on one monotonic clock.
//   - Effects carry the publish Key of the unit they serve (the workload puts
//     it in the payload), so effects and publishes meet on it.
//
// Admin operations (cancel, retry, purge) are not modelled: a history that
// contains their consequences is judged illegal (an intent read dead before
// max_attempts is dead too early).
package checker
