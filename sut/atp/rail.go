package atp

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

// railClient is the site's client of the payment rail (docs/atp-binding.md,
// "The rail"): Stripe-like payment intents, created (nothing charged), then
// confirmed (the charge, once per payment intent).
type railClient struct {
	base    string
	hc      *http.Client
	timeout time.Duration
}

func newRailClient(base string, timeout time.Duration) *railClient {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}
	return &railClient{base: strings.TrimRight(base, "/"), hc: &http.Client{Transport: tr}, timeout: timeout}
}

func (c *railClient) close() { c.hc.CloseIdleConnections() }

// Payment intent statuses.
const (
	railRequiresConfirmation = "requires_confirmation"
	railSucceeded            = "succeeded"
	railDeclined             = "declined"
	railCanceled             = "canceled"
	railRefunded             = "refunded"
)

// railPI is the rail's payment intent document.
type railPI struct {
	ID       string `json:"id"`
	IntentID string `json:"intent_id"`
	Status   string `json:"status"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Payee    string `json:"payee,omitempty"`
	ChargeID string `json:"charge_id,omitempty"`
}

type railCreate struct {
	IntentID string `json:"intent_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	Payee    string `json:"payee"`
}

// errRail is a rail call whose outcome is unknown: a timeout, a broken
// connection, a 5xx, or an answer that is not the binding's. The rail may
// or may not have acted.
var errRail = errors.New("the rail did not answer")

// createKey is the Idempotency-Key of the creation of x's payment intent:
// a retried creation (a lost answer, a restart) finds the same one.
func createKey(x *row) string { return x.intentID + ":" + x.key }

// create creates the payment intent of x (nothing is charged). idem ""
// sends no Idempotency-Key (a fresh payment intent every time: the
// mutants that charge twice).
func (c *railClient) create(ctx context.Context, x *row, idem string) (railPI, error) {
	b, _ := json.Marshal(railCreate{x.intentID, x.amount, x.currency, x.payee})
	pi, err := c.do(ctx, "POST", "/rail/payment_intents", b, idem)
	if err == nil && pi.ID == "" {
		err = fmt.Errorf("%w: the created payment intent has no id", errRail)
	}
	return pi, err
}

func (c *railClient) confirm(ctx context.Context, id string) (railPI, error) {
	return c.do(ctx, "POST", "/rail/payment_intents/"+url.PathEscape(id)+"/confirm", nil, "")
}

func (c *railClient) cancel(ctx context.Context, id string) (railPI, error) {
	return c.do(ctx, "POST", "/rail/payment_intents/"+url.PathEscape(id)+"/cancel", nil, "")
}

func (c *railClient) get(ctx context.Context, id string) (railPI, error) {
	return c.do(ctx, "GET", "/rail/payment_intents/"+url.PathEscape(id), nil, "")
}

func (c *railClient) do(ctx context.Context, method, path string, body []byte, idem string) (railPI, error) {
	var pi railPI
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return pi, fmt.Errorf("%w: %v", errRail, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return pi, fmt.Errorf("%w: %s %s: %v", errRail, method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return pi, fmt.Errorf("%w: %s %s: %v", errRail, method, path, err)
	}
	if res.StatusCode != 200 && res.StatusCode != 201 {
		return pi, fmt.Errorf("%w: %s %s answered %d", errRail, method, path, res.StatusCode)
	}
	if err := json.Unmarshal(b, &pi); err != nil || pi.Status == "" {
		return pi, fmt.Errorf("%w: %s %s: not a payment intent: %.200q", errRail, method, path, b)
	}
	return pi, nil
}
