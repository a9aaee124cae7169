package main

import (
	"context"
	"fmt"
	"io"
)

// cmdServe is a placeholder until its issue lands.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "idscheck serve: not implemented yet")
	return exitUsage
}
