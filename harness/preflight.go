package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/idscheck/idscheck/features"
)

// Preflight proves, before any scenario, that the target speaks the
// profile's protocol and that each credential it was given works: a few
// harmless calls (its health route, one authenticated read per credential).
// It returns nil, a *NotProtocolError, a *CredentialError, or another error
// (the target could not be asked: treated as unreachable). A preflight
// failure produces no rule verdict. timeout bounds each call.
type Preflight func(ctx context.Context, t features.Target, timeout time.Duration) error

// NotProtocolError says the target answered, but not as the protocol does:
// "GET /health answered 404: is this an Intent bus?". The run exits 3.
type NotProtocolError struct {
	Call   string // what was sent: "GET /health"
	Answer string // what came back: "404 text/html …"
	Hint   string // what the profile expected of it: "is this an Intent bus?"
}

func (e *NotProtocolError) Error() string {
	s := fmt.Sprintf("%s answered %s", e.Call, e.Answer)
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// CredentialError says the target refuses a credential it was given: "the
// target refuses the API key: 401 …". The run exits 2: a configuration
// answer, not a rule verdict.
type CredentialError struct {
	Credential string // "the API key", "admin-token"
	Call       string // what was sent with it
	Answer     string // the refusal, status and a clipped body
}

func (e *CredentialError) Error() string {
	return fmt.Sprintf("the target refuses %s: %s answered %s", e.Credential, e.Call, e.Answer)
}
