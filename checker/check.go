package checker

import (
	"github.com/anishathalye/porcupine"
	"github.com/idscheck/idscheck/verdict"
)

// AnomalyKind names one way a history breaks the exactly-once promise.
type AnomalyKind string

const (
	// Lost: a publish was acknowledged, and its unit of work never took
	// effect nor was completed (nor ended otherwise, when the profile's
	// options say that counts as lost).
	Lost AnomalyKind = "lost"
	// Duplicated: a unit of work took effect more often than allowed, or was
	// served by more than one instance (two units created for one key).
	Duplicated AnomalyKind = "duplicated"
	// Unexpected: an effect no publish asked for (no attempt with its key
	// could have taken effect).
	Unexpected AnomalyKind = "unexpected"
	// Recovered is not a violation: a publish whose outcome was unknown did
	// take effect. Counted and shown, never a failure.
	Recovered AnomalyKind = "recovered"
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
	Key         string      `json:"key"` // the idempotency key or the unit the anomaly is about
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

// ModelIdempotency names the idempotency-record model (partitioned by
// idempotency key: the first accepted body fixes the response, the same body
// replays it, another body is refused) in a Report.
const ModelIdempotency = "idempotency"

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
	// Bounds is what the rest of the history says of the partition's
	// object, in the profile's own type, when its model needs it (nil:
	// nothing).
	Bounds any `json:"bounds,omitempty"`
}

// QueueStats counts units of work in the manner of Jepsen's total-queue.
// A unit is one publish Key.
type QueueStats struct {
	Attempted    int `json:"attempted"`    // keys with at least one publish
	Acknowledged int `json:"acknowledged"` // keys with at least one publish OK
	Effected     int `json:"effected"`     // keys with at least one effect
	Fulfilled    int `json:"fulfilled"`    // keys whose unit was seen completed
	Lost         int `json:"lost"`
	Duplicated   int `json:"duplicated"`
	Unexpected   int `json:"unexpected"`
	Recovered    int `json:"recovered"`
	Dead         int `json:"dead"`    // acknowledged keys whose unit was last seen given up (dead-lettered)
	Expired      int `json:"expired"` // acknowledged keys whose unit was last seen gone
	Pending      int `json:"pending"` // acknowledged, no effect, still under way when an undrained run stopped
}

// Report is what a profile's checks found in a run. Verdict sums it up.
type Report struct {
	Ops       int                 `json:"ops"`
	Effects   int                 `json:"effects"`
	Queue     QueueStats          `json:"queue"`
	Models    []ModelCheck        `json:"models"`
	Anomalies []Anomaly           `json:"anomalies,omitempty"`
	Counts    map[AnomalyKind]int `json:"counts"`
	// Options are the effective options of the check (defaults filled
	// in), in the checking profile's own type.
	Options any `json:"options,omitempty"`
	// Detail is what the checking profile found besides the above, in its
	// own type (nil: nothing).
	Detail any `json:"detail,omitempty"`
	// FailingPartitions holds, for each partition porcupine found illegal,
	// its operations: Visualize renders these and nothing else.
	FailingPartitions []Partition `json:"failing_partitions,omitempty"`
	// PartitionModel is the porcupine model FailingPartitions are drawn
	// with, set by the check that found them (not recorded: a report read
	// back from JSON has none, and is drawn by checking its run again).
	PartitionModel *porcupine.Model `json:"-"`
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
