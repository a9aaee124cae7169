package checker

import (
	"fmt"
	"strings"

	"github.com/idscheck/idscheck/verdict"
)

// short shortens a digest or an id for a message.
func short(s string) string {
	if len(s) > 10 {
		return s[:8] + "…"
	}
	return s
}

// describeOp renders one operation of the shared kinds (publish, status;
// any other kind by its name and key) for porcupine's visualization.
func describeOp(op *Operation) string {
	var b strings.Builder
	switch op.Kind {
	case OpPublish:
		fmt.Fprintf(&b, "publish(%s, body %s)", op.Key, short(op.Input.Body))
	case OpStatus:
		fmt.Fprintf(&b, "status(%s)", short(op.Key))
	default:
		fmt.Fprintf(&b, "%s(%s)", op.Kind, short(op.Key))
	}
	b.WriteString(" → ")
	if op.Effective() == verdict.OutcomeUnknown {
		b.WriteString("unknown")
		return b.String()
	}
	fmt.Fprintf(&b, "%d", op.Output.Status)
	switch op.Kind {
	case OpPublish:
		if op.Output.ID != "" {
			fmt.Fprintf(&b, " id %s", short(op.Output.ID))
		}
	case OpStatus:
		if op.Output.State != "" {
			b.WriteString(" " + op.Output.State)
		}
	}
	return b.String()
}
