package httpidem

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	suthttpidem "github.com/idscheck/idscheck/sut/httpidem"
)

// CallersEnv is the variable the served endpoint reads its callers' bearer
// tokens from (comma-separated): secrets stay out of process listings.
const CallersEnv = "HTTPIDEM_CALLERS"

// Serve runs the bundled payments endpoint (sut/httpidem) as a process of
// its own: idscheck serve --profile http-idempotency --sink URL
// [--variant ietf|t0|stripe], its callers' tokens in HTTPIDEM_CALLERS. It
// follows --variant and calls the effect sink at --sink for each payment.
func Serve() *harness.ServeCommand {
	return &harness.ServeCommand{
		Flags:       serveFlags,
		Env:         CallersEnv + ": the callers' bearer tokens, comma-separated (required); each authenticates as Authorization: Bearer TOKEN",
		Child:       serveChild,
		SharedStore: true,
	}
}

// serveChild gives the served endpoint two callers, their bearer tokens in
// HTTPIDEM_CALLERS, and the variant to follow (--variant: the one
// described, else ietf); it takes no API key, and describes itself as
// BundledEndpoint does.
func serveChild(secret func() string, described any) harness.ServeChild {
	variant := VariantIETF
	if e, _ := described.(*Endpoint); e != nil && e.Variant != "" {
		variant = e.Variant
	}
	callers := []string{"tok_" + secret(), "tok_" + secret()}
	return harness.ServeChild{
		Env:     []string{CallersEnv + "=" + strings.Join(callers, ",")},
		Args:    []string{"--variant", variant},
		Target:  features.Target{Described: BundledEndpoint(variant, callers)},
		Secrets: callers,
	}
}

// serveFlags registers --variant and --sink; the function it returns runs
// the endpoint until ctx ends.
func serveFlags(fs *flag.FlagSet) func(ctx context.Context, c harness.ServeConfig) error {
	variant := fs.String("variant", VariantIETF, "the text the endpoint follows ("+strings.Join(Variants(), ", ")+")")
	sinkURL := fs.String("sink", "", "base URL of the effect sink the endpoint calls for each payment (required)")
	return func(ctx context.Context, c harness.ServeConfig) error {
		getenv := c.Getenv
		if getenv == nil {
			getenv = func(string) string { return "" }
		}
		var callers []string
		for _, tok := range strings.Split(getenv(CallersEnv), ",") {
			if tok = strings.TrimSpace(tok); tok != "" {
				callers = append(callers, tok)
			}
		}
		switch {
		case *sinkURL == "":
			return errors.New("--profile http-idempotency needs --sink URL: the effect sink its payments call")
		case len(callers) == 0:
			return fmt.Errorf("--profile http-idempotency needs %s: the callers' bearer tokens, comma-separated", CallersEnv)
		case c.TimeScale < 0:
			return errors.New("--time-scale must be > 0")
		}
		db := c.DB
		if db == "" {
			db = "payments.db"
		}
		logger := c.Logger
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		srv, err := suthttpidem.Open(ctx, suthttpidem.Config{DBPath: db, Store: c.Store, ReplicaID: c.ReplicaID, SinkURL: *sinkURL, Variant: *variant, Callers: callers,
			TimeScale: c.TimeScale, Mutant: c.Mutant, Logger: logger})
		if err != nil {
			return err
		}
		c.Logger, c.DB = logger, db
		return harness.ServeHandler(ctx, c, string(Name), srv.Handler(), srv.Close)
	}
}
