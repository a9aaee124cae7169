package atp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/rundir"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/verdict"
)

// The ATP chaos workload (seed 000 over docs/atp-binding.md): agents sign
// intents, and each transaction (one intent under one idempotency key) is
// authorized then executed by the agent client (client.go) with the
// text's retry policy, scaled to the site's time, until a terminal state
// (settled, compensated, expired) or the drain's end: every unknown
// outcome is re-issued with the same key, a row that is executing is
// polled, never executed again. Mixed in, from the seed: steps re-sent
// after success, concurrent duplicates from other workers, storms of
// hundreds of identical executes behind one barrier, the signed intent
// replayed under another key (409, never a charge), payments the rail
// declines (compensated), intents executed after their expires_at (410),
// one key on two intents (two transactions), duplicate action_dedup_keys
// (when the site opts in) and preconditions. The harness hosts the rail
// (the effect sink) and its faults. After the drain it waits for the
// site's reconciliation (up to two declared intervals and a slack) while
// rows are executing, reads every transaction's final row and the site's
// keys, and records the rail's charges. It judges nothing:
// CheckATP does.

// ATPConfig is one ATP chaos run.
type ATPConfig struct {
	BaseURL string // the site, through the network proxy when network faults run
	// Replicas are the base URLs of the site's other replicas (one site
	// behind several processes over one store): each delivery of one
	// logical request goes to another of BaseURL and these.
	Replicas []string
	APIKey   string // sent as X-API-Key ("" for a site that wants none)
	// Sink is the harness's effect sink: its rail is the one the site
	// charges through (directly or through a proxy). The workload sets the
	// rail's callback to BaseURL + /api/atp/rail/events, makes it decline
	// some intents, and reads its charges after the run.
	Sink *sink.Sink
	Seed uint64
	// RunID goes into every intent_id, nonce and agent_id, so two runs with
	// one seed against one site's data name different intents (default:
	// random).
	RunID     string
	Duration  time.Duration // how long the load and the faults run
	Workers   int           // concurrent agents' drivers (default 8)
	Agents    int           // agents registered (default 4)
	TimeScale float64       // the site's time scale: declared durations last d/TimeScale (default 1)
	// Faults are the usable faults the schedule draws from. One named
	// "storm" is replaced by the workload's own storm of identical
	// executes; a faults.RemoteFailpoint without a Trigger gets one (a
	// fresh transaction driven to its end, recorded like any other).
	Faults          []faults.Fault
	ScheduleOptions faults.ScheduleOptions
	// StormMin..StormMax bound a storm (defaults 200..300, at most faults.MaxStorm).
	StormMin, StormMax int
	RequestTimeout     time.Duration // per request (default 2 s)
	// DrainTimeout is how long, after Duration, transactions are still
	// driven (default max(15 s, two reconciliation intervals and the
	// slack)); the reconciliation wait and the final reads come after.
	DrainTimeout time.Duration
	// ClockSlack is how far the site's clock may be from the harness's
	// when it judges expires_at (default 2 s, the binding's).
	ClockSlack time.Duration
	// Expiring is how many intents are made to expire: authorized at once
	// with expires_at ExpiryLead ahead, executed ClockSlack after it
	// (defaults 3 and 3 s).
	Expiring   int
	ExpiryLead time.Duration
	// ReconcileSlack is added to two reconciliation intervals for the wait
	// after the drain (default max(1 s, half an interval)).
	ReconcileSlack time.Duration
	MaxOps         int // bound on recorded operations (default 2,000,000)
	// Recorder receives every operation (nil: one of MaxOps is made).
	Recorder *chaos.Recorder
	Logger   *slog.Logger
	// Progress, when set, is called about once a second.
	Progress func(chaos.Progress)
}

// ATPResult is everything an ATP chaos run recorded.
type ATPResult struct {
	Start    time.Time          `json:"start"`
	End      time.Time          `json:"end"`
	Schedule []faults.Planned   `json:"schedule"`
	Timeline []faults.Injection `json:"timeline"`
	History  checker.History    `json:"-"`
	// Ledger is the rail's charges net of refunds: one effect per charge
	// not refunded, Key the ATP intent_id (see CheckATP).
	Ledger checker.Ledger `json:"-"`
	// Record holds the final rows, the site's keys, the receipts' bytes and
	// the rail's charges, calls and callbacks (ATPFiles writes it).
	Record ATPRecord      `json:"-"`
	Series []chaos.Bucket `json:"series"`
	// Drained is true when every transaction was driven to its end (a
	// terminal state, a final refusal, or handed to the reconciliation
	// wait while executing) before the drain timeout.
	Drained bool `json:"drained"`
	// Transactions counts the transactions by purpose.
	Transactions map[string]int `json:"transactions"`
}

func (c *ATPConfig) defaults() error {
	if c.BaseURL == "" {
		return errors.New("chaos atp: no target URL")
	}
	if c.Sink == nil {
		return errors.New("chaos atp: no payment rail (effect sink)")
	}
	if c.Workers <= 0 {
		c.Workers = 8
	}
	if c.Agents <= 0 {
		c.Agents = 4
	}
	if c.ClockSlack <= 0 {
		c.ClockSlack = 2 * time.Second
	}
	if c.Expiring == 0 {
		c.Expiring = 3
	}
	if c.ExpiryLead <= 0 {
		c.ExpiryLead = 3 * time.Second
	}
	chaos.WorkloadKnobs{Duration: &c.Duration, TimeScale: &c.TimeScale, StormMin: &c.StormMin, StormMax: &c.StormMax,
		RequestTimeout: &c.RequestTimeout, MaxOps: &c.MaxOps, Logger: &c.Logger, RunID: &c.RunID}.Fill()
	return nil
}

// The purposes of transactions (ATPRow.Purpose).
const (
	atpPay          = "pay"
	atpDecline      = "decline"
	atpExpire       = "expire"
	atpReplay       = "replay"
	atpReuseKey     = "reuse-key"
	atpDedup        = "dedup"
	atpPrecondition = "precondition"
	atpStorm        = "storm"
)

// atpTx is one transaction: one signed intent under one key.
type atpTx struct {
	n        int
	agent    *Agent
	intentID string
	key      string
	recKey   string // ATPKey
	intent   []byte // the signed intent, the same bytes on every send
	expires  time.Time
	purpose  string

	mu       sync.Mutex
	state    string // the latest state an answer showed
	terminal bool   // an answer showed a terminal state
	final    bool   // a step was refused (a final 4xx): nothing more to drive
}

func (t *atpTx) snapshot() (state string, terminal, final bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state, t.terminal, t.final
}

func (t *atpTx) setFinal() {
	t.mu.Lock()
	t.final = true
	t.mu.Unlock()
}

// atpWorkload is the state of one ATP run shared by its goroutines.
type atpWorkload struct {
	cfg      ATPConfig
	start    time.Time
	site     *Site
	rec      *chaos.Recorder
	agents   []*Agent
	interval time.Duration // the reconciliation interval on the harness's clock
	slack    time.Duration // the reconciliation slack
	dedup    bool          // the site opts in to action_dedup_key

	mu       sync.Mutex
	txs      []*atpTx
	recent   []*atpTx
	receipts map[string]json.RawMessage

	nextN    atomic.Int64
	clientID atomic.Int64
	refused  atomic.Int64
	phase    atomic.Value
	fault    atomic.Value
}

// atpRecent bounds the pool that duplicates are drawn from; atpMaxReceipts
// the receipts kept by bytes (a site that signs anew on every answer makes
// one per answer).
const (
	atpRecent      = 256
	atpMaxReceipts = 100_000
)

// atpLongExpiry is the expires_at of an ordinary intent: far enough that
// no run reaches it.
const atpLongExpiry = time.Hour

// RunATP carries out one ATP chaos run. It returns what was recorded even
// when ctx ends early (then with ctx's error).
func RunATP(ctx context.Context, cfg ATPConfig) (*ATPResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	tr := client.NewTransport()
	tr.MaxConnsPerHost = 0
	tr.ResponseHeaderTimeout = cfg.RequestTimeout
	c, err := client.New(cfg.BaseURL, client.Options{Name: "chaos-atp", APIKey: cfg.APIKey, Timeout: cfg.RequestTimeout, Replicas: cfg.Replicas,
		HTTP: &http.Client{Transport: tr, Timeout: cfg.RequestTimeout}})
	if err != nil {
		return nil, fmt.Errorf("chaos atp: %w", err)
	}
	w := &atpWorkload{cfg: cfg, site: NewSite(c), receipts: map[string]json.RawMessage{}}
	w.phase.Store("config")
	w.fault.Store("")
	if err := w.readConfig(ctx); err != nil {
		return nil, err
	}
	if w.cfg.DrainTimeout <= 0 {
		w.cfg.DrainTimeout = max(15*time.Second, 2*w.interval+w.slack)
	}
	if err := w.register(ctx); err != nil {
		return nil, err
	}
	RailOf(cfg.Sink).SetCallback(callbackURLs(cfg.BaseURL, cfg.Replicas)...)
	return w.run(ctx)
}

// readConfig reads GET /api/atp/config (a few tries): the reconciliation
// interval (default 60 s) and whether the site rejects duplicate
// action_dedup_keys.
func (w *atpWorkload) readConfig(ctx context.Context) error {
	var cfg Config
	var err error
	for try := 0; try < 5; try++ {
		if cfg, _, err = w.site.Config(ctx); err == nil {
			break
		}
		chaos.HoldFor(ctx, 200*time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("chaos atp: GET %s: %w", PathConfig, err)
	}
	secs := 60.0
	if cfg.ReconcileIntervalSeconds != nil && *cfg.ReconcileIntervalSeconds > 0 {
		secs = *cfg.ReconcileIntervalSeconds
	}
	w.interval = time.Duration(secs * float64(time.Second) / w.cfg.TimeScale)
	w.slack = w.cfg.ReconcileSlack
	if w.slack <= 0 {
		w.slack = max(time.Second, w.interval/2)
	}
	w.dedup = cfg.ActionDedupWindowSeconds != nil && *cfg.ActionDedupWindowSeconds > 0
	return nil
}

// register registers the run's agents (keys drawn from the seed and the
// run's own nonce).
func (w *atpWorkload) register(ctx context.Context) error {
	// The agents' keys are the run's own too (rundir.Fresh): a replay
	// registers fresh agents, never an earlier run's key.
	keyRnd := mrand.NewChaCha8(seedBytes(rundir.Fresh(w.cfg.RunID, mrand.New(mrand.NewPCG(w.cfg.Seed, 0xa9e7))).Uint64()))
	for i := range w.cfg.Agents {
		key, err := KeyFromSeed(keyRnd)
		if err != nil {
			return err
		}
		ag := NewAgent(w.site, fmt.Sprintf("agt_%s_%d", w.cfg.RunID, i), key)
		var a Answer
		for try := 0; try < 5; try++ {
			if a, err = ag.Register(ctx); err == nil && a.Status < 500 {
				break
			}
			chaos.HoldFor(ctx, 200*time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("chaos atp: register %s: %w", ag.ID, err)
		}
		if a.Status != http.StatusOK && a.Status != http.StatusCreated {
			return fmt.Errorf("chaos atp: register %s: %d %s", ag.ID, a.Status, clipBytes(a.Body))
		}
		w.agents = append(w.agents, ag)
	}
	return nil
}

func seedBytes(seed uint64) [32]byte {
	var b [32]byte
	r := mrand.New(mrand.NewPCG(seed, 0xa7b))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func clipBytes(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func (w *atpWorkload) run(ctx context.Context) (*ATPResult, error) {
	cfg := w.cfg
	master := mrand.New(mrand.NewPCG(cfg.Seed, 0xa7b0))
	schedRnd := mrand.New(mrand.NewPCG(master.Uint64(), master.Uint64()))
	w.start = time.Now()
	w.rec = cfg.Recorder
	if w.rec == nil {
		w.rec = chaos.NewRecorder(w.start, cfg.MaxOps)
	}
	w.start = w.rec.Start()

	faultCtx, stopFaults := context.WithTimeout(ctx, faults.RunBound(cfg.Duration, cfg.ScheduleOptions))
	defer stopFaults()
	loadCtx, stopLoad := context.WithCancel(ctx) // ended by the schedule (faults.RunLoad): at Duration, or once every fault had its turn
	defer stopLoad()
	drainCtx, stopDrain := chaos.DrainAfter(ctx, loadCtx, cfg.DrainTimeout)
	defer stopDrain()

	list := make([]faults.Fault, 0, len(cfg.Faults))
	for _, f := range cfg.Faults {
		if ff, ok := f.(*faults.RemoteFailpoint); ok && ff.Trigger == nil {
			cp := *ff
			trnd := mrand.New(mrand.NewPCG(master.Uint64(), 77))
			var tmu sync.Mutex
			cp.Trigger = func(ctx context.Context) error {
				// Over replicas the deliveries go round them, and the
				// failpoint is the first one's: drive until it fired (ctx
				// ends then, or at its bound).
				for ctx.Err() == nil {
					tmu.Lock()
					tx := w.mint(trnd, atpPay, nil)
					seed := trnd.Uint64()
					tmu.Unlock()
					w.drive(ctx, tx, mrand.New(mrand.NewPCG(seed, 78)))
					if len(cfg.Replicas) == 0 {
						break
					}
				}
				return nil
			}
			f = &cp
		}
		if f.Name() == "storm" {
			f = &atpStormFault{w: w}
		}
		list = append(list, chaos.Tracked{Fault: f, Current: &w.fault})
	}
	schedule := faults.NewSchedule(schedRnd, list, cfg.Duration, cfg.ScheduleOptions)
	var tl faults.Timeline
	res := &ATPResult{Start: w.start, Schedule: schedule}
	w.phase.Store("faults")
	cfg.Logger.Info("chaos atp: start", "seed", cfg.Seed, "duration", cfg.Duration, "workers", cfg.Workers, "agents", len(w.agents),
		"faults", len(list), "schedule", len(schedule), "reconcile_interval", w.interval, "action_dedup", w.dedup)

	faultsDone := make(chan error, 1)
	go func() { faultsDone <- faults.RunLoad(faultCtx, cfg.Duration, schedule, list, &tl, stopLoad) }()
	progDone := make(chan struct{})
	if cfg.Progress != nil {
		go w.progress(drainCtx, progDone)
	} else {
		close(progDone)
	}
	var wg sync.WaitGroup
	expRnd := mrand.New(mrand.NewPCG(master.Uint64(), 55))
	wg.Go(func() { w.expiring(loadCtx, drainCtx, expRnd) })
	for i := range cfg.Workers {
		rnd := mrand.New(mrand.NewPCG(master.Uint64(), uint64(i)))
		wg.Go(func() { w.submitter(loadCtx, drainCtx, rnd) })
	}
	<-loadCtx.Done()
	faultErr := <-faultsDone
	w.phase.Store("drain")
	w.fault.Store("")
	wg.Wait()
	w.finishAll(drainCtx, mrand.New(mrand.NewPCG(master.Uint64(), 99)))
	res.Drained = drainCtx.Err() == nil
	stopDrain()

	// The reconciliation wait and the final rows, then the keys and the rail.
	w.phase.Store("reconcile")
	record := w.reconcile(ctx)
	<-progDone
	res.End = time.Now()
	res.Timeline = tl.Injections()
	var dropped int
	res.History, dropped = w.rec.History()
	res.Ledger, record.Charges, record.RailCalls, record.Callbacks = w.rail()
	res.Record = record
	res.Series = chaos.Series(res.History, time.Second)
	res.Transactions = map[string]int{}
	w.mu.Lock()
	for _, tx := range w.txs {
		res.Transactions[tx.purpose]++
	}
	w.mu.Unlock()
	var errs []error
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("chaos atp: %d operations not recorded past the bound of %d", dropped, cfg.MaxOps))
	}
	if n := w.refused.Load(); n > 0 {
		cfg.Logger.Warn("chaos atp: steps refused for a reason the workload did not mean", "n", n)
	}
	if faultErr != nil {
		cfg.Logger.Warn("chaos atp: some injections failed", "err", faultErr)
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("chaos atp: %w", ctx.Err()))
	}
	return res, errors.Join(errs...)
}

func (w *atpWorkload) progress(ctx context.Context, done chan<- struct{}) {
	chaos.ReportProgress(ctx, done, time.Second, w.start, &w.phase, &w.fault, func() chaos.Progress {
		w.mu.Lock()
		n := len(w.txs)
		w.mu.Unlock()
		return chaos.Progress{Ops: w.rec.Len(), Unknown: w.rec.Unknown(), Published: n, Executed: len(RailOf(w.cfg.Sink).AllCharges())}
	}, w.cfg.Progress)
}

// newKey draws an idempotency key: a UUIDv4 mostly, now and then 128
// characters (§3: "any 16–128 char string"); rnd draws the choice, fresh
// (rundir.Fresh: the run's own nonce mixed in) the key's characters.
func newKey(rnd, fresh *mrand.Rand) string {
	if rnd.IntN(10) == 0 {
		b := make([]byte, 0, 128)
		for len(b) < 128 {
			b = fmt.Appendf(b, "%016x", fresh.Uint64())
		}
		return string(b[:128])
	}
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", fresh.Uint32(), fresh.Uint32()&0xffff, fresh.Uint32()&0xfff,
		0x8000|fresh.Uint32()&0x3fff, fresh.Uint64()&0xffffffffffff)
}

// atpIntentOpts are what a transaction's intent carries besides its draw.
type atpIntentOpts struct {
	agent        *Agent    // nil: drawn
	key          string    // "": a new key
	expires      time.Time // zero: atpLongExpiry ahead
	dedupKey     string
	precondition string // an intent_id that must be settled
}

// mint creates a transaction: a new intent, signed, under a key.
func (w *atpWorkload) mint(rnd *mrand.Rand, purpose string, o *atpIntentOpts) *atpTx {
	if o == nil {
		o = &atpIntentOpts{}
	}
	n := int(w.nextN.Add(1))
	ag := o.agent
	if ag == nil {
		ag = w.agents[rnd.IntN(len(w.agents))]
	}
	key := o.key
	if key == "" {
		key = newKey(rnd, rundir.Fresh(w.cfg.RunID, rnd))
	}
	exp := o.expires
	if exp.IsZero() {
		exp = time.Now().Add(atpLongExpiry)
	}
	p := IntentParams{IntentID: fmt.Sprintf("int_%s_%d", w.cfg.RunID, n), Nonce: fmt.Sprintf("n_%s_%d_%08x", w.cfg.RunID, n, rnd.Uint32()),
		ExpiresAt: exp, Amount: int64(100 + rnd.IntN(99900)), Currency: []string{"EUR", "USD", "GBP"}[rnd.IntN(3)],
		Payee: fmt.Sprintf("merchant_%d", rnd.IntN(50)), ActionDedupKey: o.dedupKey}
	if o.precondition != "" {
		p.Precondition = &Precondition{IntentSettled: o.precondition}
	}
	intent, err := ag.NewIntent(p)
	if err != nil {
		panic(fmt.Sprintf("chaos atp: sign an intent: %v", err)) // only a bad key; the agents' are good
	}
	tx := &atpTx{n: n, agent: ag, intentID: p.IntentID, key: key, recKey: ATPKey(p.IntentID, key), intent: intent, expires: exp, purpose: purpose}
	w.add(tx)
	return tx
}

// replayTx is the transaction of a signed intent replayed under another
// key: the same bytes, another key.
func (w *atpWorkload) replayTx(of *atpTx, rnd *mrand.Rand) *atpTx {
	key := newKey(rnd, rundir.Fresh(w.cfg.RunID, rnd))
	tx := &atpTx{n: int(w.nextN.Add(1)), agent: of.agent, intentID: of.intentID, key: key, recKey: ATPKey(of.intentID, key),
		intent: of.intent, expires: of.expires, purpose: atpReplay}
	w.add(tx)
	return tx
}

func (w *atpWorkload) add(tx *atpTx) {
	w.mu.Lock()
	w.txs = append(w.txs, tx)
	if tx.purpose == atpPay || tx.purpose == atpDecline || tx.purpose == atpReuseKey {
		w.recent = append(w.recent, tx)
		if len(w.recent) > atpRecent {
			w.recent = w.recent[len(w.recent)-atpRecent:]
		}
	}
	w.mu.Unlock()
}

// pick returns a recent transaction, or nil.
func (w *atpWorkload) pick(rnd *mrand.Rand) *atpTx {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.recent) == 0 {
		return nil
	}
	return w.recent[rnd.IntN(len(w.recent))]
}

// call sends one step of tx and records it.
func (w *atpWorkload) call(ctx context.Context, tx *atpTx, route string) (Answer, error) {
	op := checker.Operation{ClientID: int(w.clientID.Add(1)), Kind: checker.OpPublish, Key: tx.recKey, Input: checker.Input{Body: route}, Call: w.rec.Now()}
	var a Answer
	var err error
	switch route {
	case ATPRouteAuthorize:
		a, err = w.site.Authorize(ctx, tx.intent, tx.key)
	case ATPRouteExecute:
		a, err = w.site.Execute(ctx, tx.intentID, tx.key)
	default:
		op.Kind = checker.OpStatus
		a, err = w.site.Get(ctx, tx.intentID, tx.key)
	}
	op.Return = w.rec.Now()
	op.Outcome = a.Outcome
	op.Output.Status = a.Status
	if err == nil {
		if a.Status >= 500 {
			op.Outcome = verdict.OutcomeUnknown // it may have been applied before failing
		}
		switch {
		case a.Tx != nil:
			op.Output.State = a.Tx.State
			op.Output.ID = ATPKey(a.Tx.IntentID, a.Tx.IdempotencyKey)
			op.Output.Body = ATPRowAnswer(a.Tx.Body, a.Tx.Receipt)
			if a.Tx.HasReceipt() {
				w.keepReceipt(a.Tx.Receipt)
			}
		case a.Error != nil:
			op.Output.Body = ATPErrorAnswer(a.Error.Error)
		}
	}
	w.rec.Op(op)
	if op.Outcome == verdict.OutcomeOK && a.Tx != nil && a.Status >= 200 && a.Status < 300 && Rank(a.Tx.State) >= 0 {
		tx.mu.Lock()
		tx.state = a.Tx.State
		tx.terminal = tx.terminal || Terminal(a.Tx.State)
		tx.mu.Unlock()
	}
	return a, err
}

func (w *atpWorkload) keepReceipt(raw json.RawMessage) {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	d := ATPReceiptDigest(raw)
	w.mu.Lock()
	if _, ok := w.receipts[d]; !ok && len(w.receipts) < atpMaxReceipts {
		w.receipts[d] = json.RawMessage(b.Bytes())
	}
	w.mu.Unlock()
}

// policy is the agent's retry policy for one driver, at the site's time
// scale, its jitter from rnd.
func (w *atpWorkload) policy(rnd *mrand.Rand) Policy {
	return Policy{Scale: w.cfg.TimeScale, Rand: rnd.Float64}
}

// errPollBudget ends a drive whose row stayed executing past the poll
// budget: the reconciliation wait after the drain reads it again.
var errPollBudget = errors.New("chaos atp: the row stayed executing past the poll budget")

// step drives one step of tx (authorize or execute) with the policy: the
// same request until an answer is final, polling while the row is
// executing, at most two reconciliation intervals and the slack of polls.
func (w *atpWorkload) step(ctx context.Context, tx *atpTx, route string, rnd *mrand.Rand) Result {
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	budget := 2*w.interval + w.slack
	var polling time.Time
	send := func(ctx context.Context) (Answer, error) {
		if w.rec.Full() {
			cancel()
			return Answer{}, errors.New("chaos atp: the operation bound is reached")
		}
		return w.call(ctx, tx, route)
	}
	poll := func(ctx context.Context) (Answer, error) {
		if polling.IsZero() {
			polling = time.Now()
		} else if time.Since(polling) > budget || w.rec.Full() {
			cancel()
			return Answer{}, errPollBudget
		}
		return w.call(ctx, tx, ATPRouteGet)
	}
	return w.policy(rnd).Do(dctx, tx.expires, send, poll)
}

// drive drives tx to its end: authorize (unless a row was seen), then
// execute, each with the policy. A 409 nonce_consumed on authorize goes on
// to execute (under the "nonce" reading of the binding a retry under the
// same key gets it while the row exists); any other final 4xx ends the
// transaction.
func (w *atpWorkload) drive(ctx context.Context, tx *atpTx, rnd *mrand.Rand) {
	state, terminal, final := tx.snapshot()
	if terminal || final {
		return
	}
	if state == "" {
		r := w.step(ctx, tx, ATPRouteAuthorize, rnd)
		if r.Stop != StopFinal {
			return
		}
		if r.Err == nil && r.Answer.Status >= 400 && !(r.Answer.Status == http.StatusConflict && r.Answer.Code() == ErrNonceConsumed) {
			tx.setFinal()
			w.unmeant(tx, "authorize", r.Answer)
			return
		}
		if _, terminal, _ := tx.snapshot(); terminal {
			return
		}
	}
	r := w.step(ctx, tx, ATPRouteExecute, rnd)
	if r.Stop == StopFinal && r.Err == nil && r.Answer.Status >= 400 {
		tx.setFinal()
		w.unmeant(tx, "execute", r.Answer)
	}
}

// unmeant counts a refusal the workload did not mean (an ordinary payment
// refused), for the log.
func (w *atpWorkload) unmeant(tx *atpTx, step string, a Answer) {
	if tx.purpose == atpPay || tx.purpose == atpDecline || tx.purpose == atpReuseKey || tx.purpose == atpStorm {
		w.refused.Add(1)
		w.cfg.Logger.Debug("chaos atp: step refused", "step", step, "intent", tx.intentID, "status", a.Status, "body", clipBytes(a.Body))
	}
}

// once sends one step of tx, recorded, and drives nothing (a resend after
// success, a replay, a probe after expiry).
func (w *atpWorkload) once(ctx context.Context, tx *atpTx, route string) Answer {
	if w.rec.Full() {
		return Answer{}
	}
	a, _ := w.call(ctx, tx, route)
	return a
}

// submitter creates and drives transactions until loadCtx ends. Driving
// goes on in the drain.
func (w *atpWorkload) submitter(loadCtx, drainCtx context.Context, rnd *mrand.Rand) {
	for loadCtx.Err() == nil && !w.rec.Full() {
		switch p := rnd.IntN(100); {
		case p < 45:
			tx := w.mint(rnd, atpPay, nil)
			w.drive(drainCtx, tx, rnd)
			if _, terminal, _ := tx.snapshot(); terminal && rnd.IntN(100) < 40 {
				// Retries after success: the stored row, verbatim, no charge.
				w.once(drainCtx, tx, ATPRouteExecute)
				w.once(drainCtx, tx, ATPRouteAuthorize)
			}
			if rnd.IntN(100) < 25 {
				// The signed intent replayed under another key: 409, and
				// its execute finds no authorized row.
				r := w.replayTx(tx, rnd)
				w.once(drainCtx, r, ATPRouteAuthorize)
				w.once(drainCtx, r, ATPRouteExecute)
			}
		case p < 55:
			tx := w.mint(rnd, atpDecline, nil)
			RailOf(w.cfg.Sink).Decline(tx.intentID)
			w.drive(drainCtx, tx, rnd)
		case p < 65:
			// Concurrent duplicates: 2 to 4 drivers of one new transaction
			// released by one barrier.
			tx := w.mint(rnd, atpPay, nil)
			w.burst(drainCtx, tx, 2+rnd.IntN(3), rnd)
		case p < 73:
			// One key on two intents: two transactions.
			of := w.pick(rnd)
			if of == nil {
				continue
			}
			tx := w.mint(rnd, atpReuseKey, &atpIntentOpts{key: of.key})
			w.drive(drainCtx, tx, rnd)
		case p < 82:
			// A recent transaction again, possibly while its own driver
			// (another worker) is still at it.
			if tx := w.pick(rnd); tx != nil {
				if _, terminal, _ := tx.snapshot(); terminal {
					w.once(drainCtx, tx, ATPRouteExecute)
				} else {
					w.drive(drainCtx, tx, rnd)
				}
			}
		case p < 91:
			w.preconditions(drainCtx, rnd)
		default:
			w.dedupPair(drainCtx, rnd)
		}
	}
}

// burst drives tx from n goroutines released together.
func (w *atpWorkload) burst(ctx context.Context, tx *atpTx, n int, rnd *mrand.Rand) {
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = rnd.Uint64()
	}
	var bg sync.WaitGroup
	barrier := make(chan struct{})
	for i := range n {
		bg.Go(func() {
			<-barrier
			w.drive(ctx, tx, mrand.New(mrand.NewPCG(seeds[i], 3)))
		})
	}
	close(barrier)
	bg.Wait()
}

// preconditions: an intent whose precondition is a settled intent of the
// same agent (authorized and paid), and now and then one whose
// precondition never settled (refused at authorize, §8).
func (w *atpWorkload) preconditions(ctx context.Context, rnd *mrand.Rand) {
	a := w.mint(rnd, atpPay, nil)
	w.drive(ctx, a, rnd)
	if state, _, _ := a.snapshot(); state == StateSettled {
		b := w.mint(rnd, atpPrecondition, &atpIntentOpts{agent: a.agent, precondition: a.intentID})
		w.drive(ctx, b, rnd)
	}
	if rnd.IntN(2) == 0 {
		never := fmt.Sprintf("int_%s_never_%d", w.cfg.RunID, w.nextN.Add(1))
		c := w.mint(rnd, atpPrecondition, &atpIntentOpts{agent: a.agent, precondition: never})
		w.drive(ctx, c, rnd)
	}
}

// dedupPair: two intents of one agent with one action_dedup_key, the
// second after the first is authorized (the site opted in: refused, §7);
// a site that does not opt in gets one intent with a key of its own.
func (w *atpWorkload) dedupPair(ctx context.Context, rnd *mrand.Rand) {
	dk := fmt.Sprintf("cart:%s:%d:user_%d", w.cfg.RunID, w.nextN.Add(1), rnd.IntN(20))
	a := w.mint(rnd, atpPay, &atpIntentOpts{dedupKey: dk})
	w.drive(ctx, a, rnd)
	if !w.dedup {
		return
	}
	if state, _, _ := a.snapshot(); state == "" {
		return
	}
	b := w.mint(rnd, atpDedup, &atpIntentOpts{agent: a.agent, dedupKey: dk})
	w.drive(ctx, b, rnd)
}

// expiring authorizes cfg.Expiring intents whose expires_at is ExpiryLead
// ahead, then executes each ClockSlack past it (410 intent_expired, §5;
// re-sent, at most 3 times, only when no answer came back), and reads it.
func (w *atpWorkload) expiring(loadCtx, drainCtx context.Context, rnd *mrand.Rand) {
	if w.cfg.Expiring < 0 {
		return
	}
	exp := time.Now().Add(w.cfg.ExpiryLead)
	var txs []*atpTx
	for range w.cfg.Expiring {
		if loadCtx.Err() != nil {
			break
		}
		tx := w.mint(rnd, atpExpire, &atpIntentOpts{expires: exp})
		txs = append(txs, tx)
		r := w.step(drainCtx, tx, ATPRouteAuthorize, rnd)
		if r.Stop == StopFinal && r.Err == nil && r.Answer.Status >= 400 {
			tx.setFinal()
		}
	}
	chaos.HoldFor(drainCtx, time.Until(exp.Add(w.cfg.ClockSlack)))
	for _, tx := range txs {
		if drainCtx.Err() != nil {
			return
		}
		if state, _, _ := tx.snapshot(); state == "" {
			continue
		}
		// A probe, not a retry of the intent: re-sent on a lost answer, the
		// site must answer 410 however often.
		for try := 0; try < 3 && drainCtx.Err() == nil; try++ {
			if a := w.once(drainCtx, tx, ATPRouteExecute); a.Outcome == verdict.OutcomeOK && a.Status < 500 {
				break
			}
			chaos.HoldFor(drainCtx, 20*time.Millisecond)
		}
		w.once(drainCtx, tx, ATPRouteGet)
		tx.setFinal()
	}
}

// finishAll drives, in the drain, every transaction not yet at its end (a
// storm's, one whose driver gave up), bounded by the drain. Rows last seen
// executing are left to the reconciliation wait.
func (w *atpWorkload) finishAll(ctx context.Context, rnd *mrand.Rand) {
	w.mu.Lock()
	var todo []*atpTx
	for _, tx := range w.txs {
		state, terminal, final := tx.snapshot()
		if terminal || final || state == StateExecuting || state == StateExecuted ||
			tx.purpose == atpReplay || tx.purpose == atpExpire || time.Now().After(tx.expires) {
			continue
		}
		todo = append(todo, tx)
	}
	w.mu.Unlock()
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for i := range min(w.cfg.Workers, len(todo)) {
		seed := rnd.Uint64()
		wg.Go(func() {
			r := mrand.New(mrand.NewPCG(seed, uint64(i)))
			for ctx.Err() == nil {
				j := int(next.Add(1)) - 1
				if j >= len(todo) {
					return
				}
				w.drive(ctx, todo[j], r)
			}
		})
	}
	wg.Wait()
}

// reconcile waits, up to two reconciliation intervals and the slack, while
// rows are executing (or executed, not yet settled), then returns the
// record of every transaction's final row and the site's keys.
func (w *atpWorkload) reconcile(ctx context.Context) ATPRecord {
	rec := ATPRecord{Start: w.start, ReconcileInterval: w.interval, ReconcileBound: 2*w.interval + w.slack}
	w.mu.Lock()
	txs := append([]*atpTx(nil), w.txs...)
	w.mu.Unlock()
	rows := make([]ATPRow, len(txs))
	// Reads go on when ctx ends (bounded), so that the record is whole.
	readCtx, stopRead := context.WithTimeout(context.WithoutCancel(ctx), rec.ReconcileBound+30*time.Second+time.Duration(len(txs))*2*time.Millisecond)
	defer stopRead()
	began := time.Now()
	pending := func(r ATPRow) bool {
		return r.Status == 0 || r.State == StateExecuting || r.State == StateExecuted
	}
	todo := make([]int, len(txs))
	for i := range todo {
		todo[i] = i
	}
	for len(todo) > 0 && readCtx.Err() == nil {
		w.readRows(readCtx, txs, rows, todo)
		var still []int
		for _, i := range todo {
			if pending(rows[i]) {
				still = append(still, i)
			}
		}
		todo = still
		if len(todo) == 0 || time.Since(began) >= rec.ReconcileBound {
			break
		}
		if ctx.Err() != nil {
			rec.ReconcileCutShort = true
			break
		}
		chaos.HoldFor(ctx, min(max(w.interval/5, 20*time.Millisecond), 500*time.Millisecond, rec.ReconcileBound-time.Since(began)))
	}
	rec.ReconcileWait = time.Since(began)
	rec.Rows = rows

	for try := 0; try < 5 && readCtx.Err() == nil; try++ {
		keys, _, err := w.site.Keys(readCtx)
		if err == nil {
			rec.Keys, rec.KeysErr = &keys, ""
			break
		}
		rec.KeysErr = err.Error()
		chaos.HoldFor(readCtx, 100*time.Millisecond)
	}
	w.mu.Lock()
	rec.Receipts = make(map[string]json.RawMessage, len(w.receipts))
	for d, r := range w.receipts {
		rec.Receipts[d] = r
	}
	w.mu.Unlock()
	return rec
}

// readRows reads the rows of txs[i] for i in idx (16 at a time, a few
// tries each), recorded like every read, into rows.
func (w *atpWorkload) readRows(ctx context.Context, txs []*atpTx, rows []ATPRow, idx []int) {
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(16, len(idx)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				j := int(next.Add(1)) - 1
				if j >= len(idx) {
					return
				}
				tx := txs[idx[j]]
				row := ATPRow{Key: tx.recKey, IntentID: tx.intentID, IdempotencyKey: tx.key, AgentID: tx.agent.ID,
					Purpose: tx.purpose, ExpiresAt: FormatTime(tx.expires)}
				for try := 0; try < 5 && ctx.Err() == nil; try++ {
					a, err := w.call(ctx, tx, ATPRouteGet)
					row.At = w.rec.Now()
					switch {
					case err != nil:
						row.Status, row.Err = 0, err.Error()
					case a.Status == http.StatusOK && a.Tx != nil:
						row.Status, row.Err, row.State, row.Body, row.Receipt = a.Status, "", a.Tx.State, a.Tx.Body, a.Tx.Receipt
					case a.Status == http.StatusNotFound:
						row.Status, row.Err = a.Status, ""
					default:
						row.Status, row.Err = 0, fmt.Sprintf("%d %s", a.Status, clipBytes(a.Body))
					}
					if row.Status != 0 {
						break
					}
					chaos.HoldFor(ctx, 100*time.Millisecond)
				}
				rows[idx[j]] = row
			}
		})
	}
	wg.Wait()
}

// rail returns the rail's charges as the ledger (net of refunds: one effect
// per charge not refunded, Key the ATP intent_id) and, for the record,
// every charge, call and callback of the run.
func (w *atpWorkload) rail() (checker.Ledger, []ATPCharge, []ATPRailCall, []ATPCallback) {
	var l checker.Ledger
	var charges []ATPCharge
	at := func(t time.Time) int64 { return int64(t.Sub(w.start)) }
	for _, c := range RailOf(w.cfg.Sink).AllCharges() {
		if c.At.Before(w.start) {
			continue
		}
		charges = append(charges, ATPCharge{Seq: c.Seq, PaymentIntent: c.PaymentIntent, IntentID: c.IntentID, ChargeID: c.ChargeID,
			Amount: c.Amount, Currency: c.Currency, At: at(c.At), Refunded: c.Refunded, LostReply: c.LostReply})
		if !c.Refunded {
			l.Effects = append(l.Effects, checker.Effect{Key: c.IntentID, Intent: c.PaymentIntent, Worker: c.ChargeID, At: at(c.At)})
		}
	}
	var calls []ATPRailCall
	for _, c := range RailOf(w.cfg.Sink).Calls() {
		if !c.At.Before(w.start) {
			calls = append(calls, ATPRailCall{Seq: c.Seq, Op: c.Op, PaymentIntent: c.PaymentIntent, IntentID: c.IntentID, Status: c.Status, At: at(c.At)})
		}
	}
	var cbs []ATPCallback
	for _, c := range RailOf(w.cfg.Sink).Callbacks() {
		if !c.At.Before(w.start) {
			cbs = append(cbs, ATPCallback{PaymentIntent: c.PaymentIntent, IntentID: c.IntentID, Type: c.Type, Dropped: c.Dropped,
				Status: c.Status, Err: c.Err, At: at(c.At)})
		}
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].Seq < calls[j].Seq })
	return l, charges, calls, cbs
}

// atpStormFault is the duplicate storm of an ATP run: one transaction is
// authorized, then n identical executes (one key) are released by one
// barrier. One charge must come of it.
type atpStormFault struct {
	w *atpWorkload
}

var _ faults.Fault = (*atpStormFault)(nil)

func (s *atpStormFault) Name() string      { return "storm" }
func (s *atpStormFault) Kind() faults.Kind { return faults.KindStorm }
func (s *atpStormFault) Available() error  { return nil }

func (s *atpStormFault) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	w := s.w
	n := w.cfg.StormMin
	if w.cfg.StormMax > n {
		n += rnd.IntN(w.cfg.StormMax - n + 1)
	}
	tx := w.mint(rnd, atpStorm, nil)
	w.step(ctx, tx, ATPRouteAuthorize, rnd)
	in, err := faults.Storm(ctx, n, func(ctx context.Context, i int) {
		w.once(ctx, tx, ATPRouteExecute)
	})
	in.Params["intent_id"] = tx.intentID
	in.Params["key"] = tx.key
	return in, err
}

// callbackURLs are the site's rail events route on base and on each of its
// other replicas.
func callbackURLs(base string, replicas []string) []string {
	var out []string
	for _, u := range append([]string{base}, replicas...) {
		out = append(out, strings.TrimSuffix(u, "/")+PathRailEvents)
	}
	return out
}
