package features

import (
	"fmt"
	"strings"

	"github.com/idscheck/idscheck/client"
)

// Describe quotes a response for a Mismatch: status and a short body.
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
