package httpidem

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflightBody is the body of the preflight's call of the declared
// endpoint: JSON cut short, which no endpoint can take for a request (the
// endpoint's "body" is "one request's JSON body", docs/http-idempotency.md),
// so a correct one creates nothing from it, whatever it answers.
const preflightBody = `{"idscheck_preflight": `

// preflight proves the endpoint the target file declares is there, and
// that each caller's credentials work where it can without an effect:
//
//   - the declared method and path, sent by the first caller under a fresh
//     key with a body that is not JSON, must not answer 404, 405 or 501:
//     those say the server has no such resource or method (RFC 9110 §15.5.5,
//     §15.5.6, §15.6.2), and every scenario would judge a route that is
//     not there. Whatever else it answers passes (a 400 is expected; the
//     texts leave the answer to a malformed body open, so neither a 2xx nor
//     a 5xx is judged here), and a 401 or 403 is the caller's headers
//     refused;
//   - the count read (a GET the target declared), sent with each caller's
//     headers, must not answer 401 or 403; as declared it must answer a
//     count (a 2xx whose pointer finds a number, an array or an object), or
//     the run would judge the declaration, not the endpoint; and read for a
//     unique value no request used, the count must be 0 (a read that
//     counts something no request made cannot count what one request
//     makes).
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	e, _ := t.Described.(*Endpoint)
	if e == nil {
		return nil
	}
	c, err := client.New(t.BaseURL, client.Options{Name: "preflight", Timeout: timeout})
	if err != nil {
		return err
	}
	callers := e.Callers
	if len(callers) == 0 {
		callers = []Caller{{}}
	}
	headers := func(i int) http.Header {
		h := http.Header{}
		for k, v := range callers[i].Headers {
			h.Set(k, v)
		}
		return h
	}
	if err := probeEndpoint(ctx, c, e, headers(0)); err != nil {
		return err
	}
	if e.Count == nil {
		return nil
	}
	u := NewUnique("idscheck-preflight", 0, randUint32)
	path := e.Count.PathFor(u)
	for i := range callers {
		r, err := harness.ProbeCredential(ctx, c, fmt.Sprintf("the headers of caller %d", i+1), client.Request{Method: http.MethodGet, Path: path, Header: headers(i), NoAPIKey: true})
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
		n, err := e.Count.Extract(r.Body)
		if err != nil {
			return &harness.NotProtocolError{Call: "GET " + path, Answer: harness.Answer(r),
				Hint: err.Error() + "; fix http_idempotency.count.pointer in the target file (docs/http-idempotency.md)"}
		}
		if n != 0 && !e.Count.Difference && strings.Contains(e.Count.Path, "{{unique") {
			return &harness.NotProtocolError{Call: "GET " + path + " (a unique value no request used)", Answer: harness.Answer(r),
				Hint: fmt.Sprintf("the count read counts %d where no request was made, so it cannot count one request's creations: fix http_idempotency.count (its path's filter, its pointer), or declare \"difference\": true for a read that counts everything (docs/http-idempotency.md)", n)}
		}
	}
	return nil
}

// probeEndpoint sends the declared method and path a body that is not JSON,
// under a fresh key, with the first caller's headers h: a 404, 405 or 501
// says the endpoint is not there (*harness.NotProtocolError), a 401 or 403
// that the headers are refused (*harness.CredentialError).
func probeEndpoint(ctx context.Context, c *client.Client, e *Endpoint, h http.Header) error {
	h = h.Clone()
	h.Set("Content-Type", "application/json")
	if e.Key.Header != "" {
		key, err := e.KeySpec.NewKey(randUint32)
		if err != nil {
			key = client.NewNonce()
		}
		if v, ok := SFString(key); ok && e.KeyFormat == "sf-string" {
			key = v
		}
		h.Set(e.Key.Header, key)
	}
	method := e.Method
	if method == "" {
		method = http.MethodPost
	}
	call := method + " " + e.Path
	r, err := harness.ProbeCredential(ctx, c, "the headers of caller 1", client.Request{Method: method, Path: e.Path, Header: h, Body: []byte(preflightBody), NoAPIKey: true})
	if err != nil {
		return err
	}
	switch r.Status {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return &harness.NotProtocolError{Call: call + " (a body that is not JSON)", Answer: harness.Answer(r),
			Hint: fmt.Sprintf("the server has no such resource (or hides it from the first caller) or does not take %s there: "+
				"fix http_idempotency.method and path in the target file, or --target (docs/http-idempotency.md)", method)}
	}
	return nil
}

func randUint32() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}
