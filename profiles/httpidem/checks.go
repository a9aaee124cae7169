package httpidem

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// The http-idempotency checks (docs/http-idempotency.md) over a chaos run
// of the http-idempotency profile: any HTTP endpoint with an idempotency
// key, judged under the variant its target declares. They read what the
// http-idempotency chaos workload records:
//
//   - History: every request to the mutating endpoint as an OpPublish
//     whose Key is HistoryKey(caller, idempotency key) and KeyID the
//     caller; Input.Body the logical request's unique value; Output.Status
//     the HTTP status, Output.ID the declared id member of a 2xx answer
//     ("" when none is declared), Output.Body the digest of the answer's
//     body. A transport error, a body cut short and a 5xx are
//     OutcomeUnknown.
//   - Ledger (when the target calls the harness's effect sink): every
//     effect the sink performed, Key the HistoryKey of the logical request
//     it was attributed to (the sink's own idempotency_key when the
//     workload could attribute it to none), Intent the sink's effect_id,
//     Worker the command_id the target sent with it.
//   - Record (RecordFile): the variant, whether the sink and a count read
//     were there, and every logical request with what the count read
//     listed for it after the drain.
//
// Two checks, each judging the variant's rule that a retry has no second
// effect and gets the first result (RetryRule): an anomaly's Kind is that
// rule's ID, its explanation names the check.

// The rule each variant's checks judge: the one that forbids a second
// effect of a retry and asks for the first result (Rules).
const (
	RuleRetryIETF   = "IETF-2.6-retry-result"
	RuleRetryT0     = "T0-0-no-further-effect"
	RuleRetryStripe = "STRIPE-IDEM-same-result"
)

// Model names of the http-idempotency checks in Report.Models.
const (
	// ModelEffects: what each logical request created (the count
	// read) and the effects it had at the sink.
	ModelEffects = "http-idem-effects"
	// ModelReplay: one result per (caller, key) (porcupine model
	// ReplayModel).
	ModelReplay = "http-idem-replay"
)

// RecordFile is the name of the record in a run directory.
const RecordFile = "httpidem-requests.json"

// RetryRule is the rule the checks judge under variant ("" is ietf).
func RetryRule(variant string) string {
	switch variant {
	case VariantT0:
		return RuleRetryT0
	case VariantStripe:
		return RuleRetryStripe
	}
	return RuleRetryIETF
}

// resultOf names the result a 2xx answer carries: its id, else its
// body's digest ("" when it has neither).
func resultOf(op *checker.Operation) string {
	if op.Output.ID != "" {
		return "id:" + op.Output.ID
	}
	if op.Output.Body != "" {
		return "body:" + op.Output.Body
	}
	return ""
}

// RuleScopeT0 is t-0's guarantee that a key is scoped to its caller: the
// one scope rule chaos judges (a MUST). The draft's composite key
// (IETF-5-composite-key) is a SHOULD, which a chaos run, having no
// --strict, does not fail on: it counts such answers (SharedKeyAnswers),
// and idscheck run judges the rule. Stripe's text scopes no key.
const RuleScopeT0 = "T0-KEYS-caller-scope"

// scopeRule is the rule of variant that scopes a key to its caller (""
// when its text scopes none).
func scopeRule(variant string) string {
	switch variant {
	case VariantT0:
		return RuleScopeT0
	case VariantStripe:
		return ""
	}
	return "IETF-5-composite-key"
}

// HistoryKey is the history's Key of a logical request: its caller, a
// space, its idempotency key (a caller label has no space).
func HistoryKey(caller, key string) string { return caller + " " + key }

// Record is what the workload knows of a run besides the history
// and the ledger.
type Record struct {
	Variant string `json:"variant"`
	// Sink says the target called the harness's effect sink: the ledger
	// holds every effect (false: the ledger means nothing).
	Sink bool `json:"sink"`
	// Count says the endpoint declares a count read: each request's
	// Created is what it listed.
	Count bool `json:"count"`
	// KeyLifeNs is a key's published life on the harness's clock
	// (key_ttl_seconds at the target's time scale); 0: none published.
	KeyLifeNs int64 `json:"key_life_ns,omitempty"`
	// KeyLifeUnscaled says the target's time scale was not known (neither
	// declared nor published): KeyLifeNs is the declared life at real
	// time, the longest a key may live at any time scale of 1 or more, and
	// the checks take a key to live the least its own answers prove
	// (ProvenKeyLife), never longer.
	KeyLifeUnscaled bool `json:"key_life_unscaled,omitempty"`
	// Total is the count read that counts everything the endpoint created
	// (count.difference), read before the first request and after the
	// drain; nil when the count read is one per request (Requests'
	// Counted) or there is none.
	Total    *TotalCount      `json:"total,omitempty"`
	Requests []LogicalRequest `json:"requests"`
}

// TotalCount is a run's difference count read: what the endpoint had
// created in all before the run's first request and after its drain. The
// requests created After - Before while idscheck was the endpoint's only
// client.
type TotalCount struct {
	Path   string `json:"path"`
	Before int    `json:"before"`
	After  int    `json:"after"`
	// BeforeErr and AfterErr say why a read was not taken ("" when it was).
	BeforeErr string `json:"before_err,omitempty"`
	AfterErr  string `json:"after_err,omitempty"`
}

// LogicalRequest is one logical request: one body (its unique value), one
// key, one caller, delivered any number of times.
type LogicalRequest struct {
	Key            string `json:"key"` // HistoryKey(Caller, IdempotencyKey)
	Caller         string `json:"caller"`
	IdempotencyKey string `json:"idempotency_key"`
	Unique         string `json:"unique"`
	// Invalid says its body is one the endpoint declares it rejects.
	Invalid bool `json:"invalid,omitempty"`
	// CountStatus is the HTTP status of the count read after the drain (0:
	// none answered); CountErr why it could not be read.
	CountStatus int    `json:"count_status,omitempty"`
	CountErr    string `json:"count_err,omitempty"`
	// Counted is what the count read counted (CountRead.Extract: a number,
	// an array's length, an object's members).
	Counted int `json:"counted,omitempty"`
	// Created is, when the count is an array, what it listed: each item's
	// declared id (or the digest of the item when none is declared).
	Created []string `json:"created,omitempty"`
}

// CountRead reports whether the count read of the request answered.
func (r LogicalRequest) CountRead() bool { return r.CountStatus == 200 && r.CountErr == "" }

// things is how many things the count read counted: Counted, or in a
// record written before Counted was (an array's items only) Created's
// length.
func (r LogicalRequest) things() int {
	if r.Counted == 0 {
		return len(r.Created)
	}
	return r.Counted
}

// describeThings names what the count read counted: the items' ids when
// it listed them.
func (r LogicalRequest) describeThings() string {
	if len(r.Created) > 0 {
		return clipList(r.Created)
	}
	return "by the count read"
}

// WriteRecord writes the record as JSON.
func WriteRecord(w io.Writer, rec Record) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rec); err != nil {
		return fmt.Errorf("write http-idempotency record: %w", err)
	}
	return nil
}

// ReadRecord parses what WriteRecord wrote.
func ReadRecord(r io.Reader) (Record, error) {
	var rec Record
	if err := json.NewDecoder(r).Decode(&rec); err != nil {
		return Record{}, fmt.Errorf("read http-idempotency record: %w", err)
	}
	for i, q := range rec.Requests {
		if q.Key == "" {
			return Record{}, fmt.Errorf("read http-idempotency record: request %d has no key", i)
		}
	}
	return rec, nil
}

// CheckOptions say what the workload promised and how long the checks
// may work.
type CheckOptions struct {
	// Undrained says the drain ran out of time: a request answered 2xx
	// whose creation or effect is not seen yet is pending, not missing,
	// and the verdict is at best UNKNOWN.
	Undrained bool `json:"undrained,omitempty"`
	// Timeout bounds porcupine on each key (default 10 s); running out
	// makes the replay check UNKNOWN, never PASS.
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// MaxExamples bounds the anomalies each check keeps with evidence
	// (default 20); Counts hold the totals.
	MaxExamples int `json:"max_examples,omitempty"`
}

// maxHTTPIdemAnomalyOps bounds the operations one anomaly carries (a storm
// has hundreds per key).
const maxHTTPIdemAnomalyOps = 16

// Check runs the two checks over a run and sums them up in a
// Report (Queue: Attempted logical requests, Acknowledged with a terminal
// answer, Fulfilled answered 2xx, Effected with a creation or an effect,
// Duplicated with more than one, Lost answered 2xx with none, Unexpected
// effects no request names and refused requests that created something,
// Recovered requests never answered 2xx that created their one thing,
// Pending). It is pure.
func Check(h checker.History, l checker.Ledger, rec Record, opts CheckOptions) checker.Report {
	if opts.MaxExamples <= 0 {
		opts.MaxExamples = 20
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	rep := checker.Report{Ops: len(h.Ops), Effects: len(l.Effects), Counts: map[checker.AnomalyKind]int{}}
	r := &httpIdemRun{h: h, rec: rec, opts: opts, rule: RetryRule(rec.Variant), byKey: map[string][]int{}, effects: map[string][]checker.Effect{}}
	kept := map[string]int{} // examples kept per check: both checks name one rule
	r.add = func(check string, a checker.Anomaly) {
		rep.Counts[a.Kind]++
		if kept[check]++; kept[check] <= opts.MaxExamples {
			rep.Anomalies = append(rep.Anomalies, a)
		}
	}
	for i := range h.Ops {
		if op := &h.Ops[i]; op.Kind == checker.OpPublish && op.Key != "" {
			r.byKey[op.Key] = append(r.byKey[op.Key], i)
		}
	}
	for _, idx := range r.byKey {
		sort.SliceStable(idx, func(a, b int) bool { return h.Ops[idx[a]].Call < h.Ops[idx[b]].Call })
	}
	if rec.Sink {
		for _, e := range l.Effects {
			r.effects[e.Key] = append(r.effects[e.Key], e)
		}
	}
	if rec.KeyLifeUnscaled && rec.KeyLifeNs > 0 {
		// How fast the endpoint runs is not known: a key lives what its
		// answers prove, never what an assumed time scale says.
		r.rec.KeyLifeNs = ProvenKeyLife(h, rec.KeyLifeNs)
		r.detail.ProvenKeyLifeNs = r.rec.KeyLifeNs
	}
	effects, q := r.checkEffects()
	rep.Models = []checker.ModelCheck{effects, r.checkReplay()}
	rep.Detail = &r.detail
	rep.Queue = q
	return rep
}

type httpIdemRun struct {
	h       checker.History
	rec     Record
	opts    CheckOptions
	rule    string
	byKey   map[string][]int
	effects map[string][]checker.Effect
	add     func(check string, a checker.Anomaly)
	detail  CheckDetail
}

// CheckDetail is what the http-idempotency checks found besides anomalies
// (Report.Detail): what a check that stayed UNKNOWN could not judge, and
// what the run taught of the endpoint.
type CheckDetail struct {
	// Undecided says, for each reason a check could not decide, why.
	Undecided []string `json:"undecided,omitempty"`
	// EffectsPerExecution is how many sink effects one execution of a
	// request makes, as the run taught it (effectsPerExecution; 0: no
	// sink, or nothing to learn from), and LearntFrom how many requests
	// delivered once taught it (0: the fewest effects of a 2xx request).
	EffectsPerExecution int `json:"effects_per_execution,omitempty"`
	LearntFrom          int `json:"learnt_from,omitempty"`
	// SharedKeyAnswers counts requests answered 2xx that created nothing
	// while another caller's request used the same key: the key is not
	// scoped to the caller (an anomaly of t-0's MUST; under ietf, the
	// SHOULD of a composite key, judged by idscheck run).
	SharedKeyAnswers int `json:"shared_key_answers,omitempty"`
	// ProvenKeyLifeNs is, when the target's time scale was not known
	// (Record.KeyLifeUnscaled), the key life the checks judged by: the
	// longest a key's answers prove it lived (ProvenKeyLife).
	ProvenKeyLifeNs int64 `json:"proven_key_life_ns,omitempty"`
}

// Notes says what the checks found that is no anomaly of theirs, for the
// chaos summary.
func (d *CheckDetail) Notes() []string {
	if d == nil {
		return nil
	}
	var out []string
	if d.ProvenKeyLifeNs > 0 {
		out = append(out, fmt.Sprintf("the endpoint's time scale is not known: a key was taken to live %s, the longest its own answers prove (a replay that long after the first 2xx); a creation later than that may be an expiry, and is not judged", time.Duration(d.ProvenKeyLifeNs).Round(time.Millisecond)))
	}
	if d.SharedKeyAnswers > 0 {
		out = append(out, fmt.Sprintf("%d request(s) were answered with another caller's result under a key both used, and executed nothing: the key is not scoped to the caller (under ietf the draft's composite key, IETF-5-composite-key, a SHOULD, which idscheck run judges; Stripe's text scopes no key)", d.SharedKeyAnswers))
	}
	return out
}

// ProvenKeyLife is the longest a key of the history certainly lived: over
// every (caller, key), the time from the return of its first 2xx answer
// naming what was created (an id: a body proves no replay) to the call of
// a later delivery answered 2xx with the same id, which the endpoint could
// only answer from the key's record. At least 1 ns, at most bound (> 0).
func ProvenKeyLife(h checker.History, bound int64) int64 {
	byKey := map[string][]*checker.Operation{}
	for i := range h.Ops {
		if op := &h.Ops[i]; op.Kind == checker.OpPublish && op.Key != "" && httpIdem2xx(op) && op.Output.ID != "" {
			byKey[op.Key] = append(byKey[op.Key], op)
		}
	}
	life := int64(1)
	for _, ops := range byKey {
		first := ops[0]
		for _, op := range ops[1:] {
			if op.Return < first.Return {
				first = op
			}
		}
		for _, op := range ops {
			if op.Output.ID == first.Output.ID && op.Call > first.Return {
				life = max(life, op.Call-first.Return)
			}
		}
	}
	if bound > 0 {
		life = min(life, bound)
	}
	return life
}

// httpIdem2xx reports whether op is a 2xx answer, read whole.
func httpIdem2xx(op *checker.Operation) bool {
	return op.Outcome == verdict.OutcomeOK && op.Output.Status >= 200 && op.Output.Status < 300
}

// InFlight reports whether status is the variant's answer to a
// duplicate of a request still in flight, after which a client retries
// later: 409 under ietf and stripe (t0's 503 in_flight_timeout is a 5xx:
// an unknown outcome anyway).
func InFlight(variant string, status int) bool {
	return status == 409 && variant != VariantT0
}

// RetryLater reports whether a 4xx status asks the client to try
// again later rather than refusing the request: the variant's in-flight
// answer, 408, 425, 429.
func RetryLater(variant string, status int) bool {
	return InFlight(variant, status) || status == 408 || status == 425 || status == 429
}

// httpIdemRefusal reports whether op is a final refusal: a 4xx answer,
// read whole, that does not ask to retry later.
func httpIdemRefusal(variant string, op *checker.Operation) bool {
	return op.Outcome == verdict.OutcomeOK && op.Output.Status >= 400 && op.Output.Status < 500 &&
		!RetryLater(variant, op.Output.Status)
}

// httpIdemNotResult reports whether op is a 4xx answer that is not the
// result of the request (a refusal, or "still in flight"): once a 2xx was
// answered, a request sent after it must get that result instead.
func httpIdemNotResult(op *checker.Operation) bool {
	return op.Outcome == verdict.OutcomeOK && op.Output.Status >= 400 && op.Output.Status < 500 &&
		op.Output.Status != 408 && op.Output.Status != 425 && op.Output.Status != 429
}

// httpIdemResult names the result a 2xx answer carries: its declared id,
// else the digest of its body.
func httpIdemResult(op *checker.Operation) string {
	if op.Output.ID != "" {
		return "id " + op.Output.ID
	}
	return "body " + op.Output.Body
}

func describeHTTPIdemOp(op *checker.Operation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST by client %d at %s", op.ClientID, checker.FormatNs(op.Call))
	if op.Effective() == verdict.OutcomeUnknown {
		if op.Output.Status != 0 {
			fmt.Fprintf(&b, " → %d (unknown outcome)", op.Output.Status)
		} else {
			b.WriteString(" → no answer (unknown outcome)")
		}
		return b.String()
	}
	fmt.Fprintf(&b, " → %d", op.Output.Status)
	if httpIdem2xx(op) {
		b.WriteString(" " + httpIdemResult(op))
	}
	fmt.Fprintf(&b, " (returned %s)", checker.FormatNs(op.Return))
	return b.String()
}

// evidence returns at most maxHTTPIdemAnomalyOps operations of key: the
// named ones, its 2xx answers, then the rest, in call order.
func (r *httpIdemRun) evidence(key string, named ...checker.Operation) []checker.Operation {
	out := append([]checker.Operation(nil), named...)
	var ok, rest []checker.Operation
	for _, i := range r.byKey[key] {
		op := r.h.Ops[i]
		if httpIdem2xx(&op) {
			ok = append(ok, op)
		} else {
			rest = append(rest, op)
		}
	}
	out = append(out, append(ok, rest...)...)
	if len(out) > maxHTTPIdemAnomalyOps {
		out = out[:maxHTTPIdemAnomalyOps]
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Call < out[b].Call })
	return out
}

func httpIdemFail(mc *checker.ModelCheck, key string) {
	mc.Result = checker.LinIllegal
	mc.FailingTotal++
	if len(mc.Failing) < 100 {
		mc.Failing = append(mc.Failing, key)
	}
}

func describeRequest(q *LogicalRequest) string {
	s := fmt.Sprintf("the request of %s under key %q (unique %s", q.Caller, q.IdempotencyKey, q.Unique)
	if q.Invalid {
		s += ", a body the endpoint declares invalid"
	}
	return s + ")"
}

func describeHTTPIdemEffects(es []checker.Effect) string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.Intent
		if e.Worker != "" {
			ids[i] += " (command_id " + e.Worker + ")"
		}
	}
	return clipList(ids)
}

// checkEffects judges what each logical request created: by a count read
// per request, at most one thing, and exactly one for a request answered
// 2xx (by a difference count read, the run's creations against the bounds
// checkTotal sets);
// at the sink (when the target calls it), at most one effect, exactly one
// for a request answered 2xx, none for a request refused (a final 4xx and
// no 2xx) and none that no request names: the effects are the requests
// answered 2xx (and those never answered that took effect all the same).
// One anomaly per request names all it shows. A second effect a full key
// life after the first, while a delivery of the request may still have
// been on its way (its outcome unknown), is a late delivery executed
// after the key expired, which the texts allow: counted (Expired), not an
// anomaly.
func (r *httpIdemRun) checkEffects() (checker.ModelCheck, checker.QueueStats) {
	mc := checker.ModelCheck{Model: ModelEffects, Result: checker.LinOk, Partitions: len(r.rec.Requests)}
	for _, es := range r.effects {
		mc.Ops += len(es)
	}
	var q checker.QueueStats
	if !r.rec.Sink && !r.rec.Count {
		// Nothing tells what a request created: neither a count read nor
		// the sink. (A target with either is judged by it: an endpoint
		// that calls no sink is judged by its count read alone.)
		mc.Result = checker.LinUnknown
		r.undecided("%s: the endpoint declares no count read and calls no effect sink: nothing shows what a request created (declare \"count\" in http_idempotency)", ModelEffects)
	}
	perExec := 1
	if r.rec.Sink {
		perExec = r.effectsPerExecution()
	}
	known := map[string]bool{}
	unread, answered := 0, 0
	perRequest := r.rec.Count && r.rec.Total == nil
	var tb totalBounds // what a difference read must and may count
	reqs := append([]LogicalRequest(nil), r.rec.Requests...)
	sort.SliceStable(reqs, func(a, b int) bool { return reqs[a].Key < reqs[b].Key })
	// The callers of each idempotency key: a key two callers used is where
	// a middleware that shares keys across callers answers one caller with
	// the other's result.
	// answersOf: per idempotency key, the results (id, else body digest)
	// of each caller's 2xx answers.
	answersOf := map[string]map[string]map[string]bool{}
	for _, req := range reqs {
		for _, j := range r.byKey[req.Key] {
			op := &r.h.Ops[j]
			if !httpIdem2xx(op) {
				continue
			}
			byCaller := answersOf[req.IdempotencyKey]
			if byCaller == nil {
				byCaller = map[string]map[string]bool{}
				answersOf[req.IdempotencyKey] = byCaller
			}
			if byCaller[req.Caller] == nil {
				byCaller[req.Caller] = map[string]bool{}
			}
			byCaller[req.Caller][resultOf(op)] = true
		}
	}
	// othersResult: req's answer is a result another caller's request
	// under the same key got (the key is not scoped to the caller).
	othersResult := func(req *LogicalRequest, op *checker.Operation) bool {
		res := resultOf(op)
		for caller, results := range answersOf[req.IdempotencyKey] {
			if caller != req.Caller && res != "" && results[res] {
				return true
			}
		}
		return false
	}
	scope := scopeRule(r.rec.Variant)
	for i := range reqs {
		req := &reqs[i]
		known[req.Key] = true
		var ok []checker.Operation
		refused := false
		var refusal checker.Operation
		for _, j := range r.byKey[req.Key] {
			op := &r.h.Ops[j]
			switch {
			case httpIdem2xx(op):
				ok = append(ok, *op)
			case httpIdemRefusal(r.rec.Variant, op) && !refused:
				refused, refusal = true, *op
			}
		}
		q.Attempted++
		if len(ok) > 0 || refused {
			q.Acknowledged++
		}
		if len(ok) > 0 {
			q.Fulfilled++
			answered++
		}
		es := r.effects[req.Key]
		lives := 1 // how many things the request may have made: one, and one more for each key life it outlived
		if r.rec.Sink {
			lives = r.lives(req.Key, es)
			q.Expired += lives - 1
		}
		var whys []string
		var named []checker.Operation
		created, effected, lost, dup, pending, extra := false, false, false, false, false, false
		switch {
		case len(ok) > 0:
			tb.answered++
			tb.expired += lives - 1
		case !refused:
			tb.unknown++ // its outcome stayed unknown: it may have created, or not
			tb.expired += lives - 1
		}
		if perRequest {
			switch n := req.things(); {
			case !req.CountRead():
				unread++
			case n > lives:
				dup = true
				whys = append(whys, fmt.Sprintf("created %d things (%s): one logical request creates at most one, however often it is delivered", n, req.describeThings()))
			case n >= 1:
				created = true
			case len(ok) > 0 && r.opts.Undrained:
				pending = true
			case len(ok) > 0 && othersResult(req, &ok[0]):
				// Another caller's request under the same key took its
				// place: the key is not scoped to the caller. That breaks
				// the variant's scope rule, not its retry rule; a variant
				// whose text scopes no key (stripe) has nothing to judge.
				if scope != RuleScopeT0 {
					r.detail.SharedKeyAnswers++
				} else {
					httpIdemFail(&mc, req.Key)
					r.add(ModelEffects, checker.Anomaly{Kind: checker.AnomalyKind(scope), Key: req.Key, Ops: r.evidence(req.Key, ok[0]),
						Explanation: fmt.Sprintf("%s: %s: %s was answered %s, another caller's result under the same key, and the count read lists nothing it created: the key is not scoped to the caller",
							scope, ModelEffects, describeRequest(req), describeHTTPIdemOp(&ok[0]))})
				}
			case len(ok) > 0:
				lost = true
				named = append(named, ok[0])
				whys = append(whys, fmt.Sprintf("was answered %s, and the count read lists nothing it created: a request answered 2xx created exactly one thing", describeHTTPIdemOp(&ok[0])))
			}
			if created && len(ok) == 0 && refused {
				extra = true
				named = append(named, refusal)
				whys = append(whys, fmt.Sprintf("was refused (%s) and never answered 2xx, yet the count read lists %s: a refused request creates nothing", describeHTTPIdemOp(&refusal), req.describeThings()))
			}
		}
		if r.rec.Sink {
			switch {
			case len(es) > lives*perExec:
				dup = true
				whys = append(whys, fmt.Sprintf("took effect %d times at the sink (%s): one logical request has the effects of one execution (%s), however often it is delivered", len(es), describeHTTPIdemEffects(es), r.describePerExec()))
			case len(es) >= 1 && len(ok) == 0 && refused:
				extra = true
				named = append(named, refusal)
				whys = append(whys, fmt.Sprintf("was refused (%s) and never answered 2xx, yet took effect at the sink (%s): a refused request has no effect", describeHTTPIdemOp(&refusal), describeHTTPIdemEffects(es)))
			case len(es) >= 1:
				effected = true
			case len(ok) > 0 && r.opts.Undrained:
				pending = true
			case len(ok) > 0:
				lost = true
				named = append(named, ok[0])
				whys = append(whys, fmt.Sprintf("was answered %s, and its effect never reached the sink, the drain over: a request answered 2xx has exactly one effect", describeHTTPIdemOp(&ok[0])))
			}
		}
		if len(whys) > 0 {
			httpIdemFail(&mc, req.Key)
			r.add(ModelEffects, checker.Anomaly{Kind: checker.AnomalyKind(r.rule), Key: req.Key, Ops: r.evidence(req.Key, named...), Effects: es,
				Explanation: fmt.Sprintf("%s: %s: %s %s", r.rule, ModelEffects, describeRequest(req), strings.Join(whys, "; it "))})
		}
		switch {
		case dup:
			q.Duplicated++
		case lost:
			q.Lost++
		case extra:
			q.Unexpected++
		case pending:
			q.Pending++
		}
		if created || effected || dup {
			q.Effected++
			if len(ok) == 0 && !refused {
				q.Recovered++ // never answered 2xx, and it happened: its answers were lost
			}
		}
	}
	if r.rec.Sink {
		for _, k := range checker.SortedKeys(r.effects) {
			if known[k] {
				continue
			}
			es := r.effects[k]
			q.Unexpected += len(es)
			httpIdemFail(&mc, k)
			r.add(ModelEffects, checker.Anomaly{Kind: checker.AnomalyKind(r.rule), Key: k, Effects: es,
				Explanation: fmt.Sprintf("%s: %s: the sink performed %d effect(s) under %q (%s), which no request of the run names: an effect no request asked for",
					r.rule, ModelEffects, len(es), k, describeHTTPIdemEffects(es))})
		}
	}
	if r.rec.Count && r.rec.Total != nil {
		unread += r.checkTotal(&mc, &q, tb)
	}
	if mc.Result == checker.LinOk && (unread > 0 || q.Pending > 0 || answered == 0) {
		// A count read not answered, an effect still owed, or nothing
		// answered 2xx at all: the run did not show what it must.
		mc.Result = checker.LinUnknown
		switch {
		case answered == 0:
			r.undecided("%s: no logical request was answered 2xx: the run showed nothing the endpoint must have done", ModelEffects)
		case unread > 0:
			r.undecided("%s: %d count read(s) not taken (%s)", ModelEffects, unread, r.firstUnread())
		default:
			r.undecided("%s: the drain was cut short with %d creation(s) or effect(s) of requests answered 2xx not seen yet", ModelEffects, q.Pending)
		}
	}
	return mc, q
}

func (r *httpIdemRun) undecided(format string, args ...any) {
	r.detail.Undecided = append(r.detail.Undecided, fmt.Sprintf(format, args...))
}

// firstUnread says why the first count read not taken was not.
func (r *httpIdemRun) firstUnread() string {
	if t := r.rec.Total; t != nil {
		if t.BeforeErr != "" {
			return "before the run: " + t.BeforeErr
		}
		if t.AfterErr != "" {
			return "after the drain: " + t.AfterErr
		}
	}
	for _, q := range r.rec.Requests {
		if !q.CountRead() {
			return fmt.Sprintf("first: %s, status %d: %s", q.Unique, q.CountStatus, q.CountErr)
		}
	}
	return "none"
}

// effectsPerExecution is how many effects one execution of a request
// makes at the sink. The binding does not say: the bundled endpoint makes
// one, a middleware may call its provider twice (a charge and a receipt).
// So the run teaches it, from the requests that cannot have executed more
// than once: answered 2xx after a single delivery (one request on the
// wire, its answer read whole), under a key no other logical request
// used (its effects are its own). The most effects any of them had is
// what one execution makes; a request with more (per key life) executed
// more than once. With no such request, the fewest effects a request
// answered 2xx had (at least 1): every execution presumed alike, that
// never names a correct endpoint's request a duplicate. This presumes
// executions make as many effects as each other; an endpoint whose count
// varies by body is held to its largest.
func (r *httpIdemRun) effectsPerExecution() int {
	users := map[string]int{}
	for _, q := range r.rec.Requests {
		users[q.IdempotencyKey]++
	}
	most, fewest, from := 0, 0, 0
	for _, q := range r.rec.Requests {
		idx := r.byKey[q.Key]
		n := len(r.effects[q.Key])
		answered := false
		for _, i := range idx {
			answered = answered || httpIdem2xx(&r.h.Ops[i])
		}
		if !answered || n == 0 {
			continue
		}
		if fewest == 0 || n < fewest {
			fewest = n
		}
		if len(idx) == 1 && users[q.IdempotencyKey] == 1 {
			most, from = max(most, n), from+1
		}
	}
	r.detail.LearntFrom = from
	switch {
	case from > 0:
		r.detail.EffectsPerExecution = most
	case fewest > 0:
		r.detail.EffectsPerExecution = fewest
	default:
		return 1
	}
	return r.detail.EffectsPerExecution
}

// describePerExec says how many effects one execution makes and how the
// run learnt it.
func (r *httpIdemRun) describePerExec() string {
	d := r.detail
	switch {
	case d.LearntFrom > 0:
		return fmt.Sprintf("%d, the most any of the %d requests delivered once and answered 2xx had", d.EffectsPerExecution, d.LearntFrom)
	case d.EffectsPerExecution > 0:
		return fmt.Sprintf("%d, the fewest a request answered 2xx had: none was delivered once", d.EffectsPerExecution)
	}
	return "1"
}

// totalBounds are what the logical requests of a run may have created:
// one for each answered 2xx (exactly), at most one for each whose outcome
// stayed unknown (it may or may not have happened), none for one refused
// (a final 4xx and no 2xx), and, with the sink, one more for each key life
// a request outlived (expired).
type totalBounds struct{ answered, unknown, expired int }

// checkTotal judges a difference count read (Record.Total): the requests
// created After - Before things, at least tb.answered and at most
// tb.answered + tb.unknown + tb.expired. The read counts the endpoint as
// a whole, so an anomaly names the run, not a request; Duplicated and Lost
// then count creations, not requests. It returns 1 when a read was not
// taken (the run judged no creation), else 0.
func (r *httpIdemRun) checkTotal(mc *checker.ModelCheck, q *checker.QueueStats, tb totalBounds) int {
	t := r.rec.Total
	if t.BeforeErr != "" || t.AfterErr != "" {
		return 1
	}
	d := t.After - t.Before
	lo, hi := tb.answered, tb.answered+tb.unknown+tb.expired
	key := "GET " + t.Path
	read := fmt.Sprintf("the count read GET %s counted %d before the run and %d after the drain: the requests created %d", t.Path, t.Before, t.After, d)
	switch {
	case d > hi:
		why := fmt.Sprintf("%d answered 2xx, %d of unknown outcome", tb.answered, tb.unknown)
		if tb.expired > 0 {
			why += fmt.Sprintf(", %d more past a key's life", tb.expired)
		}
		q.Duplicated += d - hi
		httpIdemFail(mc, key)
		r.add(ModelEffects, checker.Anomaly{Kind: checker.AnomalyKind(r.rule), Key: key,
			Explanation: fmt.Sprintf("%s: %s: %s, over the upper bound of %d (%s; a refused request creates nothing): %d more than one logical request creates however often it is delivered (or another client created meanwhile)",
				r.rule, ModelEffects, read, hi, why, d-hi)})
	case d < lo && r.opts.Undrained:
		q.Pending += lo - d
	case d < lo:
		q.Lost += lo - d
		httpIdemFail(mc, key)
		r.add(ModelEffects, checker.Anomaly{Kind: checker.AnomalyKind(r.rule), Key: key,
			Explanation: fmt.Sprintf("%s: %s: %s, under the lower bound of %d (the logical requests answered 2xx, each of which created exactly one): %d answered 2xx created nothing",
				r.rule, ModelEffects, read, lo, lo-d)})
	}
	return 0
}

// lives is how many things the request of key may have made, by its
// effects' times: one, and one more for each effect at least a key life
// after the first of the previous life while a delivery may still have
// been on its way to the endpoint (sent before it, its outcome unknown or
// answered after it). Past its key's life a late delivery MAY execute
// again (IETF-2.3-expiry-kept); the workload sends none that late, but a
// delivery it gave up on may arrive that late.
func (r *httpIdemRun) lives(key string, es []checker.Effect) int {
	if r.rec.KeyLifeNs <= 0 || len(es) < 2 {
		return 1
	}
	at := make([]int64, len(es))
	for i, e := range es {
		at[i] = e.At
	}
	sort.Slice(at, func(a, b int) bool { return at[a] < at[b] })
	lives, start := 1, at[0]
	for _, t := range at[1:] {
		if t-start < r.rec.KeyLifeNs {
			continue
		}
		for _, i := range r.byKey[key] {
			op := &r.h.Ops[i]
			if op.Call < t && (op.Effective() == verdict.OutcomeUnknown || op.Return >= t) {
				lives, start = lives+1, t
				break
			}
		}
	}
	return lives
}

// clipList joins at most 5 items, saying how many more there are.
func clipList(items []string) string {
	if len(items) <= 5 {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:5], ", "), len(items)-5)
}

// ReplayModel is the replay rule as a checker.Model: partitioned by
// (caller, key), its state the result of the first 2xx answer (its
// declared id, else its body's digest); every 2xx answer must carry that
// result; a 4xx answer that is not the result (a refusal, "still in
// flight") is allowed only before it; every other answer (a 5xx, a 429,
// no answer) leaves it unchanged.
type ReplayModel struct{}

var _ checker.Model = ReplayModel{}

// Name is ModelReplay.
func (ReplayModel) Name() string { return ModelReplay }

// Partition is the (caller, key) of a request.
func (ReplayModel) Partition(op *checker.Operation) (string, bool) {
	return op.Key, op.Kind == checker.OpPublish && op.Key != ""
}

// Porcupine is the model for porcupine.
func (ReplayModel) Porcupine() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return "" },
		Step: func(state, input, _ any) (bool, any) {
			s := state.(string)
			op := input.(*checker.Operation)
			switch {
			case httpIdem2xx(op) && s == "":
				return true, httpIdemResult(op)
			case httpIdem2xx(op):
				return httpIdemResult(op) == s, s
			case httpIdemNotResult(op):
				return s == "", s
			}
			return true, s
		},
		Equal:             func(a, b any) bool { return a == b },
		DescribeOperation: func(input, _ any) string { return describeHTTPIdemOp(input.(*checker.Operation)) },
		DescribeState: func(state any) string {
			if s := state.(string); s != "" {
				return s
			}
			return "no result yet"
		},
	}
}

// Checks is the exact decision (ReplayDecide); its failures name
// ietf's rule: Check names the variant's.
func (ReplayModel) Checks() []checker.NamedCheck {
	return []checker.NamedCheck{{Rule: RuleRetryIETF, Check: func(ops []checker.Operation) (bool, string) {
		ok, why, _ := ReplayDecide(ops)
		return ok, why
	}}}
}

// ReplayDecide decides one (caller, key)'s answers (any order)
// under ReplayModel exactly, in linear time: they linearize iff
// every 2xx answer carries the same result and no 4xx answer that is not
// the result was sent after a 2xx had come back. When they do not, it
// says why and which operations show it.
func ReplayDecide(ops []checker.Operation) (ok bool, why string, evidence []checker.Operation) {
	var first, firstRet *checker.Operation // the earliest-sent 2xx answer, the one that returned first
	for i := range ops {
		op := &ops[i]
		if !httpIdem2xx(op) {
			continue
		}
		if first == nil || op.Call < first.Call {
			first = op
		}
		if firstRet == nil || op.Return < firstRet.Return {
			firstRet = op
		}
	}
	if first == nil {
		return true, "", nil
	}
	for i := range ops {
		op := &ops[i]
		if httpIdem2xx(op) && httpIdemResult(op) != httpIdemResult(first) {
			return false, fmt.Sprintf("two 2xx answers carry different results: %s, then %s; every delivery of one request gets the first result (a second result is a second thing created, or a replay that is not one)",
				describeHTTPIdemOp(first), describeHTTPIdemOp(op)), []checker.Operation{*first, *op}
		}
	}
	var late *checker.Operation // the latest-sent answer that is not the result
	for i := range ops {
		op := &ops[i]
		if httpIdemNotResult(op) && op.Call > firstRet.Return && (late == nil || op.Call > late.Call) {
			late = op
		}
	}
	if late != nil {
		return false, fmt.Sprintf("a delivery sent %s after the result %s had been answered got %d instead of that result: a retry after the original completed gets its result",
			checker.FormatNs(late.Call-firstRet.Return), describeHTTPIdemOp(firstRet), late.Output.Status), []checker.Operation{*firstRet, *late}
	}
	return true, "", nil
}

// httpIdemReduce keeps, of one key's answers (idx into ops), those the
// model can reject, and of each kind (a 2xx result, a 4xx that is not the
// result) the one sent last and the one that returned first. Under
// ReplayModel every other answer is a no-op and the answers of one
// kind form one stretch of any linearization (the 4xx before the 2xx), so
// the reduction linearizes iff the key's answers do, and keeps porcupine
// fast on a storm's hundreds of concurrent answers.
func httpIdemReduce(ops []checker.Operation, idx []int) []int {
	lastCall, firstReturn := map[string]int{}, map[string]int{}
	var kinds []string
	for _, i := range idx {
		op := &ops[i]
		var k string
		switch {
		case httpIdem2xx(op):
			k = "2xx " + httpIdemResult(op)
		case httpIdemNotResult(op):
			k = "4xx"
		default:
			continue
		}
		j, seen := lastCall[k]
		if !seen {
			kinds = append(kinds, k)
			lastCall[k], firstReturn[k] = i, i
			continue
		}
		if op.Call > ops[j].Call {
			lastCall[k] = i
		}
		if op.Return < ops[firstReturn[k]].Return {
			firstReturn[k] = i
		}
	}
	var out []int
	for _, k := range kinds {
		out = append(out, lastCall[k])
		if firstReturn[k] != lastCall[k] {
			out = append(out, firstReturn[k])
		}
	}
	sort.Ints(out)
	return out
}

// checkReplay judges, per (caller, key), that every 2xx answer carries the
// same result (and nothing but the result answers a delivery sent after
// it), within a key life of the first delivery, with porcupine over ReplayModel on the answers
// httpIdemReduce keeps; a key porcupine runs out of time on makes the
// result UNKNOWN, never PASS. The evidence is ReplayDecide's.
func (r *httpIdemRun) checkReplay() checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelReplay, Result: checker.LinOk}
	pm := ReplayModel{}.Porcupine()
	names := map[string]*LogicalRequest{}
	for i := range r.rec.Requests {
		names[r.rec.Requests[i].Key] = &r.rec.Requests[i]
	}
	for _, k := range checker.SortedKeys(r.byKey) {
		idx := r.byKey[k]
		mc.Partitions++
		mc.Ops += len(idx)
		if life := r.rec.KeyLifeNs; life > 0 {
			// An answer that came back a key life after the first delivery
			// was sent may be a new execution under the expired key: the
			// texts allow it, the check leaves it out.
			var kept []int
			for _, i := range idx {
				if r.h.Ops[i].Return-r.h.Ops[idx[0]].Call < life {
					kept = append(kept, i)
				}
			}
			idx = kept
		}
		ops := make([]checker.Operation, len(idx))
		for j, i := range idx {
			ops[j] = r.h.Ops[i]
		}
		ok, why, ev := ReplayDecide(ops)
		res := porcupine.Ok
		if ok {
			res = porcupine.CheckOperationsTimeout(pm, checker.PorcupineOps(nil, r.h.Ops, httpIdemReduce(r.h.Ops, idx), false), r.opts.Timeout)
		}
		switch {
		case ok && res == porcupine.Ok:
			continue
		case ok && res == porcupine.Unknown:
			if mc.Result == checker.LinOk {
				mc.Result = checker.LinUnknown
			}
			r.undecided("%s: porcupine ran out of time (%s) on %s", ModelReplay, r.opts.Timeout, k)
			continue
		case ok: // porcupine found what the exact decision did not: say so
			why = fmt.Sprintf("no order of the %d answers gives every delivery the first result", len(idx))
			ev = r.evidence(k)
		}
		httpIdemFail(&mc, k)
		name := fmt.Sprintf("key %q", k)
		if q := names[k]; q != nil {
			name = describeRequest(q)
		}
		r.add(ModelReplay, checker.Anomaly{Kind: checker.AnomalyKind(r.rule), Key: k, Ops: ev,
			Explanation: fmt.Sprintf("%s: %s: %s: %s", r.rule, ModelReplay, name, why)})
	}
	return mc
}
