package features

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// Helpers for the steps of a profile (profiles/<name>): what every
// profile's steps need of the runner besides Register and Mismatch.

// ErrRunnerBug marks a scenario the runner itself could not run properly
// (a mistake of the steps, not of the target): a step wraps it (%w) into
// its error, and the scenario is judged UNKNOWN, never FAIL.
var ErrRunnerBug = errRunnerBug

// CompactJSON returns b with insignificant whitespace removed, or b as it
// is when it is not JSON: the form in which two bodies are compared byte
// for byte.
func CompactJSON(b []byte) []byte {
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}

// Clip returns b as a string of at most 300 bytes (and an ellipsis), for a
// mismatch's message.
func Clip(b []byte) string {
	const n = 300
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// Sleep waits d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
