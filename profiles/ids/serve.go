package ids

import (
	"context"
	"errors"
	"flag"
	"log/slog"

	"github.com/idscheck/idscheck/harness"
	sutids "github.com/idscheck/idscheck/sut/ids"
)

// EnvAPIKey is the variable serve reads the bundled server's API key from
// (X-API-Key; empty: the server asks for none).
const EnvAPIKey = "IDS_API_KEY"

// ServeCommand runs the bundled IDS reference server (sut/ids) as a process
// of its own: idscheck serve --profile ids --sink URL. Its own flag is
// --sink, the base URL of the effect sink it sends every external effect
// to (docs/ids-binding.md, "External effects").
func ServeCommand() *harness.ServeCommand {
	return &harness.ServeCommand{
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, c harness.ServeConfig) error {
			sinkURL := fs.String("sink", "", "base URL of the effect sink the server sends its effects to (required)")
			form := fs.String("replay-form", sutids.ReplayOutcome, "how a duplicate of a terminal command is answered (decision "+DecisionReplayForm+
				", IDS §IX.A): outcome, the stored outcome document byte for byte; reference, a reference document (original command_id, key, status, outcome_ref, status and evidence URLs; no result)")
			return func(ctx context.Context, c harness.ServeConfig) error { return ServeForm(ctx, *sinkURL, *form, c) }
		},
		Readings:    ServeReadingArgs,
		Env:         EnvAPIKey + ": the API key the server asks for (X-API-Key; empty: none asked)",
		Child:       harness.ChildWithAPIKey(EnvAPIKey),
		SharedStore: true,
	}
}

// ErrServeUsage marks a serve that could not start for what it was asked
// (no sink, a negative time scale): a usage error, before anything listens.
var ErrServeUsage = errors.New("serve: usage error")

// usageError is an error of what serve was asked; it is ErrServeUsage.
type usageError string

func (e usageError) Error() string        { return string(e) }
func (e usageError) Is(target error) bool { return target == ErrServeUsage }

// Serve runs the bundled IDS server over c.DB (default ids.db), or over the
// PostgreSQL store c.Store shared with its other replicas (as replica
// c.ReplicaID), sending
// its effects to sinkURL, on c.Addr until ctx ends; then it stops
// accepting, finishes the requests under way and closes the store. Its API
// key is c.Getenv(EnvAPIKey). It calls c.Ready with its base URL once it
// listens: an error before that is a configuration error (ErrServeUsage
// for a bad request), one after it a failure of the running server.
func Serve(ctx context.Context, sinkURL string, c harness.ServeConfig) error {
	return ServeForm(ctx, sinkURL, sutids.ReplayOutcome, c)
}

// ServeReadingArgs are the serve flags that make the bundled server follow
// the declared readings (idscheck chaos starts it so when --reading is
// given): --replay-form NAME for decision replay-form.
func ServeReadingArgs(readings map[string]string) []string {
	if f := readings[DecisionReplayForm]; f != "" {
		return []string{"--replay-form", f}
	}
	return nil
}

// ServeForm is Serve with the replay form of decision replay-form.
func ServeForm(ctx context.Context, sinkURL, form string, c harness.ServeConfig) error {
	switch {
	case form != sutids.ReplayOutcome && form != sutids.ReplayReference:
		return usageError("--replay-form " + form + ": want " + sutids.ReplayOutcome + " or " + sutids.ReplayReference)
	case sinkURL == "":
		return usageError("--profile ids needs --sink URL: the effect sink its commands send their effects to")
	case c.TimeScale < 0:
		return usageError("--time-scale must be > 0")
	}
	if c.DB == "" {
		c.DB = "ids.db"
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	apiKey := ""
	if c.Getenv != nil {
		apiKey = c.Getenv(EnvAPIKey)
	}
	srv, err := sutids.Open(ctx, sutids.Config{DBPath: c.DB, Store: c.Store, ReplicaID: c.ReplicaID, SinkURL: sinkURL, APIKey: apiKey, TimeScale: c.TimeScale,
		Mutant: c.Mutant, Seed: c.Seed, Logger: logger, ReplayForm: form})
	if err != nil {
		return err
	}
	c.Logger = logger
	return harness.ServeHandler(ctx, c, "ids", srv.Handler(), srv.Close)
}
