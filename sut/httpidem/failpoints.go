package httpidem

import (
	"context"
	"time"

	"github.com/idscheck/idscheck/sut/internal/failpoints"
)

// Named failpoints of the endpoint (github.com/pingcap/failpoint, evaluated
// at run time, no source rewriting; GO_FAILPOINTS enables them in a
// process). Enabled with the term `return("exit")` the server calls
// os.Exit(137) there: a real crash (a panic would be recovered by
// net/http).
const (
	// FailpointAfterEffectBeforeCommit is evaluated after the sink
	// answered that it made the payment, before the commit of the payment
	// and of the key's result. A crash there leaves a payment the store
	// does not know of: the restart must resolve it against the sink, not
	// pay again.
	FailpointAfterEffectBeforeCommit = "github.com/idscheck/idscheck/sut/httpidem/after-effect-before-commit"
	// FailpointAfterCommitBeforeReply is evaluated after that commit,
	// before the 201 leaves.
	FailpointAfterCommitBeforeReply = "github.com/idscheck/idscheck/sut/httpidem/after-commit-before-reply"
)

// FailpointNoReservationRacyWindow widens the race of the no-reservation
// mutant, and is evaluated nowhere else: after that mutant found no row
// for the key on the read pool, before it pays. Enabled with
// `return("barrier")`, a request waits there (at most racyWait) for a
// second request with the same key to have found nothing too; then both
// go on and both pay. It crashes nothing, so it is not one of Failpoints.
const FailpointNoReservationRacyWindow = "github.com/idscheck/idscheck/sut/httpidem/no-reservation-racy-window"

// Failpoints lists the crash points (not the racy window).
func Failpoints() []string {
	return []string{FailpointAfterEffectBeforeCommit, FailpointAfterCommitBeforeReply}
}

// racyWait bounds the wait at the racy window for a second request.
const racyWait = 2 * time.Second

var racyBarrier = failpoints.NewBarrier(racyWait)

// racyWindow: when FailpointNoReservationRacyWindow is enabled with
// return("barrier"), the first request of k waits (bounded by racyWait and
// ctx) until a second one arrives; the second releases it and both go on.
func racyWindow(ctx context.Context, k string) {
	racyBarrier.Window(ctx, FailpointNoReservationRacyWindow, k)
}

// evalFailpoint returns the failpoint's value; "exit" ends the process.
func evalFailpoint(name string) string { return failpoints.Eval(name) }
