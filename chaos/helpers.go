package chaos

import (
	"context"
	"time"
)

// Helpers for the chaos workloads of profiles (profiles/<name>): what
// every workload shares with the driver.

// HoldFor waits d or until ctx ends (its error).
func HoldFor(ctx context.Context, d time.Duration) error { return holdFor(ctx, d) }

// MaxLostReplies bounds the replies one injection of a lost-replies fault
// loses.
const MaxLostReplies = maxLostReplies
