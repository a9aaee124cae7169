// Package chaos is the engine's part of a chaos run: what every workload
// shares (its progress line, its per-second series, the faults it tracks,
// the digests of its bodies, the effect sink's proxy and faults) while a
// seeded workload drives a target through a fault schedule drawn from the
// same seed and records every operation into a checker.History and every
// effect into a checker.Ledger. Each profile brings its own workload
// (profiles/<name>, harness.ChaosWorkload); this package judges nothing:
// the profile's checks do.
package chaos
