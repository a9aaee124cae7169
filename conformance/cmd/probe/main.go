// Command probe measures, over plain HTTP and without idscheck's checks,
// what an idempotency-key endpoint does (package conformance/probe), and
// prints its behaviour table: per behaviour, what was observed and the
// verdict it implies per variant for the rule whose quote says it. With
// --result it also compares the table with an idscheck run's result.json
// and prints each verdict the run gives that the table contradicts.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/idscheck/idscheck/conformance/probe"
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	target := fs.String("target", "", "the endpoint's base URL (default: the target file's url)")
	file := fs.String("target-file", "", "the target file (its http_idempotency section describes the endpoint)")
	asJSON := fs.Bool("json", false, "print the table as JSON")
	result := fs.String("result", "", "an idscheck run's result.json to compare the table with")
	variant := fs.String("variant", "", "with --result: the variant the run judged (default: the run's own)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: probe --target URL --target-file F [--json] [--result result.json [--variant V]]

Sends plain HTTP probes to the endpoint the target file's http_idempotency
section describes and prints its behaviour table: per behaviour, what the
endpoint did and the verdict that implies, per variant (ietf, t0, stripe),
for the rule whose quote says it ("a documented choice" where no rule of
that text says it). With --result, compares the table with an idscheck
run's result.json and lists every verdict of the run the table contradicts.

exit: 0 done (and the run agrees), 1 the run disagrees, 2 usage, 3 the
endpoint could not be measured.

flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *file == "" {
		fmt.Fprintln(os.Stderr, "probe: --target-file is required")
		return 2
	}
	b, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		return 2
	}
	url := *target
	if url == "" {
		var doc struct{ URL string }
		json.Unmarshal(b, &doc)
		url = doc.URL
	}
	if url == "" {
		fmt.Fprintln(os.Stderr, "probe: no --target and no url in the target file")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t, err := probe.Measure(ctx, url, b)
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		return 3
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(t); err != nil {
			return 1
		}
	} else if err := t.WriteText(os.Stdout); err != nil {
		return 1
	}
	if *result == "" {
		return 0
	}
	v, verdicts, blocked, err := probe.ReadResult(*result)
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		return 2
	}
	if *variant != "" {
		v = *variant
	}
	ds := probe.Agree(t, v, verdicts, blocked)
	out := os.Stdout
	if *asJSON {
		out = os.Stderr
	}
	fmt.Fprintf(out, "\nagreement with %s (variant %s): %d disagreement(s)\n", *result, v, len(ds))
	for _, d := range ds {
		fmt.Fprintf(out, "  %s: want %s, the run says %s (behaviour %s): %s\n", d.Rule, d.Want, d.Got, d.Behaviour, d.Why)
	}
	if len(ds) > 0 {
		return 1
	}
	return 0
}
