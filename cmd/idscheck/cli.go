package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes, as ../ARCHITECTURE.md fixes them. A CI pipeline gates on them.
const (
	exitOK          = 0 // every MUST passed
	exitFailed      = 1 // a MUST failed (or a SHOULD, with --strict)
	exitUsage       = 2 // usage or configuration error
	exitUnreachable = 3 // target unreachable
	exitUndecided   = 4 // undecided rules remain
)

// command is one subcommand. Each lives in its own file and parses its own
// flag.FlagSet into a local config: no package-level flags, no global output.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "certify a target against a profile and write the report", cmdRun},
		{"chaos", "drive a target through faults and check the recorded histories", cmdChaos},
		{"check", "re-check a chaos run directory offline", cmdCheck},
		{"report", "re-render the reports of a run directory from result.json", cmdReport},
		{"rules", "list the rule catalog", cmdRules},
		{"serve", "run the bundled reference server", cmdServe},
		{"mutants", "certify every deliberate mutant of the reference server and print the kill matrix", cmdMutants},
	}
}

// cli runs one invocation and returns the process exit code.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "idscheck: unknown command %q; run 'idscheck help' for the list\n", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("idscheck proves, or disproves, exactly-once effects over at-least-once delivery.\n\nUsage:\n  idscheck <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'idscheck <command> -h' for the flags of one command.\n")
	io.WriteString(w, b.String())
}

// newFlagSet returns a FlagSet whose errors and help go to stderr and that
// never exits the process.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: idscheck %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs. It returns (exitOK, true) for -h, (exitUsage,
// true) for a bad flag or a stray argument when allowArgs is false, and
// (0, false) when the command should go on.
func parseFlags(fs *flag.FlagSet, args []string, allowArgs bool) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, true
		}
		return exitUsage, true
	}
	if !allowArgs && fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "idscheck %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return exitUsage, true
	}
	return 0, false
}
