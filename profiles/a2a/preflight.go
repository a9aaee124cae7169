package a2a

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflight proves the target is an A2A queue of this binding and its API
// key works: GET /a2a/queue?limit=1 with the key answers a2a_status
// (docs/a2a-binding.md, "Health"); and the status of a task no one
// enqueued is refused as the binding says: "200 {"entry": …} in any state,
// or 404 unknown_task" (any 4xx but a 401 or 403 passes, a 2xx is a queue
// that is not A2A). Both are reads: the queue keeps nothing of them.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	c, err := client.New(t.BaseURL, client.Options{Name: "preflight", APIKey: t.APIKey, Timeout: timeout})
	if err != nil {
		return err
	}
	r, err := harness.ProbeCredential(ctx, c, "the API key", client.Request{Method: http.MethodGet, Path: "/a2a/queue?limit=1"})
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"a2a_status"`) {
		return &harness.NotProtocolError{Call: "GET /a2a/queue?limit=1", Answer: harness.Answer(r),
			Hint: `an A2A queue answers {"kind":"a2a_status",…} there (docs/a2a-binding.md): is this an A2A queue?`}
	}
	// A task id of the form the daemon assigns (a UUID), drawn here.
	n := client.NewNonce()
	id := n[0:8] + "-" + n[8:12] + "-4" + n[13:16] + "-8" + n[17:20] + "-" + n[20:32]
	return harness.ProbeRefused(ctx, c, "the API key", client.Request{Method: http.MethodGet, Path: "/a2a/tasks/" + id},
		"a task no one enqueued",
		`an A2A queue answers "404 unknown_task" for a task it does not have (docs/a2a-binding.md, GET /a2a/tasks/{id}): is this an A2A queue?`)
}
