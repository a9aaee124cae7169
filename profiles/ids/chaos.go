package ids

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/harness"
	sutids "github.com/idscheck/idscheck/sut/ids"
)

// IDSChaos is the IDS profile's chaos workload (RunIDS): logical
// commands over tenants and actors delivered at least once, storms of 200
// and more identical envelopes, every unknown outcome retried with the same
// envelope; effects counted at the harness's sink (which the sink's own
// faults partition or make lose replies); judged by CheckIDS
// (IDS-V-exactly-once-effects, IDS-IX.A-same-outcome,
// IDS-XII-executed-or-replayed). The bundled server crashes at its
// failpoints (a racy mutant's window is widened by the failpoints its
// profile.Mutant carries).
func IDSChaos() *harness.ChaosWorkload {
	fps := map[string]string{}
	for _, p := range sutids.Failpoints() {
		fps[p] = `return("exit")`
	}
	return &harness.ChaosWorkload{
		Summary:    "IDS commands over tenants and actors, duplicated, stormed and retried until a terminal answer; effects counted at the harness's sink",
		Columns:    chaos.Columns{Units: chaos.Column{Name: "commands", Means: "logical commands made"}, Effects: chaos.Column{Name: "effects", Means: "effects at the effect sink, duplicates included"}},
		Sink:       true,
		Faults:     chaos.SinkFaults,
		StormMin:   200,
		StormMax:   300,
		Failpoints: fps,
		Run:        runIDSChaos,
		Check:      checkIDSChaos,
	}
}

func runIDSChaos(ctx context.Context, c harness.ChaosConfig) (*harness.ChaosResult, error) {
	res, err := RunIDS(ctx, IDSConfig{BaseURL: c.BaseURL, Replicas: c.Replicas, APIKey: c.APIKey, Sink: c.Sink, Seed: c.Seed, RunID: c.RunID,
		Duration: c.Duration, Workers: c.Workers, TimeScale: c.TimeScale, TimeScaleAssumed: c.TimeScaleAssumed, Faults: c.Faults, StormMin: 200,
		StormMax: max(200, c.StormMax), RequestTimeout: c.Timeout, Recorder: c.Recorder, Logger: c.Logger, Progress: c.Progress})
	if res == nil {
		return nil, err
	}
	var keys bytes.Buffer
	if werr := WriteIDSKeys(&keys, res.Keys); werr != nil {
		return nil, werr
	}

	return &harness.ChaosResult{Start: res.Start, End: res.End, Namespace: "ids", Schedule: res.Schedule, Timeline: res.Timeline,
		History: res.History, Ledger: res.Ledger, Series: res.Series, Drained: res.Drained,
		Files:   map[string][]byte{IDSKeysFile: keys.Bytes()},
		Summary: fmt.Sprintf("%d logical commands of %s", len(res.Keys), strings.Join(res.Commands, ", "))}, err
}

func checkIDSChaos(r harness.ChaosRecord) checker.Report {
	keys, err := ReadIDSKeys(bytes.NewReader(r.Files[IDSKeysFile]))
	if err != nil {
		keys = nil // every key's evidence unread: the evidence check is undecided
	}
	return CheckIDS(r.History, r.Ledger, keys, IDSOptions{Undrained: r.Undrained, ReplayForm: r.Readings[DecisionReplayForm]})
}
