package httpidem

import (
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

// The http-idempotency chaos workload (docs/http-idempotency.md): any HTTP
// endpoint with an idempotency key, as its target describes it (Endpoint).
// A seeded stream of logical requests, each one body (a fresh
// "{{unique}}"), one key and one caller (the same key now and then
// from two callers at once: two logical requests), each delivered until a
// terminal answer: a 2xx, or a final 4xx that is not the variant's "still
// in flight" answer (ietf and stripe: 409, retried later with backoff,
// like a 429); a transport error, a body cut short and a 5xx are unknown
// outcomes, retried with the same request (t0's 503 in_flight_timeout
// among them). Mixed in: resends after success, concurrent duplicates,
// and storms of hundreds of identical requests released by one barrier
// (the workload's own "storm"). Every delivery is recorded as a
// checker.Operation keyed by caller and key; after the drain, the count
// read of every logical request, and the effect sink's effects (when the
// target calls it) attributed to the requests, as the ledger. It judges
// nothing: Check does.
//
// A request is delivered only within half its key's published lifetime
// (key_ttl_seconds at the target's time scale) from its first delivery:
// past its expiry a retry MAY execute again, which the checks would call a
// second effect.

// WorkloadConfig is one http-idempotency chaos run.
type WorkloadConfig struct {
	BaseURL string // the target, through the network proxy when network faults run
	// Replicas are the target's other replicas: each logical request's
	// deliveries go to one after the other (client.Options.Replicas).
	Replicas []string
	// Endpoint is what the target declares (Defaults is applied): how a
	// request is built, where its key goes, the callers' headers (resolved:
	// HeadersEnv is not read), the count read.
	Endpoint Endpoint
	// Sink is the harness's effect sink the target calls for its side
	// effect; nil: effects are not counted (the count read alone judges).
	Sink *sink.Sink
	Seed uint64
	// RunID goes into every key and unique value, so two runs with one
	// seed against one target's data send different requests (default:
	// random).
	RunID     string
	Duration  time.Duration // how long the workload and the faults run
	Workers   int           // concurrent submitters (default 16)
	TimeScale float64       // the target's time scale: a key lives key_ttl_seconds/TimeScale (default 1)
	// TimeScaleAssumed says the target's time scale is not known (neither
	// declared nor published): TimeScale is an assumption, the declared
	// key life at real time only the longest a key may live, and the
	// checks judge by what the answers prove (Record.KeyLifeUnscaled).
	TimeScaleAssumed bool
	// Faults are the usable faults the schedule draws from. One named
	// "storm" is replaced by the workload's own storm of identical
	// requests; a faults.RemoteFailpoint without a Trigger gets one (a
	// fresh request, recorded like any other).
	Faults          []faults.Fault
	ScheduleOptions faults.ScheduleOptions
	// StormMin..StormMax bound a storm (defaults 200..300, at most faults.MaxStorm).
	StormMin, StormMax int
	RequestTimeout     time.Duration // per request (default 2 s)
	DrainTimeout       time.Duration // after Duration: how long requests may still be driven (default 15 s)
	MaxOps             int           // bound on recorded operations (default 2,000,000)
	// Recorder receives every operation (nil: one of MaxOps is made).
	Recorder *chaos.Recorder
	Logger   *slog.Logger
	// Progress, when set, is called about once a second.
	Progress func(chaos.Progress)
}

// WorkloadResult is everything an http-idempotency chaos run recorded.
type WorkloadResult struct {
	Start    time.Time          `json:"start"`
	End      time.Time          `json:"end"`
	Schedule []faults.Planned   `json:"schedule"`
	Timeline []faults.Injection `json:"timeline"`
	History  checker.History    `json:"-"`
	Ledger   checker.Ledger     `json:"-"`
	Record   Record             `json:"-"`
	Series   []chaos.Bucket     `json:"series"`
	// Drained is true when the drain ended in time: every logical request
	// got a terminal answer or was given up at the end of its key's window.
	Drained bool `json:"drained"`
	// Requests counts the logical requests; Answered those answered 2xx,
	// Refused those answered with a final 4xx and never a 2xx, Unsettled
	// the rest (every answer lost, or given up); Storms the storms sent.
	Requests, Answered, Refused, Unsettled, Storms int
}

func (c *WorkloadConfig) defaults() error {
	if c.BaseURL == "" {
		return errors.New("chaos http-idempotency: no target URL")
	}
	c.Endpoint.Defaults()
	if err := c.Endpoint.Validate(); err != nil {
		return fmt.Errorf("chaos http-idempotency: %w", err)
	}
	if c.Workers <= 0 {
		c.Workers = 16
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 15 * time.Second
	}
	chaos.WorkloadKnobs{Duration: &c.Duration, TimeScale: &c.TimeScale, StormMin: &c.StormMin, StormMax: &c.StormMax, RequestTimeout: &c.RequestTimeout, MaxOps: &c.MaxOps, Logger: &c.Logger, RunID: &c.RunID}.Fill()
	return nil
}

// hiLogical is one logical request: one body, one key, one caller.
type hiLogical struct {
	n      int
	caller int
	key    string
	u      Unique // the request's unique values ("{{unique}}" and its typed forms)
	unique string // u.Text: what the history and the record name it by
	recKey string // HistoryKey(caller label, key)
	inv    bool   // a body the endpoint declares it rejects
	req    client.Request
	first  time.Time

	mu       sync.Mutex
	answered bool // a delivery got a 2xx
	refused  bool // a delivery got a final 4xx
}

func (c *hiLogical) settled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.answered || c.refused
}

// hiWorkload is the state of one run shared by its goroutines.
type hiWorkload struct {
	cfg     WorkloadConfig
	ep      *Endpoint
	callers []string // labels: caller1, caller2, …
	window  time.Duration
	start   time.Time
	http    *client.Client
	rec     *chaos.Recorder

	mu       sync.Mutex
	logical  []*hiLogical // every logical request, in the order minted (and first sent)
	nextN    atomic.Int64
	clientID atomic.Int64
	unmeant  atomic.Int64 // refusals of a valid body (401, 403, 404, 422, …): not what the workload meant
	answered atomic.Int64 // 2xx answers
	storms   atomic.Int64
	phase    atomic.Value
	fault    atomic.Value
	bg       sync.WaitGroup  // drives started by storms
	drainCtx context.Context // what those drives are bounded by
}

// hiMaxDeliveries bounds the deliveries of one logical request by one
// driver.
const hiMaxDeliveries = 40

// RunWorkload carries out one http-idempotency chaos run. It returns what
// was recorded even when ctx ends early (then with ctx's error).
func RunWorkload(ctx context.Context, cfg WorkloadConfig) (*WorkloadResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	tr := client.NewTransport()
	tr.MaxConnsPerHost = 0
	tr.ResponseHeaderTimeout = cfg.RequestTimeout
	c, err := client.New(cfg.BaseURL, client.Options{Name: "chaos-http-idempotency", Timeout: cfg.RequestTimeout, Replicas: cfg.Replicas,
		HTTP: &http.Client{Transport: tr, Timeout: cfg.RequestTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}})
	if err != nil {
		return nil, fmt.Errorf("chaos http-idempotency: %w", err)
	}
	w := &hiWorkload{cfg: cfg, ep: &cfg.Endpoint, http: c}
	for i := range max(1, len(cfg.Endpoint.Callers)) {
		w.callers = append(w.callers, fmt.Sprintf("caller%d", i+1))
	}
	if ttl := float64(cfg.Endpoint.KeyTTLSeconds); ttl > 0 && !cfg.Endpoint.KeyTTLSeconds.Never() {
		// Keys that never expire have no window: every second creation
		// is a duplicate.
		w.window = time.Duration(ttl * float64(time.Second) / cfg.TimeScale)
	}
	w.phase.Store("faults")
	w.fault.Store("")
	return w.run(ctx)
}

func (w *hiWorkload) run(ctx context.Context) (*WorkloadResult, error) {
	cfg := w.cfg
	master := mrand.New(mrand.NewPCG(cfg.Seed, 0x1de3))
	schedRnd := mrand.New(mrand.NewPCG(master.Uint64(), master.Uint64()))
	var list []faults.Fault
	for _, f := range cfg.Faults {
		if ff, ok := f.(*faults.RemoteFailpoint); ok && ff.Trigger == nil {
			cp := *ff
			trnd := mrand.New(mrand.NewPCG(master.Uint64(), 77))
			var tmu sync.Mutex
			cp.Trigger = func(ctx context.Context) error {
				tmu.Lock()
				c := w.mint(trnd, 0, "", false)
				tmu.Unlock()
				w.post(ctx, c)
				return nil
			}
			f = &cp
		}
		if f.Name() == "storm" {
			f = &hiStorm{w: w}
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
	cfg.Logger.Info("chaos http-idempotency: start", "seed", cfg.Seed, "duration", cfg.Duration, "workers", cfg.Workers,
		"variant", w.ep.Variant, "callers", len(w.callers), "key_window", w.window, "faults", len(list), "schedule", len(schedule))

	faultCtx, stopFaults := context.WithTimeout(ctx, faults.RunBound(cfg.Duration, cfg.ScheduleOptions))
	defer stopFaults()
	loadCtx, stopLoad := context.WithCancel(ctx) // ended by the schedule (faults.RunLoad): at Duration, or once every fault had its turn
	defer stopLoad()
	drainCtx, stopDrain := chaos.DrainAfter(ctx, loadCtx, cfg.DrainTimeout)
	defer stopDrain()
	w.drainCtx = drainCtx

	var total *TotalCount
	if ct := w.ep.Count; ct != nil && ct.Difference {
		// What the endpoint holds before the first request, before any
		// fault: the run's creations are what it holds after less this.
		total = &TotalCount{Path: ct.PathFor(Unique{})}
		beforeCtx, stopBefore := context.WithTimeout(ctx, 5*cfg.RequestTimeout+time.Second)
		total.Before, total.BeforeErr = w.readTotal(beforeCtx, false)
		stopBefore()
		if total.BeforeErr != "" {
			cfg.Logger.Warn("chaos http-idempotency: the count before the run was not read: the effects go unjudged", "err", total.BeforeErr)
		}
	}

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
		wg.Go(func() { w.submitter(loadCtx, drainCtx, rnd, i) })
	}
	<-loadCtx.Done()
	faultErr := <-faultsDone
	w.phase.Store("drain")
	w.fault.Store("")
	wg.Wait()
	w.bg.Wait()
	// Every logical request not yet answered terminally whose key still
	// lives is driven again: the same request.
	w.finishAll(drainCtx, mrand.New(mrand.NewPCG(master.Uint64(), 99)))
	res.Drained = drainCtx.Err() == nil
	w.waitQuiet(drainCtx)
	stopDrain()

	// What each logical request created, then the sink's effects.
	w.phase.Store("count")
	w.mu.Lock()
	reqs := append([]*hiLogical(nil), w.logical...)
	w.mu.Unlock()
	countCtx, stopCount := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second+time.Duration(len(reqs))*2*time.Millisecond)
	res.Record = Record{Variant: w.ep.Variant, Sink: cfg.Sink != nil, Count: w.ep.Count != nil,
		KeyLifeNs: int64(w.window), KeyLifeUnscaled: cfg.TimeScaleAssumed && w.window > 0, Requests: w.readCounts(countCtx, reqs), Total: total}
	if total != nil {
		if total.BeforeErr != "" {
			total.AfterErr = "not read: the count before the run was not"
		} else {
			total.After, total.AfterErr = w.readTotal(countCtx, true)
		}
	}
	stopCount()
	<-progDone

	res.End = time.Now()
	res.Timeline = tl.Injections()
	var dropped int
	res.History, dropped = w.rec.History()
	if cfg.Sink != nil {
		res.Ledger = w.ledger(reqs)
	}
	res.Series = chaos.Series(res.History, time.Second)
	res.Requests, res.Storms = len(reqs), int(w.storms.Load())
	for _, c := range reqs {
		c.mu.Lock()
		switch {
		case c.answered:
			res.Answered++
		case c.refused:
			res.Refused++
		default:
			res.Unsettled++
		}
		c.mu.Unlock()
	}
	var errs []error
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("chaos http-idempotency: %d operations not recorded past the bound of %d", dropped, cfg.MaxOps))
	}
	if n := w.unmeant.Load(); n > 0 {
		cfg.Logger.Warn("chaos http-idempotency: valid requests refused (a 4xx the workload did not mean)", "n", n)
	}
	if faultErr != nil {
		cfg.Logger.Warn("chaos http-idempotency: some injections failed", "err", faultErr)
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("chaos http-idempotency: %w", ctx.Err()))
	}
	return res, errors.Join(errs...)
}

func (w *hiWorkload) progress(ctx context.Context, done chan<- struct{}) {
	chaos.ReportProgress(ctx, done, time.Second, w.start, &w.phase, &w.fault, func() chaos.Progress {
		p := chaos.Progress{Ops: w.rec.Len(), Unknown: w.rec.Unknown(), Published: int(w.nextN.Load())}
		if w.cfg.Sink != nil {
			p.Executed = len(w.cfg.Sink.AllEffects())
		} else {
			p.Executed = int(w.answered.Load())
		}
		return p
	}, w.cfg.Progress)
}

// newKey makes a fresh idempotency key: in the endpoint's published
// format (key_spec) when it has one, else "k-", the run's id and 16 hex
// digits, at most defaultKeyMax characters (a longer run id is cut: the
// random part alone keeps keys apart).
func (w *hiWorkload) newKey(rnd *mrand.Rand) string {
	// The key's bits mix the run's own nonce in (rundir.Fresh): a key in
	// the published format carries no run id of its own, and runs of one
	// seed must never share a key.
	fresh := rundir.Fresh(w.cfg.RunID, rnd)
	if ks := w.ep.KeySpec; ks != nil {
		// Validate made one key of this format; a pattern may still refuse
		// some random draws: a few more, then plain hex (the endpoint's
		// refusal of it is recorded like any other, as a request refused).
		for range 8 {
			if k, err := ks.NewKey(fresh.Uint32); err == nil {
				return k
			}
		}
		k, _ := (*KeySpec)(nil).NewKey(fresh.Uint32)
		return k
	}
	id := w.cfg.RunID
	if n := defaultKeyMax - len("k--") - 16; len(id) > n {
		id = id[:n]
	}
	return fmt.Sprintf("k-%s-%016x", id, fresh.Uint64())
}

// mint creates a logical request of caller under key ("": a fresh one),
// with a body the endpoint rejects when invalid; it is built once, and
// every delivery sends the same bytes.
func (w *hiWorkload) mint(rnd *mrand.Rand, caller int, key string, invalid bool) *hiLogical {
	n := int(w.nextN.Add(1))
	if key == "" {
		key = w.newKey(rnd)
	}
	u := NewUnique(w.cfg.RunID, int64(n), rundir.Fresh(w.cfg.RunID, rnd).Uint32)
	c := &hiLogical{n: n, caller: caller, key: key, u: u, unique: u.Text, inv: invalid, first: time.Now()}
	c.recKey = HistoryKey(w.callers[caller], key)
	body := Fill(w.ep.Body, u).(map[string]any)
	if invalid {
		for k, v := range Fill(w.ep.Invalid, u).(map[string]any) {
			body[k] = v
		}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	switch {
	case w.ep.Key.Body != "":
		body[w.ep.Key.Body] = key
	case w.ep.KeyFormat == "sf-string":
		v, _ := SFString(key) // the workload's keys are printable ASCII
		h.Set(w.ep.Key.Header, v)
	default:
		h.Set(w.ep.Key.Header, key)
	}
	if caller < len(w.ep.Callers) {
		for k, v := range w.ep.Callers[caller].Headers {
			h.Set(k, v)
		}
	}
	raw, _ := json.Marshal(body) // sorted members: the same bytes each time
	c.req = client.Request{Method: w.ep.Method, Path: w.ep.Path, Header: h, Body: raw, Spread: c.recKey}
	w.mu.Lock()
	w.logical = append(w.logical, c)
	w.mu.Unlock()
	return c
}

// inWindow reports whether a delivery now is well within the key's life
// (half of it from the first delivery): past its expiry a retry MAY
// execute again. (One sent in time may still arrive late: the checks
// allow what that explains, Record.KeyLifeNs.)
func (w *hiWorkload) inWindow(c *hiLogical) bool {
	return w.window == 0 || time.Since(c.first) < w.window/2
}

// pick returns a logical request sent before (of any age that leaves
// margin of its window ahead, uniformly: a retry a moment or a while after
// the original), or nil when there is none or it drew a rejected body.
func (w *hiWorkload) pick(rnd *mrand.Rand, margin time.Duration) *hiLogical {
	w.mu.Lock()
	defer w.mu.Unlock()
	lo := 0
	if w.window > 0 {
		oldest := time.Now().Add(-(w.window/2 - margin))
		lo = sort.Search(len(w.logical), func(i int) bool { return w.logical[i].first.After(oldest) })
	}
	if lo >= len(w.logical) {
		return nil
	}
	c := w.logical[lo+rnd.IntN(len(w.logical)-lo)]
	if c.inv || !w.inWindow(c) {
		return nil
	}
	return c
}

// submitter creates and delivers logical requests until loadCtx ends:
// mostly new ones driven to a terminal answer (and resent after success
// now and then); some recent ones again (a duplicate, possibly concurrent
// with their own driver); some in a burst of concurrent identical
// deliveries; one key from two callers at once; a body the endpoint
// rejects. The workers' first iterations cover every kind in turn
// (hiFirstKinds), so a short run sends each.
func (w *hiWorkload) submitter(loadCtx, drainCtx context.Context, rnd *mrand.Rand, worker int) {
	for n := 0; loadCtx.Err() == nil && !w.rec.Full(); n++ {
		p := rnd.IntN(100)
		if n == 0 {
			p = hiFirstKinds[worker%len(hiFirstKinds)]
		}
		switch {
		case p < 55:
			c := w.mint(rnd, rnd.IntN(len(w.callers)), "", false)
			w.drive(drainCtx, c, rnd)
			if rnd.IntN(100) < 30 && w.inWindow(c) {
				w.post(drainCtx, c) // a resend after success: must get the same result
			}
		case p < 72:
			if c := w.pick(rnd, 0); c != nil { // a duplicate, a moment or a while after
				w.drive(drainCtx, c, rnd)
			}
		case p < 86:
			c := w.pick(rnd, w.window/4)
			if c == nil {
				c = w.mint(rnd, rnd.IntN(len(w.callers)), "", false)
			}
			burst := make([]*hiLogical, 2+rnd.IntN(4))
			for i := range burst {
				burst[i] = c
			}
			w.together(drainCtx, rnd, burst...)
		case p < 96 && len(w.callers) > 1 && w.ep.KeyScope != "global":
			// One key from two callers at once: two logical requests.
			a := w.mint(rnd, 0, "", false)
			b := w.mint(rnd, 1+rnd.IntN(len(w.callers)-1), a.key, false)
			w.together(drainCtx, rnd, a, b)
		case p >= 96 && len(w.ep.Invalid) > 0:
			c := w.mint(rnd, rnd.IntN(len(w.callers)), "", true)
			w.drive(drainCtx, c, rnd)
			if w.inWindow(c) {
				w.post(drainCtx, c) // its retry: refused again, creates nothing
			}
		default:
			w.drive(drainCtx, w.mint(rnd, rnd.IntN(len(w.callers)), "", false), rnd)
		}
	}
}

// hiFirstKinds are the draws of the workers' first iterations: a fresh
// request, one key from two callers, a rejected body, a burst, a
// duplicate of a recent request.
var hiFirstKinds = []int{0, 86, 96, 72, 55}

// together drives each of cs (the same request more than once: a burst of
// concurrent duplicates) on its own goroutine, released by one barrier.
func (w *hiWorkload) together(ctx context.Context, rnd *mrand.Rand, cs ...*hiLogical) {
	seeds := make([]uint64, len(cs))
	for i := range seeds {
		seeds[i] = rnd.Uint64()
	}
	var wg sync.WaitGroup
	barrier := make(chan struct{})
	for i, c := range cs {
		wg.Go(func() {
			<-barrier
			w.drive(ctx, c, mrand.New(mrand.NewPCG(seeds[i], 3)))
		})
	}
	close(barrier)
	wg.Wait()
}

// hiAnswer is how the workload reads one answer.
type hiAnswer int

const (
	hiUnknown    hiAnswer = iota // no answer, a body cut short, a 5xx: it may have happened; resend
	hiRetryLater                 // still in flight (409 under ietf and stripe), 408, 425, 429: resend later
	hiOK                         // a 2xx: the result
	hiRefused                    // a final 4xx (or anything else): resending changes nothing
)

// post sends one delivery of c (its one request) and records it.
func (w *hiWorkload) post(ctx context.Context, c *hiLogical) hiAnswer {
	op := checker.Operation{ClientID: int(w.clientID.Add(1)), Kind: checker.OpPublish, Key: c.recKey, KeyID: w.callers[c.caller],
		Input: checker.Input{Body: c.unique}, Call: w.rec.Now()}
	resp, err := w.http.Do(ctx, c.req)
	op.Return = w.rec.Now()
	op.Outcome = client.TransportOutcome(err)
	a := hiUnknown
	if err == nil {
		op.Output.Status = resp.Status
		op.Output.Body = chaos.Digest(resp.Body)
		switch st := resp.Status; {
		case resp.Exchange.Err != "" || st >= 500:
			op.Outcome = verdict.OutcomeUnknown // a body cut short, a server error: it may have happened
		case st >= 200 && st < 300:
			a = hiOK
			if w.ep.ID != "" {
				op.Output.ID = memberString(resp.Body, w.ep.ID)
			}
		case st >= 400 && st < 500 && RetryLater(w.ep.Variant, st):
			a = hiRetryLater
		default:
			a = hiRefused
			if !c.inv {
				w.unmeant.Add(1)
				w.cfg.Logger.Debug("chaos http-idempotency: a valid request refused", "status", st, "body", string(resp.Body))
			}
		}
	}
	w.rec.Op(op)
	switch a {
	case hiOK:
		w.answered.Add(1)
		c.mu.Lock()
		c.answered = true
		c.mu.Unlock()
	case hiRefused:
		c.mu.Lock()
		c.refused = true
		c.mu.Unlock()
	}
	return a
}

// memberString is the member name of a JSON object, as text ("" when
// absent or null).
func memberString(body []byte, name string) string {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(body)))
	d.UseNumber() // an id that is a number, exactly as written
	if d.Decode(&m) != nil || m[name] == nil {
		return ""
	}
	if s, ok := m[name].(string); ok {
		return s
	}
	b, _ := json.Marshal(m[name])
	return string(b)
}

// drive delivers c until a terminal answer (a 2xx, a final 4xx): an
// unknown outcome is resent at once (after a short backoff), an answer
// that asks to retry later after a growing one, always the same request.
// It gives up at the drain's end, past half of the key's life, or after
// hiMaxDeliveries.
func (w *hiWorkload) drive(ctx context.Context, c *hiLogical, rnd *mrand.Rand) {
	backoff := 10 * time.Millisecond
	for try := 0; try < hiMaxDeliveries && ctx.Err() == nil && !w.rec.Full() && w.inWindow(c); try++ {
		switch w.post(ctx, c) {
		case hiOK, hiRefused:
			return
		case hiRetryLater:
			backoff = max(backoff, 20*time.Millisecond)
		}
		chaos.Sleep(ctx, backoff+time.Duration(rnd.Int64N(int64(backoff))))
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// finishAll drives, in the drain, every logical request that has no
// terminal answer yet and whose key still lives (a storm's, one whose
// driver gave up), bounded by the drain.
func (w *hiWorkload) finishAll(ctx context.Context, rnd *mrand.Rand) {
	w.mu.Lock()
	var todo []*hiLogical
	for _, c := range w.logical {
		if !c.settled() && w.inWindow(c) {
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
				w.drive(ctx, todo[j], r)
			}
		})
	}
	wg.Wait()
}

// waitQuiet waits, when the target calls the sink, for no new sink call
// for 300 ms (at most 3 s): an effect the target makes after it answered
// is counted too.
func (w *hiWorkload) waitQuiet(ctx context.Context) {
	if w.cfg.Sink == nil {
		return
	}
	w.phase.Store("quiet")
	last := len(w.cfg.Sink.AllCalls())
	quietSince := time.Now()
	for t := time.Now(); ctx.Err() == nil && time.Since(t) < 3*time.Second && time.Since(quietSince) < 300*time.Millisecond; {
		chaos.Sleep(ctx, 50*time.Millisecond)
		if n := len(w.cfg.Sink.AllCalls()); n != last {
			last, quietSince = n, time.Now()
		}
	}
}

// readCounts reads, for every logical request, what the endpoint's count
// read lists for its unique value (a few tries each), as the caller that
// sent it.
func (w *hiWorkload) readCounts(ctx context.Context, reqs []*hiLogical) []LogicalRequest {
	out := make([]LogicalRequest, len(reqs))
	for i, c := range reqs {
		out[i] = LogicalRequest{Key: c.recKey, Caller: w.callers[c.caller], IdempotencyKey: c.key, Unique: c.unique, Invalid: c.inv}
	}
	if w.ep.Count == nil || w.ep.Count.Difference {
		return out // a difference read names no request: readTotal reads it once
	}
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(16, max(1, len(reqs))) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(reqs) {
					return
				}
				if ctx.Err() != nil {
					out[i].CountErr = "not read: out of time"
					continue
				}
				w.count(ctx, reqs[i], &out[i])
			}
		})
	}
	wg.Wait()
	return out
}

// count reads what c created into r: the count read of its unique
// values, as its caller, counted by CountRead.Extract; when the count is
// an array, its items (their declared ids, else digests) are kept too, as
// evidence.
func (w *hiWorkload) count(ctx context.Context, c *hiLogical, r *LogicalRequest) {
	path := w.ep.Count.PathFor(c.u)
	resp := w.getCount(ctx, c.caller, path, &r.CountStatus, &r.CountErr)
	if resp == nil {
		return
	}
	n, err := w.ep.Count.Extract(resp.Body)
	if err != nil {
		r.CountErr = fmt.Sprintf("GET %s: %v", path, err)
		return
	}
	r.Counted = n
	r.Created = countItems(w.ep.Count, w.ep.ID, resp.Body)
}

// getCount GETs a count read's path as caller, a few tries while the
// answer is not read whole or is a 5xx (each bounded by the request
// timeout, the tries by ctx): the 200 answer, or nil with status and why
// set.
func (w *hiWorkload) getCount(ctx context.Context, caller int, path string, status *int, why *string) *client.Response {
	h := http.Header{}
	if caller < len(w.ep.Callers) {
		for k, v := range w.ep.Callers[caller].Headers {
			h.Set(k, v)
		}
	}
	*status, *why = 0, "not read: out of time"
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		if try > 0 {
			chaos.Sleep(ctx, 100*time.Millisecond)
		}
		resp, err := w.http.Do(ctx, client.Request{Method: http.MethodGet, Path: path, Header: h})
		*status, *why = 0, ""
		switch {
		case err != nil:
			*why = err.Error()
			continue
		case resp.Exchange.Err != "":
			*status, *why = resp.Status, resp.Exchange.Err
			continue
		}
		*status = resp.Status
		if resp.Status != http.StatusOK {
			*why = fmt.Sprintf("GET %s answered %d", path, resp.Status)
			if resp.Status >= 500 {
				continue
			}
			return nil
		}
		return resp
	}
	return nil
}

// readTotal reads the difference count read as the main caller: the
// count, or why it was not read. With settle, it reads until two reads
// 100 ms apart agree (at most 5): after the drain an effect the endpoint
// makes after answering is counted too, and a count that keeps changing
// (another client, effects still under way) is no reading.
func (w *hiWorkload) readTotal(ctx context.Context, settle bool) (int, string) {
	path := w.ep.Count.PathFor(Unique{})
	var seen []string
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		if try > 0 {
			chaos.Sleep(ctx, 100*time.Millisecond)
		}
		var status int
		var why string
		resp := w.getCount(ctx, 0, path, &status, &why)
		if resp == nil {
			return 0, why
		}
		n, err := w.ep.Count.Extract(resp.Body)
		if err != nil {
			return 0, fmt.Sprintf("GET %s: %v", path, err)
		}
		if !settle || (len(seen) > 0 && seen[len(seen)-1] == fmt.Sprint(n)) {
			return n, ""
		}
		seen = append(seen, fmt.Sprint(n))
	}
	if ctx.Err() != nil {
		return 0, "not read: out of time"
	}
	return 0, fmt.Sprintf("GET %s still changed over %d reads 100 ms apart (%s): another client, or creations still under way", path, len(seen), strings.Join(seen, ", "))
}

// countItems lists, when the count read's value is an array, each item's
// declared id (else "digest " and its digest); nil otherwise (a number or
// an object counts without naming).
func countItems(cr *CountRead, idName string, body []byte) []string {
	var doc any
	d := json.NewDecoder(strings.NewReader(string(body)))
	d.UseNumber() // an id that is a number, exactly as written
	if d.Decode(&doc) != nil {
		return nil
	}
	v, err := jsonPointer(doc, cr.pointer())
	items, ok := v.([]any)
	if err != nil || !ok {
		return nil
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		id := ""
		if m, ok := it.(map[string]any); ok && idName != "" && m[idName] != nil {
			id = fmt.Sprint(m[idName])
		}
		if id == "" {
			b, _ := json.Marshal(it)
			id = "digest " + chaos.Digest(b)
		}
		out = append(out, id)
	}
	return out
}

// ledger attributes the sink's effects (since the run began) to the
// logical requests: an effect whose idempotency_key holds a request's key
// (the bundled endpoint sends caller id + ":" + key) is that request's;
// when the key is one two callers used, what surrounds it in the effect's
// key (or its tenant_id), learnt from the effects of keys one caller
// alone used, names the caller; failing that, the effect goes to the
// candidate with the fewest effects so far. An effect of no request keeps
// the sink's key.
func (w *hiWorkload) ledger(reqs []*hiLogical) checker.Ledger {
	byKey := map[string][]*hiLogical{}
	keyLen := 0
	for _, c := range reqs {
		byKey[c.key] = append(byKey[c.key], c)
		keyLen = len(c.key)
	}
	find := func(sinkKey string) (string, string) {
		if _, ok := byKey[sinkKey]; ok {
			return sinkKey, ""
		}
		if n := len(sinkKey); keyLen > 0 && n > keyLen {
			if k := sinkKey[n-keyLen:]; byKey[k] != nil {
				return k, sinkKey[:n-keyLen]
			}
			if k := sinkKey[:keyLen]; byKey[k] != nil {
				return k, sinkKey[keyLen:]
			}
		}
		for k := range byKey {
			if strings.Contains(sinkKey, k) {
				return k, strings.Replace(sinkKey, k, "\x00", 1)
			}
		}
		return "", ""
	}
	type pending struct {
		i          int
		key, ctx   string
		tenant     string
		candidates []*hiLogical
	}
	var l checker.Ledger
	var ambiguous []pending
	byCtx, byTenant := map[string]int{}, map[string]int{} // → caller
	count := map[*hiLogical]int{}
	for _, e := range w.cfg.Sink.AllEffects() {
		if e.At.Before(w.start) {
			continue
		}
		eff := checker.Effect{Key: e.Key, Intent: e.EffectID, Worker: e.CommandID, At: int64(e.At.Sub(w.start))}
		k, around := find(e.Key)
		switch cs := byKey[k]; {
		case len(cs) == 1:
			eff.Key = cs[0].recKey
			count[cs[0]]++
			if around != "" {
				byCtx[around] = cs[0].caller
			}
			if e.Tenant != "" {
				byTenant[e.Tenant] = cs[0].caller
			}
		case len(cs) > 1:
			ambiguous = append(ambiguous, pending{i: len(l.Effects), key: k, ctx: around, tenant: e.Tenant, candidates: cs})
		}
		l.Effects = append(l.Effects, eff)
	}
	for _, p := range ambiguous {
		var pick *hiLogical
		caller, ok := byCtx[p.ctx]
		if !ok || p.ctx == "" {
			caller, ok = byTenant[p.tenant]
			ok = ok && p.tenant != ""
		}
		for _, c := range p.candidates {
			if ok && c.caller == caller {
				pick = c
			}
		}
		if pick == nil {
			sort.SliceStable(p.candidates, func(a, b int) bool { return count[p.candidates[a]] < count[p.candidates[b]] })
			pick = p.candidates[0]
		}
		count[pick]++
		l.Effects[p.i].Key = pick.recKey
	}
	return l
}

// hiStorm is the duplicate storm of an http-idempotency run: n identical
// requests (the same bytes) of one logical request, released by one
// barrier; then the request is driven to a terminal answer. One creation,
// one result must come of it.
type hiStorm struct {
	w *hiWorkload
}

var _ faults.Fault = (*hiStorm)(nil)

func (s *hiStorm) Name() string      { return "storm" }
func (s *hiStorm) Kind() faults.Kind { return faults.KindStorm }
func (s *hiStorm) Available() error  { return nil }

func (s *hiStorm) Inject(ctx context.Context, rnd *mrand.Rand, d time.Duration) (faults.Injection, error) {
	w := s.w
	n := w.cfg.StormMin
	if w.cfg.StormMax > n {
		n += rnd.IntN(w.cfg.StormMax - n + 1)
	}
	// A fresh request half the time, else a recent one (maybe being
	// driven) whose key has most of its window ahead: a storm takes a
	// while to be answered.
	var c *hiLogical
	if rnd.IntN(2) == 0 {
		c = w.pick(rnd, w.window/4)
	}
	if c == nil {
		c = w.mint(rnd, rnd.IntN(len(w.callers)), "", false)
	}
	w.storms.Add(1)
	in, err := faults.Storm(ctx, n, func(ctx context.Context, i int) { w.post(ctx, c) })
	in.Params["key"] = c.recKey
	in.Params["unique"] = c.unique
	seed := rnd.Uint64()
	w.bg.Go(func() { w.drive(w.drainCtx, c, mrand.New(mrand.NewPCG(seed, 5))) })
	return in, err
}
