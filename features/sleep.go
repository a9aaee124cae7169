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

// Rounded rounds a duration for a sentence to the precision its size
// calls for: whole seconds from a minute up, hundredths of a second from a
// second up, else milliseconds. Two reasons that need the same wait then
// read the same ("2h46m40s", never "2h46m40.009s" beside "2h46m40s").
func Rounded(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute || d <= -time.Minute:
		return d.Round(time.Second)
	case d >= time.Second || d <= -time.Second:
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
