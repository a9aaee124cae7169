package checker

import (
	"fmt"
	"sort"
)

// What this file exports is the checker's own toolkit, for the checks a
// profile (profiles/<name>) writes over its histories outside this package.

// FormatNs renders a duration in ns of a run's clock for an explanation:
// seconds, milliseconds or microseconds, whichever reads best.
func FormatNs(ns int64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%d µs", ns/1e3)
}

// SortedKeys returns the keys of m in increasing order: explanations and
// evidence list keys in a stable order.
func SortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
