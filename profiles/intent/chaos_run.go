package intent

// The Intent Protocol's chaos workload (RunChaos) drives a seeded random
// workload of the bus (publishers with idempotency keys, workers that
// claim, extend, fail and fulfil) against a target while a fault schedule
// drawn from the same seed runs, and records what happened: every operation
// into a checker.History, every execution into a checker.Ledger, every
// fault into a timeline. It judges nothing: Check does.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/rundir"
	"github.com/idscheck/idscheck/verdict"
)

// ChaosConfig is one chaos run of the Intent workload.
type ChaosConfig struct {
	BaseURL   string                             // where the workload sends: the proxy's URL when network faults run
	Replicas  []string                           // the target's other replicas: publishes and claims are spread over them and BaseURL
	APIKey    string                             // the key every publisher and worker uses
	Sign      func(r *http.Request, body []byte) // signs every request (client.Options.Sign); nil: none
	Namespace string                             // default "chaos-<seed>-<run ID>"
	Seed      uint64
	// RunID is the run's own nonce (rundir.Fresh): in the namespace and
	// mixed into every idempotency key, so that runs of one seed never
	// share one (default: drawn).
	RunID    string
	Duration time.Duration // how long the workload and the faults run
	Workers  int           // concurrent claimers; publishers are a quarter of it (at least 1)
	// Lease is a claim_timeout of 60 s as the harness experiences it (60
	// s divided by the target's time scale): a claim's lease is the
	// claim_timeout it answers (60 when it answers none) at that rate.
	Lease time.Duration
	// ProbeLease says the target's time scale is not known (neither
	// declared nor published): Lease is ignored, and the workload learns
	// how long a protocol second lasts from what the target answers (a
	// lease's end, claim_expires_at, against its own clock, the ts of GET
	// /health) before the load; when it answers neither, every lease and
	// extension is of unknown length (the checks allow any).
	ProbeLease bool
	// Faults are the usable faults the schedule draws from. A fault named
	// "storm" is replaced by the workload's own publish storm.
	Faults          []faults.Fault
	ScheduleOptions faults.ScheduleOptions
	StormMax        int           // largest duplicate storm (default 100, at most faults.MaxStorm)
	RequestTimeout  time.Duration // per request (default 2 s): a black hole costs this much
	DrainTimeout    time.Duration // after Duration: how long workers may go on fulfilling (default max(10 s, 4 leases))
	MaxOps          int           // bound on recorded operations (default 2,000,000)
	Logger          *slog.Logger
	// Progress, when set, is called about once a second.
	Progress func(chaos.Progress)
}

// ChaosResult is everything a chaos run of the Intent workload recorded.
type ChaosResult struct {
	Start     time.Time          `json:"start"`
	End       time.Time          `json:"end"`
	Namespace string             `json:"namespace"`
	Schedule  []faults.Planned   `json:"schedule"`
	Timeline  []faults.Injection `json:"timeline"`
	History   checker.History    `json:"-"`
	Ledger    checker.Ledger     `json:"-"`
	Series    []chaos.Bucket     `json:"series"`
	// Drained is true when every worker ran out of work before the drain
	// timeout; otherwise intents still open or claimed at the end may be
	// unfinished rather than lost (Options.Undrained).
	Drained bool `json:"drained"`
	// Second is one protocol second on the harness's clock, as the run
	// took it (0: unknown); ClockSlack how far the durations it implies may
	// be off (the probe's uncertainty and the default slack; 0: the
	// default), for the checks (Options.ClockSlack).
	Second     time.Duration `json:"second_ns,omitempty"`
	ClockSlack time.Duration `json:"clock_slack_ns,omitempty"`
	// LeaseFrom says where the length of a lease came from: "time scale"
	// (declared or published), "answers" (the probe), or "unknown".
	LeaseFrom string `json:"lease_from,omitempty"`
}

func (c *ChaosConfig) defaults() error {
	if c.BaseURL == "" {
		return errors.New("chaos: no target URL")
	}
	if c.RunID == "" {
		c.RunID = rundir.NewRunID()
	}
	if c.Namespace == "" {
		c.Namespace = fmt.Sprintf("chaos-%d-%s", c.Seed, c.RunID)
	}
	if c.Duration <= 0 {
		c.Duration = 60 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 40
	}
	if c.Lease <= 0 {
		c.Lease = 60 * time.Second
	}
	if c.StormMax <= 0 {
		c.StormMax = 100
	}
	c.StormMax = min(c.StormMax, faults.MaxStorm)
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 2 * time.Second
	}
	if c.DrainTimeout <= 0 && !c.ProbeLease {
		c.DrainTimeout = max(10*time.Second, 4*c.Lease)
	}
	if c.MaxOps <= 0 {
		c.MaxOps = 2_000_000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// RunChaos carries out one chaos run. It returns what was recorded even when ctx
// ends early (then with ctx's error).
func RunChaos(ctx context.Context, cfg ChaosConfig) (*ChaosResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	w, err := newWorkload(cfg)
	if err != nil {
		return nil, err
	}
	return w.run(ctx)
}

// workload is the state of one run shared by its goroutines.
type workload struct {
	cfg   ChaosConfig
	start time.Time
	http  *client.Client
	keyID string // the API key's identity in the history (a digest, never the key)
	// second is one protocol second on the harness's clock (0: unknown),
	// slack the uncertainty of what the probe learnt of it.
	second, slack time.Duration
	leaseFrom     string

	mu       sync.Mutex
	ops      []checker.Operation
	effects  []checker.Effect
	acked    map[string]string // idempotency key → intent id of an acknowledged publish
	dropped  int               // operations not recorded past MaxOps
	recorded atomic.Int64      // operations recorded or dropped: the load stops at MaxOps
	unknown  atomic.Int64
	executed atomic.Int64
	finished atomic.Int64 // fulfils and fails answered 200: the backlog shrinks by them
	nextID   atomic.Int64 // client ids of storm requests
	phase    atomic.Value // string
	fault    atomic.Value // string
}

func newWorkload(cfg ChaosConfig) (*workload, error) {
	tr := client.NewTransport()
	tr.MaxConnsPerHost = 0
	tr.ResponseHeaderTimeout = cfg.RequestTimeout
	c, err := client.New(cfg.BaseURL, client.Options{
		Name:     "chaos",
		APIKey:   cfg.APIKey,
		Sign:     cfg.Sign,
		Timeout:  cfg.RequestTimeout,
		HTTP:     &http.Client{Transport: tr, Timeout: cfg.RequestTimeout},
		Replicas: cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	w := &workload{cfg: cfg, http: c, acked: map[string]string{}, keyID: keyID(cfg.APIKey), second: cfg.Lease / 60, leaseFrom: "time scale"}
	w.nextID.Store(100000)
	w.phase.Store("faults")
	w.fault.Store("")
	return w, nil
}

func (w *workload) now() int64 { return int64(time.Since(w.start)) }

// record appends op to the history, up to MaxOps.
func (w *workload) record(op checker.Operation) {
	op.KeyID = w.keyID
	w.recorded.Add(1)
	if op.Outcome == verdict.OutcomeUnknown {
		w.unknown.Add(1)
	}
	w.mu.Lock()
	if len(w.ops) < w.cfg.MaxOps {
		w.ops = append(w.ops, op)
	} else {
		w.dropped++
	}
	w.mu.Unlock()
}

// full reports that MaxOps operations were recorded: every load loop stops
// there, so a run is bounded in count as well as in time (its contexts).
func (w *workload) full() bool { return w.recorded.Load() >= int64(w.cfg.MaxOps) }

func (w *workload) effect(e checker.Effect) {
	w.executed.Add(1)
	w.mu.Lock()
	w.effects = append(w.effects, e)
	w.mu.Unlock()
}

func (w *workload) run(ctx context.Context) (*ChaosResult, error) {
	if w.cfg.ProbeLease {
		w.probeLease(ctx)
		if w.cfg.DrainTimeout <= 0 {
			w.cfg.DrainTimeout = max(10*time.Second, 4*w.defaultLease())
		}
	}
	cfg := w.cfg
	master := rand.New(rand.NewPCG(cfg.Seed, 0x1d5c4ec4))
	schedRnd := rand.New(rand.NewPCG(master.Uint64(), master.Uint64()))
	list := make([]faults.Fault, 0, len(cfg.Faults))
	for _, f := range cfg.Faults {
		if f.Name() == "storm" {
			f = &publishStorm{w: w, max: cfg.StormMax}
		}
		list = append(list, chaos.Tracked{Fault: f, Current: &w.fault})
	}
	schedule := faults.NewSchedule(schedRnd, list, cfg.Duration, cfg.ScheduleOptions)
	var tl faults.Timeline

	w.start = time.Now()
	res := &ChaosResult{Start: w.start, Namespace: cfg.Namespace, Schedule: schedule, Second: w.second, LeaseFrom: w.leaseFrom}
	if w.slack > 0 {
		res.ClockSlack = defaultClockSlack + w.slack
	}
	cfg.Logger.Info("chaos: start", "seed", cfg.Seed, "duration", cfg.Duration, "workers", cfg.Workers,
		"faults", len(list), "schedule", len(schedule), "namespace", cfg.Namespace)

	// No fault starts after Duration but one still owed its turn (then the
	// load runs on, bounded: faults.RunLoad); one that started holds its
	// planned time (at most MaxHold), and a crash's restart is bounded by
	// its own timeout: faultCtx only guards against a hang.
	faultCtx, stopFaults := context.WithTimeout(ctx, faults.RunBound(cfg.Duration, cfg.ScheduleOptions))
	defer stopFaults()
	loadCtx, stopLoad := context.WithCancel(ctx) // ended by the schedule (faults.RunLoad): at Duration, or once every fault had its turn
	defer stopLoad()
	drainCtx, stopDrain := chaos.DrainAfter(ctx, loadCtx, cfg.DrainTimeout)
	defer stopDrain()

	var wg sync.WaitGroup
	// The fault schedule: one fault at a time.
	faultsDone := make(chan error, 1)
	go func() {
		faultsDone <- faults.RunLoad(faultCtx, cfg.Duration, schedule, list, &tl, stopLoad)
	}()
	// Progress.
	progDone := make(chan struct{})
	if cfg.Progress != nil {
		go w.progress(drainCtx, progDone, &tl)
	} else {
		close(progDone)
	}

	publishers := max(1, cfg.Workers/4)
	for i := range publishers {
		rnd := rand.New(rand.NewPCG(master.Uint64(), uint64(i)))
		wg.Go(func() { w.publisher(loadCtx, i, rnd) })
	}
	var idle atomic.Int64 // workers that stopped because nothing was left to claim
	for i := range cfg.Workers {
		rnd := rand.New(rand.NewPCG(master.Uint64(), uint64(1000+i)))
		wg.Go(func() { w.worker(loadCtx, drainCtx, publishers+i, rnd, &idle) })
	}

	<-loadCtx.Done()
	faultErr := <-faultsDone
	w.phase.Store("drain")
	w.fault.Store("")
	wg.Wait()
	res.Drained = idle.Load() == int64(cfg.Workers)

	// Final state of every intent the run heard of.
	w.phase.Store("status")
	statusCtx, stopStatus := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	w.readStatuses(statusCtx)
	stopStatus()
	stopDrain()
	<-progDone

	res.End = time.Now()
	res.Timeline = tl.Injections()
	w.mu.Lock()
	res.History = checker.History{Ops: w.ops}
	res.Ledger = checker.Ledger{Effects: w.effects}
	dropped := w.dropped
	w.mu.Unlock()
	sort.SliceStable(res.History.Ops, func(i, j int) bool { return res.History.Ops[i].Call < res.History.Ops[j].Call })
	res.Series = chaos.Series(res.History, time.Second)
	var errs []error
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("chaos: %d operations not recorded past the bound of %d", dropped, cfg.MaxOps))
	}
	if faultErr != nil {
		cfg.Logger.Warn("chaos: some injections failed", "err", faultErr)
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("chaos: %w", ctx.Err()))
	}
	return res, errors.Join(errs...)
}

func (w *workload) progress(ctx context.Context, done chan<- struct{}, tl *faults.Timeline) {
	chaos.ReportProgress(ctx, done, time.Second, w.start, &w.phase, &w.fault, func() chaos.Progress {
		w.mu.Lock()
		defer w.mu.Unlock()
		return chaos.Progress{Ops: len(w.ops), Published: len(w.acked), Unknown: int(w.unknown.Load()), Executed: int(w.executed.Load())}
	}, w.cfg.Progress)
}

// keyID is the identity of an API key in a history: the first 16 hex digits
// of its SHA-256, so idempotency records are scoped per key (§7.2) and the
// key itself is never written.
func keyID(apiKey string) string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:8])
}
