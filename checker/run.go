package checker

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
	"github.com/idscheck/idscheck/verdict"
)

// check holds the state of one Check call.
type check struct {
	h      History
	l      Ledger
	opts   Options
	report Report
	// held, when set, collects what add is given instead of reporting it:
	// a named check's findings wait for its model's word.
	held *[]Anomaly
	// contradicted counts named findings dropped because their model
	// accepted the partition: a named check must never contradict its
	// model, so the tests hold this at zero.
	contradicted int
	env          *modelEnv
	// unexpectedIntents are the intents the lease checks found unexpected.
	unexpectedIntents map[string]bool
}

func newCheck(h History, l Ledger, opts Options) *check {
	return &check{h: h, l: l, opts: opts, unexpectedIntents: map[string]bool{}, report: Report{Ops: len(h.Ops), Effects: len(l.Effects), Counts: map[AnomalyKind]int{}}}
}

// maxFailingKeys bounds the failing keys listed per model.
const maxFailingKeys = 100

// maxEvidenceOps bounds the operations kept with one anomaly.
const maxEvidenceOps = 24

// add counts a and keeps it, with its evidence, while fewer than
// Options.MaxExamples of its kind are kept.
func (c *check) add(a Anomaly) {
	if c.held != nil {
		*c.held = append(*c.held, a)
		return
	}
	c.report.Counts[a.Kind]++
	if c.report.Counts[a.Kind] > c.opts.MaxExamples {
		return
	}
	if len(a.Ops) > maxEvidenceOps {
		a.Ops = a.Ops[:maxEvidenceOps]
	}
	c.report.Anomalies = append(c.report.Anomalies, a)
}

// bounds returns what env knows of intent id.
func (e *modelEnv) bounds(id string) *IntentBounds {
	if b := e.intents[id]; b != nil {
		return b
	}
	return &anyIntent
}

func (c *check) run() {
	parts := partitions(c.h.Ops)
	env := newModelEnv(c.h, c.l, c.opts, parts)
	c.env = env
	c.report.Options = c.opts
	c.report.FirstHiddenClaim = math.MaxInt64
	if len(env.hidden) > 0 {
		c.report.FirstHiddenClaim = env.hidden[0]
	}
	c.report.HiddenClaims = env.hidden

	// named checks, per partition, held until the model has spoken
	held := make([][]Anomaly, len(parts))
	suspect := make([]bool, len(parts))
	count := map[string]int{}
	for i, p := range parts {
		count[p.model]++
		var buf []Anomaly
		c.held = &buf
		switch p.model {
		case ModelIdempotency:
			c.checkIdempotency(p.key, p.ops)
		case ModelLease:
			c.checkLease(p.key, p.ops, env.bounds(p.key), env.hidden)
		}
		c.held = nil
		held[i], suspect[i] = buf, len(buf) > 0
	}

	// the models, under one reading of extend for the whole history: from
	// now first; if that leaves an intent illegal, the intents that were
	// extended again under "added", and the reading that explains more
	envs := [2]*modelEnv{env, env}
	envs[0].reading = readingFromNow
	added := *env
	added.reading = readingAdded
	envs[1] = &added
	todo := make([]bool, len(parts))
	for i := range todo {
		todo[i] = true
	}
	status := c.decideParts(parts, todo, suspect, envs[0])
	reading := 0
	var other []uint8 // what the other reading says of each partition
	if n := countIllegal(parts, status); n > 0 {
		extended := false
		for i, p := range parts {
			todo[i] = p.model == ModelLease && c.extended(p)
			extended = extended || todo[i]
		}
		if extended {
			alt := c.decideParts(parts, todo, suspect, envs[1])
			for i := range alt {
				if !todo[i] {
					alt[i] = status[i]
				}
			}
			if countIllegal(parts, alt) < n {
				status, other, reading = alt, status, 1
			} else {
				other = alt
			}
		}
	}
	env = envs[reading]
	c.report.ExtendReading = [2]string{"from-now", "added"}[reading]
	notes := c.hiddenBudget(parts, status, env)

	results := map[string]LinResult{ModelIdempotency: LinOk, ModelLease: LinOk}
	for i, p := range parts {
		switch status[i] {
		case partIllegal:
			results[p.model] = LinIllegal
		case partUndecided:
			results[p.model] = worse(results[p.model], LinUnknown)
		}
	}
	// the named findings stand where their model found the partition
	// illegal (or could not decide it); where it accepted it, they are
	// dropped (and counted: that would be a defect of the named check)
	for i := range parts {
		if !suspect[i] {
			continue
		}
		if status[i] == partLegal {
			c.contradicted += len(held[i])
			suspect[i] = false
			continue
		}
		for _, a := range held[i] {
			if a.Kind == Unexpected {
				c.report.Queue.Unexpected++
				c.unexpectedIntents[a.Key] = true
			}
			c.add(a)
		}
	}

	failingKeys := map[string][]string{}
	failingTotal := map[string]int{}
	for i, p := range parts {
		if status[i] != partIllegal {
			continue
		}
		failingTotal[p.model]++
		if len(failingKeys[p.model]) < maxFailingKeys {
			failingKeys[p.model] = append(failingKeys[p.model], p.key)
		}
		if len(c.report.FailingPartitions) < c.opts.MaxExamples {
			fp := Partition{Model: p.model, Key: p.key}
			for _, i := range p.ops {
				fp.Ops = append(fp.Ops, c.h.Ops[i])
			}
			if p.model == ModelLease {
				fp.Bounds = env.bounds(p.key)
			}
			c.report.FailingPartitions = append(c.report.FailingPartitions, fp)
		}
		if !suspect[i] {
			note := notes[i]
			if other != nil && other[i] == partLegal {
				note = fmt.Sprintf(" under the reading of extend the rest of the history needs (%s; the other would allow this intent)", c.report.ExtendReading)
			}
			c.add(Anomaly{
				Kind: NotLinearizable, Key: p.key,
				Explanation: fmt.Sprintf("no order of the %d operations on %s %s is allowed by the %s model (%s)%s%s",
					len(p.ops), keyNoun(p.model), p.key, p.model, modelPromise(p.model), note, c.stuck(p, env)),
				Ops: firstOps(c.h.Ops, p.ops, maxEvidenceOps),
			})
		}
	}
	nops := map[string]int{}
	for _, p := range parts {
		nops[p.model] += len(p.ops)
	}
	for _, m := range []string{ModelIdempotency, ModelLease} {
		c.report.Models = append(c.report.Models, ModelCheck{Model: m, Result: results[m], Ops: nops[m], Partitions: count[m], Failing: failingKeys[m], FailingTotal: failingTotal[m]})
	}

	if !c.opts.SkipQueue {
		c.queue(parts)
	}
}

// hiddenBudget holds the intents to the claims whose answer was lost: each
// took one intent at most, but a partition may use any of them. It finds
// how many each legal partition that can use them needs (the fewest with
// which it is still legal, earliest first); if they need more than were
// made, the partitions past the budget are illegal, with a note saying why.
func (c *check) hiddenBudget(parts []part, status []uint8, env *modelEnv) map[int]string {
	h := len(env.hidden) // the most one partition can use
	if h == 0 {
		return nil
	}
	todo := make([]bool, len(parts))
	var remaining []int
	for i, p := range parts {
		if p.model == ModelLease && status[i] == partLegal && c.mayUseHidden(p) {
			todo[i] = true
			remaining = append(remaining, i)
		}
	}
	need := map[int]int{}
	none := make([]bool, len(parts))
	for k := 0; k < h && len(remaining) > 0; k++ {
		ek := *env
		ek.hidden = env.hidden[:k]
		st := c.decideParts(parts, todo, none, &ek)
		var still []int
		for _, i := range remaining {
			if st[i] == partIllegal {
				still = append(still, i)
				continue
			}
			need[i], todo[i] = k, false
		}
		remaining = still
	}
	for _, i := range remaining {
		need[i] = h
	}
	total := 0
	for _, n := range need {
		total += n
	}
	if total <= env.hiddenTotal {
		return nil
	}
	notes := map[int]string{}
	used := 0
	for i := range parts {
		n, ok := need[i]
		if !ok || n == 0 {
			continue
		}
		if used+n <= env.hiddenTotal {
			used += n
			continue
		}
		status[i] = partIllegal
		notes[i] = fmt.Sprintf(" once the other intents have taken their share of the %d claims whose answer was lost: alone it needs %d of them (no claim recorded explains what it shows), and each took one intent at most", env.hiddenTotal, n)
	}
	return notes
}

// mayUseHidden reports whether a claim whose answer was lost can explain
// anything in p: a claim at attempt 2 or more, or a read of claimed or dead.
func (c *check) mayUseHidden(p part) bool {
	for _, i := range p.ops {
		op := &c.h.Ops[i]
		if op.Effective() != verdict.OutcomeOK {
			continue
		}
		if op.Kind == OpClaim && op.Output.Attempts >= 2 || op.Kind == OpStatus && (op.Output.State == StateClaimed || op.Output.State == StateDead) {
			return true
		}
	}
	return false
}

// countIllegal counts the lease partitions found illegal.
func countIllegal(parts []part, status []uint8) int {
	n := 0
	for i, p := range parts {
		if p.model == ModelLease && status[i] == partIllegal {
			n++
		}
	}
	return n
}

// extended reports whether an extension may have taken effect in p.
func (c *check) extended(p part) bool {
	for _, i := range p.ops {
		op := &c.h.Ops[i]
		if op.Kind == OpExtend && op.Effective() != verdict.OutcomeFailed {
			return true
		}
	}
	return false
}

func keyNoun(model string) string {
	if model == ModelIdempotency {
		return "idempotency key"
	}
	return "intent"
}

func modelPromise(model string) string {
	if model == ModelIdempotency {
		return "the first accepted body fixes the response, the same body replays it, another body is refused"
	}
	return "one live lease at a time, a superseded or expired token never succeeds, a fulfilled intent stays fulfilled, claim_attempts grows by one with every claim, dead only at max_attempts"
}

// stuck says where the longest order the model accepts for p ends: the
// operations of p it cannot place, the earliest first. Only for the first
// Options.MaxExamples not-linearizable partitions; empty if undecided.
func (c *check) stuck(p part, env *modelEnv) string {
	if c.report.Counts[NotLinearizable] >= c.opts.MaxExamples {
		return ""
	}
	if p.model == ModelIdempotency {
		if ok, why := env.idemDecide(c.h.Ops, p.ops); !ok {
			return ": it cannot place them all, because " + why
		}
		return ""
	}
	model := env.porcupineModel()
	pops := PorcupineOps(nil, c.h.Ops, p.ops, false)
	res, info := porcupine.CheckOperationsVerbose(model, pops, c.opts.Timeout)
	if res != porcupine.Illegal {
		return ""
	}
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	placed := make([]bool, len(p.ops))
	for _, j := range longest {
		if j >= 0 && j < len(placed) {
			placed[j] = true
		}
	}
	var first *Operation
	for j, i := range p.ops {
		if !placed[j] && (first == nil || c.h.Ops[i].Call < first.Call) {
			first = &c.h.Ops[i]
		}
	}
	if first == nil {
		return ""
	}
	// replay the longest order to say what the intent could be by then
	state := model.Init()
	for _, j := range longest {
		if j < 0 || j >= len(p.ops) {
			return ""
		}
		ok, next := model.Step(state, &c.h.Ops[p.ops[j]], nil)
		if !ok {
			return ""
		}
		state = next
	}
	return fmt.Sprintf(": the longest order it accepts places %d of them, after which the intent can only be %s; it cannot place %s, called at %s",
		len(longest), describeState(state.(lmState)), DescribeOp(first), ms(first.Call))
}
