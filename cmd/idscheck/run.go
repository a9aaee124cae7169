package main

import (
	"context"
	"fmt"
	"io"
)

// cmdRun is a placeholder until its issue lands.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "idscheck run: not implemented yet")
	return exitUsage
}
