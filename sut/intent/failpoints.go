package intent

import (
	"context"
	"errors"
	"time"

	"github.com/idscheck/idscheck/sut/internal/failpoints"
)

// Named failpoints of the reference server (github.com/pingcap/failpoint,
// evaluated at run time, no source rewriting). Enabled with the term
// `return("exit")` the server calls os.Exit(137) there: a real crash.
// `return("error")` makes the point fail softly (see each name).
const (
	// FailpointAfterCommitBeforeReply is evaluated by the writer after a
	// batch's commit is durable and before any of its replies: a crash here
	// loses the replies of committed work. "error": the batch's requests
	// answer 503 although their writes landed (an ambiguous outcome).
	FailpointAfterCommitBeforeReply = "github.com/idscheck/idscheck/sut/intent/after-commit-before-reply"
	// FailpointAfterClaimBeforeResponse is evaluated after a claim committed,
	// before its 200 is written: the worker never learns its lease.
	// "error": the claim answers 503 while the lease is held.
	FailpointAfterClaimBeforeResponse = "github.com/idscheck/idscheck/sut/intent/after-claim-before-response"
	// FailpointInsideCleanup is evaluated at the start of every cleanup
	// pass. "error": the pass fails (the lazy pass then backs off 60 s).
	FailpointInsideCleanup = "github.com/idscheck/idscheck/sut/intent/inside-cleanup"
)

// FailpointIdemRacyWindow widens the race of the idem-check-racy mutant, and
// is evaluated nowhere else: after that mutant's idempotency lookup found
// nothing, before its write. Enabled with `return("barrier")`, a request
// waits there (at most idemBarrierWait) for a second request with the same
// API key and Idempotency-Key to have found nothing too, then both go on
// and both write: a concurrent duplicate always gets through, where without
// it the race shows only when the scheduler happens to interleave the two.
// Tests enable it so that the mutant is caught at every run. It crashes
// nothing, so it is not one of Failpoints (the chaos command's crash points).
const FailpointIdemRacyWindow = "github.com/idscheck/idscheck/sut/intent/idem-racy-window"

// FailpointClaimRacyWindow does for the claim-non-atomic mutant what
// FailpointIdemRacyWindow does for idem-check-racy: after that mutant's read
// picked an intent, before its write, a claim waits (at most
// idemBarrierWait) for a second claim that picked the same intent; then
// both write, and two workers hold one intent at every run.
const FailpointClaimRacyWindow = "github.com/idscheck/idscheck/sut/intent/claim-racy-window"

// idemBarrierWait bounds the wait at a racy-window failpoint for a second
// request: a request with no concurrent twin is delayed this much.
const idemBarrierWait = 300 * time.Millisecond

// idemBarrier pairs the requests waiting at FailpointIdemRacyWindow, by API
// key and Idempotency-Key.
var idemBarrier = failpoints.NewBarrier(idemBarrierWait)

// failpointIdemRacyWindow is FailpointIdemRacyWindow: when enabled, the first
// request of a key waits (bounded by idemBarrierWait and ctx) until a second
// one arrives; the second releases it and goes on at once.
func failpointIdemRacyWindow(ctx context.Context, apiKey, idemKey string) {
	racyWindow(ctx, FailpointIdemRacyWindow, "idem\x00"+apiKey+"\x00"+idemKey)
}

// failpointClaimRacyWindow is FailpointClaimRacyWindow for a claim that
// picked intent id.
func failpointClaimRacyWindow(ctx context.Context, id string) {
	racyWindow(ctx, FailpointClaimRacyWindow, "claim\x00"+id)
}

// racyWindow: when failpoint name is enabled with return("barrier"), the
// first request of key waits (bounded by idemBarrierWait and ctx) until a
// second one arrives; the second releases it and goes on at once.
func racyWindow(ctx context.Context, name, k string) {
	idemBarrier.Window(ctx, name, k)
}

// Failpoints lists the crash points above (not FailpointIdemRacyWindow).
func Failpoints() []string {
	return []string{FailpointAfterCommitBeforeReply, FailpointAfterClaimBeforeResponse, FailpointInsideCleanup}
}

// errFailpoint is the soft failure of a failpoint enabled with return("error").
var errFailpoint = errors.New("failpoint")

// evalFailpoint returns the failpoint's value; "exit" ends the process.
func evalFailpoint(name string) string { return failpoints.Eval(name) }

// failpointAfterCommit is FailpointAfterCommitBeforeReply, run by the
// writer after each durable commit: "exit" crashes there, "error" answers
// the batch with a failure although its writes landed.
func failpointAfterCommit() error {
	if evalFailpoint(FailpointAfterCommitBeforeReply) == "error" {
		return errFailpoint
	}
	return nil
}

func failpointAfterClaim(s *Server) error {
	if evalFailpoint(FailpointAfterClaimBeforeResponse) == "error" {
		return errFailpoint
	}
	return nil
}

func failpointInsideCleanup() error {
	if evalFailpoint(FailpointInsideCleanup) == "error" {
		return errFailpoint
	}
	return nil
}
