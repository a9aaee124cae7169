package atp

import (
	"context"
	"net/http"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflight proves the target is an ATP site of this binding and its API
// key works: GET /api/atp/config, what every site declares
// (docs/atp-binding.md), answers 2xx with the key; a 401 or 403 is a
// refused key, any other answer says this is not an ATP site.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	c, err := client.New(t.BaseURL, client.Options{Name: "preflight", APIKey: t.APIKey, Timeout: timeout})
	if err != nil {
		return err
	}
	r, err := harness.ProbeCredential(ctx, c, "the API key", client.Request{Method: http.MethodGet, Path: PathConfig})
	if err != nil {
		return err
	}
	if r.Status < 200 || r.Status > 299 {
		return &harness.NotProtocolError{Call: "GET " + PathConfig, Answer: harness.Answer(r),
			Hint: "an ATP site declares its binding there (docs/atp-binding.md): is this an ATP site?"}
	}
	return nil
}
