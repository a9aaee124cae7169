package client

import (
	"github.com/idscheck/idscheck/verdict"
)

// TransportOutcome classifies the error Do returned: fail when the request
// certainly never reached the target (refused, not dialled), unknown when it
// may have been applied (timeout, reset after sending). A nil error is ok.
func TransportOutcome(err error) verdict.Outcome {
	switch {
	case err == nil:
		return verdict.OutcomeOK
	case neverSent(err):
		return verdict.OutcomeFailed
	}
	return verdict.OutcomeUnknown
}
