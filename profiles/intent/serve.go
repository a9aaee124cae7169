package intent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	sut "github.com/idscheck/idscheck/sut/intent"
)

// serveEnv is what -h of idscheck serve --profile intent says of the
// server's environment and its readings.
const serveEnv = `Runs the bundled reference server of the Intent Protocol v2.1 (seed 004).
Configuration comes from the spec's environment variables (BUS_SECRET,
BUS_ADMIN_SECRET, DASHBOARD_PASSWORD, BUS_METRICS_TOKEN, BUS_DB_PATH,
BUS_TRUST_PROXY, BUS_ENFORCE_HTTPS, BUS_REQUIRE_SIGNATURES,
BUS_MAINTENANCE_MODE, BUS_CLEANUP_INTERVAL_SECONDS); flags override them.
BUS_SECRET is required and must not be dev_secret.
SIGTERM: stop accepting, finish in-flight requests, commit what is queued.

Where the text contradicts itself or leaves a choice open, the server
follows one reading per key: --readings default takes the first name of
every key, --readings alternate the second; each --reading ID=NAME
(repeatable) then sets one key. GET /health reports them ("readings").`

// serveHelp is serveEnv with the list of reading keys and their names,
// taken from the server (its decisions with readings, then its other
// allowed answers).
func serveHelp() string {
	var b strings.Builder
	b.WriteString(serveEnv)
	b.WriteString("\n\nReadings (ID: default, alternate):\n")
	for _, k := range sut.ReadingKeys() {
		kind := "decision"
		if !k.Decision {
			kind = "allowed answer"
		}
		fmt.Fprintf(&b, "  %s: %s (%s, §%s)\n", k.Key, strings.Join(k.Names, ", "), kind, k.Section)
		for i, n := range k.Names {
			fmt.Fprintf(&b, "      %s: %s\n", n, k.Means[i])
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// serve runs the bundled bus as a process of its own (idscheck serve
// --profile intent): its configuration from the environment (BUS_*), then
// the common flags, then its readings (--readings, --reading).
func serve() *harness.ServeCommand {
	return &harness.ServeCommand{
		Env:   serveHelp(),
		DBEnv: "BUS_DB_PATH",
		Child: serveChild,
		// --store postgres://… --replica-id NAME: several replicas over one
		// PostgreSQL store are one bus.
		SharedStore: true,
		// A harness that starts the bus as its child (run --replicas, chaos)
		// hands it the readings the run declares.
		Readings: serveReadingArgs,
		Flags: func(fs *flag.FlagSet) func(ctx context.Context, c harness.ServeConfig) error {
			base := fs.String("readings", "default", "default or alternate: the first or the second name of every reading key (listed above)")
			set := readingFlag{}
			fs.Var(set, "reading", "ID=NAME: follow reading NAME for key ID (repeatable; overrides --readings)")
			return func(ctx context.Context, c harness.ServeConfig) error {
				readings, err := chooseReadings(*base, set)
				if err != nil {
					return err
				}
				return serveBus(ctx, c, readings)
			}
		},
	}
}

// serveBus opens the bus as c and the environment say and serves it on
// c.Addr until ctx ends; then it finishes in-flight requests (15 s at
// most) and closes the store.
func serveBus(ctx context.Context, c harness.ServeConfig, readings map[string]string) error {
	getenv := c.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	logger := c.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg, err := sut.ConfigFromEnv(getenv)
	if err != nil {
		return err
	}
	if c.DB != "" {
		cfg.DBPath = c.DB
	}
	cfg.Store, cfg.ReplicaID = c.Store, c.ReplicaID
	if cfg.ReplicaID == "" {
		cfg.ReplicaID = c.Addr
	}
	if c.TimeScale < 0 {
		return errors.New("--time-scale must be > 0")
	}
	if c.TimeScale > 0 {
		cfg.TimeScale = c.TimeScale
	}
	if c.Mutant != "" {
		cfg.Mutant = c.Mutant
	}
	cfg.Seed = c.Seed
	cfg.Readings = readings
	cfg.Logger = logger
	srv, err := sut.Open(ctx, cfg)
	if err != nil {
		return err
	}
	c.Logger, c.DB = logger, cfg.DBPath
	return harness.ServeHandler(ctx, c, "intent", srv.Handler(), srv.Close)
}

// serveReadingArgs are the flags that make a served bus follow readings
// (decision or answer key → reading name): one --reading ID=NAME each.
func serveReadingArgs(readings map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(readings)) {
		out = append(out, "--reading", k+"="+readings[k])
	}
	return out
}

// readingFlag collects repeated --reading ID=NAME.
type readingFlag map[string]string

func (f readingFlag) String() string {
	var out []string
	for k, v := range f {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

func (f readingFlag) Set(v string) error {
	id, name, ok := strings.Cut(v, "=")
	if !ok || id == "" || name == "" {
		return fmt.Errorf("want ID=NAME, got %q", v)
	}
	f[strings.TrimSpace(id)] = strings.TrimSpace(name)
	return nil
}

// chooseReadings resolves --readings and --reading into the server's
// readings.
func chooseReadings(base string, set map[string]string) (map[string]string, error) {
	var out map[string]string
	switch base {
	case "default":
		out = map[string]string{}
	case "alternate":
		out = sut.AlternateReadings()
	default:
		return nil, fmt.Errorf("--readings must be default or alternate, got %q", base)
	}
	maps.Copy(out, set)
	if err := sut.CheckReadings(out); err != nil {
		return nil, fmt.Errorf("--reading: %w", err)
	}
	return out, nil
}

// serveChild gives the served bus its API key, admin token, dashboard
// password and metrics token in BUS_SECRET, BUS_ADMIN_SECRET,
// DASHBOARD_PASSWORD and BUS_METRICS_TOKEN; they reach the workload and
// the suite as the credentials of those names (FailpointTriggers asks for
// a cleanup with the admin token; the suite's dashboard and metrics
// scenarios use the other two).
func serveChild(secret func() string, _ any) harness.ServeChild {
	key, admin, dash, metrics := secret(), secret(), secret(), secret()
	return harness.ServeChild{
		Env: []string{"BUS_SECRET=" + key, "BUS_ADMIN_SECRET=" + admin, "DASHBOARD_PASSWORD=" + dash, "BUS_METRICS_TOKEN=" + metrics},
		Target: features.Target{APIKey: key, Credentials: map[string]string{CredentialAdminToken: admin,
			CredentialDashboardPassword: dash, CredentialMetricsToken: metrics}},
		Secrets: []string{key, admin, dash, metrics},
	}
}
