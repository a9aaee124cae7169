package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/idscheck/idscheck/rundir"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/redact"
	"github.com/idscheck/idscheck/reports"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

// chaosConfig is what `idscheck chaos` was asked to do.
type chaosConfig struct {
	tgt        targetFlags // the target description shared with run and check
	targetArgs []string    // its part of the replay line
	target     string
	targetCmd  string
	apiKey     string
	timeScale  float64
	duration   time.Duration
	seed       uint64
	runID      string // --run-id: the run's own nonce (rundir.Fresh); "": drawn
	workers    int
	faults     string
	stormMax   int
	out        string
	mutant     string
	// replicas is how many replicas of the bundled server chaos starts
	// over the shared store (--store), each delivery of a logical request
	// on another one; 1: one process on its own file.
	replicas int
	store    string
	// storeProxy is --store-proxy (or "proxy" in the target file's
	// "store"): a proxy between each replica and the store; storeFor, once
	// the proxies run, is the store URL replica i is given.
	storeProxy bool
	storeFor   func(i int) string
	verbose    bool
	force      bool // --force: replace what --out holds
	// healthWait bounds the wait for the target's health (0: 10 s for a
	// running --target, faults.ProcessStartTimeout for a process chaos
	// starts).
	healthWait time.Duration
	// profile is --profile, prof its registry entry, workload its chaos
	// workload; mutants are the profile's, for the failpoints a racy one
	// carries.
	profile  spec.Profile
	prof     harness.Profile
	workload *harness.ChaosWorkload
	mutants  []harness.Mutant
	// maxTimeScale bounds --time-scale: 3600, or the profile's bundled
	// time scale when it is higher.
	maxTimeScale float64
	// child is what the bundled server is given when chaos starts it (its
	// secrets drawn for the run), zero against a --target.
	child harness.ServeChild
	// sectionArgs are the flags of the profile's target section given
	// (its variant, …), for the replay line.
	sectionArgs []string
}

const chaosSynopsis = `chaos [--profile P] [--target-file FILE | --target URL [--target-cmd CMD] --api-key K] [--duration 60s]
                [--seed N] [--workers 40] [--faults net,storm,crash,failpoint] [--out DIR]
                [--replicas N --store local|postgres://… [--store-proxy]]

Drives the profile's seeded random chaos workload (the end of idscheck chaos
--profile P -h says what it does) through a fault schedule drawn from the seed, records every
operation and every effect, then checks the histories with the profile's checks:
lost, duplicated and unexpected units, stale tokens accepted, idempotency
violations, linearizability of what the profile models.

With no --target it starts the bundled reference server as a child process it owns
(so crash and failpoint faults are available). With --target alone crash faults are
not available; add --target-cmd (a shell command that starts the target on the
--target address, on the same data each time) to let idscheck kill and restart it.
Failpoints exist in the bundled server only. By default the faults are those
available: net and storm, and crash when idscheck starts the target (the bundled
server, or --target-cmd). A fault asked for by name or kind that is not available
against the target is a usage error (exit 2), before anything runs.

Past one machine: --replicas N --store local starts N replicas of the bundled
server over one PostgreSQL cluster idscheck starts (or --store postgres://… of
yours); each delivery of a logical request goes to another replica. The faults
replica-crash (kill one replica, restart it), store-restart (the cluster
idscheck started), and with --store-proxy store-partition and store-lost-reply
(a proxy between each replica and the store) act on them.

The time scale is the declared one (--time-scale, or time_scale in the target
file), else the one the target publishes on GET /health ("time_scale"; a
line says it is used, and a declared one it contradicts is exit 2, as is a
key lifetime or a reading it publishes otherwise); the bundled server runs at
its profile's scale. A target that neither declares nor publishes one is
judged by what it answers (a lease's end, the replays of a key, a command's
ttl_expires_at), never by an assumed scale.

Every key, id and unique value carries the run's own nonce (--run-id, drawn
and recorded in chaos.json): the replay line repeats the seed's choices and
their order with fresh keys, so it never meets the first run's state at a live
target; --run-id gives a recorded nonce back to repeat the keys too.

Every requested fault is injected at least once when the run is long enough (the
schedule starts with each of them, in an order drawn from the seed; when earlier steps
overran, a fault's first step still starts after --duration, at most 60 s late, the load
running on until it ended). A run in which
a requested fault was never injected (no room in the schedule, every injection
failed, or it could not be set up) ends UNKNOWN (exit 4), never PASS, and
says which and why. Secrets (the API key, VAR=value assignments and flags of
--target-cmd whose names hold SECRET, TOKEN, KEY or PASSWORD, such variables of the
environment) appear in no output. The target process dies with idscheck, even
when idscheck is SIGKILLed.

Exit codes: 0 no anomaly and every requested fault injected, 1 anomalies found,
2 usage, 3 target unreachable (result.json, junit.xml and index.html still say
why), 4 undecided (the checker could not decide, or a requested fault was never
injected).

Flags:`

func cmdChaos(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c chaosConfig
	fs := newFlagSet("chaos", chaosSynopsis, stderr)
	profile := new(string)
	profileFlag(fs, profile, defaultProfile(), "profile whose chaos workload to run")
	regProf, err := lookupProfile(argProfile(args, defaultProfile()))
	if err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	c.tgt.register(fs, regProf) // --target-file, --target, --target-cmd, credentials, --time-scale
	targetUsage := fs.Usage
	fs.Usage = func() { targetUsage(); fmt.Fprint(fs.Output(), chaosFaultsHelp(regProf)) } // every fault, one line each
	if w := regProf.Chaos; w != nil && w.Summary != "" {
		usage := fs.Usage
		fs.Usage = func() {
			usage()
			fmt.Fprintf(fs.Output(), "\nThe %s chaos workload: %s.\n", regProf.Name, w.Summary)
		}
	}
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "how long the workload and the faults run (then a drain)")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the workload and the fault schedule (0: a random seed, printed)")
	fs.StringVar(&c.runID, "run-id", "", "the run's own nonce, mixed into every key and id it sends (default: drawn, and recorded in chaos.json); give a recorded one back to repeat a run's keys exactly against a fresh target")
	fs.IntVar(&c.workers, "workers", 40, "concurrent workers (publishers: a quarter of it)")
	fs.StringVar(&c.faults, "faults", "", "faults to inject, "+faults.FlagHelp()+" (default: net,storm, and crash when idscheck starts the target)")
	fs.IntVar(&c.stormMax, "storm-max", 100, "largest duplicate storm (at most 1000; a profile may start higher: chaos --profile P -h shows its default)")
	fs.StringVar(&c.out, "out", "idscheck-chaos", "run directory to write (history, ledger, timeline, report)")
	fs.StringVar(&c.mutant, "mutant", "", "start the bundled server with this deliberate bug (self-validation)")
	fs.IntVar(&c.replicas, "replicas", 1, "start this many replicas of the bundled server over --store (each delivery of a logical request goes to another replica; the fault replica-crash kills one)")
	fs.BoolVar(&c.storeProxy, "store-proxy", false, "stand a proxy between each replica and the store (each replica is given the store's URL through its own proxy): the faults store-partition and store-lost-reply act on them")
	fs.StringVar(&c.store, "store", "", "the PostgreSQL the bundled server's replicas share: local (idscheck starts a throwaway cluster, stops it at the end, and can restart it: store-restart), or a postgres:// URL (default: one SQLite file per run)")
	fs.BoolVar(&c.verbose, "v", false, "log what the harness does")
	fs.DurationVar(&c.healthWait, "health-wait", 0, "how long to wait for the target's GET /health to answer 200 before giving up (exit 3, the report says why); default 10s for a running --target, 60s for a target chaos starts (--target-cmd, the bundled server)")
	fs.BoolVar(&c.force, "force", false, "write into an --out directory that holds another kind of run (run, mutants) or files that are no run, replacing the run there")
	if code, stop := parseFlags(fs, args, false, stdout); stop {
		return code
	}
	if err := profileHas(*profile, "chaos workload", func(p profiles.Profile) bool { return p.Chaos != nil }); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	prof, _ := profiles.Lookup(spec.Profile(*profile))
	c.prof, c.profile, c.workload, c.mutants = prof, prof.Name, prof.Chaos, prof.Mutants
	if w := c.workload; w != nil && w.StormMax > 0 {
		given := false
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == "storm-max" })
		if !given {
			c.stormMax = w.StormMax
		}
	}
	if err := c.tgt.load(fs, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	if err := c.tgt.validate(c.profile, true); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	c.target, c.targetCmd, c.apiKey = c.tgt.URL, c.tgt.TargetCmd, c.tgt.APIKey
	if c.store == "" && c.target == "" {
		c.store = c.tgt.Store // "store" of the target file: the bundled server's
	}
	c.storeProxy = c.storeProxy || c.tgt.StoreProxy
	// One time scale for every subcommand: the declared one, else real
	// time for a target, the profile's own for its bundled server.
	c.timeScale = c.tgt.withDefaultTimeScale(1)
	if c.target == "" {
		c.timeScale = c.tgt.withDefaultTimeScale(prof.DefaultTimeScale())
	}
	c.maxTimeScale = max(3600, prof.DefaultTimeScale())
	if c.faults == "" {
		c.faults = defaultChaosFaults(c.target == "" || c.targetCmd != "")
	}
	if c.target == "" {
		if prof.Serve == nil || prof.Serve.Child == nil {
			fmt.Fprintf(stderr, "idscheck chaos: profile %s has no bundled server chaos can start: give --target\n", c.profile)
			return exitUsage
		}
		if c.store != "" && !prof.Serve.SharedStore {
			fmt.Fprintf(stderr, "idscheck chaos: %s\n", noSharedStore(c.profile))
			return exitUsage
		}
		c.child = prof.Serve.Child(func() string { return chaosRandomHex(16) }, c.tgt.Described)
	}
	for _, a := range c.tgt.reproduceArgs(fs) {
		if !strings.HasPrefix(a, "--target-cmd=") && !strings.HasPrefix(a, "--time-scale=") {
			c.targetArgs = append(c.targetArgs, a) // the command and the time scale are written apart
		}
	}
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains(chaosOwnFlags, f.Name) && !c.tgt.isTargetFlag(f.Name) {
			c.sectionArgs = append(c.sectionArgs, "--"+f.Name, shellQuote(f.Value.String()))
		}
	})
	if err := c.validate(); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	if err := prepareOut(c.out, kindChaos, c.force); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	logger := slog.New(slog.DiscardHandler)
	return runChaos(ctx, c, stdout, stderr, logger)
}

// readings are the readings the target declares (nil: none).
func (c *chaosConfig) readings() map[string]string {
	if len(c.tgt.Readings) == 0 {
		return nil
	}
	return map[string]string(c.tgt.Readings)
}

// chaosOwnFlags are the flags of chaos itself (beyond the target's and the
// profile section's).
var chaosOwnFlags = []string{"profile", "duration", "seed", "run-id", "workers", "faults", "storm-max", "out", "mutant", "v", "force", "health-wait", "replicas", "store", "store-proxy"}

// defaultChaosFaults are the faults of a run that names none: those
// available, crash only when idscheck starts the target (canStart).
func defaultChaosFaults(canStart bool) string {
	if canStart {
		return "net,storm,crash"
	}
	return "net,storm"
}

func (c *chaosConfig) validate() error {
	if c.seed == 0 {
		var b [8]byte
		rand.Read(b[:])
		for i := range b {
			c.seed = c.seed<<8 | uint64(b[i])
		}
		c.seed &= 1<<53 - 1 // printable exactly in JSON
		if c.seed == 0 {
			c.seed = 1
		}
	}
	if c.runID == "" {
		c.runID = rundir.NewRunID()
	} else if err := rundir.CheckRunID(c.runID); err != nil {
		return fmt.Errorf("--run-id: %w", err)
	}
	switch {
	case c.duration < time.Second || c.duration > time.Hour:
		return fmt.Errorf("--duration %s: want 1s to 1h", c.duration)
	case c.workers < 1 || c.workers > 1000:
		return fmt.Errorf("--workers %d: want 1 to 1000", c.workers)
	case c.timeScale < 1 || c.timeScale > max(3600, c.maxTimeScale):
		return fmt.Errorf("--time-scale %g: want 1 to %g", c.timeScale, max(3600, c.maxTimeScale))
	case c.stormMax < 2 || c.stormMax > faults.MaxStorm:
		return fmt.Errorf("--storm-max %d: want 2 to %d", c.stormMax, faults.MaxStorm)
	case c.workload != nil && c.stormMax < c.workload.StormMin:
		return fmt.Errorf("--storm-max %d: the %s workload's storms are at least %d identical requests", c.stormMax, c.profile, c.workload.StormMin)
	case c.workload.NeedsDescription && c.target != "" && c.tgt.Described == nil && c.prof.Section != nil:
		return fmt.Errorf("profile %s with --target needs what the target offers described: %q in the target file (docs/%s.md)", c.profile, c.prof.Section.Key, c.profile)
	case c.workload.Sink && !c.workload.SinkOptional && c.target != "" && c.tgt.EffectSink.Listen == "":
		return fmt.Errorf("profile %s with --target needs the effect sink's address: --effect-sink host:port, or \"effect_sink\": {\"listen\": \"host:port\"} in the target file (idscheck hosts the sink there; the target sends its effects to http://host:port)", c.profile)
	case c.targetCmd != "" && c.target == "":
		return errors.New("--target-cmd needs --target: the URL the started process serves")
	case c.target != "" && c.mutant != "":
		return errors.New("--mutant applies to the bundled server only: drop --target")
	case checkReplicas(c.replicas, c.store, c.target != "") != nil:
		return checkReplicas(c.replicas, c.store, c.target != "")
	case c.storeProxy && c.sharedStore() == "":
		return errors.New("--store-proxy needs a store: --store postgres://… (the bundled server's), or \"store\" in the target file")
	case c.out == "":
		return errors.New("--out must name a directory")
	case c.healthWait < 0:
		return fmt.Errorf("--health-wait %s: want > 0", c.healthWait)
	}
	if c.target != "" {
		u, err := url.Parse(c.target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--target %q: want an http:// URL such as http://127.0.0.1:8080", c.target)
		}
		if c.apiKey == "" && c.prof.APIKeyRequired {
			return errors.New("--target needs --api-key: the key the workload publishes and claims with")
		}
	}
	tokens, err := c.faultTokens()
	if err != nil {
		return errors.New("--faults: " + trimEcho(err.Error(), "faults"))
	}
	if c.target == "" {
		// The bundled server's failpoints are known: a name it lacks is a typo.
		var known []string
		for _, f := range faults.All(faults.Config{Failpoints: c.workload.Failpoints}) {
			if f.Kind() == faults.KindFailpoint {
				known = append(known, f.Name())
			}
		}
		for _, tok := range tokens {
			if strings.HasPrefix(tok, faults.FailpointPrefix) && !slices.Contains(known, tok) {
				return fmt.Errorf("--faults: the bundled server has no %s; its failpoints: %s", tok, strings.Join(known, ", "))
			}
		}
	}
	return c.checkFaultsAvailable(tokens)
}

// hostsSink says the run hosts the effect sink: the workload has effects,
// and the bundled server is started or the target says where the sink
// listens.
func (c *chaosConfig) hostsSink() bool {
	return c.workload.Sink && (c.target == "" || c.tgt.EffectSink.Listen != "")
}

// checkFaultsAvailable refuses, before anything runs, a fault asked for
// that is not available against this target: a crash without a process
// idscheck starts, a failpoint of a target that is not the bundled server,
// a fault of the effect sink when no sink is hosted. A kind asked for
// (net, storm, crash, failpoint, all) asks for every fault of it that is
// available, and at least one must be.
func (c *chaosConfig) checkFaultsAvailable(tokens []string) error {
	canStart := c.target == "" || c.targetCmd != ""
	var fps map[string]string
	if c.target == "" {
		fps = c.workload.Failpoints
	}
	list := append(faults.All(faults.Config{Failpoints: fps}), c.ownFaults()...)
	if c.replicas > 1 || len(c.tgt.ReplicaList) > 1 {
		list = append(list, &faults.ReplicaCrash{})
	}
	list = append(list, c.storeFaults(nil, tokens)...)
	why := func(f faults.Fault) string {
		switch {
		case f.Name() == (&faults.ReplicaCrash{}).Name() && len(c.tgt.ReplicaList) > 1 && slices.ContainsFunc(c.tgt.ReplicaList, func(r replicaEntry) bool { return r.Cmd == "" }):
			return "a replica of the target file has no \"cmd\": idscheck can restart only replicas it starts"
		case f.Name() == (&faults.ReplicaCrash{}).Name() && len(c.tgt.ReplicaList) > 1:
			return ""
		case (f.Name() == (&faults.StorePartition{}).Name() || f.Name() == (&faults.StoreLostReply{}).Name()) && !c.storeProxy:
			return "no proxy stands between the replicas and their store: give --store-proxy (or \"proxy\": true in the target file's \"store\")"
		case f.Name() == (&faults.StoreRestart{}).Name():
			if err := f.Available(); err != nil {
				return storeNotStarted
			}
			return ""
		case slices.Contains(faults.StoreFaultNames(), f.Name()):
			return ""
		case f.Kind() == faults.KindCrash && !canStart:
			return "idscheck does not start this target: give --target-cmd (the command that starts it on the --target address) to let it kill and restart the target"
		case slices.Contains(c.ownFaultNames(), f.Name()) && !c.hostsSink():
			return "no effect sink is hosted for this target: give --effect-sink host:port (or \"effect_sink\" in the target file)"
		}
		return ""
	}
	for _, tok := range tokens {
		sel := faults.Select(list, []string{tok})
		if len(sel) == 0 {
			if tok == string(faults.KindFailpoint) || strings.HasPrefix(tok, faults.FailpointPrefix) {
				return fmt.Errorf("--faults %s: not available: failpoints exist only in the bundled reference server; this target is not it", tok)
			}
			return fmt.Errorf("--faults %s: not available against this target", tok)
		}
		var reasons []string
		for _, f := range sel {
			if w := why(f); w != "" {
				reasons = append(reasons, f.Name()+": "+w)
			}
		}
		if len(reasons) == len(sel) || (len(sel) == 1 && len(reasons) == 1) {
			return fmt.Errorf("--faults %s: not available: %s", tok, strings.Join(reasons, "; "))
		}
	}
	return nil
}

// faultTokens parses --faults: the tokens of faults.ParseKinds, and the
// names of the workload's own faults (the sink's).
func (c *chaosConfig) faultTokens() ([]string, error) {
	own := c.ownFaultNames()
	var rest, out []string
	for _, tok := range strings.Split(c.faults, ",") {
		tok = strings.TrimSpace(tok)
		if slices.Contains(own, tok) {
			if !slices.Contains(out, tok) {
				out = append(out, tok)
			}
			continue
		}
		rest = append(rest, tok)
	}
	if strings.TrimSpace(strings.Join(rest, "")) == "" && len(out) > 0 {
		return out, nil
	}
	toks, err := faults.ParseKinds(strings.Join(rest, ","))
	if err != nil {
		if len(own) > 0 {
			err = fmt.Errorf("%w (profile %s adds: %s)", err, c.profile, strings.Join(own, ", "))
		}
		return nil, err
	}
	return append(toks, out...), nil
}

// ownFaults are the workload's own faults, unbound (for their names).
func (c *chaosConfig) ownFaults() []faults.Fault {
	if c.workload != nil && c.workload.Faults != nil {
		return c.workload.Faults(nil, nil)
	}
	return nil
}

// sharedStore is the store the target's replicas share: --store (the
// bundled server's), else "store" of the target file; "" for none.
func (c *chaosConfig) sharedStore() string {
	if c.store != "" {
		return c.store
	}
	return c.tgt.Store
}

// storeFaults are the faults between the replicas and their store this
// run can name: each one that can run (a proxy fault with --store-proxy,
// store-restart of a store idscheck started), and any named in tokens
// (not available then, saying why); a kind or "all" selects only those
// that can run.
func (c *chaosConfig) storeFaults(proxies *storeProxies, tokens []string) []faults.Fault {
	var out []faults.Fault
	for _, f := range storeFaults(c.sharedStore(), proxies) {
		_, restart := f.(*faults.StoreRestart)
		can := (restart && f.Available() == nil) || (!restart && c.storeProxy)
		if can || slices.Contains(tokens, f.Name()) {
			out = append(out, f)
		}
	}
	return out
}

// ownFaultNames are the names of the workload's own faults.
func (c *chaosConfig) ownFaultNames() []string {
	var out []string
	for _, f := range c.ownFaults() {
		out = append(out, f.Name())
	}
	return out
}

// secrets returns every secret value the run was given: the API key, the
// password of --target's URL, and what --target-cmd and the environment
// carry (redact.CommandSecrets).
func (c chaosConfig) secrets() []string {
	out := redact.CommandSecrets(c.targetCmd, os.Environ())
	out = append(out, c.tgt.Secrets()...)
	out = append(out, c.child.Secrets...)
	out = append(out, storeSecrets(c.store)...)
	if c.apiKey != "" {
		out = append(out, c.apiKey)
	}
	if u, err := url.Parse(c.target); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw)
		}
	}
	return out
}

// chaosRun is what a chaos run writes to chaos.json in its directory: enough
// to re-check it offline and to replay it. It holds no secret: Command and
// every text from the target process are redacted before it is written.
type chaosRun struct {
	Seed uint64 `json:"seed"`
	// RunID is the run's own nonce (--run-id), mixed into every key and id
	// it sent: the replay line repeats the seed's choices with fresh keys,
	// and --run-id RunID repeats the keys too.
	RunID       string             `json:"run_id,omitempty"`
	Command     string             `json:"command"`
	Target      string             `json:"target"`
	Bundled     bool               `json:"bundled"`
	Mutant      string             `json:"mutant,omitempty"`
	TimeScale   float64            `json:"time_scale"`
	Duration    time.Duration      `json:"duration_ns"`
	Workers     int                `json:"workers"`
	Faults      string             `json:"faults"`
	Unavailable map[string]string  `json:"unavailable,omitempty"`
	Namespace   string             `json:"namespace"`
	Start       time.Time          `json:"start"`
	End         time.Time          `json:"end"`
	Schedule    []faults.Planned   `json:"schedule"`
	Timeline    []faults.Injection `json:"timeline"`
	Series      []chaos.Bucket     `json:"series"`
	// Options are the check options of runs recorded before Files: the
	// workload's Check reads them as its OptionsFile.
	Options json.RawMessage `json:"check_options,omitempty"`
	// Coverage is every requested fault and what became of it: scheduled,
	// injected, failed. One never injected makes the run UNKNOWN.
	Coverage []faults.Coverage `json:"coverage"`
	// Profile is the profile whose workload ran ("" in runs recorded
	// before the field: the default profile); its Check judges the
	// run. Files are the records its check reads besides the history and
	// the ledger; Undrained says its drain ran out of time; Summary is one
	// line on what it did.
	Profile   string   `json:"profile,omitempty"`
	Files     []string `json:"files,omitempty"`
	Undrained bool     `json:"undrained,omitempty"`
	Summary   string   `json:"summary,omitempty"`
	// Readings are the readings the target declared (--reading, "readings"
	// in the target file): the check holds a declared decision to its
	// reading, and accepts any reading of one not declared.
	Readings map[string]string `json:"readings,omitempty"`
	// ReplayNeeds says what Command needs set in the environment: the
	// variables it names in place of secrets.
	ReplayNeeds string `json:"replay_needs,omitempty"`
}

// command is the line that replays the run, with no secret: the API key is
// $API_KEY, and --target-cmd is redacted (redact.Redactor.Command).
func (c chaosConfig) command() string {
	parts := []string{selfCommand + " chaos"}
	defStorm := 100
	parts = append(parts, "--profile", string(c.profile))
	if c.workload.StormMax > 0 {
		defStorm = c.workload.StormMax
	}
	parts = append(parts, c.sectionArgs...)
	parts = append(parts, "--seed", fmt.Sprint(c.seed), "--duration", c.duration.String(),
		"--workers", fmt.Sprint(c.workers), "--faults", c.faults, "--time-scale", fmt.Sprint(c.timeScale))
	if c.stormMax != defStorm {
		parts = append(parts, "--storm-max", fmt.Sprint(c.stormMax))
	}
	red := redact.NewRedactor(c.secrets()...)
	if len(c.targetArgs) > 0 {
		parts = append(parts, c.targetArgs...)
	} else if c.target != "" {
		parts = append(parts, "--target", red.String(c.target), "--api-key", `"$IDSCHECK_API_KEY"`)
	}
	if c.targetCmd != "" {
		parts = append(parts, "--target-cmd", chaosShellQuote(replayCommand(c.targetCmd, c.secrets(), new(replayNeeds))))
	}
	if c.mutant != "" {
		parts = append(parts, "--mutant", c.mutant)
	}
	if c.replicas > 1 {
		parts = append(parts, "--replicas", fmt.Sprint(c.replicas))
	}
	if c.store != "" {
		parts = append(parts, "--store", chaosShellQuote(storeArg(c.store)))
	}
	if c.storeProxy {
		parts = append(parts, "--store-proxy")
	}
	// A new folder: run as printed, the line must not replace this run.
	parts = append(parts, "--out", shellQuote(reproOut(c.out)))
	return strings.Join(parts, " ")
}

// replayNeeds is what the replay line needs from the environment (see
// runConfig.reproduceNeeds).
func (c chaosConfig) replayNeeds() replayNeeds {
	var needs replayNeeds
	c.tgt.credentialNeeds(&needs)
	if c.targetCmd != "" {
		replayCommand(c.targetCmd, c.secrets(), &needs)
	}
	return needs
}

func chaosShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func runChaos(ctx context.Context, c chaosConfig, stdout, stderr io.Writer, logger *slog.Logger) int {
	// Nothing the run prints carries a secret: the terminal gets the same
	// redaction as the files.
	red := redact.NewRedactor(c.secrets()...)
	secrets := newSecretList(red.Secrets())
	stdout, stderr = redactingWriter(stdout, secrets), redactingWriter(stderr, secrets)
	if c.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	faults.SilenceToxiproxy()
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: run directory: %v\n", err)
		return exitUsage
	}
	for _, st := range []*string{&c.store, &c.tgt.Store} {
		if *st == localStore {
			u, stop, err := startLocalStore(ctx, stderr, "chaos")
			if err != nil {
				fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
				return exitUsage
			}
			defer stop()
			*st = u
		}
	}
	return runWorkloadChaos(ctx, c, red, stdout, stderr, logger)
}

// unmatchedReason says why a requested token selects no fault here.
func unmatchedReason(tok string, tgt *chaosTarget) string {
	if tok == string(faults.KindFailpoint) || strings.HasPrefix(tok, faults.FailpointPrefix) {
		if !tgt.bundled {
			return "failpoints exist only in the bundled reference server; this target is not it"
		}
		return "the bundled server has no such failpoint"
	}
	return "no fault of that name or kind against this target"
}

// redactChaosRun removes every secret from what chaos.json holds: the
// target's description, the reasons a fault was not available, the errors
// and parameters of injections (a restart error quotes the command and the
// target's output).
func redactChaosRun(run *chaosRun, red *redact.Redactor) {
	run.Target = red.String(run.Target)
	run.Command = red.String(run.Command)
	for k, v := range run.Unavailable {
		run.Unavailable[k] = red.String(v)
	}
	for i := range run.Coverage {
		run.Coverage[i].Reason = red.String(run.Coverage[i].Reason)
	}
	for i := range run.Timeline {
		in := &run.Timeline[i]
		in.Err = red.String(in.Err)
		if in.Params != nil {
			p := make(map[string]string, len(in.Params))
			for k, v := range in.Params {
				p[k] = red.String(v)
			}
			in.Params = p
		}
	}
}

// finishChaos checks the recorded run, writes check.json, the linearization
// view of failing partitions and the reports, prints the summary with every
// requested fault, and returns the exit code. It is checkChaosDir with the
// run's fault coverage in the verdict: a requested fault never injected
// makes a run whose histories pass UNKNOWN (exit 4), never PASS.
func finishChaos(dir string, run chaosRun, rep checker.Report, red *redact.Redactor, stdout, stderr io.Writer) int {
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, rundir.Check), append(b, '\n'), 0o644); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	viz := filepath.Join(dir, rundir.Linearization)
	os.Remove(viz)
	if len(rep.FailingPartitions) > 0 {
		if err := writeFileWith(viz, rep.Visualize); err != nil {
			fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		}
	}
	printChaosOutcome(stdout, run, rep, dir)
	r := chaosRunResult(run, rep, chaosViews(dir))
	r.Redact = red.Secrets()
	if err := reports.WriteAll(dir, r); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
	} else {
		fmt.Fprintf(stdout, "report: %s\n", filepath.Join(dir, rundir.HTML))
	}
	return r.ExitCode
}

// printChaosOutcome prints what the checker found and, for every requested
// fault, its injections: histories that pass are not a run that passes
// when a requested fault was never injected (UNKNOWN).
func printChaosOutcome(stdout io.Writer, run chaosRun, rep checker.Report, dir string) {
	missing := faults.Missing(run.Coverage)
	var sum bytes.Buffer
	printChaosReport(&sum, run, rep, dir)
	text := sum.String()
	if len(missing) > 0 {
		text = strings.Replace(text, "no anomaly: "+string(verdict.Pass)+"\n",
			"no anomaly in the histories, but not every requested fault was injected: "+string(verdict.Unknown)+"\n", 1)
	}
	fmt.Fprint(stdout, text)
	printChaosCoverage(stdout, run.Coverage)
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for i, m := range missing {
			names[i] = m.Fault + " (" + string(m.Status) + ")"
		}
		fmt.Fprintf(stdout, "%s: %d of %d requested faults never injected: %s\n", verdict.Unknown, len(missing), len(run.Coverage), strings.Join(names, ", "))
	}
}

// printChaosCoverage prints every requested fault with its injections.
func printChaosCoverage(w io.Writer, cov []faults.Coverage) {
	if len(cov) == 0 {
		return
	}
	fmt.Fprintln(w, "faults requested:")
	for _, c := range cov {
		fmt.Fprintf(w, "  %-38s %s\n", c.Fault, c.String())
	}
}

// applyChaosCoverage puts the run's fault coverage into its report section
// and returns the exit code: a run whose histories pass but in which a
// requested fault was never injected is UNKNOWN (exit 4). Runs written
// before coverage was recorded have none and keep their verdict.
func applyChaosCoverage(c *reports.Chaos, run chaosRun, code int) int {
	for _, f := range run.Coverage {
		c.Coverage = append(c.Coverage, reports.FaultCoverage{Fault: f.Fault, Kind: string(f.Kind), Status: string(f.Status),
			Scheduled: f.Scheduled, Injected: f.Injected, Errors: f.Errors, NoEffect: f.NoEffect, Reason: f.Reason})
	}
	if len(faults.Missing(run.Coverage)) > 0 && c.Verdict == verdict.Pass {
		c.Verdict = verdict.Unknown
		return exitUndecided
	}
	return code
}

func writeChaosRun(dir string, run chaosRun, h checker.History, l checker.Ledger) error {
	b, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return fmt.Errorf("chaos.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, rundir.Chaos), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeFileWith(filepath.Join(dir, rundir.History), h.WriteJSONL); err != nil {
		return err
	}
	return writeFileWith(filepath.Join(dir, rundir.Ledger), l.WriteJSONL)
}

func writeFileWith(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

var errUnreachable = errors.New("target unreachable")

// chaosTarget is the target of a chaos run, and what the harness owns of it.
type chaosTarget struct {
	url string
	// t is the target as the workload talks to it: its API key, named
	// credentials and what it declares of itself (Described).
	t             features.Target
	bundled       bool
	process       *faults.Process
	failpointAddr string
	// replicas are the processes of the bundled server's replicas (the
	// first is process) and urls their base URLs, with --replicas N.
	replicas []*faults.Process
	urls     []string
}

func (t *chaosTarget) describe() string {
	if t.bundled && len(t.urls) > 1 {
		return fmt.Sprintf("bundled reference server, %d replicas over one store, at %s", len(t.urls), strings.Join(t.urls, ", "))
	}
	if t.bundled {
		return "bundled reference server at " + t.url
	}
	if len(t.urls) > 1 {
		return fmt.Sprintf("%d replicas over one store, at %s", len(t.urls), strings.Join(t.urls, ", "))
	}
	return t.url
}

func (t *chaosTarget) close() {
	for _, p := range t.replicas[min(1, len(t.replicas)):] {
		if p != nil {
			p.Stop()
		}
	}
	if t.process != nil {
		t.process.Stop()
	}
}

// redactStore is a store URL without its password.
func redactStore(store string) string {
	u, err := url.Parse(store)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// startChaosTarget starts the target of a chaos run: the --target described
// (with --target-cmd, a process the harness owns), or the profile's bundled
// server as a child process that calls the effect sink at sinkURL. A
// target that does not answer is errUnreachable.
// healthWaitFor is the bound of the wait for the target's health: the
// --health-wait given, else 10 s for a running target, else (started) the
// bound of a process start.
func (c chaosConfig) healthWaitFor(started bool) time.Duration {
	switch {
	case c.healthWait > 0:
		return c.healthWait
	case started:
		return faults.ProcessStartTimeout
	}
	return defaultHealthWait
}

func startChaosTarget(ctx context.Context, c chaosConfig, sinkURL string, red *redact.Redactor, logger *slog.Logger) (*chaosTarget, error) {
	desc := c.tgt.Target()
	switch {
	case len(c.tgt.ReplicaList) > 0:
		store := func(int) string { return c.tgt.Store }
		if c.storeFor != nil {
			store = c.storeFor
		}
		t, err := startTargetReplicas(ctx, c.tgt.ReplicaList, store, c.healthWaitFor(true), red.Secrets(), logger)
		if err != nil {
			return nil, err
		}
		t.t = desc
		return t, nil
	case c.target != "" && c.targetCmd != "":
		wctx, cancel := context.WithTimeout(ctx, c.healthWaitFor(true)) // bounds the wait for health, not the process
		defer cancel()
		p, err := faults.StartProcess(wctx, c.targetCmd, nil, strings.TrimRight(c.target, "/")+"/health", logger,
			faults.WithSecrets(red.Secrets()...))
		if err != nil {
			return nil, fmt.Errorf("%w: --target-cmd did not bring up %s within --health-wait %s: %v", errUnreachable, red.String(c.target), c.healthWaitFor(true), err)
		}
		return &chaosTarget{url: c.target, t: desc, process: p}, nil
	case c.target != "":
		wait := chaosWaitHealthy
		if c.workload.AnyAnswer {
			wait = chaosWaitAnswers
		}
		if err := wait(ctx, c.target, c.healthWaitFor(false)); err != nil {
			if np := (*harness.NotProtocolError)(nil); errors.As(err, &np) {
				return nil, err // it answered: not unreachable
			}
			return nil, fmt.Errorf("%w: %v (is it running? is --target right? --health-wait raises the wait)", errUnreachable, err)
		}
		return &chaosTarget{url: c.target, t: desc}, nil
	}
	return startBundledChild(ctx, c.childConfig(), sinkURL, red, logger)
}

// childConfig is what starting the bundled server's replicas needs of a
// chaos run.
func (c chaosConfig) childConfig() childConfig {
	return childConfig{profile: c.profile, prof: c.prof, dir: c.out, timeScale: c.timeScale, mutant: c.mutant, mutants: c.mutants,
		replicas: c.replicas, store: c.store, storeFor: c.storeFor, child: c.child, readings: c.readings(), healthWait: c.healthWaitFor(true)}
}

func chaosRandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// chaosWaitHealthy polls GET base/health until it answers 200 or d passes.
// An answer waiting will not change (harness.Settled: a 404, a 405, a
// redirect) ends the wait at once with a *harness.NotProtocolError naming
// it: the target is up, and not what the profile speaks.
func chaosWaitHealthy(ctx context.Context, base string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hc := &http.Client{Timeout: time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	var last error
	for {
		health := strings.TrimRight(base, "/") + "/health"
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, health, nil)
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			if harness.Settled(resp.StatusCode) {
				return harness.HealthNotProtocol(health, &client.Response{Status: resp.StatusCode, Body: body})
			}
			err = fmt.Errorf("GET /health: %s", resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("no healthy answer within %s: %w", d, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// chaosProgress rewrites one status line on a terminal, or prints a line
// every few seconds elsewhere (CI logs).
type chaosProgress struct {
	w      io.Writer
	tty    bool
	last   time.Time
	header string // the column names, until they are printed
}

// chaosProgressHeader names the columns of the progress lines, in the
// workload's words (cols), and says what each counts: "effects" are
// effects counted, a duplicate execution included, not the keys executed
// that the summary's tally counts.
func chaosProgressHeader(cols chaos.Columns) string {
	if cols.Units.Name == "" {
		cols.Units = chaos.DefaultColumns.Units
	}
	if cols.Effects.Name == "" {
		cols.Effects = chaos.DefaultColumns.Effects
	}
	return fmt.Sprintf(chaosProgressFormat, "phase", "elapsed", "ops", "unknown", cols.Units.Name, cols.Effects.Name, "fault") + "\n" +
		fmt.Sprintf("       (ops: operations recorded; unknown: outcome unknown; %s: %s; %s: %s)\n",
			cols.Units.Name, cols.Units.Means, cols.Effects.Name, cols.Effects.Means)
}

// chaosProgressFormat lays out a progress line and its header alike.
const chaosProgressFormat = "chaos  %-7s %7s  %8v  %7v  %9v  %10v  %s"

// chaosProgressLine is one progress line under chaosProgressHeader.
func chaosProgressLine(p chaos.Progress) string {
	return fmt.Sprintf(chaosProgressFormat, p.Phase, fmt.Sprintf("%.0fs", p.Elapsed.Seconds()), p.Ops, p.Unknown, p.Published, p.Executed, p.Fault)
}

func newChaosProgress(w io.Writer, cols chaos.Columns) *chaosProgress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &chaosProgress{w: w, tty: tty, header: chaosProgressHeader(cols)}
}

func (p *chaosProgress) show(s string) {
	if p.header != "" {
		fmt.Fprint(p.w, p.header)
		p.header = ""
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", s)
		return
	}
	if time.Since(p.last) >= 5*time.Second {
		p.last = time.Now()
		fmt.Fprintln(p.w, s)
	}
}

func (p *chaosProgress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func chaosSortedKeys[K ~string, V any](m map[K]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, string(k))
	}
	sort.Strings(ks)
	return ks
}

// runWorkloadChaos is runChaos for a profile with a chaos workload of its
// own (harness.ChaosWorkload): it hosts the effect sink when the workload
// has effects (behind its own proxy when the sink's partition is asked
// for), starts the target (the bundled server as a child process given the
// sink's URL, or the --target described, which calls the sink at its
// declared effect_sink address), the network proxy in front of the target,
// runs the workload through the faults, writes the run directory and checks
// it with the workload's Check.
func runWorkloadChaos(ctx context.Context, c chaosConfig, red *redact.Redactor, stdout, stderr io.Writer, logger *slog.Logger) int {
	w := c.workload
	tokens, _ := c.faultTokens()
	own := func(sp *chaos.SinkProxy, s *sink.Sink) []faults.Fault {
		if w.Faults == nil {
			return nil
		}
		return w.Faults(sp, s)
	}
	// What is asked for, fault by fault, before anything starts.
	names := append(faults.All(faults.Config{Failpoints: w.Failpoints}), own(nil, nil)...)
	if c.replicas > 1 || len(c.tgt.ReplicaList) > 1 {
		names = append(names, &faults.ReplicaCrash{})
	}
	names = append(names, c.storeFaults(nil, tokens)...)
	requested, _ := faults.Requested(names, tokens)
	wants := func(name string) bool { return slices.Contains(requested, name) }
	wantNet := slices.ContainsFunc(requested, func(n string) bool {
		return slices.Contains(faults.Names(), n) && func() bool { k, _ := faults.KindOf(n); return k == faults.KindNet }()
	})

	var snk *sink.Sink
	var sinkProxy *chaos.SinkProxy
	sinkURL := ""
	// A target that declares no effect sink, where the workload allows it,
	// is judged by what it answers alone.
	if c.hostsSink() {
		listen := "127.0.0.1:0"
		if c.target != "" {
			listen = c.tgt.EffectSink.Listen
		}
		// The sink's partition acts on a proxy in front of it.
		partition := slices.ContainsFunc(own(nil, nil), func(f faults.Fault) bool {
			_, ok := f.(*chaos.SinkPartition)
			return ok && wants(f.Name())
		})
		var err error
		if partition {
			if snk, err = sink.Start("127.0.0.1:0"); err == nil {
				if sinkProxy, err = chaos.NewSinkProxy(listen, snk.Addr()); err != nil {
					snk.Close()
				}
			}
		} else {
			snk, err = sink.Start(listen)
		}
		if err != nil {
			fmt.Fprintf(stderr, "idscheck chaos: effect sink: %v\n", err)
			return exitUsage
		}
		defer snk.Close()
		sinkURL = snk.URL()
		if sinkProxy != nil {
			defer sinkProxy.Close()
			sinkURL = sinkProxy.URL()
		}
	}
	var proxies *storeProxies
	if c.storeProxy {
		var err error
		if proxies, err = startStoreProxies(c.sharedStore(), max(c.replicas, len(c.tgt.ReplicaList)), logger); err != nil {
			fmt.Fprintf(stderr, "idscheck chaos: %v\n", red.String(err.Error()))
			return exitUsage
		}
		defer proxies.close()
		c.storeFor = proxies.urlFor
		fmt.Fprintf(stderr, "chaos: a proxy between each replica and the store: %s\n", strings.Join(proxies.addrs(), ", "))
	}
	tgt, err := startChaosTarget(ctx, c, sinkURL, red, logger)
	if err != nil {
		if np := (*harness.NotProtocolError)(nil); errors.As(err, &np) {
			return chaosPreflightFailed(c, red, err, stdout, stderr)
		}
		if errors.Is(err, errUnreachable) {
			return chaosUnreachable(c, red, err.Error(), stdout, stderr)
		}
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	defer tgt.close()
	// A target of the user's speaks the protocol, and takes its
	// credentials, before any chaos (run's preflight).
	if !tgt.bundled && c.prof.Preflight != nil {
		pt := tgt.t
		pt.BaseURL = tgt.url
		if err := c.prof.Preflight(ctx, pt, 5*time.Second); err != nil {
			return chaosPreflightFailed(c, red, err, stdout, stderr)
		}
	}
	if c.target != "" {
		// What the target publishes about itself is used, or contradicted
		// out loud (exit 2), never silently overridden.
		if err := c.listen(ctx, tgt, stderr); err != nil {
			fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
			return exitUsage
		}
	}

	var network *faults.Network
	if wantNet {
		u, _ := url.Parse(tgt.url)
		if network, err = faults.NewNetwork(u.Host, logger); err != nil {
			fmt.Fprintf(stderr, "idscheck chaos: network proxy: %v\n", err)
			return exitUsage
		}
		defer network.Close()
	}
	// The workload sends its own storms and drives the target to an armed
	// failpoint itself (a fresh command, recorded).
	fcfg := faults.Config{Network: network, Process: tgt.process, StormMin: 2, StormMax: c.stormMax,
		StormDo: func(context.Context, int) {}}
	if tgt.bundled && tgt.process != nil {
		fcfg.Failpoints = w.Failpoints
		fcfg.FailpointAddr = tgt.failpointAddr
		if w.FailpointTriggers != nil {
			fcfg.FailpointTriggers = w.FailpointTriggers(tgt.url, tgt.t)
		}
	}
	list := append(faults.All(fcfg), own(sinkProxy, snk)...)
	if len(tgt.urls) > 1 {
		list = append(list, &faults.ReplicaCrash{Replicas: tgt.replicas})
	}
	list = append(list, c.storeFaults(proxies, tokens)...)
	requested, unmatched := faults.Requested(list, tokens)
	selected := faults.Select(list, tokens)
	usable, unavailable := faults.Usable(selected)
	why := map[string]string{}
	for name, err := range unavailable {
		why[name] = red.String(err.Error())
	}
	for _, tok := range unmatched {
		why[tok] = unmatchedReason(tok, tgt)
	}
	for _, name := range append(requested, unmatched...) {
		if w, ok := why[name]; ok {
			fmt.Fprintf(stderr, "fault %s: not available: %s\n", name, w)
		}
	}
	base := tgt.url
	if network != nil {
		base = network.URL()
	}
	fmt.Fprintf(stderr, "chaos: profile %s, seed %d, run id %s, %s, %d workers, %d of %d requested faults available, target %s\n", c.profile, c.seed,
		c.runID, c.duration, c.workers, len(usable), len(requested)+len(unmatched), tgt.describe())
	progress := newChaosProgress(stderr, w.Columns)
	var others []string
	if len(tgt.urls) > 1 {
		others = tgt.urls[1:] // the network proxy, when asked for, stands in front of the first replica alone
	}
	res, runErr := w.Run(ctx, harness.ChaosConfig{BaseURL: base, Replicas: others, APIKey: tgt.t.APIKey, Sink: snk, Seed: c.seed, RunID: c.runID,
		Duration: c.duration, Workers: c.workers, StormMax: c.stormMax, TimeScale: c.timeScale, TimeScaleAssumed: c.timeScaleAssumed(), Timeout: 2 * time.Second,
		Faults: usable, Logger: logger, Described: tgt.t.Described, Readings: c.readings(),
		Progress: func(p chaos.Progress) { progress.show(chaosProgressLine(p)) }})
	progress.done()
	if res == nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", runErr)
		if tgt.process != nil && !tgt.process.Running() {
			return exitUnreachable
		}
		return exitUsage
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", runErr)
	}
	if !res.Drained {
		fmt.Fprintln(stderr, "chaos: the drain ran out of time; effects still owed count as pending, not missing (the verdict is at best UNKNOWN)")
	}
	var files []string
	for name := range res.Files {
		files = append(files, name)
	}
	slices.Sort(files)
	cover := faults.Cover(append(requested, unmatched...), why, res.Schedule, res.Timeline)
	for i := range cover {
		if cover[i].Kind == "" {
			for _, f := range list {
				if f.Name() == cover[i].Fault {
					cover[i].Kind = f.Kind()
				}
			}
		}
	}
	run := chaosRun{Seed: c.seed, RunID: c.runID, Command: c.command(), Target: tgt.describe(), Bundled: tgt.bundled, Mutant: c.mutant,
		TimeScale: c.timeScale, Duration: c.duration, Workers: c.workers, Faults: c.faults, Unavailable: why,
		Coverage: cover, Namespace: res.Namespace, Start: res.Start, End: res.End, Schedule: res.Schedule, Timeline: res.Timeline,
		Series: res.Series, Profile: string(c.profile), Files: files, Undrained: !res.Drained, Summary: red.String(res.Summary),
		Readings: c.readings(), ReplayNeeds: c.replayNeeds().note()}
	redactChaosRun(&run, red)
	if err := writeChaosRun(c.out, run, res.History, res.Ledger); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	for _, name := range files {
		if err := os.WriteFile(filepath.Join(c.out, name), []byte(red.String(string(res.Files[name]))), 0o644); err != nil {
			fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
			return exitUsage
		}
	}
	return finishChaos(c.out, run, checkChaosRun(run, res.History, res.Ledger, res.Files), red, stdout, stderr)
}

// chaosWaitAnswers polls GET base until it answers anything over HTTP or d
// passes.
func chaosWaitAnswers(ctx context.Context, base string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hc := &http.Client{Timeout: time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no HTTP answer within %s: %w", d, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkChaosRun judges a recorded run with its profile's workload Check
// (a run recorded before chaos.json named its profile is the default
// profile's); the options an older run kept in chaos.json reach the Check
// as its OptionsFile. A run of a profile this idscheck does not know is
// undecided.
func checkChaosRun(run chaosRun, h checker.History, l checker.Ledger, files map[string][]byte) checker.Report {
	name := run.Profile
	if name == "" {
		name = defaultProfile()
	}
	p, ok := profiles.Lookup(spec.Profile(name))
	if !ok || p.Chaos == nil || p.Chaos.Check == nil {
		return checker.Report{Ops: len(h.Ops), Effects: len(l.Effects), Counts: map[checker.AnomalyKind]int{},
			Models: []checker.ModelCheck{{Model: name, Result: checker.LinUnknown}}}
	}
	if f := p.Chaos.OptionsFile; f != "" && len(run.Options) > 0 && files[f] == nil {
		files = maps.Clone(files)
		if files == nil {
			files = map[string][]byte{}
		}
		files[f] = run.Options
	}
	return p.Chaos.Check(harness.ChaosRecord{History: h, Ledger: l, Files: files, Undrained: run.Undrained, Readings: run.Readings})
}

// chaosRunResult is chaosResult (its profile is the run's).
func chaosRunResult(run chaosRun, rep checker.Report, viz []string) *reports.Result {
	return chaosResult(run, rep, viz)
}

// chaosUnreachable ends a run whose target never answered: like run, it
// still writes result.json (exit 3, the cause), junit.xml (an error naming
// the cause) and index.html, says so, and returns exitUnreachable.
func chaosUnreachable(c chaosConfig, red *redact.Redactor, cause string, stdout, stderr io.Writer) int {
	hint := "check that the target is running, that --target (or \"url\" in the target file) is its base URL, and that GET <target>/health answers 200 without credentials"
	if c.targetCmd != "" {
		hint = "check that --target-cmd starts the target on the --target address and that GET <target>/health answers 200 without credentials"
	}
	return chaosStopped(c, red, exitUnreachable, false, strings.TrimPrefix(cause, errUnreachable.Error()+": "), "To fix: "+hint+".", stdout, stderr)
}

// chaosPreflightFailed ends a run whose target answered, but not as the
// profile's protocol does (a *harness.NotProtocolError: exit 3 saying what
// it answered), or refused a credential (a *harness.CredentialError: exit
// 2 naming it), before any chaos: the reports say so, as run's do.
func chaosPreflightFailed(c chaosConfig, red *redact.Redactor, err error, stdout, stderr io.Writer) int {
	var cred *harness.CredentialError
	if errors.As(err, &cred) {
		return chaosStopped(c, red, exitUsage, true, err.Error(),
			"To fix: give the credential the target expects (see idscheck chaos -h: the target's flags and file).", stdout, stderr)
	}
	var np *harness.NotProtocolError
	if errors.As(err, &np) {
		return chaosStopped(c, red, exitUnreachable, true, fmt.Sprintf("the target does not speak the %s profile: %v", c.profile, err),
			fmt.Sprintf("To fix: check that --target is the base URL of a service of the %s profile (see idscheck chaos -h and the profile's page in docs/).", c.profile), stdout, stderr)
	}
	return chaosUnreachable(c, red, "preflight: "+err.Error(), stdout, stderr)
}

// chaosStopped writes the reports of a chaos run that stopped before any
// chaos (exit code; preflight: the target answered, not as the protocol
// does, or refused a credential; else it was unreachable) and says so,
// once, on stdout: the cause, the fix, the report, the replay line, the
// exit.
func chaosStopped(c chaosConfig, red *redact.Redactor, code int, preflight bool, cause, fix string, stdout, stderr io.Writer) int {
	cause = red.String(cause)
	what := "target unreachable"
	if preflight {
		what = "preflight failed"
	}
	now := time.Now()
	doc := &reports.Result{
		Tool:        reports.CurrentTool(),
		Profile:     c.profile,
		Target:      reports.Target{URL: red.String(c.target), Bundled: c.target == "", Mutant: c.mutant, Command: red.Command(c.targetCmd), TimeScale: c.timeScale},
		Seed:        c.seed,
		Command:     red.String(c.command()),
		Started:     now,
		Finished:    now,
		ExitCode:    code,
		Unreachable: cause,
		Preflight:   preflight,
		Notes: []string{
			fmt.Sprintf("exit %d: %s: %s", code, what, cause),
			"No chaos was run. " + fix,
		},
		Redact: red.Secrets(),
	}
	if err := reports.WriteAll(c.out, doc); err != nil {
		fmt.Fprintf(stdout, "idscheck chaos: %s, no chaos run: %s\n  %s\nexit %d: %s\n", what, stoppedCause(cause), fix, code, what)
		fmt.Fprintf(stderr, "idscheck chaos: writing the report: %v\n", err)
		return code
	}
	needs := ""
	if n := c.replayNeeds().note(); n != "" {
		needs = "        first: " + n + "\n"
	}
	fmt.Fprintf(stdout, "idscheck chaos: %s, no chaos run: %s\n  %s\nreport: %s\nreplay: %s\n%sexit %d: %s\n",
		what, stoppedCause(cause), fix, filepath.Join(c.out, reports.HTMLFile), doc.Command, needs, code, what)
	return code
}
