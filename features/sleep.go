package features

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends (a step's wait for protocol time).
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
