package chaos

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// Recorder collects the operations of a run, bounded in count: past its
// bound it drops them (and says how many), so a run is bounded in memory
// whatever the load.
type Recorder struct {
	start    time.Time
	max      int
	mu       sync.Mutex
	ops      []checker.Operation
	dropped  int
	recorded atomic.Int64
	unknown  atomic.Int64
}

// NewRecorder returns a recorder of at most max operations whose times
// count from start.
func NewRecorder(start time.Time, max int) *Recorder {
	return &Recorder{start: start, max: max}
}

// Start is when the run's clock started: operation times count from it.
func (r *Recorder) Start() time.Time { return r.start }

// Now is the time of the run's clock: ns since its start.
func (r *Recorder) Now() int64 { return int64(time.Since(r.start)) }

// Op records one operation.
func (r *Recorder) Op(op checker.Operation) {
	r.recorded.Add(1)
	if op.Outcome == verdict.OutcomeUnknown {
		r.unknown.Add(1)
	}
	r.mu.Lock()
	if len(r.ops) < r.max {
		r.ops = append(r.ops, op)
	} else {
		r.dropped++
	}
	r.mu.Unlock()
}

// Full reports that the bound is reached: every load loop stops there.
func (r *Recorder) Full() bool { return r.recorded.Load() >= int64(r.max) }

// Len is how many operations were recorded or dropped.
func (r *Recorder) Len() int { return int(r.recorded.Load()) }

// Unknown is how many had an unknown outcome.
func (r *Recorder) Unknown() int { return int(r.unknown.Load()) }

// History returns the recorded operations in call order, and how many were
// dropped past the bound.
func (r *Recorder) History() (checker.History, int) {
	r.mu.Lock()
	ops := append([]checker.Operation(nil), r.ops...)
	dropped := r.dropped
	r.mu.Unlock()
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	return checker.History{Ops: ops}, dropped
}
