package checker

import (
	"fmt"
	"strings"

	"github.com/idscheck/idscheck/verdict"
)

// short is Abbreviate.
func short(s string) string { return Abbreviate(s) }

// describeOp is DescribeOp.
func describeOp(op *Operation) string { return DescribeOp(op) }

// Abbreviate shortens an ID or a digest to its first 8 characters (and an
// ellipsis) for a one-line rendering.
func Abbreviate(s string) string {
	if len(s) > 10 {
		return s[:8] + "…"
	}
	return s
}

// DescribeOp renders one operation of the shared kinds (publish, status;
// any other kind by its name and key) on one line, for porcupine's
// visualization and for evidence. A profile with kinds of its own renders
// them itself.
func DescribeOp(op *Operation) string {
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
