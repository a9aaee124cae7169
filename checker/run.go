package checker

import (
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"math"

	"github.com/anishathalye/porcupine"
)

// check holds the state of one Check call.
type check struct {
	h      History
	l      Ledger
	opts   Options
	report Report
}

func newCheck(h History, l Ledger, opts Options) *check {
	return &check{h: h, l: l, opts: opts, report: Report{Ops: len(h.Ops), Effects: len(l.Effects), Counts: map[AnomalyKind]int{}}}
}

// maxFailingKeys bounds the failing keys listed per model.
const maxFailingKeys = 100

// maxEvidenceOps bounds the operations kept with one anomaly.
const maxEvidenceOps = 24

// add counts a and keeps it, with its evidence, while fewer than
// Options.MaxExamples of its kind are kept.
func (c *check) add(a Anomaly) {
	c.report.Counts[a.Kind]++
	if c.report.Counts[a.Kind] > c.opts.MaxExamples {
		return
	}
	if len(a.Ops) > maxEvidenceOps {
		a.Ops = a.Ops[:maxEvidenceOps]
	}
	c.report.Anomalies = append(c.report.Anomalies, a)
}

func (c *check) run() {
	parts := partitions(c.h.Ops)
	env := &modelEnv{slack: int64(c.opts.ClockSlack), conflictStatus: c.opts.ConflictStatus, firstHiddenClaim: math.MaxInt64}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.Kind == OpClaim && op.Effective() == verdict.OutcomeUnknown && op.Key == "" && op.Call < env.firstHiddenClaim {
			env.firstHiddenClaim = op.Call
		}
	}

	c.report.Options = c.opts
	c.report.FirstHiddenClaim = env.firstHiddenClaim

	// max_attempts of each intent, from the publishes that created it
	maxAttempts := map[string]int{}
	for i := range c.h.Ops {
		op := &c.h.Ops[i]
		if op.Kind == OpPublish && op.Input.MaxAttempts > 0 && op.Output.ID != "" && op.Effective() == verdict.OutcomeOK {
			maxAttempts[op.Output.ID] = op.Input.MaxAttempts
		}
	}

	// named checks, per partition
	named := make([]bool, len(parts))
	count := map[string]int{}
	for i, p := range parts {
		count[p.model]++
		switch p.model {
		case ModelIdempotency:
			named[i] = c.checkIdempotency(p.key, p.ops)
		case ModelLease:
			named[i] = c.checkLease(p.key, p.ops)
			if m := maxAttempts[p.key]; m > 0 && c.attemptsExceeded(p.key, p.ops, m) {
				named[i] = true
			}
		}
	}

	// porcupine
	results, failing := c.linearizability(parts, named, env)
	failingKeys := map[string][]string{}
	failingTotal := map[string]int{}
	isNamed := map[[2]string]bool{}
	for i, p := range parts {
		if named[i] {
			isNamed[[2]string{p.model, p.key}] = true
		}
	}
	for _, p := range failing {
		failingTotal[p.model]++
		if len(failingKeys[p.model]) < maxFailingKeys {
			failingKeys[p.model] = append(failingKeys[p.model], p.key)
		}
		if len(c.report.FailingPartitions) < c.opts.MaxExamples {
			fp := Partition{Model: p.model, Key: p.key}
			for _, i := range p.ops {
				fp.Ops = append(fp.Ops, c.h.Ops[i])
			}
			c.report.FailingPartitions = append(c.report.FailingPartitions, fp)
		}
		if !isNamed[[2]string{p.model, p.key}] {
			c.add(Anomaly{
				Kind: NotLinearizable, Key: p.key,
				Explanation: fmt.Sprintf("no order of the %d operations on %s %s is allowed by the %s model (%s)%s",
					len(p.ops), keyNoun(p.model), p.key, p.model, modelPromise(p.model), c.stuck(p, env)),
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
	return "one live lease at a time, a superseded or expired token never succeeds, a fulfilled intent stays fulfilled, claim_attempts grows with every claim"
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
	pops := porcupineOps(nil, c.h.Ops, p.ops, false)
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
		len(longest), describeState(state.(lmState)), describeOp(first), ms(first.Call))
}
