package ids

import (
	"context"
	"time"

	"github.com/idscheck/idscheck/sut/internal/failpoints"
)

// Named failpoints of the IDS reference server (github.com/pingcap/failpoint,
// evaluated at run time, no source rewriting; GO_FAILPOINTS enables them in
// a process). Enabled with the term `return("exit")` the server calls
// os.Exit(137) there: a real crash (a panic would be recovered by net/http).
const (
	// FailpointAfterEffectBeforeCommit is evaluated after the sink acted
	// (its POST answered) and before the outcome is committed: in a
	// request, in the resumer, and in the outbox dispatcher (after the POST,
	// before the row is marked sent). A crash there leaves an effect the
	// store does not know of: recovery must reconcile, not act again.
	// "error": the server behaves as if the sink had not answered (the
	// command answers 202 and is left to the resumer).
	FailpointAfterEffectBeforeCommit = "github.com/idscheck/idscheck/sut/ids/after-effect-before-commit"
	// FailpointAfterCommitBeforeReply is evaluated after the outcome of a
	// first delivery is durable and before its reply is written.
	FailpointAfterCommitBeforeReply = "github.com/idscheck/idscheck/sut/ids/after-commit-before-reply"
)

// FailpointNoReservationRacyWindow widens the race of the no-reservation
// mutant, and is evaluated nowhere else: after that mutant's lookup found
// nothing, before its write. Enabled with `return("barrier")`, a request
// waits there (at most racyWait) for a second request of the same tenant
// and key to have found nothing too; then both go on and both execute. It
// crashes nothing, so it is not one of Failpoints.
const FailpointNoReservationRacyWindow = "github.com/idscheck/idscheck/sut/ids/no-reservation-racy-window"

// Failpoints lists the crash points (not the racy window).
func Failpoints() []string {
	return []string{FailpointAfterEffectBeforeCommit, FailpointAfterCommitBeforeReply}
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
