package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
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
		{"version", "print the version and VCS revision of this build (also: idscheck --version)", cmdVersion},
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
	if args[0] == "--version" || args[0] == "-version" {
		return cmdVersion(ctx, args[1:], stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	if near := nearestName(names, strings.TrimLeft(args[0], "-")); near != "" {
		fmt.Fprintf(stderr, "idscheck: unknown command %q; did you mean %q? ('idscheck help' lists every command)\n", args[0], near)
		return exitUsage
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

// newFlagSet returns a FlagSet that never exits the process. Its usage (the
// synopsis, then every flag) goes to its output, stderr, except for -h:
// parseFlags prints the help asked for on stdout.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: idscheck %s\n\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs. It returns (exitOK, true) for -h, its help
// printed on stdout; (exitUsage, true) for a bad flag, said in one line on
// fs's output (with the nearest flag for a mistyped one), or for a stray
// argument when allowArgs is false; and (0, false) when the command should
// go on.
func parseFlags(fs *flag.FlagSet, args []string, allowArgs bool, stdout io.Writer) (int, bool) {
	stderr := fs.Output()
	fs.SetOutput(io.Discard) // the flag package's own message and usage: said below, once
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			fs.SetOutput(stderr)
			return exitOK, true
		}
		fmt.Fprintf(stderr, "idscheck %s: %s (idscheck %s -h lists every flag)\n", fs.Name(), flagErrorText(fs, err), fs.Name())
		return exitUsage, true
	}
	if !allowArgs && fs.NArg() > 0 {
		fmt.Fprintf(stderr, "idscheck %s: unexpected argument %q (idscheck %s -h shows the usage)\n", fs.Name(), fs.Arg(0), fs.Name())
		return exitUsage, true
	}
	return 0, false
}

// trimEcho drops the leading "name: " of msg for each of names (again and
// again): the words the caller's own prefix already says. "idscheck run: "
// and an error "run: no rule matches …" make "idscheck run: no rule
// matches …", not "idscheck run: run: …".
func trimEcho(msg string, names ...string) string {
	for again := true; again; {
		again = false
		for _, n := range names {
			if rest, ok := strings.CutPrefix(msg, n+": "); ok {
				msg, again = rest, true
			}
		}
	}
	return msg
}

// flagErrorText says what was wrong with the flags in one line: an unknown
// flag with the nearest one fs defines ("unknown flag --seeed; did you mean
// --seed?"), or the flag package's own words with flags spelt "--name".
func flagErrorText(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		s := "unknown flag --" + name
		if other := otherProfilesFlag(fs, name); other != "" {
			s += ": " + other
		} else if near := nearestFlag(fs, name); near != "" {
			s += "; did you mean --" + near + "?"
		}
		return s
	}
	return flagDashes.ReplaceAllString(oneLine(msg, 300), "${1}--${2}")
}

// flagDashes finds "-name" after "flag " or ": " in the flag package's messages.
var flagDashes = regexp.MustCompile(`(flag |: )-([A-Za-z0-9][-A-Za-z0-9_.]*)`)

// nearestFlag is the flag of fs nearest to name (nearestName).
func nearestFlag(fs *flag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return nearestName(names, name)
}

// nearestName is the one of names nearest to name: the same but for case
// and '_' for '-', else the one a unique prefix or an edit distance of at
// most 2 (1 for a name of 4 letters or fewer; two neighbours swapped count
// as 1) reaches; "" when none is near.
func nearestName(names []string, name string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "_", "-") }
	k := norm(name)
	limit := 2
	if len(k) <= 4 {
		limit = 1
	}
	best, bestD, prefixed := "", limit+1, []string{}
	for _, n := range names {
		if norm(n) == k {
			return n
		}
		d := editDistance(k, norm(n))
		if swapped(k, norm(n)) {
			d = 1 // "rnu" for run: one slip of the fingers
		}
		if d < bestD {
			best, bestD = n, d
		}
		if len(k) >= 3 && strings.HasPrefix(n, k) {
			prefixed = append(prefixed, n)
		}
	}
	if best == "" && len(prefixed) == 1 {
		return prefixed[0]
	}
	return best
}

// swapped says whether a and b differ by two neighbouring letters swapped.
func swapped(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
}
