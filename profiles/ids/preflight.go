package ids

import (
	"context"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflight proves the target speaks the IDS binding and its API key works:
// GET /registry, the command registry every IDS target declares
// (docs/ids-binding.md), answers 2xx with the key.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	return harness.ProbeRoute(ctx, t, timeout, PathRegistry,
		"an IDS target serves its command registry there (docs/ids-binding.md): is this an IDS server?")
}
