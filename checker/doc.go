// Package checker checks recorded histories for the exactly-once promise:
// at-least-once delivery, exactly-once effect. It is the engine's part of
// checking and knows no protocol: each profile brings its operation kinds,
// its models and its checks (profiles/<name>), written against what is
// here. It is pure: no network, no clock, no goroutines of its own beyond
// porcupine's.
//
// Inputs are a History (every operation of a run with its call and return
// times and an outcome of ok, fail or unknown, and a kind the profile
// names) and a Ledger (every effect observed where it lands). What is here:
//
//   - History, Operation and Ledger, written to a run directory as JSON
//     Lines and read back (Load) to re-check a run offline;
//   - the Model interface (a partition key, a porcupine model over one
//     partition, named checks, each evidence against one rule) and
//     CheckModels, which runs models over a history;
//   - PorcupineOps, which hands one partition to porcupine with the
//     convention every model shares: an operation whose outcome is unknown
//     may take effect at any instant from its call on, or never;
//   - Report: anomalies with their evidence, queue counts in the manner of
//     Jepsen's total-queue, one result per model, and the failing
//     partitions, which Visualize draws (and nothing else).
//
// Time: every operation takes effect at one instant, within [Call, Return]
// when it got an answer, at any instant from its Call on (or never) when its
// outcome is unknown. A porcupine timeout is LinUnknown, never LinOk.
//
// Recording conventions (what a recorder puts into an Operation):
//   - Outcome: OutcomeOK when an answer came back, OutcomeFailed when the
//     request certainly did nothing (never sent), OutcomeUnknown on a timeout
//     or a reset after sending. Output.Status is the HTTP status whenever one
//     came back; Operation.Effective reads it: a 5xx is unknown (the server
//     may have applied it before failing), a 4xx a refusal, a 404 on a
//     status read an answer (Output.State = StateGone).
//   - KeyID names the API key a request carried (a label or a digest, never
//     the key). Empty: the run's one key.
//   - Bodies are digests of canonical JSON: equal for semantically identical
//     bodies.
//   - Times are nanoseconds since the run started, on one monotonic clock.
//   - Effects carry the publish Key of the unit they serve (the workload puts
//     it in the payload), so effects and publishes meet on it.
package checker
