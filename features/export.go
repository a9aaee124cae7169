package features

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// What this file exports is the step toolkit, for the step definitions a
// profile (profiles/<name>) writes outside this package.

// ErrRunnerBug marks a step that could not run as written (a scenario that
// names an unknown alias, a description the harness should have refused):
// the scenario ends UNKNOWN as the harness's fault, never as the target's.
// Wrap it: fmt.Errorf("%w: ...", features.ErrRunnerBug).
var ErrRunnerBug = errRunnerBug

// Clip returns at most the first 300 bytes of a body, for a mismatch's
// "observed" (an ellipsis marks a cut).
func Clip(b []byte) string {
	const n = 300
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// CompactJSON returns a JSON document without insignificant space, or b
// itself when it is not JSON: two bodies compare as documents.
func CompactJSON(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// Sleep waits d, or until ctx ends (the caller reads ctx.Err()).
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
