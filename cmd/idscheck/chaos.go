package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
)

// chaosConfig is what `idscheck chaos` was asked to do.
type chaosConfig struct {
	target    string
	targetCmd string
	apiKey    string
	timeScale float64
	duration  time.Duration
	seed      uint64
	workers   int
	faults    string
	stormMax  int
	out       string
	mutant    string
	verbose   bool
}

const chaosSynopsis = `chaos [--target URL [--target-cmd CMD] --api-key K] [--duration 60s] [--seed N]
                [--workers 40] [--faults net,storm,crash,failpoint] [--out DIR]

Drives a seeded random Intent Protocol workload (publishers with idempotency keys,
workers that claim, extend, fail and fulfil) through a fault schedule drawn from the
seed, records every operation, then checks the histories: lost, duplicated and
unexpected units, double leases, stale tokens accepted, idempotency violations,
linearizability of the idempotency record and of each intent's lease.

With no --target it starts the bundled reference server as a child process it owns
(so crash and failpoint faults are available). With --target alone crash faults are
N/A; add --target-cmd (a shell command that starts the target on the --target
address, on the same data each time) to let idscheck kill and restart it.

Exit codes: 0 no anomaly, 1 anomalies found, 2 usage, 3 target unreachable,
4 the checker could not decide.

Flags:`

func cmdChaos(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c chaosConfig
	fs := newFlagSet("chaos", chaosSynopsis, stderr)
	fs.StringVar(&c.target, "target", "", "base URL of the target; empty: the bundled reference server")
	fs.StringVar(&c.targetCmd, "target-cmd", "", "shell command that starts the target (lets idscheck crash and restart it)")
	fs.StringVar(&c.apiKey, "api-key", "", "API key (X-API-KEY) of the target; the bundled server gets its own")
	fs.Float64Var(&c.timeScale, "time-scale", 60, "the target divides every protocol duration by this (the bundled server is started with it)")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "how long the workload and the faults run (then a drain)")
	fs.Uint64Var(&c.seed, "seed", 0, "seed of the workload and the fault schedule (0: a random seed, printed)")
	fs.IntVar(&c.workers, "workers", 40, "concurrent workers (publishers: a quarter of it)")
	fs.StringVar(&c.faults, "faults", "net,storm,crash", "faults to draw from: all, net, storm, crash, failpoint, or fault names (latency, partition, …)")
	fs.IntVar(&c.stormMax, "storm-max", 100, "largest duplicate storm (at most 1000)")
	fs.StringVar(&c.out, "out", "idscheck-chaos", "run directory to write (history, ledger, timeline, report)")
	fs.StringVar(&c.mutant, "mutant", "", "start the bundled server with this deliberate bug (self-validation)")
	fs.BoolVar(&c.verbose, "v", false, "log what the harness does")
	if code, stop := parseFlags(fs, args, false); stop {
		return code
	}
	if err := c.validate(); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	logger := slog.New(slog.DiscardHandler)
	if c.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return runChaos(ctx, c, stdout, stderr, logger)
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
	switch {
	case c.duration < time.Second || c.duration > time.Hour:
		return fmt.Errorf("--duration %s: want 1s to 1h", c.duration)
	case c.workers < 1 || c.workers > 1000:
		return fmt.Errorf("--workers %d: want 1 to 1000", c.workers)
	case c.timeScale < 1 || c.timeScale > 3600:
		return fmt.Errorf("--time-scale %g: want 1 to 3600", c.timeScale)
	case c.stormMax < 2 || c.stormMax > faults.MaxStorm:
		return fmt.Errorf("--storm-max %d: want 2 to %d", c.stormMax, faults.MaxStorm)
	case c.targetCmd != "" && c.target == "":
		return errors.New("--target-cmd needs --target: the URL the started process serves")
	case c.target != "" && c.mutant != "":
		return errors.New("--mutant applies to the bundled server only: drop --target")
	case c.out == "":
		return errors.New("--out must name a directory")
	}
	if c.target != "" {
		u, err := url.Parse(c.target)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--target %q: want an http:// URL such as http://127.0.0.1:8080", c.target)
		}
		if c.apiKey == "" {
			return errors.New("--target needs --api-key: the key the workload publishes and claims with")
		}
	}
	if _, err := faults.ParseKinds(c.faults); err != nil {
		return fmt.Errorf("--faults: %w", err)
	}
	return nil
}

// chaosRun is what a chaos run writes to chaos.json in its directory: enough
// to re-check it offline and to replay it.
type chaosRun struct {
	Seed        uint64             `json:"seed"`
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
	Options     checker.Options    `json:"check_options"`
}

func (c chaosConfig) command() string {
	parts := []string{"idscheck chaos", "--seed", fmt.Sprint(c.seed), "--duration", c.duration.String(),
		"--workers", fmt.Sprint(c.workers), "--faults", c.faults, "--time-scale", fmt.Sprint(c.timeScale)}
	if c.stormMax != 100 {
		parts = append(parts, "--storm-max", fmt.Sprint(c.stormMax))
	}
	if c.target != "" {
		parts = append(parts, "--target", c.target, "--api-key", "$API_KEY")
	}
	if c.targetCmd != "" {
		parts = append(parts, "--target-cmd", chaosShellQuote(c.targetCmd))
	}
	if c.mutant != "" {
		parts = append(parts, "--mutant", c.mutant)
	}
	return strings.Join(parts, " ")
}

func chaosShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func runChaos(ctx context.Context, c chaosConfig, stdout, stderr io.Writer, logger *slog.Logger) int {
	faults.SilenceToxiproxy()
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: run directory: %v\n", err)
		return exitUsage
	}
	tgt, err := startChaosTarget(ctx, c, logger)
	if err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		if errors.Is(err, errUnreachable) {
			return exitUnreachable
		}
		return exitUsage
	}
	defer tgt.close()

	tokens, _ := faults.ParseKinds(c.faults)
	var network *faults.Network
	if wantsNet(tokens) {
		u, _ := url.Parse(tgt.url)
		network, err = faults.NewNetwork(u.Host, logger)
		if err != nil {
			fmt.Fprintf(stderr, "idscheck chaos: network proxy: %v\n", err)
			return exitUsage
		}
		defer network.Close()
	}
	fcfg := faults.Config{Network: network, Process: tgt.process, StormMin: 2, StormMax: c.stormMax,
		StormDo: func(context.Context, int) {}} // the chaos workload sends its own storms
	if tgt.bundled && tgt.process != nil {
		fcfg.Failpoints = bundledFailpoints()
		fcfg.FailpointAddr = tgt.failpointAddr
	}
	selected := faults.Select(faults.All(fcfg), tokens)
	usable, unavailable := faults.Usable(selected)
	why := map[string]string{}
	for name, err := range unavailable {
		why[name] = err.Error()
		fmt.Fprintf(stderr, "fault %s: N/A: %v\n", name, err)
	}
	base := tgt.url
	if network != nil {
		base = network.URL()
	}
	lease := time.Duration(float64(60*time.Second) / c.timeScale)
	fmt.Fprintf(stderr, "chaos: seed %d, %s, %d workers, %d faults, target %s\n", c.seed, c.duration, c.workers, len(usable), tgt.describe())
	progress := newChaosProgress(stderr)
	res, runErr := chaos.Run(ctx, chaos.Config{
		BaseURL: base, APIKey: tgt.apiKey, Seed: c.seed, Duration: c.duration, Workers: c.workers,
		Lease: lease, Faults: usable, StormMax: c.stormMax, Logger: logger,
		Progress: func(p chaos.Progress) {
			progress.show(fmt.Sprintf("chaos %s %5.0fs ops %d unknown %d published %d executed %d %s",
				p.Phase, p.Elapsed.Seconds(), p.Ops, p.Unknown, p.Published, p.Executed, p.Fault))
		},
	})
	progress.done()
	if res == nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", runErr)
		return exitUsage
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", runErr)
	}
	opts := chaosCheckOptions()
	if !res.Drained {
		// The drain ran out of time: work still open or claimed is
		// unfinished, not lost.
		opts.Undrained = true
		fmt.Fprintln(stderr, "chaos: the drain ran out of time; intents still open or claimed count as pending, not lost")
	}
	run := chaosRun{Seed: c.seed, Command: c.command(), Target: tgt.describe(), Bundled: tgt.bundled, Mutant: c.mutant,
		TimeScale: c.timeScale, Duration: c.duration, Workers: c.workers, Faults: c.faults, Unavailable: why,
		Namespace: res.Namespace, Start: res.Start, End: res.End, Schedule: res.Schedule, Timeline: res.Timeline,
		Series: res.Series, Options: opts}
	if err := writeChaosRun(c.out, run, res.History, res.Ledger); err != nil {
		fmt.Fprintf(stderr, "idscheck chaos: %v\n", err)
		return exitUsage
	}
	return checkChaosDir(c.out, stdout, stderr)
}

func wantsNet(tokens []string) bool {
	for _, t := range tokens {
		switch t {
		case "all", "net", "latency", "bandwidth", "slicer", "reset_peer", "blackhole", "lost_response", "partition":
			return true
		}
	}
	return false
}

// chaosCheckOptions are the promises of the chaos workload: workers execute
// at least once (idempotent workers: only a second intent for one key is a
// duplicate), they fail some intents on purpose (dead is not lost), and the
// run is far shorter than the intents' TTL (an acknowledged intent that
// vanished is lost), and the drain drives every unit to an end (one that ran
// but is still open or claimed at the end is stuck: lost).
func chaosCheckOptions() checker.Options {
	return checker.Options{Timeout: 60 * time.Second, MaxEffects: -1, ExpiredIsLost: true, MustFinish: true}
}

func writeChaosRun(dir string, run chaosRun, h checker.History, l checker.Ledger) error {
	b, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return fmt.Errorf("chaos.json: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "chaos.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := writeFileWith(filepath.Join(dir, "history.jsonl"), h.WriteJSONL); err != nil {
		return err
	}
	return writeFileWith(filepath.Join(dir, "ledger.jsonl"), l.WriteJSONL)
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
	url           string
	apiKey        string
	bundled       bool
	process       *faults.Process
	failpointAddr string
}

func (t *chaosTarget) describe() string {
	if t.bundled {
		return "bundled reference server at " + t.url
	}
	return t.url
}

func (t *chaosTarget) close() {
	if t.process != nil {
		t.process.Stop()
	}
}

func startChaosTarget(ctx context.Context, c chaosConfig, logger *slog.Logger) (*chaosTarget, error) {
	switch {
	case c.target != "" && c.targetCmd != "":
		p, err := faults.StartProcess(ctx, c.targetCmd, nil, strings.TrimRight(c.target, "/")+"/health", logger)
		if err != nil {
			return nil, fmt.Errorf("%w: --target-cmd did not bring up %s: %v", errUnreachable, c.target, err)
		}
		return &chaosTarget{url: c.target, apiKey: c.apiKey, process: p}, nil
	case c.target != "":
		if err := chaosWaitHealthy(ctx, c.target, 5*time.Second); err != nil {
			return nil, fmt.Errorf("%w: %v (is it running? is --target right?)", errUnreachable, err)
		}
		return &chaosTarget{url: c.target, apiKey: c.apiKey}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bundled server: %w", err)
	}
	addr, err := faults.FreeAddr()
	if err != nil {
		return nil, err
	}
	fpAddr, err := faults.FreeAddr()
	if err != nil {
		return nil, err
	}
	db, err := filepath.Abs(filepath.Join(c.out, "target.db"))
	if err != nil {
		return nil, err
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(db + suffix)
	}
	key := chaosRandomHex(16)
	cmd := fmt.Sprintf("%s serve --addr %s --db %s --time-scale %g", chaosShellQuote(exe), addr, chaosShellQuote(db), c.timeScale)
	if c.mutant != "" {
		cmd += " --mutant " + chaosShellQuote(c.mutant)
	}
	env := []string{"BUS_SECRET=" + key, "BUS_ADMIN_SECRET=" + chaosRandomHex(16), faults.FailpointsHTTPEnv(fpAddr)}
	url := "http://" + addr
	p, err := faults.StartProcess(ctx, cmd, env, url+"/health", logger)
	if err != nil {
		return nil, fmt.Errorf("bundled server did not start: %w", err)
	}
	return &chaosTarget{url: url, apiKey: key, bundled: true, process: p, failpointAddr: fpAddr}, nil
}

func chaosRandomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// chaosWaitHealthy polls GET base/health until it answers 200 or d passes.
func chaosWaitHealthy(ctx context.Context, base string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/health", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
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
	w    io.Writer
	tty  bool
	last time.Time
}

func newChaosProgress(w io.Writer) *chaosProgress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &chaosProgress{w: w, tty: tty}
}

func (p *chaosProgress) show(s string) {
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
