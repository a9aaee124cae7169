package httpidem

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflight proves each caller's credentials work where it can without an
// effect: the endpoint's count read (a GET the target declared), sent with
// each caller's headers, must not answer 401 or 403. An endpoint that
// declares no count read is not probed: the texts fix no route of their own.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	e, _ := t.Described.(*Endpoint)
	if e == nil || e.Count == nil {
		return nil
	}
	c, err := client.New(t.BaseURL, client.Options{Name: "preflight", Timeout: timeout})
	if err != nil {
		return err
	}
	path := strings.ReplaceAll(e.Count.Path, "{{unique}}", "idscheck-preflight-"+client.NewNonce())
	for i, caller := range e.Callers {
		h := http.Header{}
		for k, v := range caller.Headers {
			h.Set(k, v)
		}
		if _, err := harness.ProbeCredential(ctx, c, fmt.Sprintf("the headers of caller %d", i+1), client.Request{Method: http.MethodGet, Path: path, Header: h, NoAPIKey: true}); err != nil {
			return err
		}
	}
	return nil
}
