package ids

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflight proves the target speaks the IDS binding and its API key works:
// GET /registry, the command registry every IDS target declares
// (docs/ids-binding.md), answers 2xx with the key; a 401 or 403 is a
// refused key, any other answer says this is not an IDS target.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	c, err := client.New(t.BaseURL, client.Options{Name: "preflight", APIKey: t.APIKey, Timeout: timeout})
	if err != nil {
		return err
	}
	r, err := harness.ProbeCredential(ctx, c, "the API key", client.Request{Method: http.MethodGet, Path: PathRegistry})
	if err != nil {
		return err
	}
	if r.Status < 200 || r.Status > 299 {
		return &harness.NotProtocolError{Call: "GET " + PathRegistry, Answer: harness.Answer(r),
			Hint: fmt.Sprintf("an IDS target serves its command registry there (docs/ids-binding.md): is this an IDS server?")}
	}
	return nil
}
