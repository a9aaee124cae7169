package toy

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/verdict"
)

// Chaos is the toy's chaos workload: workers store and read a handful of
// keys through the faults; every read must return a value stored under its
// key before it returned (TOY-1-read-back), or 404 before any store. It is
// the smallest workload there is, in the shape of every other.
func Chaos() *harness.ChaosWorkload {
	return &harness.ChaosWorkload{
		Summary: "workers store and read a few keys through the faults",
		Run:     runChaos,
		Check:   checkChaos,
	}
}

// chaosKeys are the keys the workload stores and reads.
var chaosKeys = []string{"a", "b", "c", "d"}

func runChaos(ctx context.Context, c harness.ChaosConfig) (*harness.ChaosResult, error) {
	master := mrand.New(mrand.NewPCG(c.Seed, 0x70))
	list := make([]faults.Fault, 0, len(c.Faults))
	var current atomic.Value
	current.Store("")
	for _, f := range c.Faults {
		list = append(list, chaos.Tracked{Fault: f, Current: &current})
	}
	schedule := faults.NewSchedule(mrand.New(mrand.NewPCG(master.Uint64(), 1)), list, c.Duration, faults.ScheduleOptions{})
	rec := c.Recorder
	if rec == nil {
		rec = chaos.NewRecorder(time.Now(), 1_000_000)
	}
	start := rec.Start()
	var tl faults.Timeline
	faultCtx, stopFaults := context.WithTimeout(ctx, faults.RunBound(c.Duration, faults.ScheduleOptions{}))
	defer stopFaults()
	loadCtx, stopLoad := context.WithCancel(ctx) // ended by the schedule (faults.RunLoad)
	defer stopLoad()
	faultsDone := make(chan error, 1)
	go func() { faultsDone <- faults.RunLoad(faultCtx, c.Duration, schedule, list, &tl, stopLoad) }()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	var wg sync.WaitGroup
	for i := range max(c.Workers, 1) {
		rnd := mrand.New(mrand.NewPCG(master.Uint64(), uint64(i)))
		cl, err := client.New(c.BaseURL, client.Options{Name: fmt.Sprintf("toy-%d", i), APIKey: c.APIKey, Timeout: timeout})
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			for n := 0; loadCtx.Err() == nil && !rec.Full(); n++ {
				key := chaosKeys[rnd.IntN(len(chaosKeys))]
				op := checker.Operation{ClientID: i, Key: key, Call: rec.Now()}
				req := client.Request{Method: http.MethodGet, Path: "/items/" + key}
				if rnd.IntN(2) == 0 {
					op.Kind, op.Input.Body = "put", fmt.Sprintf("v-%d-%d", i, n)
					req = client.Request{Method: http.MethodPut, Path: "/items/" + key, Body: []byte(op.Input.Body)}
				} else {
					op.Kind = "get"
				}
				r, err := cl.Do(loadCtx, req)
				op.Return = rec.Now()
				switch {
				case err != nil:
					op.Outcome = verdict.OutcomeUnknown
				default:
					op.Outcome, op.Output.Status = verdict.OutcomeOK, r.Status
					op.Output.State = string(r.Body)
					if r.Status == http.StatusNotFound {
						op.Output.State = checker.StateGone
					}
				}
				rec.Op(op)
				chaos.Sleep(loadCtx, time.Duration(rnd.IntN(5))*time.Millisecond)
			}
		})
	}
	wg.Wait()
	faultErr := <-faultsDone
	h, _ := rec.History()
	res := &harness.ChaosResult{Start: start, End: time.Now(), Namespace: string(Name), Schedule: schedule, Timeline: tl.Injections(),
		History: h, Series: chaos.Series(h, time.Second), Drained: true,
		Summary: fmt.Sprintf("%d stores and reads of %d keys", len(h.Ops), len(chaosKeys))}
	return res, faultErr
}

// checkChaos judges a recorded run: a read that returned a value no store
// of its key had begun before the read returned broke TOY-1-read-back.
func checkChaos(r harness.ChaosRecord) checker.Report {
	rep := checker.Report{Ops: len(r.History.Ops), Counts: map[checker.AnomalyKind]int{}}
	stores := map[string][]checker.Operation{}
	for _, op := range r.History.Ops {
		if op.Kind == "put" {
			stores[op.Key] = append(stores[op.Key], op)
		}
	}
	mc := checker.ModelCheck{Model: "read-back", Result: checker.LinOk, Ops: len(r.History.Ops), Partitions: len(stores)}
	for _, op := range r.History.Ops {
		if op.Kind != "get" || op.Effective() != verdict.OutcomeOK || op.Output.State == checker.StateGone {
			continue
		}
		stored := false
		for _, s := range stores[op.Key] {
			stored = stored || (s.Input.Body == op.Output.State && s.Call <= op.Return)
		}
		if !stored {
			mc.Result = checker.LinIllegal
			mc.Failing = append(mc.Failing, op.Key)
			a := checker.Anomaly{Kind: "TOY-1-read-back", Key: op.Key, Ops: []checker.Operation{op},
				Explanation: fmt.Sprintf("TOY-1-read-back: a read of %q returned %q, which no store of that key had sent", op.Key, strings.TrimSpace(op.Output.State))}
			rep.Anomalies = append(rep.Anomalies, a)
			rep.Counts[a.Kind]++
		}
	}
	rep.Models = append(rep.Models, mc)
	return rep
}
