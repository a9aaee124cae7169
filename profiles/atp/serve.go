package atp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/idscheck/idscheck/harness"
	sutatp "github.com/idscheck/idscheck/sut/atp"
)

// EnvAPIKey is the variable the served ATP server takes its API key from
// (X-API-Key; empty: none asked).
const EnvAPIKey = "ATP_API_KEY"

// serveCommand runs the bundled ATP reference server (sut/atp) as a process
// of its own: idscheck serve --profile atp --sink URL. It charges through
// the payment rail at --sink (idscheck's effect sink serves it, RailOf).
func serveCommand() *harness.ServeCommand {
	return &harness.ServeCommand{
		Env:   EnvAPIKey + ": the API key the server asks in X-API-Key (empty: none asked)",
		Flags: serveFlags,
		Child: harness.ChildWithAPIKey(EnvAPIKey),
		// --store postgres://… --replica-id NAME: replicas over one store.
		SharedStore: true,
		Readings:    serveReadingArgs,
	}
}

// serveReadingArgs are serve's flags that make the child follow readings
// (--reading ID=NAME for each decision of the server's), sorted.
func serveReadingArgs(readings map[string]string) []string {
	var args []string
	for _, id := range []string{DecisionNonceSameKey} {
		if r := readings[id]; r != "" {
			args = append(args, "--reading", id+"="+r)
		}
	}
	return args
}

// serveFlags registers serve's flags of the ATP server: --sink (the rail),
// --readings and --reading (the reading of each decision).
func serveFlags(fs *flag.FlagSet) func(ctx context.Context, c harness.ServeConfig) error {
	rail := fs.String("sink", "", "base URL of the payment rail the server charges through (idscheck's effect sink serves it)")
	base := fs.String("readings", "default", "default or alternate: the first or the second reading of every decision ("+DecisionNonceSameKey+"=row|nonce)")
	set := map[string]string{}
	fs.Func("reading", "ID=NAME: follow reading NAME at decision ID (repeatable; overrides --readings)", func(v string) error {
		id, name, ok := strings.Cut(v, "=")
		if !ok || strings.TrimSpace(id) == "" || strings.TrimSpace(name) == "" {
			return fmt.Errorf("want ID=NAME, got %q", v)
		}
		set[strings.TrimSpace(id)] = strings.TrimSpace(name)
		return nil
	})
	return func(ctx context.Context, c harness.ServeConfig) error {
		readings := map[string]string{}
		switch *base {
		case "default":
		case "alternate":
			readings = alternateReadings()
		default:
			return fmt.Errorf("--readings %q: want default or alternate", *base)
		}
		for k, v := range set {
			readings[k] = v
		}
		return serve(ctx, c, *rail, readings)
	}
}

// alternateReadings are the readings the bundled server follows with
// --readings alternate: the other reading at every decision.
func alternateReadings() map[string]string { return map[string]string{DecisionNonceSameKey: "nonce"} }

// serve runs the bundled ATP server on c.Addr, charging through the rail at
// railURL, until ctx ends; then it shuts down (in-flight requests finish)
// and closes it.
func serve(ctx context.Context, c harness.ServeConfig, railURL string, readings map[string]string) error {
	switch {
	case railURL == "":
		return errors.New("--profile atp needs --sink URL: the payment rail it charges through (idscheck's effect sink)")
	case c.TimeScale < 0:
		return errors.New("--time-scale must be > 0")
	}
	if c.DB == "" {
		c.DB = "atp.db"
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	apiKey := ""
	if c.Getenv != nil {
		apiKey = c.Getenv(EnvAPIKey)
	}
	srv, err := sutatp.Open(ctx, sutatp.Config{DBPath: c.DB, Store: c.Store, ReplicaID: c.ReplicaID, RailURL: railURL, APIKey: apiKey, TimeScale: c.TimeScale,
		Mutant: c.Mutant, Seed: c.Seed, Readings: readings, Logger: logger})
	if err != nil {
		return err
	}
	c.Logger = logger
	return harness.ServeHandler(ctx, c, "atp", srv.Handler(), srv.Close)
}
