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
// (docs/atp-binding.md), answers 2xx with the key; and a poll of an intent
// no one authorized, under a key no one used, is refused as the binding
// says ("200 {the transaction}, or 404 when there is no such row"; any
// 4xx but a 401 or 403 passes, a 2xx is a site that is not ATP). Both are
// reads: the site keeps nothing of them.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	if err := harness.ProbeRoute(ctx, t, timeout, PathConfig,
		"an ATP site declares its binding there (docs/atp-binding.md): is this an ATP site?"); err != nil {
		return err
	}
	c, err := client.New(t.BaseURL, client.Options{Name: "preflight", APIKey: t.APIKey, Timeout: timeout})
	if err != nil {
		return err
	}
	// An intent_id and a key of the binding's characters and lengths
	// (1–128 of A–Z a–z 0–9 _ - . :; a key of 16–128), drawn here.
	nonce := client.NewNonce()
	h := http.Header{}
	h.Set("Idempotency-Key", "idscheck-preflight-"+nonce)
	return harness.ProbeRefused(ctx, c, "the API key", client.Request{Method: http.MethodGet, Path: PathIntents + "idscheck-preflight-" + nonce, Header: h},
		"an intent no one authorized",
		`an ATP site answers 404 "when there is no such row" (docs/atp-binding.md, GET /api/atp/intents/{intent_id}): is this an ATP site?`)
}
