package features

import (
	"fmt"
	"strings"

	"github.com/idscheck/idscheck/client"
)

// Describe quotes a response for a Mismatch: its status and at most 200
// bytes of its body, on one line; "no response" for nil.
func Describe(r *client.Response) string {
	if r == nil {
		return "no response"
	}
	b := strings.Join(strings.Fields(string(r.Body)), " ")
	if len(b) > 200 {
		b = b[:200] + "…"
	}
	if b == "" {
		return fmt.Sprintf("status %d (empty body)", r.Status)
	}
	return fmt.Sprintf("status %d %s", r.Status, b)
}

// describe is Describe, for the steps of this package.
func describe(r *client.Response) string { return Describe(r) }
