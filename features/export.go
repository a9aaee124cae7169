package features

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/big"
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

// SameDocument says whether two bodies are the same document: equal JSON
// values (members in any order, any spacing, numbers compared as written
// values) when both are JSON, else equal bytes. A replay that a server
// re-serializes is the same result; only a text that asks for the bytes
// ("byte for byte") compares them.
func SameDocument(a, b []byte) bool {
	va, erra := decodeJSONValue(a)
	vb, errb := decodeJSONValue(b)
	if erra != nil || errb != nil {
		return bytes.Equal(a, b)
	}
	return jsonValueEqual(va, vb)
}

func decodeJSONValue(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func jsonValueEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonValueEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonValueEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		fx, _, ex := big.ParseFloat(string(x), 10, 1024, big.ToNearestEven)
		fy, _, ey := big.ParseFloat(string(y), 10, 1024, big.ToNearestEven)
		return ex == nil && ey == nil && fx.Cmp(fy) == 0
	default:
		return a == b
	}
}
