package client

import "github.com/idscheck/idscheck/checker"

// TransportOutcome classifies the error Do returned: fail when the request
// certainly never reached the target (refused, not dialled), unknown when it
// may have been applied (timeout, reset after sending). A nil error is ok.
func TransportOutcome(err error) checker.Outcome {
	switch {
	case err == nil:
		return checker.OutcomeOK
	case neverSent(err):
		return checker.OutcomeFailed
	}
	return checker.OutcomeUnknown
}
