package chaos

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestReportProgress: the loop reports what sample counts with the phase
// and fault last stored, and closes done once ctx ends.
func TestReportProgress(t *testing.T) {
	var phase, fault atomic.Value
	phase.Store("faults")
	fault.Store("latency")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	got := make(chan Progress, 1)
	go ReportProgress(ctx, done, time.Millisecond, time.Now(), &phase, &fault,
		func() Progress { return Progress{Ops: 7, Published: 3, Phase: "ignored"} },
		func(p Progress) {
			select {
			case got <- p:
			default:
			}
		})
	p := <-got
	cancel()
	<-done
	if p.Ops != 7 || p.Published != 3 || p.Phase != "faults" || p.Fault != "latency" || p.Elapsed < 0 {
		t.Errorf("reported %+v", p)
	}
}
