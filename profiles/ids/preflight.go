package ids

import (
	"context"
	"net/http"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflight proves the target speaks the IDS binding and its API key works:
// GET /registry, the command registry every IDS target declares
// (docs/ids-binding.md), answers 2xx with the key; and the status of a
// command_id no one sent is refused, as the binding says: "404 (problem,
// `not_found`) for an id that is not an original command_id" (any 4xx
// but a 401 or 403 passes; a 2xx is a target that is not IDS). Both are
// reads: the target keeps nothing of them.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	if err := harness.ProbeRoute(ctx, t, timeout, PathRegistry,
		"an IDS target serves its command registry there (docs/ids-binding.md): is this an IDS server?"); err != nil {
		return err
	}
	c, err := client.New(t.BaseURL, client.Options{Name: "preflight", APIKey: t.APIKey, Timeout: timeout})
	if err != nil {
		return err
	}
	return harness.ProbeRefused(ctx, c, "the API key", client.Request{Method: http.MethodGet, Path: PathCommands + "/idscheck-preflight-" + client.NewNonce()},
		"a command_id no one sent",
		"an IDS target answers 404 for \"an id that is not an original command_id\" (docs/ids-binding.md, GET /commands/{command_id}): is this an IDS server?")
}
