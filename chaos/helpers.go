package chaos

import (
	"context"
	"time"

	"github.com/idscheck/idscheck/checker"
)

// Helpers for the chaos workloads of profiles (profiles/<name>): what
// every workload shares with the driver.

// WorkloadKnobs are the settings every chaos workload shares (its
// duration, time scale, storm bounds, request timeout, bound on recorded
// operations, logger and run ID), as pointers into its config.
type WorkloadKnobs = workloadKnobs

// Fill gives each knob left unset its default: 30 s, real time, storms of
// 200 to 300 (at most faults.MaxStorm), 2 s per request, 2,000,000
// operations recorded, a silent logger, a random run ID.
func (k workloadKnobs) Fill() { k.fill() }

// HoldFor waits d or until ctx ends (its error).
func HoldFor(ctx context.Context, d time.Duration) error { return holdFor(ctx, d) }

// MaxLostReplies bounds the replies one injection of a lost-replies fault
// loses.
const MaxLostReplies = maxLostReplies

// Series buckets a history by return time, width wide, for the progress
// view of a run.
func Series(h checker.History, width time.Duration) []Bucket { return series(h, width) }

// Start is the instant the recorder's clock counts from (Now is the time
// since it).
func (r *Recorder) Start() time.Time { return r.start }
