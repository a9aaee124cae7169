package harness

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idscheck/idscheck/client"
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

// ProbeCredential sends one harmless call req with the credential named
// (what the error calls it: "the API key", "the admin token"): a 401 or 403
// is a *CredentialError; any other answer is returned for the caller to
// judge. A transport error is returned as it is (the target could not be
// asked).
func ProbeCredential(ctx context.Context, c *client.Client, credential string, req client.Request) (*client.Response, error) {
	r, err := c.Do(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.Path, err)
	}
	if r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden {
		return r, &CredentialError{Credential: credential, Call: req.Method + " " + req.Path, Answer: Answer(r)}
	}
	return r, nil
}

// Answer is a reply as a preflight error shows it: its status and the
// start of its body.
func Answer(r *client.Response) string {
	body := strings.Join(strings.Fields(string(r.Body)), " ")
	if len(body) > 120 {
		body = body[:120] + "…"
	}
	if body == "" {
		return fmt.Sprint(r.Status)
	}
	return fmt.Sprintf("%d %s", r.Status, body)
}

// ProbeRoute is the preflight of a binding with one route every target
// serves (hint says so, e.g. "a target serves its registry there: is this
// one of them?"): GET path with the API key must answer
// 2xx. A 401 or 403 is a refused key (*CredentialError), another answer a
// target that is not the protocol (*NotProtocolError).
func ProbeRoute(ctx context.Context, t features.Target, timeout time.Duration, path, hint string) error {
	c, err := client.New(t.BaseURL, client.Options{Name: "preflight", APIKey: t.APIKey, Timeout: timeout})
	if err != nil {
		return err
	}
	r, err := ProbeCredential(ctx, c, "the API key", client.Request{Method: http.MethodGet, Path: path})
	if err != nil {
		return err
	}
	if r.Status < 200 || r.Status > 299 {
		return &NotProtocolError{Call: "GET " + path, Answer: Answer(r), Hint: hint}
	}
	return nil
}
