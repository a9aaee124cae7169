package chaos

import (
	"log/slog"
	"time"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/rundir"
)

// WorkloadKnobs are the settings every chaos workload shares; Fill gives
// each its default: 30 s, real time, storms of 200 to 300 (at most
// faults.MaxStorm), 2 s per request, 2,000,000 operations recorded, a
// silent logger, a fresh run ID (rundir.NewRunID).
type WorkloadKnobs struct {
	Duration           *time.Duration
	TimeScale          *float64
	StormMin, StormMax *int
	RequestTimeout     *time.Duration
	MaxOps             *int
	Logger             **slog.Logger
	RunID              *string
}

// Fill sets every knob left at its zero value to its default.
func (k WorkloadKnobs) Fill() {
	if *k.Duration <= 0 {
		*k.Duration = 30 * time.Second
	}
	if *k.TimeScale <= 0 {
		*k.TimeScale = 1
	}
	if *k.StormMin <= 0 {
		*k.StormMin = 200
	}
	if *k.StormMax < *k.StormMin {
		*k.StormMax = max(*k.StormMin, 300)
	}
	*k.StormMax = min(*k.StormMax, faults.MaxStorm)
	*k.StormMin = min(*k.StormMin, *k.StormMax)
	if *k.RequestTimeout <= 0 {
		*k.RequestTimeout = 2 * time.Second
	}
	if *k.MaxOps <= 0 {
		*k.MaxOps = 2_000_000
	}
	if *k.Logger == nil {
		*k.Logger = slog.New(slog.DiscardHandler)
	}
	if *k.RunID == "" {
		*k.RunID = rundir.NewRunID()
	}
}
