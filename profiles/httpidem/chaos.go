package httpidem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/harness"

	"github.com/idscheck/idscheck/checker"
	suthttpidem "github.com/idscheck/idscheck/sut/httpidem"
)

// Chaos is the http-idempotency profile's chaos workload (RunWorkload):
// logical requests to the endpoint the target describes (its *Endpoint in
// harness.ChaosConfig.Described), each one body, one key and one caller
// (now and then one key from two callers), delivered until a terminal
// answer with the same request, resent, duplicated concurrently and
// stormed by 200 and more identical requests; after the drain, what each
// created by the count read and its effects at the harness's sink.
// Judged by Check under the declared variant's retry rule
// (IETF-2.6-retry-result, T0-0-no-further-effect, STRIPE-IDEM-same-result):
// http-idem-effects and http-idem-replay. No faults of its own: the
// network's, crashes, and the bundled server's failpoints, where it exits.
func Chaos() *harness.ChaosWorkload {
	fps := map[string]string{}
	for _, p := range suthttpidem.Failpoints() {
		fps[p] = `return("exit")`
	}
	return &harness.ChaosWorkload{
		Summary:          "requests with an idempotency key, one body and one caller each, delivered until a terminal answer, resent, duplicated and stormed; what each created read back, effects counted at the harness's sink",
		Columns:          chaos.Columns{Units: chaos.Column{Name: "requests", Means: "logical requests started"}, Effects: chaos.Column{Name: "effects", Means: "effects at the effect sink, duplicates included (without a sink: logical requests answered 2xx)"}},
		Sink:             true,
		SinkOptional:     true,
		NeedsDescription: true,
		AnyAnswer:        true,
		StormMin:         200,
		StormMax:         300,
		Failpoints:       fps,
		Run:              runChaos,
		Check:            checkChaos,
	}
}

func runChaos(ctx context.Context, c harness.ChaosConfig) (*harness.ChaosResult, error) {
	ep, _ := c.Described.(*Endpoint)
	if ep == nil {
		return nil, errors.New("chaos http-idempotency: no endpoint described (\"http_idempotency\" in the target file)")
	}
	res, err := RunWorkload(ctx, WorkloadConfig{BaseURL: c.BaseURL, Replicas: c.Replicas, Endpoint: *ep, Sink: c.Sink, Seed: c.Seed, RunID: c.RunID,
		Duration: c.Duration, Workers: c.Workers, TimeScale: c.TimeScale, TimeScaleAssumed: c.TimeScaleAssumed, Faults: c.Faults, StormMin: 200,
		StormMax: max(200, c.StormMax), RequestTimeout: c.Timeout, Recorder: c.Recorder, Logger: c.Logger, Progress: c.Progress})
	if res == nil {
		return nil, err
	}
	var rec bytes.Buffer
	if werr := WriteRecord(&rec, res.Record); werr != nil {
		return nil, werr
	}
	return &harness.ChaosResult{Start: res.Start, End: res.End, Namespace: "http-idempotency", Schedule: res.Schedule, Timeline: res.Timeline,
		History: res.History, Ledger: res.Ledger, Series: res.Series, Drained: res.Drained,
		Files: map[string][]byte{RecordFile: rec.Bytes()},
		Summary: fmt.Sprintf("%d logical requests under the %s variant (%d answered 2xx, %d refused, %d never answered), %d deliveries, %d storms",
			res.Requests, res.Record.Variant, res.Answered, res.Refused, res.Unsettled, len(res.History.Ops), res.Storms)}, err
}

func checkChaos(r harness.ChaosRecord) checker.Report {
	rec, err := ReadRecord(bytes.NewReader(r.Files[RecordFile]))
	if err != nil {
		// The record unread: nothing says what each request created.
		return checker.Report{Ops: len(r.History.Ops), Effects: len(r.Ledger.Effects), Counts: map[checker.AnomalyKind]int{},
			Models: []checker.ModelCheck{{Model: ModelEffects, Result: checker.LinUnknown}, {Model: ModelReplay, Result: checker.LinUnknown}}}
	}
	return Check(r.History, r.Ledger, rec, CheckOptions{Undrained: r.Undrained})
}
