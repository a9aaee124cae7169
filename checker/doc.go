// Package checker checks recorded histories for the exactly-once promise:
// at-least-once delivery, exactly-once effect. It is pure: no network, no
// clock, no goroutines of its own beyond porcupine's.
//
// Inputs are a History (every operation of a run with its call and return
// times and an outcome of ok, fail or unknown) and a Ledger (every effect
// observed where it lands). Check runs
//
//   - two porcupine models, partitioned by key: the idempotency record (per
//     idempotency key: the first accepted body fixes the response, the same
//     body replays it, another body is a conflict) and the intent lease (per
//     intent: claims, tokens, extend, fulfill, fail, expiry, status reads);
//     Idempotency partitions are decided exactly in linear time (idemDecide,
//     held equal to porcupine's search by a test), lease partitions whose
//     operations are ordered in time by stepping the model, the rest by
//     porcupine;
//   - named checks that say in plain words what the models can only call
//     illegal: double lease, stale token accepted, fulfilled twice,
//     idempotency violation;
//   - queue checks in the manner of Jepsen's total-queue: lost, duplicated,
//     unexpected, recovered.
//
// An operation with an unknown outcome may or may not have happened: the
// models allow both, it is never an anomaly by itself, and it explains
// effects (recovered). A porcupine timeout is LinUnknown, never LinOk.
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
//   - Bodies are digests of canonical JSON: equal for semantically identical
//     bodies. Output.Body of a publish is the digest of the response body a
//     replay must repeat.
//   - Output.LeaseNs of a claim is the lease the server grants, in the
//     harness's time (claim_timeout divided by any time scale); 0 if unknown
//     (then no expiry is judged).
//   - Times are nanoseconds since the run started, on one monotonic clock.
//   - Effects carry the publish Key of the unit they serve (the workload puts
//     it in the payload), so effects and publishes meet on it.
//
// Admin operations (cancel, retry, purge) are not modelled: a history that
// contains their consequences may be judged illegal.
package checker
