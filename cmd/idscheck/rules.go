package main

import (
	"context"
	"fmt"
	"io"
)

// cmdRules is a placeholder until its issue lands.
func cmdRules(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "idscheck rules: not implemented yet")
	return exitUsage
}
