package features

import (
	"bytes"
	"encoding/json"
)

// What this file exports is the step toolkit, for the step definitions a
// profile (profiles/<name>) writes outside this package.

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
