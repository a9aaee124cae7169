package checker

import (
	"fmt"
	"io"

	"github.com/anishathalye/porcupine"
)

// Helpers for the checks of profiles (profiles/<name>): what every
// profile's checks share with the engine's.

// ReadJSONL calls f with each non-blank, non-comment (#) line of r and its
// number (from 1); the first error of f ends it.
func ReadJSONL(r io.Reader, f func(line []byte, n int) error) error { return readJSONL(r, f) }

// PorcupineOps converts the operations ops[idx] of one partition for
// porcupine (reusing out when it has the length). An operation with an
// unknown outcome returns after everything else in its partition: it may
// take effect at any instant after its call, or never (the models always
// allow "never"). meta adds each operation's description as its metadata
// (for the visualization).
func PorcupineOps(out []porcupine.Operation, ops []Operation, idx []int, meta bool) []porcupine.Operation {
	return porcupineOps(out, ops, idx, meta)
}

// FormatNs renders an instant or a span of a run's clock (ns): "1.50 s",
// "2.3 ms", "40 µs".
func FormatNs(ns int64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%d µs", ns/1e3)
}
