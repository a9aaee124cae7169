package sut

import (
	"errors"
	"os"

	"github.com/pingcap/failpoint"
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
	FailpointAfterCommitBeforeReply = "github.com/idscheck/idscheck/sut/after-commit-before-reply"
	// FailpointAfterClaimBeforeResponse is evaluated after a claim committed,
	// before its 200 is written: the worker never learns its lease.
	// "error": the claim answers 503 while the lease is held.
	FailpointAfterClaimBeforeResponse = "github.com/idscheck/idscheck/sut/after-claim-before-response"
	// FailpointInsideCleanup is evaluated at the start of every cleanup
	// pass. "error": the pass fails (the lazy pass then backs off 60 s).
	FailpointInsideCleanup = "github.com/idscheck/idscheck/sut/inside-cleanup"
)

// Failpoints lists the names above.
func Failpoints() []string {
	return []string{FailpointAfterCommitBeforeReply, FailpointAfterClaimBeforeResponse, FailpointInsideCleanup}
}

// errFailpoint is the soft failure of a failpoint enabled with return("error").
var errFailpoint = errors.New("failpoint")

// evalFailpoint returns the failpoint's value; "exit" ends the process.
func evalFailpoint(name string) string {
	v, err := failpoint.Eval(name)
	if err != nil {
		return ""
	}
	s, _ := v.(string)
	if s == "exit" {
		os.Exit(137)
	}
	return s
}

func failpointAfterCommit(s *Server) {
	if evalFailpoint(FailpointAfterCommitBeforeReply) == "error" {
		s.w.softFail = true
	}
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
