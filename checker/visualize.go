package checker

import (
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"io"

	"github.com/anishathalye/porcupine"
)

// Visualize writes porcupine's HTML visualization of the failing partitions
// of r, and of nothing else, to w: one key's operations each (tens of KB,
// where a whole history would be tens of MB), with the anomalies and effects
// of those keys as annotations. It writes nothing and returns nil when no
// partition failed.
func (r Report) Visualize(w io.Writer) error {
	if len(r.FailingPartitions) == 0 {
		return nil
	}
	opts := r.Options.withDefaults()
	env := &modelEnv{slack: max(int64(opts.ClockSlack), 0), conflictStatus: opts.ConflictStatus, hidden: r.HiddenClaims, intents: map[string]*IntentBounds{}}
	if r.ExtendReading == "added" {
		env.reading = readingAdded
	} else {
		env.reading = readingFromNow
	}
	for _, p := range r.FailingPartitions {
		if p.Bounds != nil {
			env.intents[p.Key] = p.Bounds
		}
	}
	model := env.porcupineModel()

	var all [][]porcupine.Operation
	lanes := map[[2]int]int{} // (partition, client) → lane
	nextLane := 0
	for pi, p := range r.FailingPartitions {
		idx := make([]int, len(p.Ops))
		for i := range idx {
			idx[i] = i
		}
		pops := PorcupineOps(nil, p.Ops, idx, true)
		// porcupine draws one lane per client id, numbered from zero; a
		// client whose operation had an unknown outcome continues on a
		// fresh lane, since that operation may still be pending.
		for i := range pops {
			op := &p.Ops[i]
			k := [2]int{pi, op.ClientID}
			lane, ok := lanes[k]
			if !ok {
				lane = nextLane
				nextLane++
				lanes[k] = lane
			}
			pops[i].ClientId = lane
			pops[i].Metadata = fmt.Sprintf("%s; %s %s, lane of client %d", describeMeta(op), keyNoun(p.Model), p.Key, op.ClientID)
			if op.Effective() == verdict.OutcomeUnknown {
				delete(lanes, k)
			}
		}
		all = append(all, pops)
	}
	model.Partition = func([]porcupine.Operation) [][]porcupine.Operation { return all }
	_, info := porcupine.CheckOperationsVerbose(model, nil, visualizationTimeout)

	failing := map[string]bool{}
	for _, p := range r.FailingPartitions {
		failing[p.Key] = true
	}
	var notes []porcupine.Annotation
	for _, a := range r.Anomalies {
		if !failing[a.Key] {
			continue
		}
		start, end := int64(-1), int64(0)
		for _, op := range a.Ops {
			if start < 0 || op.Call < start {
				start = op.Call
			}
			end = max(end, op.Return)
		}
		if start < 0 {
			start = 0
		}
		notes = append(notes, porcupine.Annotation{Tag: "anomaly: " + string(a.Kind), Start: start, End: end, Description: string(a.Kind), Details: a.Explanation, BackgroundColor: "#f8d7da"})
		for _, e := range a.Effects {
			notes = append(notes, porcupine.Annotation{Tag: "effects", Start: e.At, Description: "effect " + Abbreviate(e.Key), Details: fmt.Sprintf("effect of %s by %s (intent %s, token %s)", e.Key, e.Worker, e.Intent, e.Token)})
		}
	}
	info.AddAnnotations(notes)
	if err := porcupine.Visualize(model, info, w); err != nil {
		return fmt.Errorf("visualize: %w", err)
	}
	return nil
}
