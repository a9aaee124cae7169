package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
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

// The a2a chaos workload (docs/a2a-binding.md). idscheck plays every
// agent and the operator:
//
//   - senders enqueue tasks, each with an id of their own choosing (a
//     retry of an enqueue is the same body: a second delivery is answered
//     409 task_exists): idempotent with a key, a later task under an earlier
//     one's (sender, recipient, kind, key) that the result cache must
//     answer, unsafe with and without a key, without metadata, idempotent
//     without a key; over several sender/recipient pairs and task kinds.
//     An unknown outcome is delivered again; now and then an enqueue is
//     delivered twice at once (a barrier) or again after its answer, and
//     duplicate storms deliver one enqueue hundreds of times;
//   - receivers lease tasks of their recipients, execute each at the effect
//     sink (an idempotent task with its key under command a2a.idempotent,
//     which the sink deduplicates; any other under a2a.unsafe keyed by the
//     task id, a new effect on every call), and post the result until a
//     terminal answer, sometimes twice. Some tasks are marked at their
//     making to be abandoned by their first receiver after its work and
//     before its result (a receiver's crash): their leases go stale;
//   - the operator runs the retry gate with "enabled": true and its bounds
//     (min lease age at the target's time scale, max attempts, max
//     requeues, scan limit), now and then a dry run; requeues a stale
//     unsafe task by hand under operator_accepted, an idempotent one under
//     idempotent, or forces an error; drains senders' results; compacts.
//
// The queue's own scheduler (COVENANT_A2A_AUTO_RETRY_*) runs beside it
// when the target turns it on (the bundled queue chaos starts does).
// After the load comes a drain: receivers lease and finish what is queued,
// and the gate runs (enabled) until a pass over in-flight tasks all older
// than the minimum lease age requeues nothing. Then the workload reads the
// audit log, every task's status, and the sink's calls into the Record.

// WorkloadConfig is one a2a chaos run.
type WorkloadConfig struct {
	BaseURL string // the target, through the network proxy when network faults run
	// Replicas are the target's other replicas (one queue behind several
	// processes over one store): the deliveries of one enqueue, and of one
	// result, go to one replica after the other (client.Options.Replicas);
	// other calls go round the replicas.
	Replicas []string
	APIKey   string
	// Sink is the effect sink the receivers call; nil: the workload hosts
	// its own on 127.0.0.1 (the queue never calls it: idscheck's receivers do).
	Sink *sink.Sink
	Seed uint64
	// RunID goes into every agent name, task id and key (default: random).
	RunID     string
	Duration  time.Duration
	Workers   int     // senders and receivers, half each (default 16)
	TimeScale float64 // the target's: the gate's minimum lease age is Covenant's 5 minutes divided by it
	// Faults are the usable faults; "storm" is replaced by the workload's
	// storm of identical enqueues, and a faults.RemoteFailpoint without a
	// Trigger gets one (a fresh task enqueued and leased, recorded).
	Faults             []faults.Fault
	ScheduleOptions    faults.ScheduleOptions
	StormMin, StormMax int
	RequestTimeout     time.Duration
	DrainTimeout       time.Duration // after Duration (default 20 s plus three minimum lease ages)
	MaxOps             int
	Recorder           *chaos.Recorder
	Logger             *slog.Logger
	Progress           func(chaos.Progress)
}

// WorkloadResult is what an a2a chaos run recorded.
type WorkloadResult struct {
	Start, End time.Time
	Schedule   []faults.Planned
	Timeline   []faults.Injection
	History    checker.History
	Ledger     checker.Ledger
	Record     Record
	Series     []chaos.Bucket
	Drained    bool
	Storms     int
}

// History operation kinds of the a2a workload (besides checker.OpStatus).
const (
	OpEnqueue    checker.OpKind = "enqueue"     // Key: task id; Input.Body: its class; Output.State, Ref "replayed"
	OpLease      checker.OpKind = "lease"       // Key/Output.ID: the task leased; Input.Worker: recipient; Input.Body: its key; Output.Token, Attempts
	OpResult     checker.OpKind = "result"      // Key: task id; Input.Token: lease id; Input.Body: status; Output.Ref "duplicate"
	OpRepair     checker.OpKind = "repair"      // Key: task id; Input.Body: action and posture
	OpRetryStale checker.OpKind = "retry-stale" // Input.Body: "enabled" or "dry-run"; the report is in the Record
	OpDrain      checker.OpKind = "drain"       // Key: the sender
	OpCompact    checker.OpKind = "compact"
)

// Sink commands of the receivers (docs/a2a-binding.md, the effect sink).
const (
	CommandIdempotent = "a2a.idempotent"
	CommandUnsafe     = "a2a.unsafe"
)

// Task classes.
const (
	ClassIdempotent = "idempotent"             // idempotent, with a key
	ClassCacheHit   = "idempotent-same-key"    // idempotent, the (sender, recipient, kind, key) of an earlier task
	ClassUnsafeKey  = "unsafe-with-key"        // unsafe, with a key
	ClassUnsafe     = "unsafe-without-key"     // unsafe, no key
	ClassNoMeta     = "no-metadata"            // no idempotency metadata: unsafe
	ClassIdemNoKey  = "idempotent-without-key" // idempotent, no key: the gate skips it
)

type wTask struct {
	TaskRecord
	body []byte
}

type workload struct {
	cfg        WorkloadConfig
	http       *client.Client
	sinkHTTP   *http.Client
	sink       *sink.Sink
	rec        *chaos.Recorder
	start      time.Time
	minAgeMS   int64
	senders    []string
	recipients []string
	pairs      [][2]int
	kinds      []string

	mu      sync.Mutex
	tasks   []*wTask
	byID    map[string]*wTask
	groups  []*wTask // idempotent tasks with a key: a later task may share their cache key
	reports []GateCall

	next     atomic.Int64
	clientID atomic.Int64
	storms   atomic.Int64
	loading  atomic.Bool // the load phase: receivers abandon what is marked
	phase    atomic.Value
	fault    atomic.Value
	bg       sync.WaitGroup
	drainCtx context.Context
}

func (c *WorkloadConfig) defaults() error {
	if c.BaseURL == "" {
		return errors.New("chaos a2a: no target URL")
	}
	if c.Workers <= 0 {
		c.Workers = 16
	}
	chaos.WorkloadKnobs{Duration: &c.Duration, TimeScale: &c.TimeScale, StormMin: &c.StormMin, StormMax: &c.StormMax,
		RequestTimeout: &c.RequestTimeout, MaxOps: &c.MaxOps, Logger: &c.Logger, RunID: &c.RunID}.Fill()
	return nil
}

// RunWorkload carries out one a2a chaos run. It returns what was recorded
// even when ctx ends early (then with ctx's error).
func RunWorkload(ctx context.Context, cfg WorkloadConfig) (*WorkloadResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	tr := client.NewTransport()
	tr.MaxConnsPerHost = 0
	tr.ResponseHeaderTimeout = cfg.RequestTimeout
	c, err := client.New(cfg.BaseURL, client.Options{Name: "chaos-a2a", APIKey: cfg.APIKey, Timeout: cfg.RequestTimeout, Replicas: cfg.Replicas,
		HTTP: &http.Client{Transport: tr, Timeout: cfg.RequestTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}})
	if err != nil {
		return nil, fmt.Errorf("chaos a2a: %w", err)
	}
	w := &workload{cfg: cfg, http: c, sink: cfg.Sink, byID: map[string]*wTask{},
		sinkHTTP: &http.Client{Timeout: 5 * time.Second, Transport: client.NewTransport()}}
	if w.sink == nil {
		if w.sink, err = sink.Start("127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("chaos a2a: effect sink: %w", err)
		}
		defer w.sink.Close()
	}
	w.sink.HonourKeys(CommandIdempotent)
	// Covenant's five minutes at the target's time scale, at least 50 ms.
	w.minAgeMS = max(50, int64(300000/cfg.TimeScale))
	for _, s := range []string{"planner", "ops"} {
		w.senders = append(w.senders, "agent:"+s+"-"+cfg.RunID)
	}
	for _, r := range []string{"billing", "mailer", "ledger"} {
		w.recipients = append(w.recipients, "agent:"+r+"-"+cfg.RunID)
	}
	w.pairs = [][2]int{{0, 0}, {0, 1}, {1, 0}, {1, 2}, {0, 2}}
	w.kinds = []string{"invoice.create", "mail.send", "ledger.write", ""}
	w.phase.Store("faults")
	w.fault.Store("")
	return w.run(ctx)
}

func (w *workload) run(ctx context.Context) (*WorkloadResult, error) {
	cfg := w.cfg
	master := mrand.New(mrand.NewPCG(cfg.Seed, 0xa2a))
	schedRnd := mrand.New(mrand.NewPCG(master.Uint64(), master.Uint64()))
	var list []faults.Fault
	for _, f := range cfg.Faults {
		if ff, ok := f.(*faults.RemoteFailpoint); ok && ff.Trigger == nil {
			cp := *ff
			trnd := mrand.New(mrand.NewPCG(master.Uint64(), 77))
			var tmu sync.Mutex
			cp.Trigger = func(ctx context.Context) error {
				// Over replicas the calls go round them, and the failpoint
				// is the first one's: drive until it fired (ctx ends then,
				// or at its bound).
				for ctx.Err() == nil {
					tmu.Lock()
					t := w.mint(trnd, ClassIdempotent, false)
					tmu.Unlock()
					w.deliver(ctx, t)
					w.receive(ctx, trnd, t.Recipient)
					if len(cfg.Replicas) == 0 {
						break
					}
				}
				return nil
			}
			f = &cp
		}
		if f.Name() == "storm" {
			f = &a2aStorm{w: w}
		}
		list = append(list, chaos.Tracked{Fault: f, Current: &w.fault})
	}
	schedule := faults.NewSchedule(schedRnd, list, cfg.Duration, cfg.ScheduleOptions)
	var tl faults.Timeline
	w.rec = cfg.Recorder
	if w.rec == nil {
		w.rec = chaos.NewRecorder(time.Now(), cfg.MaxOps)
	}
	w.start = w.rec.Start()
	res := &WorkloadResult{Start: w.start, Schedule: schedule}
	drainFor := cfg.DrainTimeout
	if drainFor <= 0 {
		drainFor = 20*time.Second + 3*time.Duration(w.minAgeMS)*time.Millisecond
	}
	cfg.Logger.Info("chaos a2a: start", "seed", cfg.Seed, "duration", cfg.Duration, "workers", cfg.Workers, "min_lease_age_ms", w.minAgeMS, "faults", len(list))

	faultCtx, stopFaults := context.WithTimeout(ctx, faults.RunBound(cfg.Duration, cfg.ScheduleOptions))
	defer stopFaults()
	loadCtx, stopLoad := context.WithCancel(ctx) // ended by the schedule (faults.RunLoad): at Duration, or once every fault had its turn
	defer stopLoad()
	drainCtx, stopDrain := chaos.DrainAfter(ctx, loadCtx, drainFor)
	defer stopDrain()
	w.drainCtx = drainCtx
	w.loading.Store(true)

	faultsDone := make(chan error, 1)
	go func() { faultsDone <- faults.RunLoad(faultCtx, cfg.Duration, schedule, list, &tl, stopLoad) }()
	progDone := make(chan struct{})
	if cfg.Progress != nil {
		go w.progress(drainCtx, progDone)
	} else {
		close(progDone)
	}
	nSend := max(1, cfg.Workers/2)
	nRecv := max(1, cfg.Workers-nSend)
	var senders, receivers sync.WaitGroup
	recvCtx, stopRecv := context.WithCancel(drainCtx)
	defer stopRecv()
	for i := range nSend {
		rnd := mrand.New(mrand.NewPCG(master.Uint64(), uint64(i)))
		senders.Go(func() { w.sender(loadCtx, rnd, i) })
	}
	for i := range nRecv {
		rnd := mrand.New(mrand.NewPCG(master.Uint64(), uint64(1000+i)))
		receivers.Go(func() {
			for recvCtx.Err() == nil && !w.rec.Full() {
				if !w.receive(recvCtx, rnd, w.recipients[(i+rnd.IntN(len(w.recipients)))%len(w.recipients)]) {
					chaos.Sleep(recvCtx, time.Duration(10+rnd.IntN(20))*time.Millisecond)
				}
			}
		})
	}
	opRnd := mrand.New(mrand.NewPCG(master.Uint64(), 4242))
	var operator sync.WaitGroup
	operator.Go(func() { w.operator(loadCtx, opRnd) })
	<-loadCtx.Done()
	faultErr := <-faultsDone
	w.loading.Store(false)
	w.phase.Store("drain")
	w.fault.Store("")
	senders.Wait()
	operator.Wait()
	w.bg.Wait()
	res.Drained = w.drain(drainCtx, opRnd)
	stopRecv()
	receivers.Wait()
	stopDrain()

	w.phase.Store("read")
	readCtx, stopRead := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	rec := w.readBack(readCtx)
	stopRead()
	<-progDone
	res.Record = rec
	res.End = time.Now()
	res.Timeline = tl.Injections()
	var dropped int
	res.History, dropped = w.rec.History()
	for _, e := range w.sink.AllEffects() {
		if e.At.Before(w.start) {
			continue
		}
		res.Ledger.Effects = append(res.Ledger.Effects, checker.Effect{Key: e.Key, Intent: e.EffectID, Worker: e.CommandID, At: int64(e.At.Sub(w.start))})
	}
	res.Series = chaos.Series(res.History, time.Second)
	res.Storms = int(w.storms.Load())
	var errs []error
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("chaos a2a: %d operations not recorded past the bound of %d", dropped, cfg.MaxOps))
	}
	if faultErr != nil {
		cfg.Logger.Warn("chaos a2a: some injections failed", "err", faultErr)
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("chaos a2a: %w", ctx.Err()))
	}
	return res, errors.Join(errs...)
}

func (w *workload) progress(ctx context.Context, done chan<- struct{}) {
	chaos.ReportProgress(ctx, done, time.Second, w.start, &w.phase, &w.fault, func() chaos.Progress {
		return chaos.Progress{Ops: w.rec.Len(), Unknown: w.rec.Unknown(), Published: int(w.next.Load()), Executed: len(w.sink.AllEffects())}
	}, w.cfg.Progress)
}

// mint makes a task of class (a ClassCacheHit without an earlier
// idempotent task is a ClassIdempotent), marked to be abandoned by its
// first receiver when abandon.
func (w *workload) mint(rnd *mrand.Rand, class string, abandon bool) *wTask {
	n := w.next.Add(1)
	t := &wTask{TaskRecord: TaskRecord{ID: fmt.Sprintf("t-%s-%06d", w.cfg.RunID, n), Class: class, Abandon: abandon}}
	w.mu.Lock()
	defer w.mu.Unlock()
	if class == ClassCacheHit && len(w.groups) > 0 {
		g := w.groups[len(w.groups)-1-rnd.IntN(min(len(w.groups), 64))]
		t.Sender, t.Recipient, t.Kind, t.Safety, t.Key, t.SameKeyAs = g.Sender, g.Recipient, g.Kind, g.Safety, g.Key, g.ID
	} else {
		if class == ClassCacheHit {
			t.Class = ClassIdempotent
		}
		p := w.pairs[rnd.IntN(len(w.pairs))]
		t.Sender, t.Recipient, t.Kind = w.senders[p[0]], w.recipients[p[1]], w.kinds[rnd.IntN(len(w.kinds))]
		key := fmt.Sprintf("%s:%s:%06d", t.Sender, t.Kind, n)
		switch t.Class {
		case ClassIdempotent:
			t.Safety, t.Key = SafetyIdempotentName, &key
		case ClassUnsafeKey:
			t.Safety, t.Key = SafetyUnsafeName, &key
		case ClassUnsafe:
			t.Safety = SafetyUnsafeName
		case ClassIdemNoKey:
			t.Safety = SafetyIdempotentName
		}
	}
	body := map[string]any{"id": t.ID, "sender": t.Sender, "recipient": t.Recipient, "intent_text": "idscheck chaos " + t.Class, "task_kind": t.Kind}
	if t.Safety != "" {
		m := map[string]any{"duplicate_safety": t.Safety}
		if t.Key != nil {
			m["key"] = *t.Key
		}
		body["idempotency"] = m
	}
	t.body, _ = json.Marshal(body)
	w.tasks = append(w.tasks, t)
	w.byID[t.ID] = t
	if t.Class == ClassIdempotent {
		w.groups = append(w.groups, t)
	}
	return t
}

// Wire names of duplicate safety.
const (
	SafetyIdempotentName = "idempotent"
	SafetyUnsafeName     = "unsafe"
)

func (w *workload) task(id string) *wTask {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byID[id]
}

// firstClasses are the senders' first tasks, each abandoned by its first
// receiver: an unsafe task with a key (the gate must never requeue it,
// though it carries a key), then one of each class (the third, idempotent
// with a key, the gate must requeue).
var firstClasses = []string{ClassUnsafeKey, ClassUnsafe, ClassIdempotent, ClassNoMeta, ClassIdemNoKey, ClassCacheHit}

func (w *workload) drawClass(rnd *mrand.Rand) string {
	switch p := rnd.IntN(100); {
	case p < 35:
		return ClassIdempotent
	case p < 50:
		return ClassCacheHit
	case p < 65:
		return ClassUnsafeKey
	case p < 78:
		return ClassUnsafe
	case p < 90:
		return ClassNoMeta
	default:
		return ClassIdemNoKey
	}
}

func (w *workload) sender(ctx context.Context, rnd *mrand.Rand, i int) {
	for n := 0; ctx.Err() == nil && !w.rec.Full(); n++ {
		class, abandon := w.drawClass(rnd), rnd.IntN(100) < 15
		switch n {
		case 0:
			class, abandon = firstClasses[i%len(firstClasses)], true
		case 1:
			// Every sender's second task reuses an earlier task's cache
			// key: a short run on a loaded machine makes a handful of
			// tasks, and a cache hit must be among them (a cache kept per
			// replica shows only there).
			class = ClassCacheHit
		}
		t := w.mint(rnd, class, abandon)
		switch p := rnd.IntN(100); {
		case p < 10: // the same enqueue delivered twice at once
			w.together(ctx, rnd, t, t)
		case p < 25: // delivered, then delivered again
			w.deliver(ctx, t)
			w.post(ctx, t)
		default:
			w.deliver(ctx, t)
		}
		chaos.Sleep(ctx, time.Duration(5+rnd.IntN(15))*time.Millisecond)
	}
}

// together delivers each of ts on its own goroutine, released by one barrier.
func (w *workload) together(ctx context.Context, rnd *mrand.Rand, ts ...*wTask) {
	barrier := make(chan struct{})
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Go(func() { <-barrier; w.deliver(ctx, t) })
	}
	close(barrier)
	wg.Wait()
}

// call sends one request and records it as op (Call, Return, Outcome,
// Output.Status filled); the body is decoded into out when it is JSON.
func (w *workload) call(ctx context.Context, op checker.Operation, method, path string, body []byte, out any) (checker.Operation, bool) {
	return w.callSpread(ctx, op, method, path, body, out, "")
}

// callSpread is call for a delivery of the logical request spread names
// (with replicas, each delivery of it goes to another replica).
func (w *workload) callSpread(ctx context.Context, op checker.Operation, method, path string, body []byte, out any, spread string) (checker.Operation, bool) {
	op.ClientID = int(w.clientID.Add(1))
	op.Call = w.rec.Now()
	h := http.Header{}
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	resp, err := w.http.Do(ctx, client.Request{Method: method, Path: path, Header: h, Body: body, Spread: spread})
	op.Return = w.rec.Now()
	op.Outcome = client.TransportOutcome(err)
	answered := false
	if err == nil {
		op.Output.Status = resp.Status
		switch {
		case resp.Exchange.Err != "" || resp.Status >= 500:
			op.Outcome = verdict.OutcomeUnknown
		default:
			answered = true
			if out != nil && len(resp.Body) > 0 {
				if json.Unmarshal(resp.Body, out) != nil && resp.Status < 300 {
					op.Outcome, answered = verdict.OutcomeUnknown, false
				}
			}
		}
	}
	return op, answered
}

type wireEntry struct {
	State   string `json:"state"`
	LeaseID string `json:"lease_id"`
	Attempt int    `json:"attempt"`
	Task    struct {
		ID          string `json:"id"`
		Sender      string `json:"sender"`
		Recipient   string `json:"recipient"`
		Idempotency *struct {
			DuplicateSafety string  `json:"duplicate_safety"`
			Key             *string `json:"key"`
		} `json:"idempotency"`
	} `json:"task"`
	LeasedAtMS int64 `json:"leased_at_ms"`
	Result     *struct {
		Status   string `json:"status"`
		Replayed bool   `json:"replayed"`
	} `json:"result"`
}

type wireAnswer struct {
	Entry     *wireEntry `json:"entry"`
	Duplicate bool       `json:"duplicate"`
	Error     string     `json:"error"`
}

// post sends one delivery of t's enqueue: true when terminal (201, or
// 409 task_exists: an earlier delivery stored it; any other 4xx).
func (w *workload) post(ctx context.Context, t *wTask) bool {
	var a wireAnswer
	op, ok := w.callSpread(ctx, checker.Operation{Kind: OpEnqueue, Key: t.ID, Input: checker.Input{Body: t.Class}}, http.MethodPost, "/a2a/tasks", t.body, &a, "enqueue "+t.ID)
	if ok && a.Entry != nil {
		op.Output.ID, op.Output.State, op.Output.Attempts = a.Entry.Task.ID, a.Entry.State, a.Entry.Attempt
		if a.Entry.Result != nil && a.Entry.Result.Replayed {
			op.Output.Ref = "replayed"
		}
	} else if ok {
		op.Output.State = a.Error
	}
	w.rec.Op(op)
	if ok && op.Output.Status != 201 && op.Output.Status != 409 {
		w.cfg.Logger.Debug("chaos a2a: an enqueue refused", "status", op.Output.Status, "error", a.Error)
	}
	return ok && op.Output.Status != 429
}

// deliver delivers t's enqueue until a terminal answer (bounded).
func (w *workload) deliver(ctx context.Context, t *wTask) {
	backoff := 10 * time.Millisecond
	for try := 0; try < 40 && ctx.Err() == nil && !w.rec.Full(); try++ {
		if w.post(ctx, t) {
			return
		}
		chaos.Sleep(ctx, backoff)
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// receive leases one task of recipient and works it: its effect at the
// sink, then its result (unless it is abandoned). It reports whether a
// task was leased.
func (w *workload) receive(ctx context.Context, rnd *mrand.Rand, recipient string) bool {
	var a wireAnswer
	body, _ := json.Marshal(map[string]string{"recipient": recipient})
	op, ok := w.call(ctx, checker.Operation{Kind: OpLease, Input: checker.Input{Worker: recipient}}, http.MethodPost, "/a2a/lease", body, &a)
	if !ok || op.Output.Status != 200 || a.Entry == nil {
		w.rec.Op(op)
		return false
	}
	e := a.Entry
	op.Key, op.Output.ID, op.Output.Token, op.Output.Attempts, op.Output.State = e.Task.ID, e.Task.ID, e.LeaseID, e.Attempt, e.State
	keyed := false
	key := ""
	if m := e.Task.Idempotency; m != nil && m.Key != nil {
		key = *m.Key
		op.Input.Body = key
		keyed = m.DuplicateSafety == SafetyIdempotentName && key != ""
	}
	w.rec.Op(op)
	w.execute(ctx, e.Task.ID, recipient, key, keyed)
	t := w.task(e.Task.ID)
	if t != nil && t.Abandon && e.Attempt == 1 && w.loading.Load() {
		return true // the receiver crashed after its work, before its result
	}
	status := "completed"
	if t != nil && t.failed() {
		status = "failed"
	}
	rb, _ := json.Marshal(map[string]any{"lease_id": e.LeaseID, "status": status, "content": map[string]string{"done": e.Task.ID}})
	backoff := 10 * time.Millisecond
	for try := 0; try < 40 && ctx.Err() == nil; try++ {
		if w.postResult(ctx, e.Task.ID, e.LeaseID, status, rb) {
			if rnd.IntN(100) < 10 {
				w.postResult(ctx, e.Task.ID, e.LeaseID, status, rb) // the same result again
			}
			break
		}
		chaos.Sleep(ctx, backoff)
		backoff = min(2*backoff, 500*time.Millisecond)
	}
	return true
}

// failed: one task in ten (by its id) ends failed, the same on every
// execution, so a re-execution posts the same result.
func (t *wTask) failed() bool {
	n, _ := strconv.Atoi(t.ID[len(t.ID)-6:])
	return n%10 == 7
}

func (w *workload) postResult(ctx context.Context, id, lease, status string, body []byte) bool {
	var a wireAnswer
	op, ok := w.callSpread(ctx, checker.Operation{Kind: OpResult, Key: id, Input: checker.Input{Token: lease, Body: status}}, http.MethodPost, "/a2a/tasks/"+url.PathEscape(id)+"/result", body, &a, "result "+id+" "+lease)
	if ok && a.Duplicate {
		op.Output.Ref = "duplicate"
	}
	if ok && a.Error != "" {
		op.Output.State = a.Error
	}
	w.rec.Op(op)
	return ok
}

// execute performs a task's external effect at the sink: an idempotent
// task with its key under CommandIdempotent (the key in the body and the
// header: the sink makes one effect per key), any other under
// CommandUnsafe keyed by its id (every call a new effect), called once.
func (w *workload) execute(ctx context.Context, id, recipient, key string, keyed bool) {
	cmd, k := CommandUnsafe, id
	if keyed {
		cmd, k = CommandIdempotent, key
	}
	b, _ := json.Marshal(map[string]any{"tenant_id": recipient, "idempotency_key": k, "command_id": id, "command": cmd, "args": map[string]any{}})
	tries := 1
	if keyed {
		tries = 3 // a keyed call is safe to repeat
	}
	for try := 0; try < tries && ctx.Err() == nil; try++ {
		req, _ := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, w.sink.URL()+sink.PathEffects, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if keyed {
			req.Header.Set(sink.HeaderKey, k)
		}
		resp, err := w.sinkHTTP.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return
			}
		}
	}
}

// GateCall is one answered POST /a2a/retry-stale of the workload.
type GateCall struct {
	Enabled  bool       `json:"enabled"`
	Call     int64      `json:"call"`
	Return   int64      `json:"ret"`
	Requeued []Requeued `json:"requeued"`
	Skipped  int        `json:"skipped"`
}

// Requeued is one entry of a gate report's requeued list.
type Requeued struct {
	TaskID  string `json:"task_id"`
	LeaseID string `json:"lease_id"`
	Attempt int    `json:"attempt"`
}

// gate runs POST /a2a/retry-stale (enabled with its bounds, or a dry run)
// and records its report: it returns how many it requeued (-1: no answer).
func (w *workload) gate(ctx context.Context, enabled bool, maxRequeues, scanLimit int) int {
	p := map[string]any{"min_lease_age_ms": w.minAgeMS, "max_attempts": 3, "max_requeues": maxRequeues, "scan_limit": scanLimit}
	mode := "dry-run"
	if enabled {
		p["enabled"], mode = true, "enabled"
	}
	b, _ := json.Marshal(p)
	var a struct {
		Report *struct {
			Requeued []Requeued       `json:"requeued"`
			Skipped  []map[string]any `json:"skipped"`
		} `json:"report"`
	}
	op, ok := w.call(ctx, checker.Operation{Kind: OpRetryStale, Input: checker.Input{Body: mode}}, http.MethodPost, "/a2a/retry-stale", b, &a)
	w.rec.Op(op)
	if !ok || op.Output.Status != 200 || a.Report == nil {
		return -1
	}
	w.mu.Lock()
	w.reports = append(w.reports, GateCall{Enabled: enabled, Call: op.Call, Return: op.Return, Requeued: a.Report.Requeued, Skipped: len(a.Report.Skipped)})
	w.mu.Unlock()
	return len(a.Report.Requeued)
}

// operator runs the gate, repairs stale leases by hand, drains senders'
// results and compacts, until ctx ends.
func (w *workload) operator(ctx context.Context, rnd *mrand.Rand) {
	every := time.Duration(max(20, min(w.minAgeMS/4, 500))) * time.Millisecond
	for ctx.Err() == nil && !w.rec.Full() {
		chaos.Sleep(ctx, every/2+time.Duration(rnd.Int64N(int64(every))))
		switch p := rnd.IntN(100); {
		case p < 55:
			w.gate(ctx, true, 1+rnd.IntN(8), 20+rnd.IntN(200))
		case p < 65:
			w.gate(ctx, false, 1+rnd.IntN(8), 100)
		case p < 80:
			w.repairOne(ctx, rnd)
		case p < 95:
			w.drainResults(ctx, w.senders[rnd.IntN(len(w.senders))])
		default:
			op, _ := w.call(ctx, checker.Operation{Kind: OpCompact}, http.MethodPost, "/a2a/compact", []byte("{}"), nil)
			w.rec.Op(op)
		}
	}
}

func (w *workload) drainResults(ctx context.Context, sender string) {
	b, _ := json.Marshal(map[string]string{"sender": sender})
	op, _ := w.call(ctx, checker.Operation{Kind: OpDrain, Key: sender}, http.MethodPost, "/a2a/results/drain", b, nil)
	w.rec.Op(op)
}

// inFlight lists the run's in-flight entries (stale ones only when
// stale), at most 1000.
func (w *workload) inFlight(ctx context.Context, stale bool) ([]wireEntry, bool) {
	path := "/a2a/queue?state_filter=in_flight&limit=1000"
	if stale {
		path += "&min_lease_age_ms=" + strconv.FormatInt(w.minAgeMS, 10)
	}
	var q struct {
		Tasks []wireEntry `json:"tasks"`
	}
	op, ok := w.call(ctx, checker.Operation{Kind: "queue"}, http.MethodGet, path, nil, &q)
	if !ok || op.Output.Status != 200 {
		return nil, false
	}
	var out []wireEntry
	for _, e := range q.Tasks {
		if w.task(e.Task.ID) != nil && e.State == "in_flight" {
			out = append(out, e)
		}
	}
	return out, true
}

// queued counts the run's queued tasks (-1: not read).
func (w *workload) queued(ctx context.Context) int {
	var q struct {
		Tasks []wireEntry `json:"tasks"`
	}
	op, ok := w.call(ctx, checker.Operation{Kind: "queue"}, http.MethodGet, "/a2a/queue?state_filter=queued&limit=1000", nil, &q)
	if !ok || op.Output.Status != 200 {
		return -1
	}
	n := 0
	for _, e := range q.Tasks {
		if e.State == "queued" {
			n++
		}
	}
	return n
}

// repairOne repairs one stale in-flight task by hand: an unsafe one
// requeued under operator_accepted (the operator takes the risk), an
// idempotent one requeued under idempotent, or an error forced.
func (w *workload) repairOne(ctx context.Context, rnd *mrand.Rand) {
	es, ok := w.inFlight(ctx, true)
	if !ok || len(es) == 0 {
		return
	}
	e := es[rnd.IntN(len(es))]
	t := w.task(e.Task.ID)
	cmd := map[string]any{"action": "requeue", "lease_id": e.LeaseID, "duplicate_risk": "idempotent"}
	switch {
	case rnd.IntN(100) < 25:
		cmd = map[string]any{"action": "force_error", "lease_id": e.LeaseID, "message": "idscheck operator: stale lease"}
	case !t.Repeatable():
		cmd["duplicate_risk"] = "operator_accepted"
	}
	b, _ := json.Marshal(map[string]any{"task_id": e.Task.ID, "reason": "idscheck operator: worker heartbeat expired", "command": cmd})
	in := fmt.Sprint(cmd["action"])
	if r, ok := cmd["duplicate_risk"]; ok {
		in += " " + fmt.Sprint(r)
	}
	op, _ := w.call(ctx, checker.Operation{Kind: OpRepair, Key: e.Task.ID, Input: checker.Input{Body: in, Token: e.LeaseID}}, http.MethodPost, "/a2a/repair", b, nil)
	w.rec.Op(op)
}

// drain ends the run's work: receivers keep leasing (abandoning nothing)
// while tasks are queued; once none is and every in-flight task is older
// than the minimum lease age, a gate pass enabled over all of them must
// requeue nothing. It reports whether that came before ctx ended.
func (w *workload) drain(ctx context.Context, rnd *mrand.Rand) bool {
	for ctx.Err() == nil {
		chaos.Sleep(ctx, time.Duration(max(20, min(w.minAgeMS/5, 200)))*time.Millisecond)
		if n := w.queued(ctx); n != 0 {
			continue
		}
		all, ok1 := w.inFlight(ctx, false)
		stale, ok2 := w.inFlight(ctx, true)
		if !ok1 || !ok2 || len(stale) < len(all) {
			continue
		}
		if n := w.gate(ctx, true, 1000, 1000); n == 0 {
			return ctx.Err() == nil
		}
	}
	return false
}

// readBack reads, after the drain, the audit log, every task's status and
// the sink's calls into the Record.
func (w *workload) readBack(ctx context.Context) Record {
	w.mu.Lock()
	rec := Record{RunID: w.cfg.RunID, MinLeaseAgeMS: w.minAgeMS, MaxAttempts: 3, Reports: append([]GateCall(nil), w.reports...)}
	tasks := append([]*wTask(nil), w.tasks...)
	w.mu.Unlock()
	for _, t := range tasks {
		rec.Tasks = append(rec.Tasks, t.TaskRecord)
	}
	rec.Audit, rec.AuditErr = w.readAudit(ctx)
	rec.Statuses = make([]Status, len(tasks))
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(16, max(1, len(tasks))) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(tasks) {
					return
				}
				rec.Statuses[i] = w.status(ctx, tasks[i].ID)
			}
		})
	}
	wg.Wait()
	for _, c := range w.sink.AllCalls() {
		if c.At.Before(w.start) {
			continue
		}
		rec.Calls = append(rec.Calls, SinkCall{Key: c.Key, Command: c.Command, TaskID: c.CommandID, New: c.New, EffectID: c.EffectID, At: int64(c.At.Sub(w.start))})
	}
	return rec
}

func (w *workload) status(ctx context.Context, id string) Status {
	s := Status{TaskID: id}
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		var a wireAnswer
		op, ok := w.call(ctx, checker.Operation{Kind: checker.OpStatus, Key: id}, http.MethodGet, "/a2a/tasks/"+url.PathEscape(id), nil, &a)
		if ok && op.Output.Status == 404 {
			op.Output.State = checker.StateGone
		}
		if ok && a.Entry != nil {
			op.Output.State, op.Output.Attempts = a.Entry.State, a.Entry.Attempt
		}
		w.rec.Op(op)
		if ok {
			s.HTTP, s.State, s.Attempt = op.Output.Status, op.Output.State, op.Output.Attempts
			return s
		}
		chaos.Sleep(ctx, 50*time.Millisecond)
	}
	return s
}

// readAudit reads every audit row, a page of up to 1000 at a time (at
// most 500 pages).
func (w *workload) readAudit(ctx context.Context) ([]AuditRow, string) {
	var rows []AuditRow
	since := int64(0)
	for page := 0; page < 500; page++ {
		var a struct {
			Rows []AuditRow `json:"rows"`
		}
		ok := false
		for try := 0; try < 5 && ctx.Err() == nil && !ok; try++ {
			var op checker.Operation
			op, ok = w.call(ctx, checker.Operation{Kind: "audit"}, http.MethodGet, "/a2a/audit?since_seq="+strconv.FormatInt(since, 10), nil, &a)
			ok = ok && op.Output.Status == 200
			if !ok {
				chaos.Sleep(ctx, 100*time.Millisecond)
			}
		}
		if !ok {
			return rows, fmt.Sprintf("GET /a2a/audit?since_seq=%d was not answered 200", since)
		}
		if len(a.Rows) == 0 {
			return rows, ""
		}
		rows = append(rows, a.Rows...)
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].Seq < rows[j].Seq })
		if last := rows[len(rows)-1].Seq; last > since {
			since = last
		} else {
			return rows, "the audit log's seq did not advance"
		}
	}
	return rows, "more than 500 pages of audit rows"
}

// a2aStorm is the duplicate storm of an a2a run: n identical enqueues of
// one fresh task (one id) released by one barrier, then delivered to a
// terminal answer: one task must come of it.
type a2aStorm struct{ w *workload }

var _ faults.Fault = (*a2aStorm)(nil)

func (s *a2aStorm) Name() string      { return "storm" }
func (s *a2aStorm) Kind() faults.Kind { return faults.KindStorm }
func (s *a2aStorm) Available() error  { return nil }

func (s *a2aStorm) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	w := s.w
	n := w.cfg.StormMin
	if w.cfg.StormMax > n {
		n += rnd.IntN(w.cfg.StormMax - n + 1)
	}
	t := w.mint(rnd, w.drawClass(rnd), false)
	w.storms.Add(1)
	in, err := faults.Storm(ctx, n, func(ctx context.Context, i int) { w.post(ctx, t) })
	in.Params["task"] = t.ID
	w.bg.Go(func() { w.deliver(w.drainCtx, t) })
	return in, err
}
