package atp

import (
	"context"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// preflight proves the target is an ATP site of this binding and its API
// key works: GET /api/atp/config, what every site declares
// (docs/atp-binding.md), answers 2xx with the key.
func preflight(ctx context.Context, t features.Target, timeout time.Duration) error {
	return harness.ProbeRoute(ctx, t, timeout, PathConfig,
		"an ATP site declares its binding there (docs/atp-binding.md): is this an ATP site?")
}
