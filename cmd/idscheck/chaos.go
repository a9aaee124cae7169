package main

import (
	"context"
	"fmt"
	"io"
)

// cmdChaos is a placeholder until its issue lands.
func cmdChaos(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "idscheck chaos: not implemented yet")
	return exitUsage
}
