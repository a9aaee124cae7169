package checker

import (
	"fmt"
	"sort"
)

// SortedKeys returns the keys of m in ascending order: a check that walks a
// map reports in the same order every time.
func SortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// FormatNs renders a span of ns nanoseconds for an anomaly's explanation
// (seconds, milliseconds or microseconds, whichever reads best).
func FormatNs(ns int64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", float64(ns)/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", float64(ns)/1e6)
	}
	return fmt.Sprintf("%d µs", ns/1e3)
}
