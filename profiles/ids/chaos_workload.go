package ids

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/verdict"
)

// The IDS chaos workload (RFC-WF-0010 over docs/ids-binding.md): a seeded
// pool of logical commands over several tenants and actors, each delivered
// at least once and often more (a resend with a new command_id or new
// ephemeral fields, a concurrent duplicate from another worker, a resend
// after success), storms of hundreds of identical envelopes released by one
// barrier, and every unknown outcome (a timeout, a reset, a 5xx, a 202
// processing) retried with the same envelope until a terminal answer or the
// drain's end. It records every request into a checker.History, every
// effect the harness's sink performed into a checker.Ledger, and, after the
// drain, GET /evidence of every key (IDSKey). It judges nothing:
// CheckIDS does.

// IDSConfig is one IDS chaos run.
type IDSConfig struct {
	BaseURL string // the target, through the network proxy when network faults run
	// Replicas are the target's other replicas: each logical command's
	// deliveries go to one after the other (client.Options.Replicas).
	Replicas []string
	APIKey   string // sent as X-API-Key ("" for a target that wants none)
	// Sink is the harness's effect sink the target sends its effects to
	// (directly or through a proxy): the workload tells it which commands
	// are S1 (HonourKeys) and reads its effects after the drain.
	Sink *sink.Sink
	Seed uint64
	// RunID goes into every command's target and command_id, so two runs
	// with one seed against one target's data name different commands
	// (default: random).
	RunID     string
	Duration  time.Duration // how long the workload and the faults run
	Workers   int           // concurrent submitters (default 16)
	TimeScale float64       // the target's time scale: a declared window of W s lasts W/TimeScale (default 1)
	// TimeScaleAssumed says the target's time scale is not known (neither
	// declared nor published): before the load, the workload learns each
	// command's dedupe window from what the target answers (learnWindows),
	// never from TimeScale.
	TimeScaleAssumed bool
	// Faults are the usable faults the schedule draws from. One named
	// "storm" is replaced by the workload's own storm of identical
	// envelopes; a faults.RemoteFailpoint without a Trigger gets one (a
	// fresh command, recorded like any other).
	Faults          []faults.Fault
	ScheduleOptions faults.ScheduleOptions
	// StormMin..StormMax bound a storm (defaults 200..300, at most faults.MaxStorm).
	StormMin, StormMax int
	RequestTimeout     time.Duration // per request (default 2 s)
	DrainTimeout       time.Duration // after Duration: how long deliveries and the outbox may go on (default 15 s)
	MaxOps             int           // bound on recorded operations (default 2,000,000)
	// Recorder receives every operation (nil: one of MaxOps is made).
	Recorder *chaos.Recorder
	Logger   *slog.Logger
	// Progress, when set, is called about once a second.
	Progress func(chaos.Progress)
}

// IDSResult is everything an IDS chaos run recorded.
type IDSResult struct {
	Start    time.Time          `json:"start"`
	End      time.Time          `json:"end"`
	Schedule []faults.Planned   `json:"schedule"`
	Timeline []faults.Injection `json:"timeline"`
	History  checker.History    `json:"-"`
	Ledger   checker.Ledger     `json:"-"`
	Keys     []IDSKey           `json:"-"`
	Series   []chaos.Bucket     `json:"series"`
	// Drained is true when every logical command reached a terminal answer
	// (or was given up on its window) and every executed I3 command's
	// effect reached the sink before the drain timeout.
	Drained bool `json:"drained"`
	// Commands are the registry's commands the workload sent.
	Commands []string `json:"commands"`
}

func (c *IDSConfig) defaults() error {
	if c.BaseURL == "" {
		return errors.New("chaos ids: no target URL")
	}
	if c.Sink == nil {
		return errors.New("chaos ids: no effect sink")
	}
	if c.Workers <= 0 {
		c.Workers = 16
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 15 * time.Second
	}
	chaos.WorkloadKnobs{Duration: &c.Duration, TimeScale: &c.TimeScale, StormMin: &c.StormMin, StormMax: &c.StormMax,
		RequestTimeout: &c.RequestTimeout, MaxOps: &c.MaxOps, Logger: &c.Logger, RunID: &c.RunID}.Fill()
	return nil
}

// The IDS binding's paths and headers (docs/ids-binding.md).
const (
	idsPathCommands = "/commands"
	idsPathRegistry = "/registry"
	idsPathEvidence = "/evidence"
	idsHeaderAPIKey = "X-API-Key"
)

// idsRegistry is GET /registry, as much as the workload needs.
type idsRegistry struct {
	Binding  string `json:"binding"`
	Commands []struct {
		Command              string `json:"command"`
		Class                string `json:"class"`
		TTLSeconds           *int64 `json:"ttl_seconds"`
		Shielding            string `json:"shielding"`
		Financial            bool   `json:"financial"`
		RequiresConfirmation bool   `json:"requires_confirmation"`
		// ArgsExamples are args the command accepts; ArgsRejected args it
		// refuses with a terminal 422 (docs/ids-binding.md, GET /registry).
		ArgsExamples []json.RawMessage `json:"args_examples"`
		ArgsRejected json.RawMessage   `json:"args_rejected"`
		Effects      *bool             `json:"effects"`
	} `json:"commands"`
}

// idsCommandType is one command of the registry the workload sends.
type idsCommandType struct {
	Name      string // entity.action
	Entity    string
	Action    string
	Class     string
	Shielding string
	Financial bool
	Window    time.Duration // the dedupe window on the harness's clock; 0: none declared (never expires)
	Examples  []map[string]any
	Rejected  map[string]any // nil: none declared
	Effects   bool           // it makes an external effect per execution (RegistryEntry.HasEffects)
}

// jsonObject decodes a JSON object keeping numbers as written.
func jsonObject(raw json.RawMessage) (map[string]any, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	var m map[string]any
	if d.Decode(&m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// External reports whether its effects land at the effect sink: the
// registry declares it ("effects"), or, with nothing declared, it is an I3
// command (RegistryEntry.HasEffects).
func (t idsCommandType) External() bool { return t.Effects }

// idsLogical is one logical command: one envelope, one key.
type idsLogical struct {
	n        int
	typ      idsCommandType
	tenant   string
	actor    string
	effActor string // "" unless sent on behalf of someone
	target   string
	args     map[string]any
	kind     string // command_kind, "" when left out
	key      string // the idempotency key (hex)
	recKey   string // tenant + "/" + key: the history's Key
	fp       string // the envelope's fingerprint digest (Input.Body)
	first    time.Time

	mu         sync.Mutex
	terminal   bool   // some delivery got a terminal answer
	executed   bool   // ... or a status read said executed
	origID     string // the original command_id, once an answer named it
	commandIDs int    // how many command_ids were drawn for it
}

// envelope renders one delivery: the logical command with a command_id and,
// when fresh, new ephemeral fields; withKey adds the client-computed key.
func (c *idsLogical) envelope(commandID string, rnd *mrand.Rand, withKey bool) []byte {
	env := map[string]any{
		"command_id": commandID,
		"tenant_id":  c.tenant,
		"actor_id":   c.actor,
		"intent":     c.intentObj(),
		"args":       c.args,
		"timestamp":  time.Now().UTC().Format(time.RFC3339Nano),
		"message_id": fmt.Sprintf("wamid.%016x", rnd.Uint64()),
		"trace_id":   fmt.Sprintf("%016x", rnd.Uint64()),
	}
	if c.effActor != "" {
		env["effective_actor_id"] = c.effActor
	}
	if c.kind != "" {
		env["command_kind"] = c.kind
	}
	if withKey {
		env["idempotency_key"] = c.key
	}
	b, _ := json.Marshal(env)
	return b
}

func (c *idsLogical) intentObj() map[string]any {
	in := map[string]any{"entity": c.typ.Entity, "action": c.typ.Action}
	if c.target != "" {
		in["target"] = c.target
	}
	return in
}

// spec returns the logical command as the binding's envelope (no
// command_id, no ephemeral fields): its Key and Fingerprint are the
// binding's (wire.go).
func (c *idsLogical) spec() Envelope {
	args, _ := json.Marshal(c.args)
	return Envelope{TenantID: c.tenant, ActorID: c.actor, EffectiveActorID: c.effActor,
		Intent: Intent{Entity: c.typ.Entity, Action: c.typ.Action, Target: c.target}, Args: args, CommandKind: c.kind}
}

// idsWorkload is the state of one IDS run shared by its goroutines.
type idsWorkload struct {
	cfg   IDSConfig
	start time.Time
	http  *client.Client
	rec   *chaos.Recorder
	types []idsCommandType

	mu       sync.Mutex
	logical  []*idsLogical // every logical command, in creation order
	recent   []*idsLogical // the latest ones, for duplicates from other workers
	nextCmd  atomic.Int64
	clientID atomic.Int64
	refused  atomic.Int64 // deliveries refused for a reason the workload did not mean (400, 401, 403, 404, 409, problem 422)
	open     atomic.Int64 // deliveries under way
	phase    atomic.Value
	fault    atomic.Value
	minted   atomic.Int64 // logical commands created
}

// The tenants and actors of the pool.
var (
	idsTenants = []string{"acme", "globex", "initech"}
	idsActors  = []string{"alice", "bob", "carol"}
)

// idsRecent bounds the pool that duplicates are drawn from.
const idsRecent = 256

// idsMaxDeliveries bounds the deliveries of one logical command by one
// driver; idsMaxPolls the status reads between two of them.
const (
	idsMaxDeliveries = 40
	idsMaxPolls      = 40
)

// RunIDS carries out one IDS chaos run. It returns what was recorded even
// when ctx ends early (then with ctx's error).
func RunIDS(ctx context.Context, cfg IDSConfig) (*IDSResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	tr := client.NewTransport()
	tr.MaxConnsPerHost = 0
	tr.ResponseHeaderTimeout = cfg.RequestTimeout
	c, err := client.New(cfg.BaseURL, client.Options{Name: "chaos-ids", Timeout: cfg.RequestTimeout, Replicas: cfg.Replicas,
		HTTP: &http.Client{Transport: tr, Timeout: cfg.RequestTimeout}})
	if err != nil {
		return nil, fmt.Errorf("chaos ids: %w", err)
	}
	w := &idsWorkload{cfg: cfg, http: c}
	w.phase.Store("registry")
	w.fault.Store("")
	w.clientID.Store(0)
	types, err := w.readRegistry(ctx)
	if err != nil {
		return nil, err
	}
	w.types = types
	var s1 []string
	for _, t := range types {
		if t.Shielding == "S1" {
			s1 = append(s1, t.Name)
		}
	}
	cfg.Sink.HonourKeys(s1...)
	return w.run(ctx)
}

// get sends one unrecorded GET (registry, evidence) and decodes a 200.
func (w *idsWorkload) get(ctx context.Context, path string, into any) (int, error) {
	resp, err := w.http.Do(ctx, client.Request{Method: http.MethodGet, Path: path, Header: w.header()})
	if err != nil {
		return 0, err
	}
	if resp.Exchange.Err != "" {
		return 0, errors.New(resp.Exchange.Err)
	}
	if resp.Status != http.StatusOK {
		return resp.Status, fmt.Errorf("GET %s: %d", path, resp.Status)
	}
	if err := json.Unmarshal(resp.Body, into); err != nil {
		return resp.Status, fmt.Errorf("GET %s: %w", path, err)
	}
	return resp.Status, nil
}

func (w *idsWorkload) header() http.Header {
	h := http.Header{}
	if w.cfg.APIKey != "" {
		h.Set(idsHeaderAPIKey, w.cfg.APIKey)
	}
	return h
}

// readRegistry reads GET /registry (a few tries) and keeps the commands the
// workload can send: mutations (I1-I3) that need no confirmation.
func (w *idsWorkload) readRegistry(ctx context.Context) ([]idsCommandType, error) {
	var reg idsRegistry
	var err error
	for try := 0; try < 5; try++ {
		if _, err = w.get(ctx, idsPathRegistry, &reg); err == nil {
			break
		}
		chaos.Sleep(ctx, 200*time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("chaos ids: the registry: %w", err)
	}
	var out []idsCommandType
	for _, c := range reg.Commands {
		entity, action, ok := strings.Cut(c.Command, ".")
		if !ok || c.RequiresConfirmation || !slices.Contains([]string{"I1", "I2", "I3"}, c.Class) {
			continue
		}
		t := idsCommandType{Name: c.Command, Entity: entity, Action: action, Class: c.Class, Shielding: c.Shielding, Financial: c.Financial,
			Effects: RegistryEntry{Class: c.Class, Effects: c.Effects}.HasEffects()}
		if c.TTLSeconds != nil {
			t.Window = time.Duration(float64(*c.TTLSeconds) * float64(time.Second) / w.cfg.TimeScale)
		}
		for _, raw := range c.ArgsExamples {
			if m, ok := jsonObject(raw); ok {
				t.Examples = append(t.Examples, m)
			}
		}
		if m, ok := jsonObject(c.ArgsRejected); ok {
			t.Rejected = m
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, errors.New("chaos ids: the registry declares no mutation that needs no confirmation: nothing to send")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (w *idsWorkload) run(ctx context.Context) (*IDSResult, error) {
	cfg := w.cfg
	master := mrand.New(mrand.NewPCG(cfg.Seed, 0x1d5c1d5))
	schedRnd := mrand.New(mrand.NewPCG(master.Uint64(), master.Uint64()))
	list := make([]faults.Fault, 0, len(cfg.Faults))
	for _, f := range cfg.Faults {
		switch ff := f.(type) {
		case *faults.RemoteFailpoint:
			if ff.Trigger == nil {
				cp := *ff
				trnd := mrand.New(mrand.NewPCG(master.Uint64(), 77))
				var tmu sync.Mutex
				cp.Trigger = func(ctx context.Context) error {
					tmu.Lock()
					c := w.mint(trnd)
					tmu.Unlock()
					w.deliverOnce(ctx, c, mrand.New(mrand.NewPCG(uint64(c.n), 78)))
					return nil
				}
				f = &cp
			}
		}
		if f.Name() == "storm" {
			f = &idsStorm{w: w}
		}
		list = append(list, chaos.Tracked{Fault: f, Current: &w.fault})
	}
	schedule := faults.NewSchedule(schedRnd, list, cfg.Duration, cfg.ScheduleOptions)
	var tl faults.Timeline

	w.start = time.Now()
	w.rec = cfg.Recorder
	if w.rec == nil {
		w.rec = chaos.NewRecorder(w.start, cfg.MaxOps)
	}
	w.start = w.rec.Start()
	if cfg.TimeScaleAssumed {
		w.phase.Store("windows")
		if err := w.learnWindows(ctx, mrand.New(mrand.NewPCG(cfg.Seed, 0x71d0))); err != nil {
			return nil, err
		}
	}
	res := &IDSResult{Start: w.start, Schedule: schedule}
	for _, t := range w.types {
		res.Commands = append(res.Commands, t.Name)
	}
	w.phase.Store("faults")
	cfg.Logger.Info("chaos ids: start", "seed", cfg.Seed, "duration", cfg.Duration, "workers", cfg.Workers,
		"faults", len(list), "schedule", len(schedule), "commands", res.Commands)

	faultCtx, stopFaults := context.WithTimeout(ctx, faults.RunBound(cfg.Duration, cfg.ScheduleOptions))
	defer stopFaults()
	loadCtx, stopLoad := context.WithCancel(ctx) // ended by the schedule (faults.RunLoad): at Duration, or once every fault had its turn
	defer stopLoad()
	drainCtx, stopDrain := chaos.DrainAfter(ctx, loadCtx, cfg.DrainTimeout)
	defer stopDrain()

	faultsDone := make(chan error, 1)
	go func() { faultsDone <- faults.RunLoad(faultCtx, cfg.Duration, schedule, list, &tl, stopLoad) }()
	progDone := make(chan struct{})
	if cfg.Progress != nil {
		go w.progress(drainCtx, progDone)
	} else {
		close(progDone)
	}
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		rnd := mrand.New(mrand.NewPCG(master.Uint64(), uint64(i)))
		wg.Go(func() { w.submitter(loadCtx, drainCtx, rnd) })
	}
	<-loadCtx.Done()
	faultErr := <-faultsDone
	w.phase.Store("drain")
	w.fault.Store("")
	// Every logical command not yet answered terminally is driven again
	// (a storm's key, one whose driver gave up): the same envelope.
	wg.Wait()
	finishRnd := mrand.New(mrand.NewPCG(master.Uint64(), 99))
	w.finishAll(drainCtx, finishRnd)
	drained := w.waitOutbox(drainCtx) && w.allSettled()
	res.Drained = drained && drainCtx.Err() == nil

	// Evidence of every key, then the sink's effects.
	w.phase.Store("evidence")
	w.mu.Lock()
	nkeys := len(w.logical)
	w.mu.Unlock()
	evCtx, stopEv := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second+time.Duration(nkeys)*2*time.Millisecond)
	res.Keys = w.readEvidence(evCtx)
	stopEv()
	stopDrain()
	<-progDone

	res.End = time.Now()
	res.Timeline = tl.Injections()
	var dropped int
	res.History, dropped = w.rec.History()
	res.Ledger = w.ledger()
	res.Series = chaos.Series(res.History, time.Second)
	var errs []error
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("chaos ids: %d operations not recorded past the bound of %d", dropped, cfg.MaxOps))
	}
	if n := w.refused.Load(); n > 0 {
		cfg.Logger.Warn("chaos ids: deliveries refused for a reason the workload did not mean", "n", n)
	}
	if faultErr != nil {
		cfg.Logger.Warn("chaos ids: some injections failed", "err", faultErr)
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("chaos ids: %w", ctx.Err()))
	}
	return res, errors.Join(errs...)
}

func (w *idsWorkload) progress(ctx context.Context, done chan<- struct{}) {
	chaos.ReportProgress(ctx, done, time.Second, w.start, &w.phase, &w.fault, func() chaos.Progress {
		return chaos.Progress{Ops: w.rec.Len(), Unknown: w.rec.Unknown(), Published: int(w.minted.Load()), Executed: len(w.cfg.Sink.AllEffects())}
	}, w.cfg.Progress)
}

// mint creates a new logical command from rnd.
func (w *idsWorkload) mint(rnd *mrand.Rand) *idsLogical {
	return w.mintOf(w.types[rnd.IntN(len(w.types))], rnd)
}

// mintLong creates a new logical command of a type whose window is long
// (none, or a minute or more on the harness's clock), for a storm; of any
// type when none is.
func (w *idsWorkload) mintLong(rnd *mrand.Rand) *idsLogical {
	var long []idsCommandType
	for _, t := range w.types {
		if t.Window == 0 || t.Window >= time.Minute {
			long = append(long, t)
		}
	}
	if len(long) == 0 {
		return w.mint(rnd)
	}
	return w.mintOf(long[rnd.IntN(len(long))], rnd)
}

func (w *idsWorkload) mintOf(typ idsCommandType, rnd *mrand.Rand) *idsLogical {
	n := int(w.nextCmd.Add(1))
	c := &idsLogical{n: n, typ: typ, tenant: idsTenants[rnd.IntN(len(idsTenants))], first: time.Now()}
	c.actor = idsActors[rnd.IntN(len(idsActors))]
	if rnd.IntN(100) < 20 {
		// A system retry on behalf of a user (IDS §VII.E).
		c.effActor, c.actor = c.actor, "retry-bot"
	}
	c.target = fmt.Sprintf("%s-%s-%d", typ.Entity, w.cfg.RunID, n)
	c.args = idsArgs(typ, n, rnd)
	if rnd.IntN(2) == 0 {
		c.kind = typ.Class
	}
	env := c.spec()
	c.key = env.MustKey()
	c.recKey = c.tenant + "/" + c.key
	fp, _ := env.Fingerprint()
	c.fp = fp[:16]
	w.minted.Add(1)
	w.mu.Lock()
	w.logical = append(w.logical, c)
	w.recent = append(w.recent, c)
	if len(w.recent) > idsRecent {
		w.recent = w.recent[len(w.recent)-idsRecent:]
	}
	w.mu.Unlock()
	return c
}

// idsArgs draws the args of a command: one of the registry's args_examples
// (each logical command has a target of its own, so examples repeat
// safely), now and then its args_rejected (a terminal 422 rejected
// outcome, replayed like any). A registry without examples gets a guess:
// payment.capture {amount_minor, currency}, refund.issue {amount_minor,
// payment_ref}, another financial command an amount and a currency,
// anything else a text.
func idsArgs(typ idsCommandType, n int, rnd *mrand.Rand) map[string]any {
	if len(typ.Examples) > 0 {
		if typ.Rejected != nil && rnd.IntN(100) < 4 {
			return typ.Rejected
		}
		return typ.Examples[rnd.IntN(len(typ.Examples))]
	}
	amount := 100 + rnd.IntN(99900)
	if rnd.IntN(100) < 4 {
		amount = 0
	}
	switch {
	case typ.Name == "refund.issue":
		return map[string]any{"amount_minor": amount, "payment_ref": fmt.Sprintf("pay-%d", n)}
	case typ.Financial || typ.Name == "payment.capture":
		return map[string]any{"amount_minor": amount, "currency": []string{"EUR", "USD", "BRL"}[rnd.IntN(3)]}
	}
	return map[string]any{"text": fmt.Sprintf("chaos note %d", n)}
}

// pick returns a recent logical command whose window leaves room for
// another delivery, or nil.
func (w *idsWorkload) pick(rnd *mrand.Rand) *idsLogical {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.recent) == 0 {
		return nil
	}
	c := w.recent[rnd.IntN(len(w.recent))]
	if !c.inWindow() {
		return nil
	}
	return c
}

// inWindow reports whether a delivery now is well within the command's
// dedupe window (half of it): past the window it MAY execute again
// (IDS §VIII.C), which the effect check would call a duplicate.
func (c *idsLogical) inWindow() bool {
	return c.typ.Window == 0 || time.Since(c.first) < c.typ.Window/2
}

// submitter creates and delivers logical commands until loadCtx ends:
// mostly new ones, driven to a terminal answer; some recent ones again
// (a duplicate, possibly concurrent with their own driver); some in a
// small burst of concurrent identical deliveries.
func (w *idsWorkload) submitter(loadCtx, drainCtx context.Context, rnd *mrand.Rand) {
	for loadCtx.Err() == nil && !w.rec.Full() {
		p := rnd.IntN(100)
		switch {
		case p < 60:
			c := w.mint(rnd)
			w.drive(loadCtx, drainCtx, c, rnd)
			if rnd.IntN(100) < 30 && c.inWindow() {
				// A duplicate after success: must replay.
				w.deliverOnce(drainCtx, c, rnd)
			}
		case p < 85:
			if c := w.pick(rnd); c != nil {
				w.drive(loadCtx, drainCtx, c, rnd)
			}
		default:
			c := w.pick(rnd)
			if c == nil {
				c = w.mint(rnd)
			}
			n := 2 + rnd.IntN(4)
			seeds := make([]uint64, n)
			for i := range seeds {
				seeds[i] = rnd.Uint64()
			}
			var bg sync.WaitGroup
			barrier := make(chan struct{})
			for i := range n {
				bg.Go(func() {
					<-barrier
					w.drive(loadCtx, drainCtx, c, mrand.New(mrand.NewPCG(seeds[i], 3)))
				})
			}
			close(barrier)
			bg.Wait()
		}
	}
}

// delivery is what one POST /commands answered.
type idsAnswer struct {
	op        checker.Operation
	statusURL string
	retryIn   time.Duration
}

// idsBody is the part of an answer's body the workload reads.
type idsBody struct {
	CommandID      string `json:"command_id"`
	IdempotencyKey string `json:"idempotency_key"`
	Status         string `json:"status"`
	StatusURL      string `json:"status_url"`
	OutcomeRef     string `json:"outcome_ref"`
	Code           string `json:"code"`
}

// commandID draws the command_id of a delivery: the command's first one,
// or (now and then) a new one, as a client that lost track of it sends.
func (w *idsWorkload) commandID(c *idsLogical, rnd *mrand.Rand) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	if c.commandIDs == 0 || rnd.IntN(100) < 30 {
		i = c.commandIDs
		c.commandIDs++
	}
	return fmt.Sprintf("cmd-%s-%d-%d", w.cfg.RunID, c.n, i)
}

// post sends one delivery of c and records it.
func (w *idsWorkload) post(ctx context.Context, c *idsLogical, body []byte) idsAnswer {
	id := int(w.clientID.Add(1))
	op := checker.Operation{ClientID: id, Kind: checker.OpPublish, Key: c.recKey, KeyID: c.tenant,
		Input: checker.Input{Body: c.fp}, Call: w.rec.Now()}
	w.open.Add(1)
	// Spread: on several replicas, each delivery of the logical command
	// goes to the next one (a retry never lands where its original did).
	resp, err := w.http.Do(ctx, client.Request{Method: http.MethodPost, Path: idsPathCommands, Header: w.header(), Body: body,
		Spread: c.recKey})
	w.open.Add(-1)
	op.Return = w.rec.Now()
	op.Outcome = client.TransportOutcome(err)
	a := idsAnswer{}
	if err == nil {
		op.Output.Status = resp.Status
		op.Output.Body = chaos.Digest(resp.Body)
		var b idsBody
		json.Unmarshal(resp.Body, &b)
		op.Output.ID = b.CommandID
		op.Output.State = b.Status
		op.Output.Ref = b.OutcomeRef
		a.statusURL = b.StatusURL
		switch {
		case resp.Exchange.Err != "" || resp.Status >= 500:
			// A body cut short, or a server error: it may have happened.
			op.Outcome = verdict.OutcomeUnknown
		case resp.Status == http.StatusTooManyRequests:
			// Retry-After counts real seconds, already scaled by the target
			// (docs/ids-binding.md, "Time scale"); drive waits at most 2 s.
			secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			a.retryIn = time.Duration(max(secs, 1)) * time.Second
		case b.IdempotencyKey != "" && b.IdempotencyKey != c.key:
			w.cfg.Logger.Warn("chaos ids: the target answered another key than the binding's", "tenant", c.tenant,
				"want", c.key, "got", b.IdempotencyKey)
		}
		if resp.Status >= 400 && resp.Status < 500 && resp.Status != http.StatusTooManyRequests && b.Status == "" {
			w.refused.Add(1)
			w.cfg.Logger.Debug("chaos ids: delivery refused", "status", resp.Status, "code", b.Code, "body", string(resp.Body))
		}
	}
	w.rec.Op(op)
	a.op = op
	if idsIsTerminal(&op) {
		c.mu.Lock()
		c.terminal = true
		if op.Output.State == "executed" {
			c.executed = true
		}
		if c.origID == "" {
			c.origID = op.Output.ID
		}
		c.mu.Unlock()
	}
	if op.Output.State == "processing" && op.Output.ID != "" {
		c.mu.Lock()
		if c.origID == "" {
			c.origID = op.Output.ID
		}
		c.mu.Unlock()
	}
	return a
}

func idsIsTerminal(op *checker.Operation) bool {
	if op.Outcome != verdict.OutcomeOK || op.Output.Status >= 500 {
		return false
	}
	switch op.Output.State {
	case "executed", "rejected", "failed", "compensated":
		return true
	}
	return false
}

// deliverOnce sends one delivery of c (a new command_id or new ephemeral
// fields now and then), recorded; it drives nothing.
func (w *idsWorkload) deliverOnce(ctx context.Context, c *idsLogical, rnd *mrand.Rand) idsAnswer {
	return w.post(ctx, c, c.envelope(w.commandID(c, rnd), rnd, rnd.IntN(100) < 30))
}

// drive delivers c until a terminal answer: an unknown outcome (no answer,
// a body cut short, a 5xx) is resent with the same envelope; a 202
// processing is followed by status reads until the command is no longer
// in progress, then resent to get the outcome; a 429 waits as told. It
// gives up at the drain's end, past half the command's window, when the
// target refuses the delivery outright, or after idsMaxDeliveries. New
// logical commands start only until loadCtx ends; driving goes on in the
// drain.
func (w *idsWorkload) drive(loadCtx, drainCtx context.Context, c *idsLogical, rnd *mrand.Rand) {
	// One envelope for the whole drive, now and then a fresh command_id or
	// fresh ephemeral fields on a resend: the same logical command.
	cmdID := w.commandID(c, rnd)
	body := c.envelope(cmdID, rnd, rnd.IntN(100) < 30)
	backoff := 10 * time.Millisecond
	for try := 0; try < idsMaxDeliveries && drainCtx.Err() == nil && !w.rec.Full() && c.inWindow(); try++ {
		if try > 0 && rnd.IntN(100) < 25 {
			body = c.envelope(w.commandID(c, rnd), rnd, rnd.IntN(100) < 30)
		}
		a := w.post(drainCtx, c, body)
		op := a.op
		switch {
		case idsIsTerminal(&op):
			return
		case op.Outcome == verdict.OutcomeOK && op.Output.Status == http.StatusAccepted:
			if w.poll(drainCtx, c, a.statusURL, rnd) {
				backoff = 10 * time.Millisecond
				continue // resend to get the outcome
			}
		case op.Outcome == verdict.OutcomeOK && op.Output.Status == http.StatusTooManyRequests:
			chaos.Sleep(drainCtx, min(a.retryIn, 2*time.Second)+time.Duration(rnd.IntN(50))*time.Millisecond)
			continue
		case op.Outcome == verdict.OutcomeOK && op.Output.Status < 500:
			return // refused outright (400, 401, 403, 409, 422 problem): resending changes nothing
		}
		chaos.Sleep(drainCtx, backoff+time.Duration(rnd.Int64N(int64(backoff))))
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// poll reads GET /commands/{original} until the command is no longer in
// progress or the target does not know it (true), or a bound is reached
// (false).
func (w *idsWorkload) poll(ctx context.Context, c *idsLogical, statusURL string, rnd *mrand.Rand) bool {
	path := statusURL
	if u, err := url.Parse(statusURL); err != nil || !strings.HasPrefix(u.Path, idsPathCommands+"/") || u.Host != "" {
		c.mu.Lock()
		id := c.origID
		c.mu.Unlock()
		if id == "" {
			return false
		}
		path = idsPathCommands + "/" + url.PathEscape(id)
	}
	wait := 10 * time.Millisecond
	for i := 0; i < idsMaxPolls && ctx.Err() == nil && !w.rec.Full(); i++ {
		chaos.Sleep(ctx, wait+time.Duration(rnd.Int64N(int64(wait))))
		wait = min(2*wait, 300*time.Millisecond)
		op := checker.Operation{ClientID: int(w.clientID.Add(1)), Kind: checker.OpStatus, Key: c.recKey, KeyID: c.tenant, Call: w.rec.Now()}
		resp, err := w.http.Do(ctx, client.Request{Method: http.MethodGet, Path: path, Header: w.header()})
		op.Return = w.rec.Now()
		op.Outcome = client.TransportOutcome(err)
		if err == nil {
			op.Output.Status = resp.Status
			var b idsBody
			json.Unmarshal(resp.Body, &b)
			op.Output.ID, op.Output.State = b.CommandID, b.Status
			if resp.Exchange.Err != "" || resp.Status >= 500 {
				op.Outcome = verdict.OutcomeUnknown
			}
		}
		w.rec.Op(op)
		if op.Outcome == verdict.OutcomeOK && op.Output.Status == http.StatusNotFound {
			// The target does not know the command (any more): reading its
			// status again tells nothing new, a resend tells its outcome.
			return true
		}
		if op.Outcome != verdict.OutcomeOK || op.Output.Status != http.StatusOK {
			continue
		}
		if op.Output.State == "executed" {
			c.mu.Lock()
			c.executed = true
			c.mu.Unlock()
		}
		if op.Output.State != "in_progress" && op.Output.State != "" {
			return true
		}
	}
	return false
}

// finishAll drives, in the drain, every logical command that has no
// terminal answer yet (a storm's key, one whose driver gave up), bounded
// by the drain.
func (w *idsWorkload) finishAll(ctx context.Context, rnd *mrand.Rand) {
	w.mu.Lock()
	var todo []*idsLogical
	for _, c := range w.logical {
		c.mu.Lock()
		done := c.terminal
		c.mu.Unlock()
		if !done && c.inWindow() {
			todo = append(todo, c)
		}
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
				w.drive(ctx, ctx, todo[j], r)
			}
		})
	}
	wg.Wait()
}

// allSettled reports whether every logical command got a terminal answer
// (or left its window).
func (w *idsWorkload) allSettled() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.logical {
		c.mu.Lock()
		done := c.terminal || !c.inWindow()
		c.mu.Unlock()
		if !done {
			return false
		}
	}
	return true
}

// waitOutbox waits until every executed I3 command has its effect at the
// sink (an outbox dispatches after it answers), then for the sink to be
// quiet a moment (a late duplicate dispatch is counted too). It reports
// whether every effect arrived before ctx ended.
func (w *idsWorkload) waitOutbox(ctx context.Context) bool {
	w.phase.Store("outbox")
	w.mu.Lock()
	var want []*idsLogical
	for _, c := range w.logical {
		c.mu.Lock()
		if c.executed && c.typ.External() {
			want = append(want, c)
		}
		c.mu.Unlock()
	}
	w.mu.Unlock()
	for ctx.Err() == nil {
		missing := 0
		for _, c := range want {
			if w.cfg.Sink.Effects(c.key) == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		chaos.Sleep(ctx, 50*time.Millisecond)
	}
	// Quiet: no new sink call for 300 ms (at most 3 s).
	last := len(w.cfg.Sink.AllCalls())
	quietSince := time.Now()
	for t := time.Now(); ctx.Err() == nil && time.Since(t) < 3*time.Second && time.Since(quietSince) < 300*time.Millisecond; {
		chaos.Sleep(ctx, 50*time.Millisecond)
		if n := len(w.cfg.Sink.AllCalls()); n != last {
			last, quietSince = n, time.Now()
		}
	}
	return ctx.Err() == nil
}

// readEvidence reads GET /evidence of every key (a few tries each).
func (w *idsWorkload) readEvidence(ctx context.Context) []IDSKey {
	w.mu.Lock()
	cmds := append([]*idsLogical(nil), w.logical...)
	w.mu.Unlock()
	out := make([]IDSKey, len(cmds))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(16, max(1, len(cmds))) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(cmds) {
					return
				}
				c := cmds[i]
				k := IDSKey{Key: c.recKey, Command: c.typ.Name, External: c.typ.External()}
				q := url.Values{"tenant_id": {c.tenant}, "idempotency_key": {c.key}}
				for try := 0; try < 5 && ctx.Err() == nil; try++ {
					var body struct {
						Evidence []IDSEvidenceItem `json:"evidence"`
					}
					st, err := w.get(ctx, idsPathEvidence+"?"+q.Encode(), &body)
					k.EvidenceStatus, k.Evidence, k.EvidenceErr = st, body.Evidence, ""
					if err == nil {
						break
					}
					k.EvidenceErr = err.Error()
					if st != 0 && st < 500 {
						break
					}
					chaos.Sleep(ctx, 100*time.Millisecond)
				}
				out[i] = k
			}
		})
	}
	wg.Wait()
	for i := range out {
		if out[i].Key == "" { // not reached: ctx ended
			out[i] = IDSKey{Key: cmds[i].recKey, Command: cmds[i].typ.Name, External: cmds[i].typ.External(), EvidenceErr: "not read: out of time"}
		}
	}
	return out
}

// ledger turns the sink's effects into the run's ledger (tenant/key).
func (w *idsWorkload) ledger() checker.Ledger {
	var l checker.Ledger
	for _, e := range w.cfg.Sink.AllEffects() {
		if e.At.Before(w.start) {
			continue
		}
		l.Effects = append(l.Effects, checker.Effect{Key: e.Tenant + "/" + e.Key, Intent: e.EffectID, Worker: e.CommandID,
			At: int64(e.At.Sub(w.start))})
	}
	return l
}

// idsStorm is the duplicate storm of an IDS run: n identical envelopes (the
// same bytes: one command_id) of one logical command, released by one
// barrier. One effect, one outcome must come of it; the deliveries past the
// registry's duplicate_rate_limit are refused (429), which is no outcome.
type idsStorm struct {
	w *idsWorkload
}

var _ faults.Fault = (*idsStorm)(nil)

func (s *idsStorm) Name() string      { return "storm" }
func (s *idsStorm) Kind() faults.Kind { return faults.KindStorm }
func (s *idsStorm) Available() error  { return nil }

func (s *idsStorm) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	w := s.w
	n := w.cfg.StormMin
	if w.cfg.StormMax > n {
		n += rnd.IntN(w.cfg.StormMax - n + 1)
	}
	// A fresh command half the time, a recent one (maybe being driven)
	// else, if its window leaves a long margin: hundreds of deliveries
	// take a while to decide, and one decided past the window MAY execute
	// again (IDS §VIII.C).
	var c *idsLogical
	if rnd.IntN(2) == 0 {
		if p := w.pick(rnd); p != nil && (p.typ.Window == 0 || p.typ.Window-time.Since(p.first) > 30*time.Second) {
			c = p
		}
	}
	if c == nil {
		c = w.mintLong(rnd)
	}
	body := c.envelope(w.commandID(c, rnd), rnd, false)
	in, err := faults.Storm(ctx, n, func(ctx context.Context, i int) {
		w.post(ctx, c, body)
	})
	in.Params["key"] = c.recKey
	in.Params["command"] = c.typ.Name
	return in, err
}
