package atp

import (
	"context"
	"time"

	"github.com/idscheck/idscheck/sut/internal/failpoints"
)

// Named failpoints of the ATP reference server (github.com/pingcap/failpoint,
// evaluated at run time, no source rewriting; GO_FAILPOINTS enables them in
// a process). Enabled with the term `return("exit")` the server calls
// os.Exit(137) there: a real crash (a panic would be recovered by net/http).
const (
	// FailpointAfterChargeBeforeCommit is evaluated after the rail answered
	// that the payment intent succeeded (or declined) and before the row's
	// settle (or compensate) commit: in an execute after its confirm, in the
	// sweep and in a callback after their GET. A crash there leaves a charge
	// the store does not know of: recovery must reconcile, not charge again.
	// "error": the server behaves as if the rail had not answered (the row
	// stays executing).
	FailpointAfterChargeBeforeCommit = "github.com/idscheck/idscheck/sut/atp/after-charge-before-commit"
	// FailpointAfterCommitBeforeReply is evaluated after the commit that
	// ends an execute (settled or compensated) and before its reply.
	FailpointAfterCommitBeforeReply = "github.com/idscheck/idscheck/sut/atp/after-commit-before-reply"
)

// FailpointNoReservationRacyWindow widens the race of the no-reservation
// mutant, and is evaluated nowhere else: after that mutant read an
// authorized row on the read pool, before it charges. Enabled with
// `return("barrier")`, an execute waits there (at most racyWait) for a
// second execute of the same row to have read it too; then both go on and
// both charge. It crashes nothing, so it is not one of Failpoints.
const FailpointNoReservationRacyWindow = "github.com/idscheck/idscheck/sut/atp/no-reservation-racy-window"

// Failpoints lists the crash points (not the racy window).
func Failpoints() []string {
	return []string{FailpointAfterChargeBeforeCommit, FailpointAfterCommitBeforeReply}
}

// racyWait bounds the wait at the racy window for a second request.
const racyWait = 300 * time.Millisecond

var racyBarrier = failpoints.NewBarrier(racyWait)

// racyWindow: when FailpointNoReservationRacyWindow is enabled with
// return("barrier"), the first request of k waits (bounded by racyWait and
// ctx) until a second one arrives; the second releases it and both go on.
func racyWindow(ctx context.Context, k string) {
	racyBarrier.Window(ctx, FailpointNoReservationRacyWindow, k)
}

// evalFailpoint returns the failpoint's value; "exit" ends the process.
func evalFailpoint(name string) string { return failpoints.Eval(name) }
