package ids

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// sink is the client of the effect sink (the binding's "External
// effects"): every external side effect of a command is one POST there.
type sink struct {
	base    string
	hc      *http.Client
	timeout time.Duration
}

func newSink(base string, timeout time.Duration) *sink {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
	return &sink{base: strings.TrimRight(base, "/"), hc: &http.Client{Transport: tr}, timeout: timeout}
}

func (k *sink) close() { k.hc.CloseIdleConnections() }

// effectRequest is the body of POST {sink}/effects.
type effectRequest struct {
	TenantID       string          `json:"tenant_id"`
	IdempotencyKey string          `json:"idempotency_key"`
	CommandID      string          `json:"command_id"`
	Command        string          `json:"command"`
	Args           json.RawMessage `json:"args"`
}

type effectReply struct {
	EffectID string `json:"effect_id"`
	Count    int64  `json:"count"`
}

// errNoAnswer is a sink call whose outcome is unknown: a timeout, a broken
// connection, a 5xx or an answer that is not the protocol's. The effect may
// or may not have happened.
var errNoAnswer = errors.New("the sink did not answer")

// post asks the sink for one effect. s1 sends the Idempotency-Key header
// (the provider honours it for S1 commands only).
func (k *sink) post(ctx context.Context, e effectRequest, s1 bool) (string, error) {
	b, _ := json.Marshal(e)
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", k.base+"/effects", bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if s1 {
		req.Header.Set("Idempotency-Key", e.IdempotencyKey)
	}
	st, r, err := k.do(req)
	if err != nil {
		return "", err
	}
	if (st != 200 && st != 201) || r.EffectID == "" {
		return "", fmt.Errorf("%w: POST /effects answered %d", errNoAnswer, st)
	}
	return r.EffectID, nil
}

// get asks the sink what it did for key: found with the effect id and the
// number of effects, or not found (404).
func (k *sink) get(ctx context.Context, key string) (found bool, effectID string, count int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", k.base+"/effects/"+url.PathEscape(key), nil)
	if err != nil {
		return false, "", 0, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	st, r, err := k.do(req)
	switch {
	case err != nil:
		return false, "", 0, err
	case st == 404:
		return false, "", 0, nil
	case st == 200 && r.EffectID != "":
		if r.Count < 1 {
			r.Count = 1
		}
		return true, r.EffectID, r.Count, nil
	}
	return false, "", 0, fmt.Errorf("%w: GET /effects/{key} answered %d", errNoAnswer, st)
}

func (k *sink) do(req *http.Request) (int, effectReply, error) {
	var r effectReply
	res, err := k.hc.Do(req)
	if err != nil {
		return 0, r, fmt.Errorf("%w: %w", errNoAnswer, err) // a timeout stays one (errors.Is)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return 0, r, fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	if res.StatusCode == 200 || res.StatusCode == 201 {
		if err := json.Unmarshal(b, &r); err != nil {
			return 0, r, fmt.Errorf("%w: %v", errNoAnswer, err)
		}
	}
	return res.StatusCode, r, nil
}
