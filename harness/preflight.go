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
// start of its body; an HTML page is its title (a web server's error page
// says no more than that).
func Answer(r *client.Response) string {
	if t, ok := htmlTitle(r.Body); ok {
		return fmt.Sprintf("%d, an HTML page titled %q", r.Status, t)
	}
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

// ProbeRefused sends one harmless call the protocol refuses (an id no one
// issued, a body that is not JSON), what says what it is ("an intent id no
// one published"). A target of the protocol refuses it; one that answers
// 2xx is not the protocol (*NotProtocolError, hint saying where the text
// requires the refusal). A 401 or 403 is a refused credential when
// credential names one (*CredentialError), else a refusal like any other
// 4xx. A 3xx or 5xx is no proof either way: it passes, and the scenarios
// judge the target. A transport error is returned as it is.
func ProbeRefused(ctx context.Context, c *client.Client, credential string, req client.Request, what, hint string) error {
	call := req.Method + " " + req.Path
	r, err := c.Do(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	if credential != "" && (r.Status == http.StatusUnauthorized || r.Status == http.StatusForbidden) {
		return &CredentialError{Credential: credential, Call: call, Answer: Answer(r)}
	}
	if r.Status >= 200 && r.Status <= 299 {
		return &NotProtocolError{Call: call + " (" + what + ")", Answer: Answer(r), Hint: hint}
	}
	return nil
}

// Settled says whether an answer other than the one a wait for a target's
// health awaits (GET /health, 200) is the target's last word: a server that
// answers 404, 405 or 501 there, a redirect or a refusal, is up and serves
// no such route, and waiting will not change what it answers. A 5xx (a
// server starting, a proxy whose backend is not up yet), 408, 425 and 429
// (a busy server) are not: the wait goes on.
func Settled(status int) bool {
	switch {
	case status == http.StatusOK:
		return false
	case status == http.StatusNotImplemented:
		return true // the server has no such method: it will not grow one
	case status >= 500, status == http.StatusRequestTimeout, status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		return false
	}
	return true
}

// HealthNotProtocol is the *NotProtocolError of a target whose GET /health
// (url: its full URL) answered r, a settled answer other than 200.
func HealthNotProtocol(url string, r *client.Response) *NotProtocolError {
	return &NotProtocolError{Call: "GET " + url, Answer: Answer(r),
		Hint: "a target of this profile answers 200 there, without credentials"}
}

// htmlTitle is the title of an HTML page (ok false for a body that is not
// one, or has none).
func htmlTitle(body []byte) (string, bool) {
	s := strings.TrimSpace(string(body))
	if !strings.HasPrefix(s, "<") {
		return "", false
	}
	lower := strings.ToLower(s)
	i := strings.Index(lower, "<title>")
	j := strings.Index(lower, "</title>")
	if i < 0 || j < i {
		return "", false
	}
	t := strings.Join(strings.Fields(s[i+len("<title>"):j]), " ")
	if t == "" || len(t) > 120 {
		return "", false
	}
	return t, true
}
