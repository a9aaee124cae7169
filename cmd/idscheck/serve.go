package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/idscheck/idscheck/harness"
)

// cmdServe runs a profile's bundled reference server until ctx ends, through
// the profile's ServeCommand (serve_profile.go): the flags every server
// takes, then the profile's own.
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	p, err := lookupProfile(argProfile(args, defaultProfile()))
	if err != nil {
		fmt.Fprintf(stderr, "idscheck serve: %v\n", err)
		return exitUsage
	}
	if p.Serve == nil {
		fmt.Fprintf(stderr, "idscheck serve: the %s profile has no bundled server to serve\n", p.Name)
		return exitUsage
	}
	return serveProfile(ctx, p, args, stdout, stderr)
}

// argProfile finds --profile NAME (or -profile, =NAME) in args before they
// are parsed: a subcommand whose flags depend on the profile registers them
// once it knows which. def when absent.
func argProfile(args []string, def string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "profile" {
			continue
		}
		if hasVal {
			return val
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return def
}

// serveProfile runs a profile's bundled server as a process of its own,
// through its harness.ServeCommand: the common flags, then the profile's.
func serveProfile(ctx context.Context, p harness.Profile, args []string, stdout, stderr io.Writer) int {
	var mutants []string
	for _, m := range p.Mutants {
		mutants = append(mutants, m.Name)
	}
	synopsis := "serve --profile " + string(p.Name) + " [--addr 127.0.0.1:8080] [--db PATH] [--time-scale F] [--mutant NAME] [flags of the profile]\n\n" +
		"Runs the bundled reference server of " + p.Title + " until SIGTERM or Ctrl-C (it then finishes the requests in flight).\n" +
		"With --addr port 0 the chosen address is printed on stdout (\"listening on http://HOST:PORT\")."
	if p.Serve.Env != "" {
		synopsis += "\n\n" + p.Serve.Env
	}
	fs := newFlagSet("serve", synopsis, stderr)
	var profile string
	profileFlag(fs, &profile, string(p.Name), "profile whose bundled reference server to run")
	c := harness.ServeConfig{Getenv: os.Getenv, Stdout: stdout, Stderr: stderr,
		Ready: func(base string) { fmt.Fprintf(stdout, "listening on %s\n", base) }}
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address (port 0: any free port, printed)")
	fs.StringVar(&c.DB, "db", "", "its SQLite database file (default: a fresh one in a temporary folder, removed when it stops; printed)")
	fs.Float64Var(&c.TimeScale, "time-scale", 0, "divide every protocol duration by this factor (default 1)")
	fs.StringVar(&c.Mutant, "mutant", "", "run with a deliberate bug: "+strings.Join(mutants, ", "))
	fs.Uint64Var(&c.Seed, "seed", 0, "seed of the server's random choices (0: drawn)")
	if p.Serve.SharedStore {
		fs.StringVar(&c.Store, "store", "", "a PostgreSQL URL (postgres://…) it keeps its state in, shared by its replicas (default: the SQLite file --db)")
		fs.StringVar(&c.ReplicaID, "replica-id", "", "this replica's name among those sharing --store, stable across its restarts (default: --addr)")
	}
	level := fs.String("log-level", "info", "debug, info, warn or error")
	run := p.Serve.Flags(fs)
	if code, done := parseFlags(fs, args, false, stdout); done {
		return code
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "idscheck serve: --log-level: %v\n", err)
		return exitUsage
	}
	if c.TimeScale < 0 {
		fmt.Fprintln(stderr, "idscheck serve: --time-scale must be > 0")
		return exitUsage
	}
	if c.Mutant != "" && !containsString(mutants, c.Mutant) {
		fmt.Fprintf(stderr, "idscheck serve: --mutant %q: want one of %s\n", c.Mutant, strings.Join(mutants, ", "))
		return exitUsage
	}
	if c.Store != "" && !strings.HasPrefix(c.Store, "postgres://") && !strings.HasPrefix(c.Store, "postgresql://") {
		fmt.Fprintf(stderr, "idscheck serve: --store %q: want a postgres:// URL\n", redactStore(c.Store))
		return exitUsage
	}
	if c.ReplicaID == "" {
		c.ReplicaID = c.Addr
	}
	c.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lv}))
	dbGiven := false
	fs.Visit(func(f *flag.Flag) { dbGiven = dbGiven || f.Name == "db" })
	if !dbGiven && c.Store == "" && (p.Serve.DBEnv == "" || os.Getenv(p.Serve.DBEnv) == "") {
		// Never a file in the current folder unasked: a fresh database in
		// a folder of its own, said where, removed when the server stops.
		dir, err := os.MkdirTemp("", "idscheck-serve-"+string(p.Name)+"-")
		if err != nil {
			fmt.Fprintf(stderr, "idscheck serve: a folder for its database: %v\n", err)
			return exitUsage
		}
		defer os.RemoveAll(dir)
		c.DB = filepath.Join(dir, string(p.Name)+".db")
		ready, db := c.Ready, c.DB
		c.Ready = func(base string) {
			fmt.Fprintf(stderr, "idscheck serve: database %s (fresh, removed when the server stops; --db PATH keeps one)\n", db)
			ready(base)
		}
	}
	if err := run(ctx, c); err != nil {
		fmt.Fprintf(stderr, "idscheck serve: %s\n", trimEcho(err.Error(), "serve"))
		return exitUsage
	}
	return exitOK
}
