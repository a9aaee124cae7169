package httpidem

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflight proves each caller's credentials work where it can without an
// effect: the endpoint's count read (a GET the target declared), sent with
// each caller's headers, must not answer 401 or 403; and the count read
// as declared must answer a count (a 2xx whose pointer finds a number, an
// array or an object), or the run would judge the declaration, not the
// endpoint. An endpoint that declares no count read is not probed: the
// texts fix no route of their own.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	e, _ := t.Described.(*Endpoint)
	if e == nil || e.Count == nil {
		return nil
	}
	c, err := client.New(t.BaseURL, client.Options{Name: "preflight", Timeout: timeout})
	if err != nil {
		return err
	}
	nonce := client.NewNonce()
	path := e.Count.PathFor(Unique{Text: "idscheck-preflight-" + nonce, Int: 0, UUID: "00000000-0000-4000-8000-000000000000"})
	callers := e.Callers
	if len(callers) == 0 {
		callers = []Caller{{}}
	}
	for i, caller := range callers {
		h := http.Header{}
		for k, v := range caller.Headers {
			h.Set(k, v)
		}
		r, err := harness.ProbeCredential(ctx, c, fmt.Sprintf("the headers of caller %d", i+1), client.Request{Method: http.MethodGet, Path: path, Header: h, NoAPIKey: true})
		if err != nil {
			return err
		}
		if i > 0 {
			continue
		}
		if r.Status < 200 || r.Status > 299 {
			return &harness.NotProtocolError{Call: "GET " + path, Answer: harness.Answer(r),
				Hint: "the count read the target file declares (http_idempotency.count.path) must answer 2xx; fix its path (docs/http-idempotency.md)"}
		}
		if _, err := e.Count.Extract(r.Body); err != nil {
			return &harness.NotProtocolError{Call: "GET " + path, Answer: harness.Answer(r),
				Hint: err.Error() + "; fix http_idempotency.count.pointer in the target file (docs/http-idempotency.md)"}
		}
	}
	return nil
}
