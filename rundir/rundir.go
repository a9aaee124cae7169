// Package rundir names the files of a run directory: what `idscheck run`
// and `idscheck chaos` write into --out, and what `idscheck check` and
// `idscheck report` read back. Every file a run writes is named here and
// nowhere else; a profile's own records (a chaos workload's Files) are named
// by the profile.
package rundir

const (
	// Result is everything a report shows (reports.Result): reports are
	// re-rendered from it alone.
	Result = "result.json"
	// JUnit is one testcase per rule, for CI.
	JUnit = "junit.xml"
	// HTML is the self-contained report for a person.
	HTML = "index.html"
	// History is every operation (chaos) or exchange (run), one JSON object
	// a line.
	History = "history.jsonl"
	// Ledger is every effect the harness's sink counted, one a line.
	Ledger = "ledger.jsonl"
	// Chaos is a chaos run's record: seed, schedule, fault timeline, series.
	Chaos = "chaos.json"
	// Check is the checker's report of a chaos run.
	Check = "check.json"
	// Linearization is porcupine's view of the partitions found illegal.
	Linearization = "linearization.html"
	// Scenarios is every scenario of a run with its judgments.
	Scenarios = "scenarios.json"
	// Matrix is `idscheck report A B`'s comparison of runs.
	Matrix = "matrix.html"
)
