package httpidem

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

// sinkClient calls the effect sink, the payment processor: every POST
// {sink}/effects is one payment made (no Idempotency-Key header is sent,
// so the sink counts every call as an effect).
type sinkClient struct {
	base    string
	hc      *http.Client
	timeout time.Duration
}

func newSinkClient(base string, timeout time.Duration) *sinkClient {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	return &sinkClient{base: strings.TrimRight(base, "/"), hc: &http.Client{Transport: tr}, timeout: timeout}
}

func (k *sinkClient) close() { k.hc.CloseIdleConnections() }

// effectRequest is the body of POST {sink}/effects.
type effectRequest struct {
	TenantID       string     `json:"tenant_id"`
	IdempotencyKey string     `json:"idempotency_key"`
	CommandID      string     `json:"command_id"`
	Command        string     `json:"command"`
	Args           effectArgs `json:"args"`
}

type effectArgs struct {
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Reference string `json:"reference"`
}

// commandCreate is the command of a payment's sink call.
const commandCreate = "payment.create"

func (s *Server) effectRequest(who, sinkKey, payID string, req paymentRequest) effectRequest {
	return effectRequest{TenantID: who, IdempotencyKey: sinkKey, CommandID: payID, Command: commandCreate,
		Args: effectArgs{req.Amount, req.Currency, req.Reference}}
}

type effectReply struct {
	EffectID string `json:"effect_id"`
	Count    int64  `json:"count"`
}

var (
	// errNoAnswer: the outcome of the call is unknown (a timeout, a broken
	// connection, a 5xx, an answer that is not the protocol's).
	errNoAnswer = errors.New("the sink did not answer")
	// errRefused: the sink refused the call (4xx): nothing happened.
	errRefused = errors.New("the sink refused the call")
)

// post asks the sink for one effect.
func (k *sinkClient) post(ctx context.Context, e effectRequest) error {
	b, _ := json.Marshal(e)
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", k.base+"/effects", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	req.Header.Set("Content-Type", "application/json")
	st, r, err := k.do(req)
	switch {
	case err != nil:
		return err
	case (st == 200 || st == 201) && r.EffectID != "":
		return nil
	case st >= 400 && st < 500:
		return fmt.Errorf("%w: POST /effects answered %d", errRefused, st)
	}
	return fmt.Errorf("%w: POST /effects answered %d", errNoAnswer, st)
}

// get asks the sink whether it made an effect under key.
func (k *sinkClient) get(ctx context.Context, key string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", k.base+"/effects/"+url.PathEscape(key), nil)
	if err != nil {
		return false, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	st, r, err := k.do(req)
	switch {
	case err != nil:
		return false, err
	case st == 404:
		return false, nil
	case st == 200 && r.EffectID != "":
		return true, nil
	}
	return false, fmt.Errorf("%w: GET /effects/{key} answered %d", errNoAnswer, st)
}

func (k *sinkClient) do(req *http.Request) (int, effectReply, error) {
	var r effectReply
	res, err := k.hc.Do(req)
	if err != nil {
		return 0, r, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return 0, r, fmt.Errorf("%w: %v", errNoAnswer, err)
	}
	if res.StatusCode == 200 || res.StatusCode == 201 {
		if err := json.Unmarshal(b, &r); err != nil {
			return 0, r, fmt.Errorf("%w: %v", errNoAnswer, err)
		}
	}
	return res.StatusCode, r, nil
}

// outcome is what a payment's sink call did.
type outcome int

const (
	outcomeEffect  outcome = iota // the payment was made
	outcomeNone                   // it was not
	outcomeUnknown                // nobody knows yet
)

// effect makes the payment at the sink. A call whose outcome is unknown is
// resolved at once with GET /effects/{key}.
func (s *Server) effect(ctx context.Context, who, sinkKey, payID string, req paymentRequest) outcome {
	err := s.sink.post(ctx, s.effectRequest(who, sinkKey, payID, req))
	switch {
	case err == nil:
		return outcomeEffect
	case errors.Is(err, errRefused):
		s.log.Warn("the sink refused a payment", "key", sinkKey, "err", err)
		return outcomeNone
	}
	found, gerr := s.sink.get(ctx, sinkKey)
	switch {
	case gerr != nil:
		s.log.Warn("the sink's outcome is unknown", "key", sinkKey, "post", err, "get", gerr)
		return outcomeUnknown
	case found:
		return outcomeEffect
	}
	return outcomeNone
}
