package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/idscheck/idscheck/checker"
)

// What this file exports is the driver's toolkit, for the workloads a
// profile (profiles/<name>) writes outside this package.

// WorkloadKnobs are the settings every chaos workload shares, each a
// pointer into the workload's own config; Fill gives each left zero its
// default: 30 s, real time, storms of 200 to 300 (at most
// faults.MaxStorm), 2 s per request, 2,000,000 operations recorded, a
// silent logger, a random run ID.
type WorkloadKnobs = workloadKnobs

// Fill gives every knob left zero its default (see WorkloadKnobs).
func (k workloadKnobs) Fill() { k.fill() }

// Start is the instant the recorder's clock counts from (Now is ns since).
func (r *Recorder) Start() time.Time { return r.start }

// Series buckets a history by return time, width each: the run's
// throughput, latencies and unknown outcomes over time.
func Series(h checker.History, width time.Duration) []Bucket { return series(h, width) }

// Digest returns a short digest of a JSON document in canonical form (or
// of the raw bytes when they are not JSON): two answers with the same
// digest have the same body.
func Digest(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) == nil {
		if c, err := json.Marshal(v); err == nil {
			b = c
		}
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:8])
}

// Sleep waits d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
