package chaos

import (
	"time"
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
