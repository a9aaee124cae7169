package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/verdict"
)

// Progress is a snapshot of a running chaos run.
type Progress struct {
	Elapsed   time.Duration
	Phase     string // "faults", "drain", "status"
	Ops       int
	Unknown   int
	Published int // units of work under way or done, as the workload's Columns name them
	Executed  int // effects, as the workload's Columns name them
	Fault     string
}

// Column names one count of the progress lines and says what it counts,
// in the words of the workload's protocol.
type Column struct{ Name, Means string }

// Columns name Progress.Published and Progress.Executed.
type Columns struct{ Units, Effects Column }

// DefaultColumns are the columns of a workload that names none.
var DefaultColumns = Columns{
	Units:   Column{"requests", "logical requests started"},
	Effects: Column{"effects", "effects counted, duplicates included"},
}

// ReportProgress is the progress loop of every chaos workload: every
// interval until ctx ends it calls report with what sample counts, the
// time elapsed since start, and the phase and the fault the workload last
// stored in phase and fault (strings; unset: ""); then it closes done.
func ReportProgress(ctx context.Context, done chan<- struct{}, every time.Duration, start time.Time, phase, fault *atomic.Value,
	sample func() Progress, report func(Progress)) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p := sample()
		p.Elapsed = time.Since(start)
		p.Phase, _ = phase.Load().(string)
		p.Fault, _ = fault.Load().(string)
		report(p)
	}
}

// Bucket is one second of the run: operations completed, unknown outcomes,
// and latency percentiles of the operations that got a response.
type Bucket struct {
	At      time.Duration `json:"at"`
	Ops     int           `json:"ops"`
	Unknown int           `json:"unknown"`
	Failed  int           `json:"failed"`
	P50     time.Duration `json:"p50"`
	P99     time.Duration `json:"p99"`
}

// Series buckets a history by return time, one Bucket per width: what a
// run's throughput and latency chart shows.
func Series(h checker.History, width time.Duration) []Bucket { return series(h, width) }

// series buckets the history by return time.
func series(h checker.History, width time.Duration) []Bucket {
	if len(h.Ops) == 0 {
		return nil
	}
	var last int64
	for _, op := range h.Ops {
		last = max(last, op.Return)
	}
	n := int(last/int64(width)) + 1
	buckets := make([]Bucket, n)
	lat := make([][]time.Duration, n)
	for _, op := range h.Ops {
		i := int(op.Return / int64(width))
		b := &buckets[i]
		b.Ops++
		switch op.Outcome {
		case verdict.OutcomeUnknown:
			b.Unknown++
		case verdict.OutcomeFailed:
			b.Failed++
		default:
			lat[i] = append(lat[i], time.Duration(op.Return-op.Call))
		}
	}
	for i := range buckets {
		buckets[i].At = time.Duration(i) * width
		l := lat[i]
		if len(l) == 0 {
			continue
		}
		sort.Slice(l, func(a, b int) bool { return l[a] < l[b] })
		buckets[i].P50 = l[len(l)/2]
		buckets[i].P99 = l[min(len(l)-1, len(l)*99/100)]
	}
	return buckets
}

// Tracked is a fault that names itself in Current while it is injected,
// for a workload's progress line (Current holds a string; "" between
// faults).
type Tracked struct {
	faults.Fault
	Current *atomic.Value
}

var _ faults.Fault = Tracked{}

// Inject injects the fault with Current naming it.
func (t Tracked) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (faults.Injection, error) {
	t.Current.Store(t.Name())
	defer t.Current.Store("")
	return t.Fault.Inject(ctx, rnd, d)
}

// Digest returns a short digest of a JSON document in canonical form (or of
// the raw bytes when they are not JSON): equal for semantically identical
// bodies, as checker.Input.Body wants.
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

// Sleep waits for d or until ctx ends, whichever comes first.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
