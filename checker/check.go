package checker

import (
	"github.com/idscheck/idscheck/verdict"
	"time"
)

// AnomalyKind names one way a history breaks the exactly-once promise.
type AnomalyKind string

const (
	// Lost: a publish was acknowledged, and its unit of work never took
	// effect nor was fulfilled (dead or expired ones too, when Options say so).
	Lost AnomalyKind = "lost"
	// Duplicated: a unit of work took effect more often than allowed, or was
	// served by more than one intent.
	Duplicated AnomalyKind = "duplicated"
	// Unexpected: an effect no publish asked for (no attempt with its key
	// could have taken effect).
	Unexpected AnomalyKind = "unexpected"
	// Recovered is not a violation: a publish whose outcome was unknown did
	// take effect. Counted and shown, never a failure.
	Recovered AnomalyKind = "recovered"
	// DoubleLease: two claims of one intent whose leases certainly overlap,
	// the first not released.
	DoubleLease AnomalyKind = "double-lease"
	// StaleTokenAccepted: extend, fulfill or fail succeeded with a token that
	// a later claim had certainly superseded, or whose lease had certainly
	// expired.
	StaleTokenAccepted AnomalyKind = "stale-token-accepted"
	// FulfilledTwice: after a fulfill of an intent succeeded, another fulfill
	// or a claim of it succeeded.
	FulfilledTwice AnomalyKind = "fulfilled-twice"
	// AttemptsExceeded: an intent was claimed more often than the
	// max_attempts its publisher set; it should have been dead.
	AttemptsExceeded AnomalyKind = "attempts-exceeded"
	// DeadTooEarly: an intent was read dead before max_attempts claims of
	// it could have been made: dead-lettered early (or cancelled by an
	// admin, which the history does not hold).
	DeadTooEarly AnomalyKind = "dead-too-early"
	// IdempotencyViolation: the idempotency record broke: the same body under
	// the same key got a different response, a different body was accepted
	// instead of rejected, or a conflict was reported with no different body.
	IdempotencyViolation AnomalyKind = "idempotency-violation"
	// NotLinearizable: porcupine found no order of a partition's operations
	// that its model accepts, and no more specific check named the cause.
	NotLinearizable AnomalyKind = "not-linearizable"
)

// Violation reports whether an anomaly of this kind breaks a promise
// (everything but Recovered).
func (k AnomalyKind) Violation() bool { return k != Recovered }

// Anomaly is one broken promise with its minimal evidence: the operations and
// effects that show it, and a plain-language explanation.
type Anomaly struct {
	Kind        AnomalyKind `json:"kind"`
	Key         string      `json:"key"` // idempotency key or intent id the anomaly is about
	Explanation string      `json:"explanation"`
	Ops         []Operation `json:"ops,omitempty"`
	Effects     []Effect    `json:"effects,omitempty"`
}

// LinResult is the result of a linearizability check; like porcupine's, an
// Unknown (the checker ran out of time) never reads as Ok.
type LinResult string

const (
	LinOk      LinResult = "Ok"
	LinIllegal LinResult = "Illegal"
	LinUnknown LinResult = "Unknown"
)

// Model names of the porcupine models Check runs.
const (
	ModelIdempotency = "idempotency" // partitioned by idempotency key, publish ops
	ModelLease       = "lease"       // partitioned by intent id, claim/extend/fulfill/fail/status ops
)

// ModelCheck is the linearizability result of one model over the history.
type ModelCheck struct {
	Model      string    `json:"model"`
	Result     LinResult `json:"result"`
	Ops        int       `json:"ops"`
	Partitions int       `json:"partitions"`
	Failing    []string  `json:"failing,omitempty"` // keys of the partitions found illegal (the first 100)
	// FailingTotal is how many partitions were found illegal.
	FailingTotal int `json:"failing_total,omitempty"`
}

// Partition is the operations of one key under one model: what a
// visualization of a failing partition needs.
type Partition struct {
	Model string      `json:"model"`
	Key   string      `json:"key"`
	Ops   []Operation `json:"ops"`
	// Bounds (lease partitions) is what the rest of the history says of the
	// intent: when a publish can have created it, its max_attempts.
	Bounds *IntentBounds `json:"bounds,omitempty"`
}

// QueueStats counts units of work in the manner of Jepsen's total-queue.
// A unit is one publish Key.
type QueueStats struct {
	Attempted    int `json:"attempted"`    // keys with at least one publish
	Acknowledged int `json:"acknowledged"` // keys with at least one publish OK
	Effected     int `json:"effected"`     // keys with at least one effect
	Fulfilled    int `json:"fulfilled"`    // keys whose intent was seen fulfilled
	Lost         int `json:"lost"`
	Duplicated   int `json:"duplicated"`
	Unexpected   int `json:"unexpected"`
	Recovered    int `json:"recovered"`
	Dead         int `json:"dead"`    // acknowledged keys whose intent was last seen dead
	Expired      int `json:"expired"` // acknowledged keys whose intent was last seen gone
	Pending      int `json:"pending"` // acknowledged, no effect, last seen open or claimed (Options.Undrained)
}

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

// Report is what Check found. Verdict sums it up.
type Report struct {
	Ops       int                 `json:"ops"`
	Effects   int                 `json:"effects"`
	Queue     QueueStats          `json:"queue"`
	Models    []ModelCheck        `json:"models"`
	Anomalies []Anomaly           `json:"anomalies,omitempty"`
	Counts    map[AnomalyKind]int `json:"counts"`
	// Options are the effective options of the check (defaults filled in).
	Options Options `json:"options"`
	// FirstHiddenClaim is the call time of the earliest claim whose outcome
	// and intent are unknown (math.MaxInt64 if none): the models need it to
	// re-check FailingPartitions alone.
	FirstHiddenClaim int64 `json:"first_hidden_claim"`
	// HiddenClaims are the call times of the earliest such claims (at most
	// 20, the most any intent can use): the lease model needs them to
	// re-check FailingPartitions alone.
	HiddenClaims []int64 `json:"hidden_claims,omitempty"`
	// ExtendReading is the reading of extend the lease model judged the
	// history under ("from-now" or "added", spec.DecisionExtend): one for
	// the whole history, the one that leaves fewer intents illegal.
	ExtendReading string `json:"extend_reading,omitempty"`
	// FailingPartitions holds, for each partition porcupine found illegal,
	// its operations: Visualize renders these and nothing else.
	FailingPartitions []Partition `json:"failing_partitions,omitempty"`
	// contradicted counts named findings dropped because their model
	// accepted the partition (never, the tests say).
	contradicted int
}

// Verdict is Fail when any violation was found, Unknown when none was found
// but a model could not be decided, Pass otherwise.
func (r Report) Verdict() verdict.Verdict {
	for k, n := range r.Counts {
		if n > 0 && k.Violation() {
			return verdict.Fail
		}
	}
	v := verdict.Pass
	for _, m := range r.Models {
		switch m.Result {
		case LinIllegal:
			return verdict.Fail
		case LinUnknown:
			v = verdict.Unknown
		}
	}
	return v
}

// Check checks a history and a ledger: porcupine models per key, the lease
// checks, the idempotency checks and the queue checks. It is pure: same
// input, same report (porcupine's own goroutines aside).
func Check(h History, l Ledger, opts Options) Report {
	opts = opts.withDefaults()
	c := newCheck(h, l, opts)
	c.run()
	c.report.contradicted = c.contradicted
	return c.report
}

func (o Options) withDefaults() Options {
	if o.ClockSlack == 0 {
		o.ClockSlack = 50 * time.Millisecond
	}
	if o.ConflictStatus == 0 {
		o.ConflictStatus = 422
	}
	if o.MaxExamples == 0 {
		o.MaxExamples = 20
	}
	return o
}
