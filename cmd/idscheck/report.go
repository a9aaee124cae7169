package main

import (
	"context"
	"fmt"
	"io"
)

// cmdReport is a placeholder until its issue lands.
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "idscheck report: not implemented yet")
	return exitUsage
}
