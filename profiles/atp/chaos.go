package atp

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/harness"
	sutatp "github.com/idscheck/idscheck/sut/atp"
)

// ATPChaos is the ATP profile's chaos workload (RunATP): agents sign
// intents, each transaction authorized and executed under one key by the
// agent client with the text's retry policy until a terminal state;
// resends, concurrent duplicates, storms of 200 and more identical
// executes, replays under another key, declines, expiries; money counted
// at the rail the harness hosts (whose faults partition it, lose its
// replies, drop or delay its callbacks); after the drain, the
// reconciliation wait and every final row. Judged by CheckATP
// (ATP-2-no-second-effect, ATP-2-retry-verbatim, ATP-0-signed-by-site-key,
// ATP-4-settlement-signed, ATP-4-compensation-receipt,
// ATP-4-never-speculative, ATP-4-expired-no-receipt, ATP-1-monotonic,
// ATP-1-no-executing-to-authorized, ATP-6-reconciliation). The bundled
// server crashes at its failpoints.
func ATPChaos() *harness.ChaosWorkload {
	fps := map[string]string{}
	for _, p := range sutatp.Failpoints() {
		fps[p] = `return("exit")`
	}
	return &harness.ChaosWorkload{
		Summary:    "ATP transactions of signed intents authorized and executed under one key, retried, duplicated, stormed and replayed until a terminal state; money counted at the harness's payment rail",
		Columns:    chaos.Columns{Units: chaos.Column{Name: "transactions", Means: "transactions begun"}, Effects: chaos.Column{Name: "charges", Means: "charges at the payment rail, duplicates included"}},
		Sink:       true,
		Faults:     ATPRailFaults,
		StormMin:   200,
		StormMax:   300,
		Failpoints: fps,
		Run:        runATPChaos,
		Check:      checkATPChaos,
	}
}

func runATPChaos(ctx context.Context, c harness.ChaosConfig) (*harness.ChaosResult, error) {
	res, err := RunATP(ctx, ATPConfig{BaseURL: c.BaseURL, Replicas: c.Replicas, APIKey: c.APIKey, Sink: c.Sink, Seed: c.Seed, RunID: c.RunID,
		Duration: c.Duration, Workers: c.Workers, TimeScale: c.TimeScale, Faults: c.Faults, StormMin: 200,
		StormMax: max(200, c.StormMax), RequestTimeout: c.Timeout, Recorder: c.Recorder, Logger: c.Logger, Progress: c.Progress})
	if res == nil {
		return nil, err
	}
	files, ferr := ATPFiles(res.Record)
	if ferr != nil {
		return nil, ferr
	}
	var purposes []string
	total := 0
	for p, n := range res.Transactions {
		purposes = append(purposes, fmt.Sprintf("%d %s", n, p))
		total += n
	}
	sort.Strings(purposes)
	return &harness.ChaosResult{Start: res.Start, End: res.End, Namespace: "atp", Schedule: res.Schedule, Timeline: res.Timeline,
		History: res.History, Ledger: res.Ledger, Series: res.Series, Drained: res.Drained, Files: files,
		Summary: fmt.Sprintf("%d transactions (%s), %d rows read after a reconciliation wait of %s", total, strings.Join(purposes, ", "),
			len(res.Record.Rows), res.Record.ReconcileWait.Round(1e6))}, err
}

func checkATPChaos(r harness.ChaosRecord) checker.Report {
	rec, err := ReadATPFiles(r.Files)
	if err != nil {
		// No record: the keys and final rows are unknown, and the checks
		// that need them are undecided (never passed).
		rec = ATPRecord{}
	}
	return CheckATP(r.History, r.Ledger, rec, ATPOptions{})
}
