package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/profiles"
	profids "github.com/idscheck/idscheck/profiles/ids"
	atpprofile "github.com/idscheck/idscheck/profiles/atp"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/sut/httpidem"
	sut "github.com/idscheck/idscheck/sut/intent"
)

const serveSynopsis = `serve [--addr 127.0.0.1:8080] [--db PATH] [--time-scale F] [--mutant NAME]
       [--readings default|alternate] [--reading ID=NAME ...]
serve --profile ids --sink URL [--addr 127.0.0.1:8080] [--db PATH] [--time-scale F] [--mutant NAME]
serve --profile atp --sink URL [--addr 127.0.0.1:8080] [--db PATH] [--time-scale F] [--mutant NAME]
       [--readings default|alternate] [--reading nonce-same-key=row|nonce]
serve --profile http-idempotency --sink URL [--variant ietf|t0|stripe] [--addr A] [--db PATH]
       [--time-scale F] [--mutant NAME]

With --profile ids it runs the bundled IDS reference server (RFC-WF-0010 over
docs/ids-binding.md), which sends every external effect to the effect sink at
--sink; its API key (X-API-Key) comes from IDS_API_KEY (empty: none asked).
With --profile atp it runs the bundled ATP reference server (docs/atp-binding.md),
which charges through the payment rail at --sink (idscheck's effect sink serves
it); its API key comes from ATP_API_KEY (empty: none asked).
With --profile http-idempotency it runs the bundled payments endpoint
(docs/http-idempotency.md) under --variant, calling the effect sink at --sink
for each payment; its callers' bearer tokens come from HTTPIDEM_CALLERS
(comma-separated, required).
The rest of this text is about the intent server.

Runs the bundled reference server of the Intent Protocol v2.1 (seed 004).
Configuration comes from the spec's environment variables (BUS_SECRET,
BUS_ADMIN_SECRET, DASHBOARD_PASSWORD, BUS_METRICS_TOKEN, BUS_DB_PATH,
BUS_TRUST_PROXY, BUS_ENFORCE_HTTPS, BUS_REQUIRE_SIGNATURES,
BUS_MAINTENANCE_MODE, BUS_CLEANUP_INTERVAL_SECONDS); flags override them.
BUS_SECRET is required and must not be dev_secret. With --addr port 0 the
chosen address is printed on stdout ("listening on http://HOST:PORT").
SIGTERM: stop accepting, finish in-flight requests, commit what is queued.

Where the text contradicts itself or leaves a choice open, the server
follows one reading per key: --readings default takes the first name of
every key, --readings alternate the second; each --reading ID=NAME
(repeatable) then sets one key. GET /health reports them ("readings").`

// serveHelp is the synopsis with the list of reading keys and their names,
// taken from the server (its decisions with readings, then its other
// allowed answers).
func serveHelp() string {
	var b strings.Builder
	b.WriteString(serveSynopsis)
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

// chooseReadings resolves --readings and --reading into Config.Readings.
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

// cmdServe runs the reference server until ctx ends.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if p, err := lookupProfile(argProfile(args, defaultProfile())); err == nil && p.Serve != nil {
		return serveProfile(ctx, p, args, stdout, stderr)
	}
	fs := newFlagSet("serve", serveHelp(), stderr)
	profile := new(string)
	profileFlag(fs, profile, defaultProfile(), "profile whose bundled reference server to run")
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	db := fs.String("db", "", "SQLite database file (default BUS_DB_PATH or infrastructure.db)")
	scale := fs.Float64("time-scale", 0, "divide every protocol duration by this factor (default IDSCHECK_TIME_SCALE or 1)")
	mutant := fs.String("mutant", "", "run with a deliberate bug: "+strings.Join(mutantList(), ", "))
	level := fs.String("log-level", "info", "debug, info, warn or error")
	base := fs.String("readings", "default", "default or alternate: the first or the second name of every reading key (listed above)")
	set := readingFlag{}
	fs.Var(set, "reading", "ID=NAME: follow reading NAME for key ID (repeatable; overrides --readings)")
	variant := fs.String("variant", "ietf", "--profile http-idempotency: the text the endpoint follows (ietf, t0, stripe)")
	sinkURL := fs.String("sink", "", "--profile ids: base URL of the effect sink the server sends its effects to; --profile atp: base URL of the payment rail")
	if code, done := parseFlags(fs, args, false); done {
		return code
	}
	if *profile == string(spec.ProfileIDS) {
		var lv slog.Level
		if err := lv.UnmarshalText([]byte(*level)); err != nil {
			fmt.Fprintf(stderr, "idscheck serve: --log-level: %v\n", err)
			return exitUsage
		}
		return serveIDS(ctx, idsServeConfig{addr: *addr, db: *db, sink: *sinkURL, scale: *scale, mutant: *mutant,
			level: lv}, stdout, stderr)
	}
	if *profile == string(spec.ProfileHTTPIdem) {
		var lv slog.Level
		if err := lv.UnmarshalText([]byte(*level)); err != nil {
			fmt.Fprintf(stderr, "idscheck serve: --log-level: %v\n", err)
			return exitUsage
		}
		var callers []string
		for _, c := range strings.Split(os.Getenv("HTTPIDEM_CALLERS"), ",") {
			if c = strings.TrimSpace(c); c != "" {
				callers = append(callers, c)
			}
		}
		switch {
		case *sinkURL == "":
			fmt.Fprintln(stderr, "idscheck serve: --profile http-idempotency needs --sink URL: the effect sink its payments call")
			return exitUsage
		case len(callers) == 0:
			fmt.Fprintln(stderr, "idscheck serve: --profile http-idempotency needs HTTPIDEM_CALLERS: the callers' bearer tokens, comma-separated")
			return exitUsage
		case *scale < 0:
			fmt.Fprintln(stderr, "idscheck serve: --time-scale must be > 0")
			return exitUsage
		}
		if *db == "" {
			*db = "payments.db"
		}
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
		srv, err := httpidem.Open(ctx, httpidem.Config{DBPath: *db, SinkURL: *sinkURL, Variant: *variant, Callers: callers,
			TimeScale: *scale, Mutant: *mutant, Logger: logger})
		if err != nil {
			fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
			return exitUsage
		}
		return serveHandler(ctx, "http-idempotency", *addr, *db, *mutant, srv.Handler(), srv.Close, logger, stdout, stderr)
	}
	if *profile == string(atpprofile.Name) {
		var lv slog.Level
		if err := lv.UnmarshalText([]byte(*level)); err != nil {
			fmt.Fprintf(stderr, "idscheck serve: --log-level: %v\n", err)
			return exitUsage
		}
		// The profile's own flags (profiles/atp's ServeCommand), as serve
		// parsed them.
		pargs := []string{"--sink", *sinkURL, "--readings", *base}
		for k, v := range set {
			pargs = append(pargs, "--reading", k+"="+v)
		}
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
		return runServeCommand(ctx, atpprofile.Profile().Serve, pargs, harness.ServeConfig{Addr: *addr, DB: *db,
			TimeScale: *scale, Mutant: *mutant, Logger: logger}, stdout, stderr)
	}
	if *sinkURL != "" {
		fmt.Fprintln(stderr, "idscheck serve: --sink is for --profile ids and atp (the intent server has no external effects)")
		return exitUsage
	}
	if err := profileHas(*profile, "a bundled reference server", func(p profiles.Profile) bool { return p.Bundled != nil }); err != nil {
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		return exitUsage
	}
	if *profile != string(spec.ProfileIntent) {
		fmt.Fprintf(stderr, "idscheck serve: the %s server is started by idscheck run; serve runs the intent server with its environment (BUS_*)\n", *profile)
		return exitUsage
	}
	readings, err := chooseReadings(*base, set)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		return exitUsage
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "idscheck serve: --log-level: %v\n", err)
		return exitUsage
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	cfg, err := sut.ConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		return exitUsage
	}
	if *db != "" {
		cfg.DBPath = *db
	}
	if *scale < 0 {
		fmt.Fprintln(stderr, "idscheck serve: --time-scale must be > 0")
		return exitUsage
	}
	if *scale > 0 {
		cfg.TimeScale = *scale
	}
	if *mutant != "" {
		cfg.Mutant = *mutant
	}
	cfg.Readings = readings
	cfg.Logger = logger
	srv, err := sut.Open(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		return exitUsage
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		srv.Close()
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		return exitUsage
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	logger.Info("serving", "addr", ln.Addr().String(), "db", cfg.DBPath)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	code := exitOK
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
			code = exitFailed
		}
	case <-ctx.Done():
		logger.Info("shutting down: finishing in-flight requests")
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := hs.Shutdown(sctx); err != nil {
			logger.Warn("shutdown", "err", err)
		}
		cancel()
	}
	if err := srv.Close(); err != nil {
		fmt.Fprintf(stderr, "idscheck serve: close: %v\n", err)
		code = exitFailed
	}
	logger.Info("stopped")
	return code
}

func mutantList() []string {
	var out []string
	for _, m := range sut.Mutants() {
		out = append(out, m.Name)
	}
	return out
}

// idsServeConfig is what serve --profile ids was asked.
type idsServeConfig struct {
	addr, db, sink, mutant string
	scale                  float64
	level                  slog.Level
}

// serveIDS runs the bundled IDS reference server (profiles/ids.Serve) until
// ctx ends: an error before it listens is a usage error, one after it a
// failure.
func serveIDS(ctx context.Context, c idsServeConfig, stdout, stderr io.Writer) int {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: c.level}))
	listening := false
	err := profids.Serve(ctx, c.sink, harness.ServeConfig{Addr: c.addr, DB: c.db, TimeScale: c.scale, Mutant: c.mutant,
		Logger: logger, Getenv: os.Getenv, Stdout: stdout, Stderr: stderr, Ready: func(baseURL string) {
			listening = true
			fmt.Fprintf(stdout, "listening on %s\n", baseURL)
		}})
	switch {
	case err == nil:
		return exitOK
	case !listening:
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
	return exitFailed
}

// runServeCommand runs a profile's serve command with its own flags taken
// from args: an error before the server listens is a usage error (exit 2),
// one after it a failure (exit 1).
func runServeCommand(ctx context.Context, sc *harness.ServeCommand, args []string, c harness.ServeConfig, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := sc.Flags(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		return exitUsage
	}
	listening := false
	c.Getenv, c.Stdout, c.Stderr = os.Getenv, stdout, stderr
	c.Ready = func(url string) {
		listening = true
		fmt.Fprintf(stdout, "listening on %s\n", url)
	}
	if err := run(ctx, c); err != nil {
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		if !listening {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}

// serveHandler serves a bundled server's handler on addr until ctx ends,
// then shuts down and closes it.
func serveHandler(ctx context.Context, name, addr, db, mutant string, h http.Handler, closeFn func() error, logger *slog.Logger, stdout, stderr io.Writer) int {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		closeFn()
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		return exitUsage
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	logger.Info("serving "+name, "addr", ln.Addr().String(), "db", db, "mutant", mutant)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	code := exitOK
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
			code = exitFailed
		}
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		if err := hs.Shutdown(sctx); err != nil {
			logger.Warn("shutdown", "err", err)
		}
		cancel()
	}
	if err := closeFn(); err != nil {
		fmt.Fprintf(stderr, "idscheck serve: close: %v\n", err)
		code = exitFailed
	}
	return code
}
