// Package probe measures, over plain HTTP, what an idempotency-key
// endpoint does in each situation the three texts of the http-idempotency
// profile speak of (a retry, a duplicate in flight, another payload under
// a used key, a rejection, keys outside the published format, two
// callers), and says, per variant, which verdict each behaviour implies
// for the rule whose quote decides it. It is the second opinion on
// idscheck's verdicts: it imports nothing of idscheck that judges, reads
// the target file itself, and sends its own requests
// (profiles/httpidem/realmw/byhand_test.go is its model).
package probe

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Table is what Measure did: one behaviour per situation probed.
type Table struct {
	Behaviours []Behaviour `json:"behaviours"`
}

// Behaviour is one situation, what the endpoint did in it, and what that
// implies per variant.
type Behaviour struct {
	ID        string        `json:"id"`        // stable, e.g. "retry-after-complete"
	Situation string        `json:"situation"` // "the same request retried under its key after the first answered"
	Observed  string        `json:"observed"`  // "201, same id pay_1, 1 payment" (short, for a table cell)
	Evidence  []string      `json:"evidence"`  // the exchanges
	Expect    []Expectation `json:"expect"`
}

// Expectation is the verdict a behaviour implies for one rule of one
// variant's text.
type Expectation struct {
	Variant string `json:"variant"` // ietf, t0, stripe
	// Rule is the rule ID whose quote says it; "" when no rule of that
	// text says it (a documented choice).
	Rule string `json:"rule"`
	// Verdicts are the verdicts this behaviour implies for Rule: PASS for
	// a correct one, FAIL (MUST) or NON-STRICT (SHOULD) for a deviation;
	// BLOCKED only beside another expectation of the table naming the
	// blocking rule failing (BlockedBy).
	Verdicts []string `json:"verdicts"`
	// BlockedBy names the rule whose failure may block Rule, when
	// Verdicts holds BLOCKED.
	BlockedBy string `json:"blocked_by,omitempty"`
	// Intermittent: the behaviour deviates in some tries and not in
	// others (a race in the target): every verdict in Verdicts agrees,
	// BLOCKED by any rule (the deviation may fail another rule first).
	Intermittent bool   `json:"intermittent,omitempty"`
	Why          string `json:"why"`
}

// Variants are the texts the probe maps behaviours to.
func Variants() []string { return []string{"ietf", "t0", "stripe"} }

// Per-request and whole-measurement bounds.
const (
	RequestTimeout = 10 * time.Second
	MeasureTimeout = 2 * time.Minute
)

// Measure sends plain HTTP probes to the endpoint at baseURL described by
// targetFile (the JSON bytes of target.json) and returns what it did.
// Every request is bounded (10 s), the whole at most 2 minutes.
func Measure(ctx context.Context, baseURL string, targetFile []byte) (*Table, error) {
	sp, err := parseTarget(targetFile)
	if err != nil {
		return nil, err
	}
	if _, ok := sp.goodKey(); !ok {
		return nil, fmt.Errorf("http_idempotency.key_spec: the probe finds no key in the published format (it tries hex digits, digits, letters and a UUID)")
	}
	ctx, cancel := context.WithTimeout(ctx, MeasureTimeout)
	defer cancel()
	p := newProber(ctx, baseURL, sp, &http.Client{Timeout: RequestTimeout})
	if err := p.reachable(); err != nil {
		return nil, err
	}
	t := &Table{}
	for _, probe := range []func() []Behaviour{
		p.firstRequest, p.newKeySameBody, p.retryAfterComplete, p.inFlight, p.vary,
		p.rejectedThenCorrected, p.rejectedUncorrected, p.noKey, p.keyLengths, p.keyOutsideFormat,
		p.twoCallers,
	} {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("the probes took longer than %v", MeasureTimeout)
		}
		t.Behaviours = append(t.Behaviours, probe()...)
	}
	t.Behaviours = append(t.Behaviours, p.serverErrors())
	if ctx.Err() != nil {
		return nil, fmt.Errorf("the probes took longer than %v", MeasureTimeout)
	}
	return t, nil
}
