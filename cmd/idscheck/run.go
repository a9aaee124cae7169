package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/redact"
	"github.com/idscheck/idscheck/rundir"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/reports"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/spec"
)

// runConfig is what `idscheck run` parsed from its flags.
type runConfig struct {
	tgt              targetFlags // --target-file and the target flags (target.go)
	profile          string
	rules            string
	exclude          string    // --exclude: rule-ID globs left out
	sel              selection // what --rules and --exclude select
	dryRun           bool
	force            bool // --force: replace what --out holds
	strict           bool
	seed             uint64
	seedSet          bool
	runID            string // --run-id: the run's own nonce (features.Env.Fresh); "": drawn
	out              string
	expectedFailures string
	budget           time.Duration
	requestTimeout   time.Duration
	scenarioTimeout  time.Duration
	healthWait       time.Duration
	maxDuration      time.Duration
	minJudged        int
	mutant           string
	serverReadings   string // --readings: which readings the bundled server follows
	// replicas is --replicas: how many replicas of the bundled server run
	// starts as child processes over store (--store, or "store" in the
	// target file); each delivery of a logical request goes to another.
	replicas int
	store    string
	// storeProxy is --store-proxy ("proxy" of the target file's "store"):
	// a proxy between each replica and the store.
	storeProxy bool
	setFlags   []string // flags given on the command line, in order, for the reproduce line
	values     map[string]string
}

const runSynopsis = `run [--target-file FILE] [--target URL --api-key K [--admin-token T] [--metrics-token M]]
                    [--profile NAME] [--effect-sink HOST:PORT] [--time-scale F] [--rules GLOB[,GLOB]] [--strict] [--seed N]
                    [--out DIR] [--expected-failures FILE] [--reading DECISION=NAME ...]
                    [--target-cmd CMD] [--health-wait 10s]
                    [--readings default|alternate] [--replicas N --store local|postgres://…] [--store-proxy]  (bundled server)

Certifies a target against the rules of one profile and writes the report
(result.json, junit.xml, index.html, history.jsonl) to --out. With no target
URL it starts the bundled reference server in-process (fresh database, its own
secrets, --time-scale 60 unless given) and certifies it. The target is
described by --target-file, by the flags, or both (a flag overrides the
file's field): see "Target file" below. --target-cmd starts the target first
(and stops it at the end).

Exit codes: 0 every MUST passed; 1 a MUST failed (a SHOULD too with --strict),
or a rule of --expected-failures now passes; 2 usage or configuration error;
3 target unreachable (GET /health did not answer 200 within --health-wait:
the report is still written, saying why); 4 undecided (UNKNOWN or BLOCKED)
rules remain and nothing failed (a target that stops answering during the
run ends here).

Where the text contradicts itself or leaves a choice open, a check is judged
under every reading it allows: a target that follows one gets a READING
verdict naming it (never a failure). --reading DECISION=NAME declares the
target's reading; its checks are then PASS or FAIL by that reading alone.
idscheck rules --readings [--profile NAME] lists the decisions and their
readings. Against the bundled server (no --target) the declared readings are
the server's too: it is started following them (as idscheck serve --reading
would) where its profile lets it choose.

What the target publishes on GET /health about itself (its "time_scale", a
key lifetime, its readings) is used where nothing was declared (a line says
so), and a declaration it contradicts is exit 2 naming both. Every key, id
and name a run sends carries its own nonce (--run-id, drawn and recorded in
result.json): the same seed makes the same choices in the same order with
fresh keys; --run-id repeats the keys too, against a fresh target.

--expected-failures FILE lists rule IDs, one a line, '#' starts a comment.
A listed rule that fails is shown as expected and does not fail the run. A
listed rule that now passes fails the run (exit 1) with "now passes: remove
it from the file", so the file stays honest and only shrinks.`

// defaultHealthWait is how long run waits for GET /health to answer 200:
// long enough for a target that takes a few seconds to start.
const defaultHealthWait = 10 * time.Second

// maxHealthProbe bounds one GET /health of the wait.
const maxHealthProbe = 2 * time.Second

func parseRunFlags(args []string, getenv func(string) string, stdout, stderr io.Writer) (runConfig, int, bool) {
	var c runConfig
	fs := newFlagSet("run", runSynopsis, stderr)
	prof, err := lookupProfile(argProfile(args, defaultProfile()))
	if err != nil {
		fmt.Fprintf(stderr, "idscheck run: %v\n", err)
		return c, exitUsage, true
	}
	c.tgt.register(fs, prof)
	profileFlag(fs, &c.profile, defaultProfile(), "profile (protocol text) to certify against")
	fs.StringVar(&c.rules, "rules", "", "comma-separated rule-ID globs (e.g. 'INTENT-7.*'); a glob starting with '!' excludes ('INTENT-7.*,!INTENT-7.9*'); empty: every rule. Every glob must match a rule")
	fs.StringVar(&c.exclude, "exclude", "", "comma-separated rule-ID globs to leave out of the selection (the same as '!GLOB' in --rules)")
	fs.BoolVar(&c.force, "force", false, "write into an --out directory that holds another kind of run (chaos, mutants) or files that are no run, replacing the run there")
	fs.BoolVar(&c.dryRun, "dry-run", false, "list the scenarios and the rules the selection would run, then exit 0: no target is started or contacted")
	fs.BoolVar(&c.strict, "strict", false, "a broken SHOULD fails the run too")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of every random choice; default: drawn and printed")
	fs.StringVar(&c.runID, "run-id", "", "the run's own nonce, mixed into every key and id it sends (default: drawn, and recorded in result.json); give a recorded one back to repeat a run's requests exactly against a fresh target")
	fs.StringVar(&c.out, "out", "idscheck-report", "directory the report is written to")
	fs.StringVar(&c.expectedFailures, "expected-failures", "", "file of rule IDs expected to fail (see above)")
	fs.DurationVar(&c.budget, "budget", features.DefaultBudget, "longest protocol wait (lease expiry, backoff) one scenario may do; rules needing longer are N/A")
	fs.DurationVar(&c.requestTimeout, "request-timeout", features.DefaultRequestTimeout, "bound of one HTTP exchange")
	fs.DurationVar(&c.scenarioTimeout, "scenario-timeout", 0, "bound of one scenario (default: budget + 3 request timeouts)")
	fs.DurationVar(&c.healthWait, "health-wait", defaultHealthWait, "how long to wait for GET /health to answer 200 before giving up (exit 3, the report says why); each probe is bounded by min(--request-timeout, 2s)")
	fs.StringVar(&c.mutant, "mutant", "", "start the bundled server with this deliberate bug (self-validation; see idscheck mutants)")
	fs.DurationVar(&c.maxDuration, "max-duration", 30*time.Minute, "bound of the whole run; scenarios left when it passes are UNKNOWN (not run)")
	fs.IntVar(&c.minJudged, "min-judged", 1, "the least number of testable rules the run must judge (PASS, FAIL, NON-STRICT or READING); fewer: exit 4, never a pass")
	fs.StringVar(&c.serverReadings, "readings", "default", "bundled server only: default or alternate, the first or the other reading at every decision and allowed answer (see idscheck serve -h)")
	fs.IntVar(&c.replicas, "replicas", 1, "bundled server only: start this many replicas of it as child processes over --store; each delivery of a logical request goes to another replica")
	fs.BoolVar(&c.storeProxy, "store-proxy", false, "stand a proxy between each replica and the store (idscheck chaos injects faults on them; run only passes the bytes through)")
	fs.StringVar(&c.store, "store", "", "bundled server only: the PostgreSQL its replicas share: local (idscheck starts a throwaway cluster and stops it at the end), or a postgres:// URL (\"store\" in the target file; default: its own SQLite file)")
	if code, stop := parseFlags(fs, args, false, stdout); stop {
		return c, code, true
	}
	c.values = map[string]string{}
	fs.Visit(func(f *flag.Flag) {
		c.setFlags = append(c.setFlags, f.Name)
		c.values[f.Name] = f.Value.String()
	})
	c.seedSet = c.values["seed"] != ""
	usageErr := func(format string, a ...any) (runConfig, int, bool) {
		fmt.Fprintf(stderr, "idscheck run: "+format+"\n", a...)
		return c, exitUsage, true
	}
	if err := c.tgt.load(fs, getenv); err != nil {
		return usageErr("%v", err)
	}
	if p, ok := profiles.Lookup(spec.Profile(c.profile)); !ok {
		return usageErr("%v", errUnknownProfile(c.profile))
	} else if p.Suite == nil {
		return usageErr("profile %q has no scenarios yet", c.profile)
	} else if c.sel, err = selectRules(p, c.rules, c.exclude); err != nil {
		return usageErr("%v", err)
	}
	if err := c.tgt.validate(spec.Profile(c.profile), true); err != nil {
		return usageErr("%v", err)
	}
	if c.tgt.URL != "" && c.values["readings"] != "" {
		return usageErr("--readings chooses what the bundled server follows; for --target, declare the target's readings with --reading DECISION=NAME")
	}
	if c.serverReadings != "default" && c.serverReadings != "alternate" {
		return usageErr("--readings must be default or alternate, got %q", c.serverReadings)
	}
	if c.tgt.URL != "" && c.mutant != "" {
		return usageErr("--mutant applies to the bundled server only, not to --target")
	}
	if c.store == "" && c.tgt.URL == "" {
		c.store = c.tgt.Store // "store" of the target file: the bundled server's
	}
	if err := checkReplicas(c.replicas, c.store, c.tgt.URL != ""); err != nil {
		return usageErr("%v", err)
	}
	c.storeProxy = c.storeProxy || c.tgt.StoreProxy
	if c.storeProxy && c.store == "" && c.tgt.Store == "" {
		return usageErr("--store-proxy needs a store: --store postgres://… (the bundled server's), or \"store\" in the target file")
	}
	if c.budget <= 0 || c.requestTimeout <= 0 || c.scenarioTimeout < 0 || c.healthWait <= 0 || c.maxDuration <= 0 {
		return usageErr("--budget, --request-timeout, --health-wait and --max-duration must be > 0")
	}
	if c.out == "" {
		return usageErr("--out must name a directory")
	}
	if c.runID != "" {
		if err := rundir.CheckRunID(c.runID); err != nil {
			return usageErr("--run-id: %v", err)
		}
	}
	return c, 0, false
}

// globs is the selection as the report records it: the globs of --rules,
// and those of --exclude as '!GLOB'.
func (c runConfig) globs() []string {
	out := splitList(c.rules)
	for _, g := range splitList(c.exclude) {
		out = append(out, "!"+g)
	}
	return out
}

// reproduce returns the command line that repeats this run: the same flags,
// the seed always, --target-file when one was given, every credential
// replaced by its environment variable. Values from the target file are not
// repeated: the file is named instead.
//
// It writes to a new folder (reproOut), never to --out: run as printed, it
// must not replace the report it reproduces.
func (c runConfig) reproduce() string {
	parts := []string{selfCommand, "run", "--seed=" + strconv.FormatUint(c.seed, 10), "--out=" + shellQuote(reproOut(c.out))}
	for _, name := range c.setFlags {
		if name == "seed" || name == "out" {
			continue
		}
		if tp, ok := c.tgt.reproduceFlag(name, c.values[name]); ok {
			parts = append(parts, tp...)
			continue
		}
		v := c.values[name]
		if name == "store" {
			v = redactStore(v) // its password never written
		}
		parts = append(parts, "--"+name+"="+shellQuote(v))
	}
	parts = append(parts, c.tgt.reproduceEnv()...)
	return strings.Join(parts, " ")
}

// reproduceNeeds is what the reproduce line needs from the environment:
// the variables it names in place of the credentials given by flag and of
// the secrets of --target-cmd.
func (c runConfig) reproduceNeeds() replayNeeds {
	var needs replayNeeds
	c.tgt.credentialNeeds(&needs)
	if containsString(c.setFlags, "target-cmd") {
		replayCommand(c.tgt.cli.targetCmd, c.tgt.Secrets(), &needs)
	}
	return needs
}

// reproduceNote is the note of a result that says what the reproduce line
// needs set (reproduceNeeds); printReproduce prints it under the line.
const reproduceNote = "to reproduce: "

// printReproduce writes the reproduce line of doc and, under it, what it
// needs from the environment.
func printReproduce(b io.Writer, doc *reports.Result) {
	fmt.Fprintf(b, "reproduce: %s\n", doc.Command)
	for _, n := range doc.Notes {
		if rest, ok := strings.CutPrefix(n, reproduceNote); ok {
			if strings.HasPrefix(rest, "same seed:") {
				fmt.Fprintf(b, "           (%s)\n", rest) // what the line repeats, not a step to take first
			} else {
				fmt.Fprintf(b, "           first: %s\n", rest)
			}
		}
	}
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == ',' || r == '=' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// cmdRun is `idscheck run`.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, code, stop := parseRunFlags(args, os.Getenv, stdout, stderr)
	if stop {
		return code
	}
	started := time.Now()
	prof, _ := profiles.Lookup(spec.Profile(c.profile)) // parseRunFlags checked it
	if c.dryRun {
		if err := dryRun(stdout, prof, c.sel); err != nil {
			fmt.Fprintf(stderr, "idscheck run: %v\n", err)
			return exitUsage
		}
		return exitOK
	}
	if err := prepareOut(c.out, kindRun, c.force); err != nil {
		fmt.Fprintf(stderr, "idscheck run: %v\n", err)
		return exitUsage
	}
	secrets := append(c.tgt.Secrets(), storeSecrets(c.store)...)
	tty := isTerminal(stderr)
	// Every line this command writes goes through the redaction: an error
	// may quote the target command, its output, or a URL with a password.
	redact := newSecretList(secrets)
	stdout, stderr = redactingWriter(stdout, redact), redactingWriter(stderr, redact)
	expected, err := readExpectedFailures(c.expectedFailures, spec.Profile(c.profile))
	if err != nil {
		fmt.Fprintf(stderr, "idscheck run: %v\n", err)
		return exitUsage
	}
	if !c.seedSet {
		var b [8]byte
		rand.Read(b[:])
		c.seed = binary.LittleEndian.Uint64(b[:]) % 1_000_000_000
	}
	if c.runID == "" {
		c.runID = rundir.NewRunID()
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	target := c.tgt.Target()
	bundled := c.tgt.URL == ""
	targetLabel := c.tgt.URL
	effects, err := startEffectSink(prof, c.tgt.EffectSink, bundled)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck run: %v\n", err)
		return exitUsage
	}
	if effects != nil {
		defer effects.Close()
		fmt.Fprintf(stderr, "idscheck run: effect sink at %s\n", effects.URL())
	} else if prof.EffectSink {
		fmt.Fprintln(stderr, noSinkNote(prof, c.tgt.Described))
	}
	for _, st := range []*string{&c.store, &c.tgt.Store} {
		if *st == localStore {
			u, stop, err := startLocalStore(ctx, stderr, "run")
			if err != nil {
				fmt.Fprintf(stderr, "idscheck run: %v\n", err)
				return exitUsage
			}
			defer stop()
			*st = u
		}
	}
	var storeFor func(int) string
	if c.storeProxy {
		store := c.store
		if store == "" {
			store = c.tgt.Store
		}
		proxies, err := startStoreProxies(store, max(c.replicas, len(c.tgt.ReplicaList)), logger)
		if err != nil {
			fmt.Fprintf(stderr, "idscheck run: %v\n", err)
			return exitUsage
		}
		defer proxies.close()
		storeFor = proxies.urlFor
		fmt.Fprintf(stderr, "idscheck run: a proxy between each replica and the store: %s\n", strings.Join(proxies.addrs(), ", "))
	}
	if bundled {
		timeScale := c.tgt.withDefaultTimeScale(prof.DefaultTimeScale())
		variant := c.tgt.variant()
		dir, err := os.MkdirTemp("", "idscheck-bundled-")
		if err != nil {
			fmt.Fprintf(stderr, "idscheck run: bundled server: %v\n", err)
			return exitUsage
		}
		defer os.RemoveAll(dir)
		var readings map[string]string
		if c.serverReadings == "alternate" && prof.AlternateReadings != nil {
			readings = prof.AlternateReadings()
		}
		// The readings declared (--reading, "readings" of the target file)
		// are the bundled server's too: it is started following them, as
		// idscheck serve --reading would, so that it is judged by what it
		// was told to follow.
		switch {
		case len(target.Readings) > 0 && prof.AlternateReadings == nil:
			// A server without readings to choose follows its own: the
			// declared ones judge it as it is.
			fmt.Fprintf(stderr, "idscheck run: note: the bundled %s server takes no readings (idscheck serve --profile %s has no --reading): it follows its own, and the declared %s judge it as it is\n",
				c.profile, c.profile, c.tgt.Readings.String())
		case len(target.Readings) > 0:
			if readings == nil {
				readings = map[string]string{}
			}
			maps.Copy(readings, target.Readings)
		}
		sinkURL := ""
		if effects != nil {
			sinkURL = effects.URL()
		}
		var bt features.Target
		if c.replicas > 1 || c.store != "" || storeFor != nil {
			// Child processes over the shared store, as chaos starts them.
			if prof.Serve == nil || prof.Serve.Child == nil {
				fmt.Fprintf(stderr, "idscheck run: profile %s has no bundled server to start as replicas\n", c.profile)
				return exitUsage
			}
			if !prof.Serve.SharedStore {
				fmt.Fprintf(stderr, "idscheck run: %s\n", noSharedStore(c.profile))
				return exitUsage
			}
			wait := faults.ProcessStartTimeout
			if containsString(c.setFlags, "health-wait") {
				wait = c.healthWait
			}
			child := prof.Serve.Child(func() string { return chaosRandomHex(16) }, c.tgt.Described)
			redact.add(child.Secrets...)
			secrets = append(secrets, child.Secrets...)
			ct, err := startBundledChild(ctx, childConfig{profile: prof.Name, prof: prof, dir: dir, timeScale: timeScale, mutant: c.mutant,
				mutants: prof.Mutants, replicas: c.replicas, store: c.store, storeFor: storeFor, child: child, readings: readings, healthWait: wait}, sinkURL, redact.redactor(), logger)
			if errors.Is(err, errUnreachable) { // a replica died before it was up: its output quoted
				return unreachable(c, target, secrets, started, err.Error(), stdout, stderr)
			}
			if err != nil {
				fmt.Fprintf(stderr, "idscheck run: starting the bundled reference server: %v\n", err)
				return exitUsage
			}
			defer ct.close()
			bt = ct.t
			bt.Replicas = ct.urls[1:]
		} else {
			b, stopServer, err := startBundled(ctx, prof, bundledOptions{Dir: dir, TimeScale: timeScale, Seed: c.seed, Mutant: c.mutant, Readings: readings, Logger: logger, SinkURL: sinkURL, Variant: variant})
			if err != nil {
				fmt.Fprintf(stderr, "idscheck run: starting the bundled reference server: %v\n", err)
				return exitUsage
			}
			defer stopServer()
			bt = b
		}
		bt.Readings = target.Readings
		target = bt
		secrets = append(secrets, bt.Secrets()...)
		redact.add(bt.Secrets()...)
		targetLabel = bt.BaseURL + " (bundled reference server)"
		if c.mutant != "" {
			targetLabel = bt.BaseURL + " (bundled reference server, mutant " + c.mutant + ")"
		}
		if c.serverReadings == "alternate" {
			targetLabel = strings.TrimSuffix(targetLabel, ")") + ", alternate readings)"
		}
		if len(target.Readings) > 0 && prof.AlternateReadings != nil {
			targetLabel = strings.TrimSuffix(targetLabel, ")") + ", started with the declared readings " + c.tgt.Readings.String() + ")"
		}
		if len(bt.Replicas) > 0 {
			targetLabel = strings.TrimSuffix(targetLabel, ")") + fmt.Sprintf(", %d replicas over one store, also at %s)", len(bt.Replicas)+1, strings.Join(bt.Replicas, ", "))
		}
	}
	fmt.Fprintf(stderr, "idscheck run: profile %s, seed %d, target %s\n", c.profile, c.seed, redactURL(targetLabel))

	var exited <-chan struct{}
	var proc *faults.Process
	if c.tgt.TargetCmd != "" {
		proc, err = faults.StartProcess(ctx, c.tgt.TargetCmd, nil, "", logger)
		if err != nil {
			return unreachable(c, target, secrets, started, fmt.Sprintf("--target-cmd could not start: %v", err), stdout, stderr)
		}
		defer proc.Stop()
		exited = proc.Exited()
		fmt.Fprintf(stderr, "idscheck run: started the target (pid %d); waiting up to %s for GET /health\n", proc.PID(), c.healthWait)
	}
	if len(c.tgt.ReplicaList) > 0 {
		store := func(int) string { return c.tgt.Store }
		if storeFor != nil {
			store = storeFor
		}
		rt, err := startTargetReplicas(ctx, c.tgt.ReplicaList, store, c.healthWait, redact.get(), logger)
		if err != nil {
			return unreachable(c, target, secrets, started, err.Error(), stdout, stderr)
		}
		defer rt.close()
		fmt.Fprintf(stderr, "idscheck run: %d replicas answer GET /health: %s\n", len(rt.urls), strings.Join(rt.urls, ", "))
	}
	if err := waitHealthyOrExit(ctx, target.BaseURL, c.healthWait, c.requestTimeout, exited); err != nil {
		if np := (*harness.NotProtocolError)(nil); errors.As(err, &np) {
			return preflightFailed(c, target, secrets, started, err, stdout, stderr)
		}
		cause := err.Error()
		if proc != nil {
			output := strings.TrimSpace(proc.Output())
			if output == "" {
				output = "(none)"
			}
			if proc.Running() {
				cause += "; the --target-cmd process is running; its output so far:\n" + output
			} else {
				cause += fmt.Sprintf("; the --target-cmd process exited (%v) before it answered; its last output:\n%s", proc.ExitErr(), output)
			}
		}
		return unreachable(c, target, secrets, started, cause, stdout, stderr)
	}
	if !bundled {
		// What the target publishes about itself is used, or contradicted
		// out loud (exit 2), never silently overridden.
		if err := c.listen(ctx, &target, stderr); err != nil {
			fmt.Fprintf(stderr, "idscheck run: %v\n", err)
			return exitUsage
		}
	}
	if prof.Preflight != nil {
		if err := prof.Preflight(ctx, target, min(c.requestTimeout, 10*time.Second)); err != nil {
			return preflightFailed(c, target, secrets, started, err, stdout, stderr)
		}
	}

	rules := prof.Rules()
	runCtx, cancel := context.WithTimeout(ctx, c.maxDuration)
	defer cancel()
	res, err := prof.Run(runCtx, features.RunConfig{
		Target:          target,
		Seed:            c.seed,
		RunID:           c.runID,
		Select:          c.sel.runnerSelect(),
		Budget:          c.budget,
		RequestTimeout:  c.requestTimeout,
		ScenarioTimeout: c.scenarioTimeout,
		Progress:        stderr,
		ProgressTTY:     tty,
		Logger:          logger,
		Sink:            effects,
	})
	if err != nil {
		fmt.Fprintf(stderr, "idscheck run: %s\n", trimEcho(err.Error(), "run"))
		return exitUsage
	}
	// The failed exchanges as curl lines, before the redaction: each
	// credential is told by its value and printed as its variable.
	curls := failedCurls(res, target.BaseURL, targetShellVars(target))
	res.Redact(secrets)
	g := gate(res.Rules, rules, expected, c.strict)
	doc, g := newRunResult(c, target, bundled, res, rules, expected, g, secrets)
	if err := writeRunDir(c.out, doc, res); err != nil {
		fmt.Fprintf(stderr, "idscheck run: writing the report: %v\n", err)
		if _, serr := os.Stat(filepath.Join(c.out, reports.ResultFile)); serr != nil {
			printSummary(stdout, doc, res, g, "", curls)
			return exitUsage
		}
	}
	printSummary(stdout, doc, res, g, c.out, curls)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintln(stderr, "idscheck run: interrupted; the scenarios left are UNKNOWN")
	case runCtx.Err() != nil:
		fmt.Fprintf(stderr, "idscheck run: --max-duration %s passed; the scenarios left are UNKNOWN\n", c.maxDuration)
	}
	return g.code
}

// preflightFailed ends a run whose preflight failed: a refused credential
// is exit 2 naming it, a target that answered but not as the protocol does
// is exit 3 saying what it answered, anything else (the target could not be
// asked) is unreachable. The reports are written as for an unreachable
// target: no rule verdict.
func preflightFailed(c runConfig, target features.Target, secrets []string, started time.Time, err error, stdout, stderr io.Writer) int {
	var cred *harness.CredentialError
	var other *harness.NotProtocolError
	cause := redactAll(err.Error(), secrets)
	switch {
	case errors.As(err, &cred):
		return writeStopped(c, target, secrets, started, cause, exitUsage, true,
			"To fix: give the credential the target expects (see idscheck run -h: the target's flags and file).", stdout, stderr)
	case errors.As(err, &other):
		return writeStopped(c, target, secrets, started, "the target does not speak the "+c.profile+" profile: "+cause, exitUnreachable, true,
			"To fix: check that --target is the base URL of a service of the "+c.profile+" profile (see idscheck run -h and the profile's page in docs/).", stdout, stderr)
	}
	return unreachable(c, target, secrets, started, "preflight: "+cause, stdout, stderr)
}

// writeStopped writes the reports of a run that stopped before any
// scenario (exit code code; what stopped it, "preflight failed" or "target
// unreachable"; the cause and the fix in every report) and says so, once,
// on stdout: the cause, the fix, the report, the reproduce line, the exit.
// No rule has a verdict.
func writeStopped(c runConfig, target features.Target, secrets []string, started time.Time, cause string, code int, preflight bool, fix string, stdout, stderr io.Writer) int {
	what := "target unreachable"
	if preflight {
		what = "preflight failed"
	}
	doc := &reports.Result{
		Tool:             reports.CurrentTool(),
		Profile:          spec.Profile(c.profile),
		Decisions:        profileDecisions(spec.Profile(c.profile)),
		Target:           reports.Target{URL: target.BaseURL, Bundled: c.tgt.URL == "", Mutant: c.mutant, Command: redact.NewRedactor(secrets...).Command(c.tgt.TargetCmd), TimeScale: target.TimeScale},
		Seed:             c.seed,
		Command:          redactAll(c.reproduce(), secrets),
		Started:          started,
		Finished:         time.Now(),
		Strict:           c.strict,
		Select:           c.globs(),
		ExpectedFailures: c.expectedFailures,
		ExitCode:         code,
		Unreachable:      cause,
		Preflight:        preflight,
		Notes:            []string{fmt.Sprintf("exit %d: %s: %s", code, what, cause), "No rule was checked. " + fix},
		Redact:           secrets,
	}
	if n := c.reproduceNeeds().note(); n != "" {
		doc.Notes = append(doc.Notes, reproduceNote+n)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nidscheck run: %s, no rule checked: %s\n  %s\n", what, stoppedCause(cause), fix)
	if err := reports.WriteAll(c.out, doc); err != nil {
		io.WriteString(stdout, b.String())
		fmt.Fprintf(stderr, "idscheck run: writing the report: %v\n", err)
		return code
	}
	fmt.Fprintf(&b, "\nreport:    %s\n", filepath.Join(c.out, reports.HTMLFile))
	printReproduce(&b, doc)
	fmt.Fprintf(&b, "exit %d: %s\n", code, what)
	io.WriteString(stdout, b.String())
	return code
}

// unreachable ends a run whose target never answered GET /health with 200:
// it still writes result.json (exit code 3, a note naming the cause),
// junit.xml (one <error> testcase naming the cause, so a CI job shows why)
// and index.html, says so on stdout, and returns exitUnreachable.
func unreachable(c runConfig, target features.Target, secrets []string, started time.Time, cause string, stdout, stderr io.Writer) int {
	cause = strings.TrimPrefix(cause, errUnreachable.Error()+": ") // said once, below
	hint := "check that the target is running, that --target (or \"url\" in the target file) is its base URL " +
		"(scheme, host, port, path prefix), and that GET <target>/health answers 200 without credentials"
	if len(c.tgt.ReplicaList) > 0 {
		hint = "check that each replica's cmd starts it on its own url (an address no other process holds), over the store, within --health-wait (" +
			c.healthWait.String() + "), and that GET <replica>/health answers 200 without credentials"
	} else if c.tgt.URL == "" && !strings.HasPrefix(cause, "preflight") { // a bundled replica that died
		hint = "the bundled server's output above says why it stopped; check that --store names a PostgreSQL the replicas can reach"
	} else if c.tgt.TargetCmd != "" {
		hint = "check that --target-cmd starts the target on the target URL, within --health-wait (" + c.healthWait.String() +
			"; raise it for a slow start), and that GET <target>/health answers 200 without credentials"
	}
	return writeStopped(c, target, secrets, started, cause, exitUnreachable, false, "To fix: "+hint+".", stdout, stderr)
}

// waitHealthy polls GET /health until it answers 200, for at most wait;
// each probe is bounded by min(reqTimeout, maxHealthProbe), so one that
// hangs is retried. A close of exited (the started target process ended)
// ends the wait early.
func waitHealthy(ctx context.Context, base string, wait, reqTimeout time.Duration) error {
	return waitHealthyOrExit(ctx, base, wait, reqTimeout, nil)
}

// waitHealthyOrExit is waitHealthy that also stops when exited is closed.
// Without a process it started (exited nil), an answer waiting will not
// change (harness.Settled: a 404, a 405, a redirect) ends the wait at once
// with a *harness.NotProtocolError naming it; a target the harness started
// may answer so while it comes up (a proxy before its backend), and is
// waited for.
func waitHealthyOrExit(ctx context.Context, base string, wait, reqTimeout time.Duration, exited <-chan struct{}) error {
	timeout := min(reqTimeout, maxHealthProbe)
	c, err := client.New(base, client.Options{Name: "health", Timeout: timeout})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	health := strings.TrimSuffix(redactURL(base), "/") + "/health"
	var last error
	probes := 0
	for {
		probes++
		resp, err := c.Do(ctx, client.Request{Method: http.MethodGet, Path: "/health", NoAPIKey: true})
		var ne net.Error
		switch {
		case err != nil && ctx.Err() != nil:
			// The wait ended inside this probe: keep what the previous one said.
			if last == nil {
				last = fmt.Errorf("no answer within %s", min(timeout, wait))
			}
		case err != nil && errors.As(err, &ne) && ne.Timeout():
			last = fmt.Errorf("no answer within %s", timeout)
		case err != nil:
			last = err
		case resp.Status != http.StatusOK && exited == nil && harness.Settled(resp.Status):
			// A running target answered, and waiting will not change
			// what: it is reachable, and not what the profile speaks.
			return harness.HealthNotProtocol(health, resp)
		case resp.Status != http.StatusOK:
			last = fmt.Errorf("answered %d, want 200", resp.Status)
		default:
			return nil
		}
		select {
		case <-ctx.Done():
			if err := context.Cause(ctx); ctx.Err() != nil && !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("GET %s: interrupted: %w", health, err)
			}
			return fmt.Errorf("GET %s did not answer 200 within --health-wait %s (%s); the last: %w", health, wait, plural(probes, "probe"), last)
		case <-exited:
			return fmt.Errorf("GET %s did not answer 200 (%s; the last: %w)", health, plural(probes, "probe"), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// secretList is the secrets a command redacts from its output; it may grow
// while other goroutines write (the bundled server's own secrets are known
// once it started).
type secretList struct {
	mu   sync.RWMutex
	list []string
}

func newSecretList(s []string) *secretList { return &secretList{list: slices.Clone(s)} }

func (l *secretList) add(s ...string) {
	l.mu.Lock()
	l.list = append(l.list, s...)
	l.mu.Unlock()
}

// redactor is a Redactor of the secrets listed so far.
func (l *secretList) redactor() *redact.Redactor { return redact.NewRedactor(l.get()...) }

func (l *secretList) get() []string {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clone(l.list)
}

// redactingWriter returns w with every secret of l (and its JSON-escaped
// form) replaced in each write. Each write is redacted whole: callers write
// whole lines (fmt.Fprintf).
func redactingWriter(w io.Writer, l *secretList) io.Writer {
	return &redactWriter{w: w, secrets: l}
}

type redactWriter struct {
	w       io.Writer
	secrets *secretList
}

func (r *redactWriter) Write(p []byte) (int, error) {
	secrets := r.secrets.get()
	if len(secrets) == 0 {
		return r.w.Write(p)
	}
	if _, err := io.WriteString(r.w, redactAll(string(p), secrets)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// readExpectedFailures reads the expected-failures file: one rule ID a line,
// '#' starts a comment. Every ID must be a rule of the profile.
func readExpectedFailures(path string, p spec.Profile) (map[string]bool, error) {
	out := map[string]bool{}
	if path == "" {
		return out, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("expected failures: %w", err)
	}
	defer f.Close()
	known := map[string]bool{}
	if pr, ok := profiles.Lookup(p); ok {
		for _, r := range pr.Rules() {
			known[r.ID] = true
		}
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		id := strings.TrimSpace(line)
		if id == "" {
			continue
		}
		if !known[id] {
			return nil, fmt.Errorf("expected failures: %s:%d: %q is not a rule of the %s profile", path, n, id, p)
		}
		out[id] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("expected failures: %w", err)
	}
	return out, nil
}

// gateResult is how a run's verdicts map to the exit code.
type gateResult struct {
	code      int
	failing   []string // rules that fail the run
	expected  []string // listed in the expected-failures file and failing
	nowPasses []string // listed in the expected-failures file but passing
	undecided []string // UNKNOWN, BLOCKED, or a verdict this build does not know
	unknown   []string // UNKNOWN: the harness could not decide
	blocked   []string // BLOCKED: a precondition failed
	message   string
}

// gate decides the exit code: 1 when a MUST fails (or a SHOULD with strict)
// outside the expected failures, or an expected failure now passes; else 4
// when a rule is undecided (UNKNOWN or BLOCKED, or has a verdict this build
// does not know); else 0. A MAY never fails a run, nor does a READING (the
// target follows one reading the text allows; a target that declared a
// reading and broke it gets FAIL, which fails as any FAIL).
func gate(results []verdict.RuleResult, rules []spec.Rule, expected map[string]bool, strict bool) gateResult {
	level := map[string]spec.Level{}
	for _, r := range rules {
		level[r.ID] = r.Level
	}
	var g gateResult
	musts, nonStrict := 0, 0
	for _, r := range rules {
		if r.Level == spec.Must {
			musts++
		}
	}
	for _, rr := range results {
		exp := expected[rr.RuleID]
		if rr.Verdict == verdict.NonStrict && !exp {
			nonStrict++
		}
		switch rr.Verdict {
		case verdict.Fail, verdict.NonStrict:
			counts := rr.Verdict == verdict.Fail || (strict && level[rr.RuleID] == spec.Should)
			switch {
			case exp:
				g.expected = append(g.expected, rr.RuleID)
			case counts:
				g.failing = append(g.failing, rr.RuleID)
			}
		case verdict.Pass:
			if exp {
				g.nowPasses = append(g.nowPasses, rr.RuleID)
			}
		case verdict.Unknown:
			g.unknown = append(g.unknown, rr.RuleID)
			g.undecided = append(g.undecided, rr.RuleID)
		case verdict.Blocked:
			g.blocked = append(g.blocked, rr.RuleID)
			g.undecided = append(g.undecided, rr.RuleID)
		case verdict.Reading, verdict.NA:
			// never fails, never undecided
		default: // a verdict this build does not know never reads as a pass
			g.undecided = append(g.undecided, rr.RuleID)
		}
	}
	switch {
	case len(g.failing) > 0 || len(g.nowPasses) > 0:
		g.code = exitFailed
		var why []string
		if len(g.failing) > 0 {
			why = append(why, fmt.Sprintf("%d rule(s) failed", len(g.failing)))
		}
		if len(g.nowPasses) > 0 {
			why = append(why, fmt.Sprintf("%d expected failure(s) now pass: remove them from the expected-failures file", len(g.nowPasses)))
		}
		g.message = strings.Join(why, "; ")
	case len(g.undecided) > 0:
		g.code = exitUndecided
		g.message = fmt.Sprintf("%d rule(s) undecided: %d UNKNOWN (the harness could not decide), %d BLOCKED (a precondition failed)",
			len(g.undecided), len(g.unknown), len(g.blocked))
		if other := len(g.undecided) - len(g.unknown) - len(g.blocked); other > 0 {
			g.message += fmt.Sprintf(", %d with a verdict this build does not know", other)
		}
	default:
		g.code = exitOK
		g.message = "every MUST passed"
		if musts == 0 {
			// A text whose rules are all recommendations has no MUST to pass.
			g.message = "no MUST in this text: its rules are SHOULDs"
		}
		switch {
		case strict && musts == 0:
			g.message = "no MUST in this text; every SHOULD passed"
		case strict:
			g.message = "every MUST and SHOULD passed"
		case nonStrict > 0:
			g.message += fmt.Sprintf("; %d SHOULD(s) broken (NON-STRICT: --strict fails on them)", nonStrict)
		case musts == 0:
			g.message += ", and every one passed (gate with --strict)"
		}
	}
	return g
}

// covered holds a run that judged too few testable rules to undecided (exit
// 4): a run that judged nothing is not a pass. A failure stays a failure.
func (g gateResult) covered(sum reports.Summary, minJudged int) gateResult {
	if g.code == exitFailed || (sum.Judged > 0 && sum.Judged >= minJudged) {
		return g
	}
	g.code = exitUndecided
	g.message = fmt.Sprintf("judged %d of %d testable rules, fewer than the %d required (--min-judged): not a pass", sum.Judged, sum.Testable, max(minJudged, 1))
	if sum.Judged == 0 {
		g.message = fmt.Sprintf("judged none of the %d testable rules: nothing was tested, so this is not a pass", sum.Testable)
	}
	if len(sum.NotJudged) > 0 {
		g.message += "; most were left for: " + sum.NotJudged[0].Reason + " (declare what the target offers: see the target file in -h)"
	}
	return g
}

// newRunResult builds the reports.Result of a run: every selected rule with
// its verdict, the expected-failure marks, the exit code, and the secrets
// the renderers must redact.
func newRunResult(c runConfig, target features.Target, bundled bool, res *features.RunResult, rules []spec.Rule, expected map[string]bool, g gateResult, secrets []string) (*reports.Result, gateResult) {
	out := &reports.Result{
		Tool:             reports.CurrentTool(),
		Profile:          res.Profile,
		Decisions:        profileDecisions(res.Profile),
		Target:           reports.Target{URL: target.BaseURL, Bundled: bundled, Mutant: c.mutant, Command: redact.NewRedactor(secrets...).Command(c.tgt.TargetCmd), TimeScale: target.TimeScale, Variant: c.tgt.variantOf(target.Described)},
		Seed:             res.Seed,
		RunID:            c.runID,
		Command:          redactAll(c.reproduce(), secrets),
		Started:          res.Started,
		Finished:         res.Finished,
		Strict:           c.strict,
		Select:           c.globs(),
		NotCovered:       res.NotCovered,
		ExpectedFailures: c.expectedFailures,
		MinJudged:        c.minJudged,
		Redact:           secrets,
	}
	out.Rules = reports.Entries(rules, res.Rules, expected)
	// A run that judged too few rules is undecided, whatever passed.
	g = g.covered(out.Summary(), c.minJudged)
	out.ExitCode = g.code
	out.Notes = []string{fmt.Sprintf("exit %d: %s", g.code, g.message)}
	out.Notes = append(out.Notes, reproduceNote+replayRepeats(c.runID))
	if n := c.reproduceNeeds().note(); n != "" {
		out.Notes = append(out.Notes, reproduceNote+n)
	}
	for _, id := range g.nowPasses {
		out.Notes = append(out.Notes, id+" now passes: remove it from the expected-failures file")
	}
	return out, g
}

// writeRunDir writes the reports (result.json, junit.xml, index.html) and,
// beside them, history.jsonl (every exchange in the order sent) and
// scenarios.json (the verdict of every scenario). res must be redacted.
func writeRunDir(dir string, doc *reports.Result, res *features.RunResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	if err := reports.WriteAll(dir, doc); err != nil {
		errs = append(errs, err)
	}
	b, err := json.MarshalIndent(res.Scenarios, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, rundir.Scenarios), append(b, '\n'), 0o644)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("scenarios.json: %w", err))
	}
	if err := writeHistory(filepath.Join(dir, rundir.History), res.Exchanges); err != nil {
		errs = append(errs, fmt.Errorf("history.jsonl: %w", err))
	}
	return errors.Join(errs...)
}

func writeHistory(name string, exs []verdict.Exchange) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, ex := range exs {
		if err := enc.Encode(ex); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func printSummary(w io.Writer, doc *reports.Result, res *features.RunResult, g gateResult, dir string, curls map[string][]string) {
	var b strings.Builder
	sum := doc.Summary()
	fmt.Fprintf(&b, "\nidscheck run: %s profile, %d rules, %d scenarios, %d exchanges, %s\n",
		doc.Profile, len(doc.Rules), len(res.Scenarios), len(res.Exchanges), doc.Finished.Sub(doc.Started).Round(time.Millisecond))
	for _, v := range []verdict.Verdict{verdict.Pass, verdict.Fail, verdict.NonStrict, verdict.Unknown, verdict.Blocked, verdict.Reading, verdict.NA} {
		fmt.Fprintf(&b, "  %-10s %d\n", v, sum.Counts[v])
	}
	if n := len(doc.NotCovered); n > 0 {
		fmt.Fprintf(&b, "  %-10s %d (no scenario: %s)\n", "NOT RUN", n, strings.Join(doc.NotCovered, ", "))
	}
	fmt.Fprintf(&b, "judged %d of %d testable rules", sum.Judged, sum.Testable)
	if sum.OutOfScope > 0 {
		fmt.Fprintf(&b, " (%d rules of another variant or reading than the target declares left out)", sum.OutOfScope)
	}
	for i, r := range sum.NotJudged {
		if i == 0 {
			b.WriteString("; not judged:")
		}
		if i == 3 {
			fmt.Fprintf(&b, " …and %d more reasons (see the report)", len(sum.NotJudged)-3)
			break
		}
		fmt.Fprintf(&b, " %d × %s;", r.N, oneLine(r.Reason, 100))
	}
	b.WriteString("\n")
	nowPasses := map[string]bool{}
	for _, id := range g.nowPasses {
		nowPasses[id] = true
	}
	rules := append([]reports.RuleEntry(nil), doc.Rules...)
	order := map[verdict.Verdict]int{verdict.Fail: 0, verdict.NonStrict: 1, verdict.Unknown: 2, verdict.Blocked: 3, verdict.Reading: 4}
	sort.SliceStable(rules, func(i, j int) bool { return order[rules[i].Result.Verdict] < order[rules[j].Result.Verdict] })
	wrote, shown, hidden := false, 0, 0
	for _, r := range rules {
		v := r.Result.Verdict
		if _, listed := order[v]; !listed && !nowPasses[r.Rule.ID] {
			continue
		}
		if shown == maxSummaryLines {
			hidden++
			continue
		}
		shown++
		if !wrote {
			b.WriteString("\n")
			wrote = true
		}
		note, reason := "", r.Result.Reason
		switch {
		case nowPasses[r.Rule.ID]:
			note, reason = " (now passes: remove it from the expected-failures file)", ""
		case r.Expected:
			note = " (expected)"
		}
		switch rd := r.Result.Reading; {
		case v == verdict.Blocked:
			reason = blockedSummary(r.Result)
		case v == verdict.Reading:
			reason = readingSummary(rd, r.Result.Reason)
		case rd != nil && rd.Declared != "":
			reason += " (held to the declared reading " + rd.Declared + " of " + rd.Decision + ")"
		}
		fmt.Fprintf(&b, "  %-10s %s%s  %s\n", v, r.Rule.ID, note, oneLine(redactString(reason, doc.Redact), 160))
	}
	if hidden > 0 {
		fmt.Fprintf(&b, "  … and %d more: see the report\n", hidden)
	}
	var failedIDs []string
	for _, r := range rules {
		failedIDs = append(failedIDs, r.Rule.ID)
	}
	printCurls(&b, failedIDs, curls, doc.Target.Bundled)
	b.WriteString("\n")
	if dir != "" {
		fmt.Fprintf(&b, "report:    %s\n", filepath.Join(dir, reports.HTMLFile))
	}
	printReproduce(&b, doc)
	fmt.Fprintf(&b, "exit %d: %s\n", g.code, g.message)
	io.WriteString(w, b.String())
}

// maxSummaryLines bounds the rules the summary lists; the report has all.
const maxSummaryLines = 30

// blockedSummary is a BLOCKED rule's line: "blocked by RULE: reason".
func blockedSummary(rr verdict.RuleResult) string {
	s := "blocked"
	if rr.BlockedBy != "" {
		s += " by " + rr.BlockedBy
	}
	if rr.Reason != "" {
		s += ": " + rr.Reason
	}
	return s
}

// readingSummary is a READING rule's line: "follows NAME (DECISION)", or
// the reason when the result names no reading.
func readingSummary(rd *verdict.ReadingChoice, reason string) string {
	if rd == nil || rd.Follows == "" {
		if rd != nil && rd.Decision != "" {
			return "follows no single reading (" + rd.Decision + "): " + reason
		}
		return reason
	}
	s := "follows " + rd.Follows + " (" + rd.Decision + ")"
	if rd.Declared != "" {
		s += ", declared " + rd.Declared
	}
	return s
}

func redactString(s string, secrets []string) string {
	for _, x := range secrets {
		if len(x) >= 4 {
			s = strings.ReplaceAll(s, x, redact.Redacted)
		}
	}
	return s
}

// oneLine returns s on one line, at most n runes, cut at the end of a word
// (features.OneLine).
func oneLine(s string, n int) string { return features.OneLine(s, n) }

// stoppedCause is why a run stopped before any rule, as the console shows
// it: the first line on one line, and what follows it (a process's output
// quoted after "its output:") kept as lines, indented, the last 20 of them.
func stoppedCause(cause string) string {
	first, rest, _ := strings.Cut(strings.TrimSpace(cause), "\n")
	out := oneLine(first, 600)
	lines := strings.Split(strings.TrimSpace(rest), "\n")
	if rest == "" {
		return out
	}
	if len(lines) > 20 {
		out += fmt.Sprintf("\n    (%d earlier lines left out)", len(lines)-20)
		lines = lines[len(lines)-20:]
	}
	for _, l := range lines {
		out += "\n    " + oneLine(l, 300)
	}
	return out
}

// isTerminal reports whether w is a character device (a live terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// bundledTimeScale is the time scale of the bundled reference server when
// --time-scale is not given: a 60 s lease lasts one second.
const bundledTimeScale = 60

// bundledOptions configure the in-process reference server.
type bundledOptions struct {
	Dir       string // fresh directory for its database
	TimeScale float64
	Mutant    string            // "" for the clean server
	Seed      uint64            // seeds the server's jitter; 0: drawn by the server
	Readings  map[string]string // sut.Config.Readings; nil: the default reading everywhere
	Logger    *slog.Logger
	SinkURL   string // the effect sink's base URL (profiles with EffectSink)
	Variant   string // the variant the bundled server follows (a profile with variants); "": its default
}

// startBundled starts a profile's bundled reference handler on
// 127.0.0.1:0 (a fresh state in o.Dir, secrets of its own) and returns it as
// a Target and a stop function that drains it.
func startBundled(ctx context.Context, p profiles.Profile, o bundledOptions) (features.Target, func(), error) {
	if p.Bundled == nil {
		return features.Target{}, nil, fmt.Errorf("profile %s has no bundled reference server: give --target", p.Name)
	}
	b, err := p.Bundled(ctx, harness.BundledConfig{Dir: o.Dir, TimeScale: o.TimeScale, Seed: o.Seed, Mutant: o.Mutant, Readings: o.Readings, Logger: o.Logger, SinkURL: o.SinkURL, Variant: o.Variant})
	if err != nil {
		return features.Target{}, nil, err
	}
	t := b.Target
	t.TimeScale = o.TimeScale
	srv := b
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		return features.Target{}, nil, err
	}
	hs := &http.Server{Handler: srv.Handler, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(l)
	t.BaseURL = "http://" + l.Addr().String()
	stop := func() {
		// Every scenario has ended: nothing of the harness is in flight. A
		// short Shutdown lets a straggler finish; Close then drops the
		// connections a client opened but never used, which Shutdown would
		// wait 5 s for.
		sctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close()
		}
		srv.Close()
	}
	return t, stop, nil
}

// startEffectSink starts the harness's effect sink for a profile whose
// targets send their external effects to it: on the target file's
// effect_sink.listen address, or on 127.0.0.1 at a free port for the
// bundled server. A target that declares no sink gets none, and the rules
// that count effects are N/A. Nil for a profile without effects.
func startEffectSink(p profiles.Profile, declared effectSink, bundled bool) (*sink.Sink, error) {
	if !p.EffectSink {
		return nil, nil
	}
	addr := declared.Listen
	if addr == "" && !bundled {
		return nil, nil
	}
	s, err := sink.Start(addr)
	if err != nil {
		return nil, fmt.Errorf("%w (effect_sink.listen in the target file: a free host:port the target can reach)", err)
	}
	return s, nil
}

// profileDecisions are the decisions of a registered profile, written into
// its result so that a report shows them from the result alone.
func profileDecisions(name spec.Profile) []spec.Decision {
	if p, ok := profiles.Lookup(name); ok && p.Decisions != nil {
		return p.Decisions()
	}
	return nil
}

// noSinkNote says how a run without an effect sink judges the rules that
// count effects: by what the target's description declares instead (a
// count read), or not at all (N/A).
func noSinkNote(prof harness.Profile, described any) string {
	if prof.EffectsWithoutSink != nil {
		if by := prof.EffectsWithoutSink(described); by != "" {
			return "idscheck run: no effect sink declared: the rules that count effects are judged by " + by
		}
	}
	return "idscheck run: no effect sink declared (--effect-sink HOST:PORT or effect_sink in the target file): the rules that count effects will be N/A"
}
