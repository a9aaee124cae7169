package chaos

import (
	"context"
	"sync"
	"time"
)

// DrainAfter returns the context of a run's drain: it ends d after load
// ends (or with parent). A workload's load ends when its fault schedule
// says (faults.RunLoad: at the planned duration, or later when a requested
// fault was still owed its turn), so the drain's time is counted from
// there, not from the run's start. stop releases it.
func DrainAfter(parent, load context.Context, d time.Duration) (ctx context.Context, stop context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	var mu sync.Mutex
	var t *time.Timer
	stopped := false
	unhook := context.AfterFunc(load, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t = time.AfterFunc(max(d, 0), cancel)
		}
	})
	return ctx, func() {
		unhook()
		mu.Lock()
		stopped = true
		if t != nil {
			t.Stop()
		}
		mu.Unlock()
		cancel()
	}
}
