package main

import (
	"context"
	"fmt"
	"io"
)

// cmdCheck is a placeholder until its issue lands.
func cmdCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "idscheck check: not implemented yet")
	return exitUsage
}
