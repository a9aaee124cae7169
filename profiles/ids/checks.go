package ids

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// The IDS checks (RFC-WF-0010, docs/ids-binding.md) over a chaos run of the
// IDS profile. They read what the IDS chaos workload records:
//
//   - History: every POST /commands as an OpPublish whose Key is
//     tenant_id + "/" + idempotency_key, Input.Body the digest of the
//     envelope without command_id and the ephemeral fields (the envelope
//     fingerprint), Output.Status the HTTP status, Output.ID the answer's
//     command_id, Output.Body the digest of the answer's body and
//     Output.State the answer's "status" ("executed", "rejected",
//     "processing", …; "" for a problem document); every GET
//     /commands/{id} as an OpStatus of the same Key with Output.State the
//     status read.
//   - Ledger: every effect the harness's effect sink performed, Key spelled
//     as above, Intent the sink's effect_id, Worker the command_id the
//     target sent with it.
//   - IDSKey records (IDSKeysFile): per key the command it names, whether
//     the registry shields it as I3 (its effects land at the sink) and what
//     GET /evidence answered for it after the drain.
//
// Each check judges one rule and names it: the anomaly's Kind is the rule ID.

// The IDS rules the chaos checks judge (rules.go names them the same).
const (
	RuleIDSExactlyOnceEffects = "IDS-V-exactly-once-effects"
	RuleIDSSameOutcome        = "IDS-IX.A-same-outcome"
	RuleIDSExecutedOrReplayed = "IDS-XII-executed-or-replayed"
)

// The anomaly kinds of the IDS checks: each is the ID of the one rule it
// breaks.
const (
	IDSEffects  checker.AnomalyKind = RuleIDSExactlyOnceEffects
	IDSOutcome  checker.AnomalyKind = RuleIDSSameOutcome
	IDSEvidence checker.AnomalyKind = RuleIDSExecutedOrReplayed
)

// Model names of the IDS checks in Report.Models.
const (
	ModelIDSOutcome  = "ids-outcome"  // IX.A: one terminal outcome per key (porcupine model IDSOutcomeModel)
	ModelIDSEffects  = "ids-effects"  // V: effects per key, after the drain
	ModelIDSEvidence = "ids-evidence" // XII: evidence per key against the effects
)

// IDSKeysFile is the name of the per-key records in a run directory.
const IDSKeysFile = "ids-keys.jsonl"

// IDSKey is what the workload knows of one key at the end of a run: the
// command it names, whether its effects land at the effect sink (the
// registry declares it I3, shielded), and the evidence GET /evidence
// answered after the drain.
type IDSKey struct {
	Key      string `json:"key"`     // tenant_id + "/" + idempotency_key
	Command  string `json:"command"` // entity.action
	External bool   `json:"external"`
	// EvidenceStatus is the HTTP status of the evidence read, 0 when none
	// answered (then Evidence is unknown, not empty).
	EvidenceStatus int               `json:"evidence_status"`
	EvidenceErr    string            `json:"evidence_err,omitempty"`
	Evidence       []IDSEvidenceItem `json:"evidence,omitempty"`
}

// EvidenceRead reports whether the evidence of the key was read.
func (k IDSKey) EvidenceRead() bool { return k.EvidenceStatus == 200 }

// IDSEvidenceItem is one item of GET /evidence (docs/ids-binding.md).
type IDSEvidenceItem struct {
	EvidenceID        string `json:"evidence_id,omitempty"`
	Decision          string `json:"decision"`
	Executed          bool   `json:"executed"`
	CommandID         string `json:"command_id,omitempty"`
	OriginalCommandID string `json:"original_command_id,omitempty"`
	IdempotencyKey    string `json:"idempotency_key,omitempty"`
	OutcomeRef        string `json:"outcome_ref,omitempty"`
}

// WriteIDSKeys writes the records as JSON Lines.
func WriteIDSKeys(w io.Writer, keys []IDSKey) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range keys {
		if err := enc.Encode(&keys[i]); err != nil {
			return fmt.Errorf("write ids keys: %d: %w", i, err)
		}
	}
	return bw.Flush()
}

// ReadIDSKeys parses what WriteIDSKeys wrote.
func ReadIDSKeys(r io.Reader) ([]IDSKey, error) {
	var out []IDSKey
	err := checker.ReadJSONL(r, func(line []byte, n int) error {
		var k IDSKey
		if err := json.Unmarshal(line, &k); err != nil {
			return fmt.Errorf("read ids keys: line %d: %w", n, err)
		}
		if k.Key == "" {
			return fmt.Errorf("read ids keys: line %d: no key", n)
		}
		out = append(out, k)
		return nil
	})
	return out, err
}

// IDSOptions say what the IDS workload promised.
type IDSOptions struct {
	// Undrained says the drain ran out of time: an executed key whose
	// effect has not landed yet (an outbox not dispatched) is pending, not
	// missing, and the verdict is at best UNKNOWN.
	Undrained bool `json:"undrained,omitempty"`
	// MaxExamples bounds the anomalies kept with evidence per kind (default 20).
	MaxExamples int `json:"max_examples,omitempty"`
	// ReplayForm is the reading of decision replay-form (IDS §IX.A) the
	// target declared: "outcome" (a replay is the outcome document again,
	// status and body), "reference" (a replay carries the original's
	// command_id, status and outcome_ref; its result may be left out), or
	// "" (none declared: the run passes under either reading the whole
	// run follows, and the report says which).
	ReplayForm string `json:"replay_form,omitempty"`
}

// IDSDetail is what the IDS checks found besides anomalies (Report.Detail).
type IDSDetail struct {
	// ReplayForm is the reading of decision replay-form the run was judged
	// under: the declared one, else the one the target followed
	// ("outcome" when its replays follow both: the outcome document
	// carries the outcome_ref too), else "" (it followed neither
	// throughout). ReplayFormWhy says how it was decided.
	ReplayForm         string `json:"replay_form,omitempty"`
	ReplayFormDeclared bool   `json:"replay_form_declared,omitempty"`
	ReplayFormWhy      string `json:"replay_form_why,omitempty"`
}

// maxIDSAnomalyOps bounds the operations one anomaly carries (a storm has
// hundreds per key).
const maxIDSAnomalyOps = 16

// CheckIDS runs the three IDS checks over a run and sums them up in a
// Report (Queue: Attempted keys, Acknowledged with a terminal answer,
// Effected, Fulfilled = executed, Duplicated, Lost = executed without
// effect, Unexpected, Pending). It is pure.
func CheckIDS(h checker.History, l checker.Ledger, keys []IDSKey, opts IDSOptions) checker.Report {
	if opts.MaxExamples <= 0 {
		opts.MaxExamples = 20
	}
	rep := checker.Report{Ops: len(h.Ops), Effects: len(l.Effects), Counts: map[checker.AnomalyKind]int{}}
	add := func(a checker.Anomaly) {
		rep.Counts[a.Kind]++
		if rep.Counts[a.Kind] <= opts.MaxExamples {
			rep.Anomalies = append(rep.Anomalies, a)
		}
	}
	byKey := opsByKey(h)
	// Effects first: a duplicated effect is what the run is about, and the
	// anomalies are shown in this order.
	effects, q := checkIDSEffects(h, l, byKey, keys, opts, add)
	var detail IDSDetail
	outcome := checkIDSOutcomes(h, byKey, opts.ReplayForm, &detail, add)
	evidence := checkIDSEvidence(h, byKey, l, keys, opts, add)
	rep.Models = []checker.ModelCheck{effects, outcome, evidence}
	rep.Queue = q
	rep.Detail = &detail
	for k := range rep.Counts {
		if rep.Counts[k] == 0 {
			delete(rep.Counts, k)
		}
	}
	return rep
}

// opsByKey indexes the keyed operations (publishes and status reads) by
// key, in call order.
func opsByKey(h checker.History) map[string][]int {
	m := map[string][]int{}
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Key == "" || (op.Kind != checker.OpPublish && op.Kind != checker.OpStatus) {
			continue
		}
		m[op.Key] = append(m[op.Key], i)
	}
	for _, idx := range m {
		sort.SliceStable(idx, func(a, b int) bool { return h.Ops[idx[a]].Call < h.Ops[idx[b]].Call })
	}
	return m
}

// idsAnswered reports whether op got an answer (a response whose body was
// read whole, not a 5xx).
func idsAnswered(op *checker.Operation) bool {
	return op.Outcome == verdict.OutcomeOK && op.Output.Status != 0 && op.Output.Status < 500
}

// idsTerminal reports whether op is a POST /commands answered with a
// terminal outcome document (201 executed, 422 rejected, …): what every
// later delivery of the key must replay.
func idsTerminal(op *checker.Operation) bool {
	if op.Kind != checker.OpPublish || !idsAnswered(op) {
		return false
	}
	switch op.Output.State {
	case StatusExecuted, StatusRejected, StatusFailed, "compensated":
		return true
	}
	return false
}

// idsProcessing reports whether op is a POST /commands answered 202
// processing.
func idsProcessing(op *checker.Operation) bool {
	return op.Kind == checker.OpPublish && idsAnswered(op) && op.Output.State == StatusProcessing
}

func idsOutcomeOf(op *checker.Operation) string {
	return fmt.Sprintf("%d %s command_id %s body %s", op.Output.Status, op.Output.State, op.Output.ID, checker.Abbreviate(op.Output.Body))
}

// The readings of decision replay-form (IDS §IX.A) the outcome check
// judges under.
const (
	ReplayFormOutcome   = "outcome"
	ReplayFormReference = "reference"
)

// idsSameTerminal reports whether op, a terminal answer, repeats first
// under the reading form of §IX.A: the same status and body (outcome), or
// the same original command_id, terminal status and outcome_ref
// (reference; a document that leaves the result out is such a replay, and
// so is the outcome document itself).
func idsSameTerminal(form string, first, op *checker.Operation) (bool, string) {
	if form == ReplayFormReference {
		switch {
		case first.Output.Ref == "":
			return false, fmt.Sprintf("the terminal answer %s carries no outcome_ref: nothing a replay by reference could refer to", idsOutcomeOf(first))
		case op.Output.Ref != first.Output.Ref:
			return false, fmt.Sprintf("outcome_ref %q, the first terminal answer's was %q", op.Output.Ref, first.Output.Ref)
		case op.Output.ID != first.Output.ID:
			return false, fmt.Sprintf("command_id %q, the first terminal answer's was %q", op.Output.ID, first.Output.ID)
		case op.Output.State != first.Output.State:
			return false, fmt.Sprintf("status %q, the first terminal answer's was %q", op.Output.State, first.Output.State)
		}
		return true, ""
	}
	if op.Output.Status != first.Output.Status || op.Output.Body != first.Output.Body {
		return false, "another status or outcome document"
	}
	return true, ""
}

// IDSOutcomeDecide decides one key's deliveries (its publishes, any order)
// under the IX.A model exactly, in linear time, under the reading form of
// decision replay-form ("" is "outcome"): they linearize iff every terminal
// answer repeats the earliest one (idsSameTerminal) and no delivery
// answered "processing" was sent after a terminal answer had come back.
// When they do not, it says why and which operations show it.
func IDSOutcomeDecide(ops []checker.Operation, form string) (ok bool, why string, evidence []checker.Operation) {
	if form == "" {
		form = ReplayFormOutcome
	}
	var first *checker.Operation    // the earliest terminal answer
	var firstRet *checker.Operation // the terminal answer that returned first
	for i := range ops {
		op := &ops[i]
		if !idsTerminal(op) {
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
		if !idsTerminal(op) || op == first {
			continue
		}
		if same, diff := idsSameTerminal(form, first, op); !same {
			return false, fmt.Sprintf("two deliveries of one envelope got different terminal outcomes: %s (client %d), then %s (client %d): %s; under the %s reading of replay-form a duplicate must get %s",
				idsOutcomeOf(first), first.ClientID, idsOutcomeOf(op), op.ClientID, diff, form, replayFormMeans(form)), []checker.Operation{*first, *op}
		}
	}
	for i := range ops {
		op := &ops[i]
		if idsProcessing(op) && op.Call > firstRet.Return {
			return false, fmt.Sprintf("a delivery sent %s after the terminal outcome %s had been answered got \"processing\" instead of that outcome",
				checker.FormatNs(op.Call-firstRet.Return), idsOutcomeOf(firstRet)), []checker.Operation{*firstRet, *op}
		}
	}
	return true, "", nil
}

func replayFormMeans(form string) string {
	if form == ReplayFormReference {
		return "the original command_id, status and outcome_ref"
	}
	return "the same status and outcome document"
}

// IDSOutcomeModel is the idempotency model of IDS (IX.A) as a checker.Model:
// partitioned by key, its state the first terminal outcome; a terminal
// answer must equal it, "processing" is allowed only before it, every other
// answer (a refusal before any decision: 400, 409, 428, 429) and every
// unknown outcome leaves it unchanged.
type IDSOutcomeModel struct {
	// Form is the reading of decision replay-form it judges under ("":
	// outcome).
	Form string
}

var _ checker.Model = IDSOutcomeModel{}

// Name is ModelIDSOutcome.
func (IDSOutcomeModel) Name() string { return ModelIDSOutcome }

// Partition is the key of a publish.
func (IDSOutcomeModel) Partition(op *checker.Operation) (string, bool) {
	return op.Key, op.Kind == checker.OpPublish && op.Key != ""
}

type idsOutcomeState struct {
	has            bool
	status         int
	body           string
	id, ref, state string
}

// Porcupine is the model for porcupine.
func (m IDSOutcomeModel) Porcupine() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return idsOutcomeState{} },
		Step: func(state, input, _ any) (bool, any) {
			s := state.(idsOutcomeState)
			op := input.(*checker.Operation)
			switch {
			case idsTerminal(op) && !s.has:
				return true, idsOutcomeState{has: true, status: op.Output.Status, body: op.Output.Body,
					id: op.Output.ID, ref: op.Output.Ref, state: op.Output.State}
			case idsTerminal(op):
				first := checker.Operation{Output: checker.Output{Status: s.status, Body: s.body, ID: s.id, Ref: s.ref, State: s.state}}
				same, _ := idsSameTerminal(m.Form, &first, op)
				return same, s
			case idsProcessing(op):
				return !s.has, s
			}
			return true, s
		},
		Equal:             func(a, b any) bool { return a == b },
		DescribeOperation: func(input, _ any) string { return checker.DescribeOp(input.(*checker.Operation)) },
		DescribeState: func(state any) string {
			s := state.(idsOutcomeState)
			if !s.has {
				return "no terminal outcome"
			}
			return fmt.Sprintf("%d %s", s.status, checker.Abbreviate(s.body))
		},
	}
}

// Checks is the exact decision, named after IX.A.
func (m IDSOutcomeModel) Checks() []checker.NamedCheck {
	return []checker.NamedCheck{{Rule: RuleIDSSameOutcome, Check: func(ops []checker.Operation) (bool, string) {
		ok, why, _ := IDSOutcomeDecide(ops, m.Form)
		return ok, why
	}}}
}

// checkIDSOutcomes judges IX.A per key with IDSOutcomeDecide, under the
// declared reading of replay-form; with none declared, under each reading
// the text allows (§IX.A: "the same terminal outcome, or - a reference to
// the same terminal evidence chain"): the run passes when every key
// follows one of them, and detail says which. A run that follows neither
// throughout is judged under the reading fewer keys break, and the
// anomalies say so.
func checkIDSOutcomes(h checker.History, byKey map[string][]int, declared string, detail *IDSDetail, add func(checker.Anomaly)) checker.ModelCheck {
	type failure struct {
		key, why string
		ev       []checker.Operation
	}
	judge := func(form string) (partitions, ops int, fails []failure) {
		for _, k := range checker.SortedKeys(byKey) {
			var kops []checker.Operation
			for _, i := range byKey[k] {
				if h.Ops[i].Kind == checker.OpPublish {
					kops = append(kops, h.Ops[i])
				}
			}
			if len(kops) == 0 {
				continue
			}
			partitions++
			ops += len(kops)
			if ok, why, ev := IDSOutcomeDecide(kops, form); !ok {
				fails = append(fails, failure{k, why, ev})
			}
		}
		return
	}
	form, note := declared, ""
	var partitions, ops int
	var fails []failure
	if declared != "" {
		partitions, ops, fails = judge(declared)
		detail.ReplayForm, detail.ReplayFormDeclared = declared, true
		detail.ReplayFormWhy = "declared (--reading " + DecisionReplayForm + "=" + declared + "): every replay is judged under it"
	} else {
		p, o, byOutcome := judge(ReplayFormOutcome)
		_, _, byRef := judge(ReplayFormReference)
		partitions, ops = p, o
		switch {
		case len(byOutcome) == 0:
			form, fails = ReplayFormOutcome, nil
			detail.ReplayFormWhy = "none declared; every replay was the outcome document again (status and body), which carries the original outcome_ref too: the target follows the outcome reading (and so the reference reading)"
		case len(byRef) == 0:
			form, fails = ReplayFormReference, nil
			detail.ReplayFormWhy = fmt.Sprintf("none declared; %d key(s) were not replayed with the outcome document itself, but every replay carried the original command_id, status and outcome_ref: the target follows the reference reading", len(byOutcome))
		default:
			form, fails = ReplayFormReference, byRef
			if len(byOutcome) < len(byRef) {
				form, fails = ReplayFormOutcome, byOutcome
			}
			note = fmt.Sprintf(" (no reading declared, and the target follows neither throughout: %d key(s) break the outcome reading, %d the reference reading; judged under the %s reading, which fewer break)",
				len(byOutcome), len(byRef), form)
			detail.ReplayFormWhy = "none declared; the target follows neither reading throughout" + note
			form = ""
		}
		detail.ReplayForm = form
	}
	name := ModelIDSOutcome
	switch {
	case detail.ReplayFormDeclared:
		name += " replay-form=" + declared + " (declared)"
	case detail.ReplayForm != "":
		name += " replay-form=" + detail.ReplayForm + " (followed)"
	default:
		name += " replay-form: neither"
	}
	mc := checker.ModelCheck{Model: name, Result: checker.LinOk, Partitions: partitions, Ops: ops}
	for _, f := range fails {
		mc.Result = checker.LinIllegal
		mc.FailingTotal++
		if len(mc.Failing) < 100 {
			mc.Failing = append(mc.Failing, f.key)
		}
		add(checker.Anomaly{Kind: IDSOutcome, Key: f.key, Explanation: RuleIDSSameOutcome + ": key " + f.key + ": " + f.why + note, Ops: f.ev})
	}
	return mc
}

// keyOps returns at most maxIDSAnomalyOps operations of a key: its terminal
// answers and status reads first, then the rest, in call order.
func keyOps(h checker.History, idx []int) []checker.Operation {
	var first, rest []checker.Operation
	for _, i := range idx {
		op := h.Ops[i]
		if idsTerminal(&op) || (op.Kind == checker.OpStatus && op.Output.State == StatusExecuted) {
			first = append(first, op)
		} else {
			rest = append(rest, op)
		}
	}
	out := append(first, rest...)
	if len(out) > maxIDSAnomalyOps {
		out = out[:maxIDSAnomalyOps]
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Call < out[b].Call })
	return out
}

// executedBy returns the operations that show a key executed: a delivery
// answered with the executed outcome, or a status read of it executed.
func executedBy(h checker.History, idx []int) []checker.Operation {
	var out []checker.Operation
	for _, i := range idx {
		op := &h.Ops[i]
		if (idsTerminal(op) && op.Output.State == StatusExecuted) ||
			(op.Kind == checker.OpStatus && idsAnswered(op) && op.Output.State == StatusExecuted) {
			out = append(out, *op)
		}
	}
	return out
}

func effectIDs(es []checker.Effect) string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.Intent
		if e.Worker != "" {
			ids[i] += " (command_id " + e.Worker + ")"
		}
	}
	return strings.Join(ids, ", ")
}

// checkIDSEffects judges V: at most one effect per key; exactly one for a
// key of an I3 command that executed (a delivery was answered executed, or
// its status read executed), once the drain is over; no effect for a key
// no delivery named.
func checkIDSEffects(h checker.History, l checker.Ledger, byKey map[string][]int, keys []IDSKey, opts IDSOptions, add func(checker.Anomaly)) (checker.ModelCheck, checker.QueueStats) {
	mc := checker.ModelCheck{Model: ModelIDSEffects, Result: checker.LinOk, Partitions: len(byKey), Ops: len(l.Effects)}
	var q checker.QueueStats
	effects := map[string][]checker.Effect{}
	for _, e := range l.Effects {
		effects[e.Key] = append(effects[e.Key], e)
	}
	external := map[string]bool{}
	for _, k := range keys {
		external[k.Key] = k.External
	}
	fail := func(k string) {
		mc.Result = checker.LinIllegal
		mc.FailingTotal++
		if len(mc.Failing) < 100 {
			mc.Failing = append(mc.Failing, k)
		}
	}
	for _, k := range checker.SortedKeys(byKey) {
		idx := byKey[k]
		hasPublish := slices.ContainsFunc(idx, func(i int) bool { return h.Ops[i].Kind == checker.OpPublish })
		if !hasPublish {
			continue
		}
		q.Attempted++
		if slices.ContainsFunc(idx, func(i int) bool { return idsTerminal(&h.Ops[i]) }) {
			q.Acknowledged++
		}
		es := effects[k]
		exec := executedBy(h, idx)
		if len(exec) > 0 {
			q.Fulfilled++
		}
		if len(es) > 0 {
			q.Effected++
		}
		if len(es) > 0 && !slices.ContainsFunc(idx, func(i int) bool { return idsAnswered(&h.Ops[i]) && h.Ops[i].Kind == checker.OpPublish }) {
			q.Recovered++ // every delivery's answer was lost, and it took effect
		}
		switch {
		case len(es) > 1:
			q.Duplicated++
			fail(k)
			add(checker.Anomaly{Kind: IDSEffects, Key: k,
				Explanation: fmt.Sprintf("%s: key %s (%s) took effect %d times at the sink: %s; one logical command must have one effect however often it is delivered",
					RuleIDSExactlyOnceEffects, k, effectCommand(es, keys, k), len(es), effectIDs(es)),
				Ops: keyOps(h, idx), Effects: es})
		case len(es) == 0 && len(exec) > 0 && external[k] && opts.Undrained:
			q.Pending++
		case len(es) == 0 && len(exec) > 0 && external[k]:
			q.Lost++
			fail(k)
			add(checker.Anomaly{Kind: IDSEffects, Key: k,
				Explanation: fmt.Sprintf("%s: key %s (%s) was executed (%s) and its effect never reached the sink, the drain over: an executed I3 command must have its one effect",
					RuleIDSExactlyOnceEffects, k, effectCommand(nil, keys, k), checker.DescribeOp(&exec[0])),
				Ops: keyOps(h, idx)})
		}
	}
	for _, k := range checker.SortedKeys(effects) {
		if _, ok := byKey[k]; ok {
			continue
		}
		es := effects[k]
		q.Unexpected++
		fail(k)
		add(checker.Anomaly{Kind: IDSEffects, Key: k,
			Explanation: fmt.Sprintf("%s: the sink performed %d effect(s) for key %s (%s), which no delivery of the run names: an effect no command asked for (or a key the target derived otherwise)",
				RuleIDSExactlyOnceEffects, len(es), k, effectIDs(es)),
			Effects: es})
	}
	if mc.Result == checker.LinOk && q.Pending > 0 {
		mc.Result = checker.LinUnknown
	}
	return mc, q
}

func effectCommand(es []checker.Effect, keys []IDSKey, k string) string {
	for _, r := range keys {
		if r.Key == k && r.Command != "" {
			return r.Command
		}
	}
	return "command unknown"
}

// checkIDSEvidence judges XII per key whose evidence was read: at most one
// item says executed, and it is the first_seen one; every other item is a
// duplicate_replayed or conflict_rejected that did not execute; at most one
// first_seen; no more effects at the sink than items that say executed;
// and, for an I3 command the history shows executed (an answer or a status
// read), as many. (A first delivery the command itself refused, 422
// rejected, may say executed: it was performed, not replayed, and has no
// effect.) A key whose evidence could not be read is undecided.
func checkIDSEvidence(h checker.History, byKey map[string][]int, l checker.Ledger, keys []IDSKey, opts IDSOptions, add func(checker.Anomaly)) checker.ModelCheck {
	mc := checker.ModelCheck{Model: ModelIDSEvidence, Result: checker.LinOk}
	effects := map[string][]checker.Effect{}
	for _, e := range l.Effects {
		effects[e.Key] = append(effects[e.Key], e)
	}
	unread := 0
	for _, k := range keys {
		if !k.EvidenceRead() {
			unread++
			continue
		}
		mc.Partitions++
		mc.Ops += len(k.Evidence)
		why := idsEvidenceWrong(k, effects[k.Key], len(executedBy(h, byKey[k.Key])) > 0, opts)
		if why == "" {
			continue
		}
		mc.Result = checker.LinIllegal
		mc.FailingTotal++
		if len(mc.Failing) < 100 {
			mc.Failing = append(mc.Failing, k.Key)
		}
		add(checker.Anomaly{Kind: IDSEvidence, Key: k.Key,
			Explanation: fmt.Sprintf("%s: key %s (%s): %s", RuleIDSExecutedOrReplayed, k.Key, k.Command, why),
			Effects:     effects[k.Key]})
	}
	if unread > 0 && mc.Result == checker.LinOk {
		mc.Result = checker.LinUnknown
	}
	return mc
}

func describeItem(it IDSEvidenceItem) string {
	s := fmt.Sprintf("%s executed=%t command_id %s", it.Decision, it.Executed, it.CommandID)
	if it.EvidenceID != "" {
		s = it.EvidenceID + " " + s
	}
	return s
}

func idsEvidenceWrong(k IDSKey, es []checker.Effect, executedSeen bool, opts IDSOptions) string {
	var executed, firstSeen []IDSEvidenceItem
	for _, it := range k.Evidence {
		if it.Executed {
			executed = append(executed, it)
		}
		switch it.Decision {
		case DecisionFirstSeen:
			firstSeen = append(firstSeen, it)
		case DecisionReplayed, DecisionConflicted:
			if it.Executed {
				return fmt.Sprintf("evidence %s says a %s delivery executed: a replayed or rejected delivery performs nothing", describeItem(it), it.Decision)
			}
		default:
			return fmt.Sprintf("evidence %s has decision %q: want first_seen, duplicate_replayed or conflict_rejected", describeItem(it), it.Decision)
		}
	}
	switch {
	case len(executed) > 1:
		return fmt.Sprintf("%d evidence items say executed (%s, %s): one logical command executes once, every other delivery is replayed (%d effect(s) at the sink: %s)",
			len(executed), describeItem(executed[0]), describeItem(executed[1]), len(es), effectIDs(es))
	case len(firstSeen) > 1:
		return fmt.Sprintf("%d evidence items are first_seen (%s, %s): only the first delivery is",
			len(firstSeen), describeItem(firstSeen[0]), describeItem(firstSeen[1]))
	case len(executed) == 1 && executed[0].Decision != DecisionFirstSeen:
		return fmt.Sprintf("evidence %s says executed but is not first_seen", describeItem(executed[0]))
	}
	switch {
	case len(executed) < len(es):
		return fmt.Sprintf("%d effect(s) at the sink (%s) but %d evidence item(s) say executed: the evidence must say when execution was performed",
			len(es), effectIDs(es), len(executed))
	case len(executed) > len(es) && k.External && executedSeen && !opts.Undrained:
		return fmt.Sprintf("evidence %s says executed but the sink performed no effect for this I3 command, the drain over",
			describeItem(executed[0]))
	}
	return ""
}
