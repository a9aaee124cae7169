package intent

// The Intent Protocol's checks (Check) judge recorded histories for the exactly-once promise:
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
// Readings (decisions.go): extend sets the expiry to now +
// seconds or adds seconds to it; one reading holds for the whole history
// (from-now first, "added" when it explains more; CheckDetail.ExtendReading).
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
//
// (This comment is the checks' overview, not the package's doc.)

import (
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/idscheck/idscheck/checker"
)

// The Intent Protocol's anomaly kinds beyond the generic ones.
const (
	// DoubleLease: two claims of one intent whose leases certainly overlap,
	// the first not released.
	DoubleLease checker.AnomalyKind = "double-lease"
	// StaleTokenAccepted: extend, fulfill or fail succeeded with a token that
	// a later claim had certainly superseded, or whose lease had certainly
	// expired.
	StaleTokenAccepted checker.AnomalyKind = "stale-token-accepted"
	// FulfilledTwice: after a fulfill of an intent succeeded, another fulfill
	// or a claim of it succeeded.
	FulfilledTwice checker.AnomalyKind = "fulfilled-twice"
	// AttemptsExceeded: an intent was claimed more often than the
	// max_attempts its publisher set; it should have been dead.
	AttemptsExceeded checker.AnomalyKind = "attempts-exceeded"
	// DeadTooEarly: an intent was read dead before max_attempts claims of
	// it could have been made: dead-lettered early (or cancelled by an
	// admin, which the history does not hold).
	DeadTooEarly checker.AnomalyKind = "dead-too-early"
)

// ModelLease names the intent-lease model in a Report.
const ModelLease = "lease" // partitioned by intent id, claim/extend/fulfill/fail/status ops

// defaultClockSlack is Options.ClockSlack when none is given.
const defaultClockSlack = 50 * time.Millisecond

// Options say what the workload promised and how long the checker may work.
type Options struct {
	// Timeout bounds each porcupine run over the history; 0 means no bound.
	// Running out of time makes a model's result LinUnknown, never LinOk.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// MaxEffects is how many effects one key may have: 0 means 1
	// (exactly-once effect), negative means any number (at-least-once
	// execution with idempotent workers: only a second intent is duplicated).
	MaxEffects int `json:"max_effects,omitempty"`
	// DeadIsLost counts an acknowledged unit whose intent ended dead as lost
	// (for workloads where workers never fail on purpose).
	DeadIsLost bool `json:"dead_is_lost,omitempty"`
	// ExpiredIsLost counts an acknowledged unit whose intent vanished (404 on
	// a status read) without effect as lost.
	ExpiredIsLost bool `json:"expired_is_lost,omitempty"`
	// MustFinish says every acknowledged unit was driven to an end: one
	// whose work ran but whose intent was last seen open or claimed (its
	// completion never landed, e.g. a lease that never lapses) is lost too,
	// not only one that never ran. Pending instead when Undrained.
	MustFinish bool `json:"must_finish,omitempty"`
	// Undrained says the workload stopped without waiting for every unit to
	// finish: units still open or claimed at the end are Pending, not Lost.
	Undrained bool `json:"undrained,omitempty"`
	// ClockSlack is how far a duration the server measures (a lease, an
	// extension) may differ from its length on the harness's clock, when
	// judging that a lease had certainly expired or was certainly still
	// live (default 50 ms; negative: none, the two clocks agree).
	ClockSlack time.Duration `json:"clock_slack_ns,omitempty"`
	// ConflictStatus is the status that reports an idempotency key reused
	// with a different body (default 422, seed 004 §7.2).
	ConflictStatus int `json:"conflict_status,omitempty"`
	// SkipQueue turns the queue checks off, for workloads that execute
	// nothing (no workers, no effect sink): lost would be meaningless.
	SkipQueue bool `json:"skip_queue,omitempty"`
	// MaxExamples bounds how many anomalies of each kind are kept with
	// evidence; Counts hold the totals (default 20).
	MaxExamples int `json:"max_examples,omitempty"`
}

// Check checks a history and a ledger: porcupine models per key, the lease
// checks, the idempotency checks and the queue checks. It is pure: same
// input, same report (porcupine's own goroutines aside).
func Check(h checker.History, l checker.Ledger, opts Options) checker.Report {
	opts = opts.withDefaults()
	c := newCheck(h, l, opts)
	c.run()
	c.detail.contradicted = c.contradicted
	c.report.Detail = &c.detail
	if len(c.report.FailingPartitions) > 0 {
		m := partitionModel(opts, &c.detail, c.report.FailingPartitions)
		c.report.PartitionModel = &m
	}
	return c.report
}

// CheckDetail is what Check reports besides the generic Report (its
// Report.Detail): what the models need to re-check FailingPartitions alone.
type CheckDetail struct {
	// FirstHiddenClaim is the call time of the earliest claim whose outcome
	// and intent are unknown (math.MaxInt64 if none).
	FirstHiddenClaim int64 `json:"first_hidden_claim"`
	// HiddenClaims are the call times of the earliest such claims (at most
	// 20, the most any intent can use).
	HiddenClaims []int64 `json:"hidden_claims,omitempty"`
	// ExtendReading is the reading of extend the lease model judged the
	// history under ("from-now" or "added", DecisionExtend): one for the
	// whole history, the one that leaves fewer intents illegal.
	ExtendReading string `json:"extend_reading,omitempty"`
	// contradicted counts named findings dropped because their model
	// accepted the partition (never, the tests say).
	contradicted int
}

// detailOf is the CheckDetail of a report Check made.
func detailOf(r checker.Report) *CheckDetail {
	if d, ok := r.Detail.(*CheckDetail); ok {
		return d
	}
	return &CheckDetail{}
}

// partitionModel is the porcupine model the failing partitions parts are
// drawn with: the models under the options, the hidden claims and the
// reading of extend the check used, each lease partition with its bounds.
func partitionModel(opts Options, d *CheckDetail, parts []checker.Partition) porcupine.Model {
	env := &modelEnv{slack: max(int64(opts.ClockSlack), 0), conflictStatus: opts.ConflictStatus, hidden: d.HiddenClaims, intents: map[string]*IntentBounds{}}
	if d.ExtendReading == "added" {
		env.reading = readingAdded
	} else {
		env.reading = readingFromNow
	}
	for _, p := range parts {
		if b, ok := p.Bounds.(*IntentBounds); ok && b != nil {
			env.intents[p.Key] = b
		}
	}
	return env.porcupineModel()
}

func (o Options) withDefaults() Options {
	if o.ClockSlack == 0 {
		o.ClockSlack = defaultClockSlack
	}
	if o.ConflictStatus == 0 {
		o.ConflictStatus = 422
	}
	if o.MaxExamples == 0 {
		o.MaxExamples = 20
	}
	return o
}
