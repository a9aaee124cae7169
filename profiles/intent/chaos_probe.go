package intent

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/idscheck/idscheck/client"
)

// probeLease learns, before the load, how long one protocol second of the
// target lasts on the harness's clock, from what the target answers alone
// (ChaosConfig.ProbeLease: its time scale is not known): GET /health's ts
// (§7.1, the server's clock), then one intent published in a namespace of
// the probe's own and claimed, whose claim answers claim_timeout (in
// protocol seconds; the text's 60 when absent) and claim_expires_at (§4.2:
// when the lease ends, on the server's clock), then GET /health's ts again.
// The claim took effect between the two ts, so the lease lasted between
// claim_expires_at less the second and less the first: one protocol
// second is that over claim_timeout, within half the difference of the two
// ts (w.slack). Its intent is fulfilled and left in its namespace, which
// the workload never claims from and the checks never see. Any answer
// missing leaves w.second 0: every lease of unknown length, which the
// checks allow at any length, and no stall that must outlive one.
func (w *workload) probeLease(ctx context.Context) {
	w.second, w.slack, w.leaseFrom = 0, 0, "unknown"
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	health := func() (float64, bool) {
		r, err := w.http.Do(ctx, client.Request{Method: http.MethodGet, Path: PathHealth, NoAPIKey: true})
		if err != nil || r.Status != http.StatusOK {
			return 0, false
		}
		var h Health
		if json.Unmarshal(r.Body, &h) != nil || h.TS <= 0 {
			return 0, false
		}
		return h.TS, true
	}
	ns := w.cfg.Namespace + "-probe"
	body, _ := json.Marshal(map[string]any{"goal": "lease-probe", "payload": map[string]any{}, "namespace": ns, "max_attempts": 1})
	r, err := w.http.Do(ctx, client.Request{Method: http.MethodPost, Path: PathIntent, Body: body})
	if err != nil || r.Status != http.StatusCreated {
		w.cfg.Logger.Warn("chaos: the lease probe could not publish", "err", err)
		return
	}
	ts1, ok1 := health()
	r, err = w.http.Do(ctx, client.Request{Method: http.MethodPost, Path: PathClaim + "?namespace=" + ns,
		Header: http.Header{HeaderWorkerID: {"lease-probe"}}})
	ts2, ok2 := health()
	if err != nil || r.Status != http.StatusOK {
		w.cfg.Logger.Warn("chaos: the lease probe could not claim", "err", err)
		return
	}
	var c struct {
		ID        string   `json:"id"`
		Token     string   `json:"claim_token"`
		Timeout   *float64 `json:"claim_timeout"`
		ExpiresAt *float64 `json:"claim_expires_at"`
	}
	json.Unmarshal(r.Body, &c)
	if c.ID != "" && c.Token != "" {
		fb, _ := json.Marshal(map[string]any{"claim_token": c.Token})
		w.http.Do(ctx, client.Request{Method: http.MethodPost, Path: PathFulfill + c.ID, Body: fb})
	}
	secs := 60.0
	if c.Timeout != nil && *c.Timeout > 0 {
		secs = *c.Timeout
	}
	if !ok1 || !ok2 || c.ExpiresAt == nil || *c.ExpiresAt-ts2 <= 0 || ts2 < ts1 {
		w.cfg.Logger.Warn("chaos: the target answers no lease end to learn its time from: leases of unknown length")
		return
	}
	mid := *c.ExpiresAt - (ts1+ts2)/2 // seconds of lease on the server's clock
	w.second = time.Duration(mid / secs * float64(time.Second))
	// Uncertainty of the lease: half the window between the two reads, and
	// as much again for an extension of 10 s in a lease of 60.
	w.slack = time.Duration((ts2 - ts1) / 2 * float64(time.Second) * max(1, 10/secs))
	w.leaseFrom = "answers"
	w.cfg.Logger.Info("chaos: learnt the target's time from its answers", "second", w.second, "slack", w.slack)
}
