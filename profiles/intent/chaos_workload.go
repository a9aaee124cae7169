package intent

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/rundir"
	"github.com/idscheck/idscheck/verdict"
)

// maxAttempts is the max_attempts of every intent the workload publishes.
const maxAttempts = 3

// backlogPerWorker bounds the acknowledged intents not yet finished, per worker.
const backlogPerWorker = 10

// backlog is how many acknowledged publishes no fulfil or fail has answered yet
// (an over-estimate: a fail requeues, and unknown outcomes count as pending).
func (w *workload) backlog() int64 {
	w.mu.Lock()
	n := int64(len(w.acked))
	w.mu.Unlock()
	return n - w.finished.Load()
}

// maxPublishTries bounds the retries of one publish whose outcome was unknown.
const maxPublishTries = 6

// publishBody is the canonical body of the publish of key (json.Marshal sorts
// map keys, so the bytes are canonical).
func (w *workload) publishBody(key string, variant int) []byte {
	body := map[string]any{
		"goal":         "chaos",
		"payload":      map[string]any{"key": key, "variant": variant},
		"namespace":    w.cfg.Namespace,
		"max_attempts": maxAttempts,
		"backoff_base": 1.0,
	}
	b, _ := json.Marshal(body)
	return b
}

// publish sends one publish attempt of key and records it. It returns the
// HTTP status (0 when none) and the intent id.
func (w *workload) publish(ctx context.Context, clientID int, key string, body []byte) (int, string) {
	op := checker.Operation{ClientID: clientID, Kind: checker.OpPublish, Key: key, Input: checker.Input{Body: chaos.Digest(body), MaxAttempts: maxAttempts}, Call: w.now()}
	resp, err := w.http.Do(ctx, client.Request{Method: http.MethodPost, Path: "/intent",
		Header: http.Header{"Idempotency-Key": {key}}, Body: body, Spread: key})
	op.Return = w.now()
	op.Outcome = client.TransportOutcome(err)
	if err != nil {
		w.record(op)
		return 0, ""
	}
	op.Output.Status = resp.Status
	op.Output.Body = chaos.Digest(resp.Body)
	if resp.Status == http.StatusCreated {
		var r struct {
			ID string `json:"id"`
		}
		json.Unmarshal(resp.Body, &r)
		op.Output.ID = r.ID
	}
	if resp.Status >= 500 {
		// The server may have applied it before failing.
		op.Outcome = verdict.OutcomeUnknown
	}
	w.record(op)
	if op.Output.ID != "" {
		w.mu.Lock()
		w.acked[key] = op.Output.ID
		w.mu.Unlock()
	}
	return resp.Status, op.Output.ID
}

// publisher publishes new keys until ctx ends, retrying each key with the
// same body while its outcome is unknown (at-least-once delivery from the
// client's side), and now and then reusing a key with another body, which
// the target must refuse.
func (w *workload) publisher(ctx context.Context, id int, rnd *rand.Rand) {
	for n := 0; ctx.Err() == nil && !w.full(); n++ {
		// Publish no faster than the workers finish: a backlog that the
		// drain cannot clear would leave work unjudged.
		for ctx.Err() == nil && w.backlog() > int64(backlogPerWorker*w.cfg.Workers) {
			chaos.Sleep(ctx, 5*time.Millisecond)
		}
		key := fmt.Sprintf("p%d-%d-%016x", id, n, rundir.Fresh(w.cfg.RunID, rnd).Uint64())
		body := w.publishBody(key, 0)
		status := 0
		for try := 0; try < maxPublishTries && ctx.Err() == nil; try++ {
			status, _ = w.publish(ctx, id, key, body)
			if status != 0 && status < 500 && status != http.StatusTooManyRequests {
				break
			}
			chaos.Sleep(ctx, time.Duration(10+rnd.IntN(40))*time.Millisecond*time.Duration(1<<try))
		}
		if status == http.StatusCreated && rnd.IntN(100) < 5 {
			w.publish(ctx, id, key, w.publishBody(key, 1))
		}
		if rnd.IntN(100) < 20 {
			// A plain retry of an acknowledged publish: must replay.
			w.publish(ctx, id, key, body)
		}
	}
}

// idleWait is how long a draining worker goes on polling an empty queue:
// long enough for any lease to lapse and for the longest backoff the workload
// can cause (backoff_base 1 s × 2^max_attempts + 2 s of jitter, at the
// target's time scale, which Lease carries: 60 s of protocol time).
func (w *workload) idleWait() time.Duration {
	backoff := time.Duration(float64(w.defaultLease()) * float64(1<<maxAttempts+2) / 60)
	return w.defaultLease() + backoff + 200*time.Millisecond
}

// defaultLease is a lease of the text's default claim_timeout (60 s) on the
// harness's clock: 60 protocol seconds, or, when the run does not know how
// long one lasts, 60 real seconds, the longest the text allows a target at
// any time scale of 1 or more.
func (w *workload) defaultLease() time.Duration {
	if w.second <= 0 {
		return 60 * time.Second
	}
	return 60 * w.second
}

// claimed is what a worker learns from a 200 on /claim.
type claimed struct {
	ID       string `json:"id"`
	Token    string `json:"claim_token"`
	Attempts int    `json:"claim_attempts"`
	// Timeout is the claim_timeout the claim answered, in protocol
	// seconds (nil: none, the text's default 60).
	Timeout *float64 `json:"claim_timeout"`
	Payload struct {
		Key string `json:"key"`
	} `json:"payload"`
}

// worker claims and works intents until the drain ends: during the fault
// phase (loadCtx) it fulfils most, fails some, extends some and stalls past
// its lease on some; after it, it only fulfils, and stops once it has found
// nothing to claim for a while (then it counts in idle: the run drained).
// It also stops, not idle, at the drain's end and at the bound of MaxOps.
func (w *workload) worker(loadCtx, drainCtx context.Context, id int, rnd *rand.Rand, idle *atomic.Int64) {
	ranOut := false
	defer func() {
		if ranOut && drainCtx.Err() == nil {
			idle.Add(1)
		}
	}()
	name := fmt.Sprintf("w%d", id)
	var emptySince time.Time
	for drainCtx.Err() == nil && !w.full() {
		draining := loadCtx.Err() != nil
		c, status := w.claim(drainCtx, id, name)
		if c == nil {
			if draining && status == http.StatusNoContent {
				if emptySince.IsZero() {
					emptySince = time.Now()
				}
				// Nothing left: wait out leases and backoffs once, then stop.
				if time.Since(emptySince) > w.idleWait() {
					ranOut = true
					return
				}
			}
			chaos.Sleep(drainCtx, time.Duration(5+rnd.IntN(20))*time.Millisecond)
			continue
		}
		emptySince = time.Time{}
		// Executing the intent is the effect: at-least-once, fenced by the token.
		w.effect(checker.Effect{Key: c.Payload.Key, Intent: c.ID, Worker: name, Token: c.Token, At: w.now()})
		ctx := drainCtx
		p := rnd.IntN(100)
		switch {
		case draining || p < 72:
			w.lease(ctx, id, name, OpFulfill, c, nil)
		case p < 82:
			w.lease(ctx, id, name, OpFail, c, nil)
		case p < 92:
			ext := 10 * w.second // "seconds": 10 (0: of unknown length)
			w.lease(ctx, id, name, OpExtend, c, &ext)
			w.lease(ctx, id, name, OpFulfill, c, nil)
		case w.second <= 0:
			// How long a lease lasts is not known: no stall can be sure
			// to outlive it.
			w.lease(ctx, id, name, OpFulfill, c, nil)
		case p < 96:
			// A worker that stalls past its lease: its token must be dead by now.
			chaos.Sleep(ctx, w.leaseOf(c)+w.leaseOf(c)/4+50*time.Millisecond)
			w.lease(ctx, id, name, OpFulfill, c, nil)
		default:
			// A worker that stalls past its lease and then tries to extend it:
			// an expired lease must not be extended.
			chaos.Sleep(ctx, w.leaseOf(c)+w.leaseOf(c)/4+50*time.Millisecond)
			ext := 10 * w.second
			w.lease(ctx, id, name, OpExtend, c, &ext)
			w.lease(ctx, id, name, OpFulfill, c, nil)
		}
	}
}

func (w *workload) claim(ctx context.Context, clientID int, worker string) (*claimed, int) {
	op := checker.Operation{ClientID: clientID, Kind: OpClaim, Input: checker.Input{Worker: worker}, Call: w.now()}
	resp, err := w.http.Do(ctx, client.Request{Method: http.MethodPost, Path: "/claim?namespace=" + w.cfg.Namespace,
		Header: http.Header{"X-Worker-ID": {worker}}})
	op.Return = w.now()
	op.Outcome = client.TransportOutcome(err)
	if err != nil {
		w.record(op)
		return nil, 0
	}
	op.Output.Status = resp.Status
	var c claimed
	if resp.Status == http.StatusOK && json.Unmarshal(resp.Body, &c) == nil && c.ID != "" {
		op.Key = c.ID
		op.Output.ID = c.ID
		op.Output.Token = c.Token
		op.Output.Attempts = c.Attempts
		op.Output.LeaseNs = int64(w.leaseOf(&c))
		w.record(op)
		return &c, resp.Status
	}
	if resp.Status >= 500 {
		op.Outcome = verdict.OutcomeUnknown
	}
	w.record(op)
	return nil, resp.Status
}

// leaseOf is the lease c was granted on the harness's clock: the
// claim_timeout it answered (the text's 60 when none) in protocol seconds;
// 0 when how long one lasts is not known (the checks then allow any).
func (w *workload) leaseOf(c *claimed) time.Duration {
	secs := 60.0
	if c.Timeout != nil && *c.Timeout > 0 {
		secs = *c.Timeout
	}
	return time.Duration(secs * float64(w.second))
}

// lease sends fulfill, fail or extend of c with its token and records it.
func (w *workload) lease(ctx context.Context, clientID int, worker string, kind checker.OpKind, c *claimed, extend *time.Duration) {
	body := map[string]any{"claim_token": c.Token}
	var path string
	switch kind {
	case OpFulfill:
		path = "/fulfill/" + c.ID
		body["result"] = map[string]any{"by": worker}
	case OpFail:
		path = "/fail/" + c.ID
		body["error"] = "chaos: simulated failure"
	case OpExtend:
		path = "/extend_claim/" + c.ID
		body["seconds"] = 10
	}
	b, _ := json.Marshal(body)
	op := checker.Operation{ClientID: clientID, Kind: kind, Key: c.ID, Input: checker.Input{Token: c.Token, Worker: worker}, Call: w.now()}
	if extend != nil {
		op.Input.ExtendNs = int64(*extend)
	}
	resp, err := w.http.Do(ctx, client.Request{Method: http.MethodPost, Path: path, Body: b})
	op.Return = w.now()
	op.Outcome = client.TransportOutcome(err)
	if err == nil {
		op.Output.Status = resp.Status
		if resp.Status >= 500 {
			op.Outcome = verdict.OutcomeUnknown
		}
		if kind != OpExtend && resp.Status == http.StatusOK {
			w.finished.Add(1)
		}
		if kind == OpExtend && resp.Status == http.StatusOK {
			op.Output.LeaseNs = op.Input.ExtendNs
		}
	}
	w.record(op)
}

// readStatuses reads the final state of every intent the run heard of.
func (w *workload) readStatuses(ctx context.Context) {
	ids := map[string]bool{}
	w.mu.Lock()
	for _, id := range w.acked {
		ids[id] = true
	}
	for _, op := range w.ops {
		if op.Kind == OpClaim && op.Output.ID != "" {
			ids[op.Output.ID] = true
		}
	}
	w.mu.Unlock()
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	const readers = 16
	next := atomic.Int64{}
	done := make(chan struct{})
	for r := range readers {
		go func() {
			defer func() { done <- struct{}{} }()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(sorted) {
					return
				}
				w.status(ctx, 200000+r, sorted[i])
			}
		}()
	}
	for range readers {
		<-done
	}
}

func (w *workload) status(ctx context.Context, clientID int, id string) {
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		op := checker.Operation{ClientID: clientID, Kind: checker.OpStatus, Key: id, Call: w.now()}
		resp, err := w.http.Do(ctx, client.Request{Method: http.MethodGet, Path: "/status/" + id})
		op.Return = w.now()
		op.Outcome = client.TransportOutcome(err)
		if err == nil {
			op.Output.Status = resp.Status
			switch {
			case resp.Status == http.StatusOK:
				var r struct {
					Status string `json:"status"`
				}
				json.Unmarshal(resp.Body, &r)
				op.Output.State = strings.ToLower(r.Status)
			case resp.Status == http.StatusNotFound:
				op.Output.State = checker.StateGone
			default:
				op.Outcome = verdict.OutcomeUnknown
			}
		}
		w.record(op)
		if op.Outcome == verdict.OutcomeOK {
			return
		}
		chaos.Sleep(ctx, 100*time.Millisecond)
	}
}

// publishStorm is the duplicate storm of a chaos run: n identical publishes
// of one fresh key released by one barrier. Exactly one intent must come of it.
type publishStorm struct {
	w   *workload
	max int
	n   atomic.Int64
}

var _ faults.Fault = (*publishStorm)(nil)

func (s *publishStorm) Name() string      { return "storm" }
func (s *publishStorm) Kind() faults.Kind { return faults.KindStorm }
func (s *publishStorm) Available() error  { return nil }

func (s *publishStorm) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (faults.Injection, error) {
	n := 2 + rnd.IntN(max(1, s.max-1))
	key := fmt.Sprintf("storm-%d-%016x", s.n.Add(1), rundir.Fresh(s.w.cfg.RunID, rnd).Uint64())
	body := s.w.publishBody(key, 0)
	base := int(s.w.nextID.Add(int64(n))) - n
	in, err := faults.Storm(ctx, n, func(ctx context.Context, i int) {
		s.w.publish(ctx, base+i, key, body)
	})
	in.Params["key"] = key
	return in, err
}
