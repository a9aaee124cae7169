package intent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	sut "github.com/idscheck/idscheck/sut/intent"
	"github.com/idscheck/idscheck/verdict"
)

// ChaosOptionsFile is the record of a chaos run (harness.ChaosResult.Files)
// that holds the Options its check ran under, so that a run re-checked
// offline (idscheck check DIR) is judged as it was.
const ChaosOptionsFile = "check_options.json"

// Chaos is the Intent Protocol's chaos workload (RunChaos): publishers with
// idempotency keys, duplicate storms of one fresh key, workers that claim,
// extend, fail and fulfil, every unknown outcome retried; effects are the
// workers' executions, counted by the workload itself (no effect sink).
// Judged by Check under ChaosCheckOptions: lost, duplicated and unexpected
// units, double leases, stale tokens accepted, idempotency violations,
// linearizability of the idempotency record and of each intent's lease.
// The bundled server crashes at its failpoints (Failpoints; FailpointTriggers
// drives it there when the workload has not).
func Chaos() *harness.ChaosWorkload {
	return &harness.ChaosWorkload{
		Summary:    "Intent Protocol publishers with idempotency keys and workers that claim, extend, fail and fulfil, stormed and retried; effects are the workers' executions",
		StormMin:   2,
		StormMax:   100,
		Failpoints: Failpoints(),
		FailpointTriggers: func(baseURL string, t features.Target) map[string]func(context.Context) error {
			return FailpointTriggers(baseURL, t.APIKey, t.Credentials[CredentialAdminToken])
		},
		OptionsFile: ChaosOptionsFile,
		Tally:       chaosTally,
		Columns:     chaos.Columns{Units: chaos.Column{Name: "published", Means: "publishes acknowledged"}, Effects: chaos.Column{Name: "executions", Means: "workers' executions, duplicates included"}},
		Run:         runChaosWorkload,
		Check:       checkChaosWorkload,
	}
}

// chaosTally words the check's counts of units: keys published,
// acknowledged, executed, seen fulfilled, dead before running.
func chaosTally(q checker.QueueStats) string {
	return fmt.Sprintf("queue: %d keys published, %d acknowledged, %d executed, %d seen fulfilled, %d dead before running; lost %d, duplicated %d, unexpected %d, recovered %d",
		q.Attempted, q.Acknowledged, q.Effected, q.Fulfilled, q.Dead, q.Lost, q.Duplicated, q.Unexpected, q.Recovered)
}

// Failpoints are the bundled server's named failpoints, each with the term
// that crashes the server there (it calls os.Exit).
func Failpoints() map[string]string {
	m := map[string]string{}
	for _, name := range sut.Failpoints() {
		m[name] = `return("exit")`
	}
	return m
}

// ChaosCheckOptions are the promises of the chaos workload: workers execute
// at least once (idempotent workers: only a second intent for one key is a
// duplicate), they fail some intents on purpose (dead is not lost), and the
// run is far shorter than the intents' TTL (an acknowledged intent that
// vanished is lost), and the drain drives every unit to an end (one that ran
// but is still open or claimed at the end is stuck: lost).
func ChaosCheckOptions() Options {
	return Options{Timeout: 60 * time.Second, MaxEffects: -1, ExpiredIsLost: true, MustFinish: true}
}

// runChaosWorkload is RunChaos behind harness.ChaosWorkload: a lease is
// the claim_timeout a claim answers at the target's time scale; at a time
// scale only assumed, at the rate the target's own answers show
// (ChaosConfig.ProbeLease).
func runChaosWorkload(ctx context.Context, c harness.ChaosConfig) (*harness.ChaosResult, error) {
	lease := 60 * time.Second
	if c.TimeScale > 0 {
		lease = time.Duration(float64(lease) / c.TimeScale)
	}
	res, err := RunChaos(ctx, ChaosConfig{BaseURL: c.BaseURL, Replicas: c.Replicas, APIKey: c.APIKey, Seed: c.Seed, RunID: c.RunID, Duration: c.Duration,
		Workers: c.Workers, Lease: lease, ProbeLease: c.TimeScaleAssumed, Faults: c.Faults, StormMax: c.StormMax, RequestTimeout: c.Timeout,
		Logger: c.Logger, Progress: c.Progress})
	if res == nil {
		return nil, err
	}
	if c.Recorder != nil {
		for _, op := range res.History.Ops {
			c.Recorder.Op(op)
		}
	}
	opts := ChaosCheckOptions()
	opts.Undrained = !res.Drained
	opts.ClockSlack = res.ClockSlack
	b, merr := json.MarshalIndent(opts, "", "  ")
	if merr != nil {
		return nil, fmt.Errorf("chaos: %s: %w", ChaosOptionsFile, merr)
	}
	published := map[string]bool{}
	for _, op := range res.History.Ops {
		if op.Kind == checker.OpPublish && op.Effective() == verdict.OutcomeOK {
			published[op.Key] = true
		}
	}
	return &harness.ChaosResult{Start: res.Start, End: res.End, Namespace: res.Namespace, Schedule: res.Schedule,
		Timeline: res.Timeline, History: res.History, Ledger: res.Ledger, Series: res.Series, Drained: res.Drained,
		Files:   map[string][]byte{ChaosOptionsFile: append(b, '\n')},
		Summary: fmt.Sprintf("%d units published and acknowledged, %d executions", len(published), len(res.Ledger.Effects))}, err
}

// checkChaosWorkload judges a recorded run with Check, under the options
// the run recorded (ChaosOptionsFile), else ChaosCheckOptions; a drain
// that ran out of time makes work still open or claimed pending, not lost.
func checkChaosWorkload(r harness.ChaosRecord) checker.Report {
	opts := ChaosCheckOptions()
	if b, ok := r.Files[ChaosOptionsFile]; ok {
		var recorded Options
		if err := json.Unmarshal(b, &recorded); err == nil {
			opts = recorded
		}
	}
	opts.Undrained = opts.Undrained || r.Undrained
	return Check(r.History, r.Ledger, opts)
}

// FailpointTriggers drive the bundled server at baseURL to each failpoint
// when the workload has not reached it half-way through its hold (see
// faults.RemoteFailpoint.Trigger): the cleanup pass runs every few
// minutes, so its failpoint is reached by asking for a cleanup (POST
// /admin/cleanup with adminToken, the admin token the harness gave the
// server); the failpoints after a commit and after a claim by a publish,
// and a publish then a claim, in a namespace of their own that the
// workload never claims from and the checker never sees. An error is
// expected: the failpoint ends the server mid-request.
func FailpointTriggers(baseURL, apiKey, adminToken string) map[string]func(context.Context) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	send := func(ctx context.Context, path string, header http.Header, body string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+path, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header = header
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("POST %s: %s", path, resp.Status)
		}
		return nil
	}
	const ns = "chaos-failpoint-trigger"
	publish := func(ctx context.Context) error {
		return send(ctx, PathIntent, http.Header{HeaderAPIKey: {apiKey}},
			`{"goal":"failpoint-trigger","payload":{},"namespace":"`+ns+`"}`)
	}
	return map[string]func(context.Context) error{
		sut.FailpointInsideCleanup: func(ctx context.Context) error {
			return send(ctx, PathCleanup, http.Header{HeaderAdminToken: {adminToken}}, "")
		},
		sut.FailpointAfterCommitBeforeReply: publish,
		sut.FailpointAfterClaimBeforeResponse: func(ctx context.Context) error {
			if err := publish(ctx); err != nil {
				return err
			}
			return send(ctx, PathClaim+"?namespace="+ns, http.Header{HeaderAPIKey: {apiKey}, HeaderWorkerID: {"failpoint-trigger"}}, "")
		},
	}
}
