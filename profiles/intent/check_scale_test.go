package intent

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// scaleHistory generates a correct Intent Protocol history of about n
// operations over `units` units of work (ten operations each): a publish and
// a concurrent duplicate that replays, a late retry whose answer is sometimes
// lost, an empty claim (204), a claim, an extend, a fulfill, a retried
// fulfill refused with 404, and two status reads. Units overlap in time.
func scaleHistory(n, units int, seed uint64) checker.History {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ops := make([]checker.Operation, 0, n)
	const clients = 64
	lease := int64(30 * time.Second)
	for u := 0; len(ops) < n && u < units*2; u++ {
		key := "k" + strconv.Itoa(u)
		id := fmt.Sprintf("%032x", u)
		tok := fmt.Sprintf("%016x", rng.Uint64())
		t := int64(u) * 50_000 // a new unit every 50 µs
		d := func() int64 { return 100_000 + rng.Int64N(900_000) }
		c := func() int { return rng.IntN(clients) }
		body := "sha256:" + key
		resp := "resp:" + id
		p1c := t
		p1r := p1c + d()
		p2c := t + rng.Int64N(200_000)
		p2r := max(p2c+d(), p1r)
		ops = append(ops,
			checker.Operation{ClientID: c(), Kind: checker.OpPublish, Key: key, Input: checker.Input{Body: body}, Output: checker.Output{Status: 201, ID: id, Body: resp}, Call: p1c, Return: p1r, Outcome: verdict.OutcomeOK},
			checker.Operation{ClientID: c(), Kind: checker.OpPublish, Key: key, Input: checker.Input{Body: body}, Output: checker.Output{Status: 201, ID: id, Body: resp}, Call: p2c, Return: p2r, Outcome: verdict.OutcomeOK},
		)
		p3c := p2r + d()
		if rng.IntN(20) == 0 {
			ops = append(ops, checker.Operation{ClientID: c(), Kind: checker.OpPublish, Key: key, Input: checker.Input{Body: body}, Call: p3c, Return: p3c + int64(time.Second), Outcome: verdict.OutcomeUnknown})
		} else {
			ops = append(ops, checker.Operation{ClientID: c(), Kind: checker.OpPublish, Key: key, Input: checker.Input{Body: body}, Output: checker.Output{Status: 201, ID: id, Body: resp}, Call: p3c, Return: p3c + d(), Outcome: verdict.OutcomeOK})
		}
		w := c()
		cc := p1r + d()
		ops = append(ops, checker.Operation{ClientID: c(), Kind: OpClaim, Output: checker.Output{Status: 204}, Call: cc - 50_000, Return: cc, Outcome: verdict.OutcomeOK})
		cr := cc + d()
		ops = append(ops, checker.Operation{ClientID: w, Kind: OpClaim, Key: id, Output: checker.Output{Status: 200, ID: id, Token: tok, Attempts: 1, LeaseNs: lease}, Call: cc, Return: cr, Outcome: verdict.OutcomeOK})
		ec := cr + d()
		er := ec + d()
		ops = append(ops, checker.Operation{ClientID: w, Kind: OpExtend, Key: id, Input: checker.Input{Token: tok, ExtendNs: lease}, Output: checker.Output{Status: 200}, Call: ec, Return: er, Outcome: verdict.OutcomeOK})
		fc := er + d()
		fr := fc + d()
		ops = append(ops, checker.Operation{ClientID: w, Kind: OpFulfill, Key: id, Input: checker.Input{Token: tok}, Output: checker.Output{Status: 200}, Call: fc, Return: fr, Outcome: verdict.OutcomeOK})
		f2 := fr + d()
		ops = append(ops, checker.Operation{ClientID: w, Kind: OpFulfill, Key: id, Input: checker.Input{Token: tok}, Output: checker.Output{Status: 404}, Call: f2, Return: f2 + d(), Outcome: verdict.OutcomeFailed})
		for range 2 {
			sc := fr + d()
			ops = append(ops, checker.Operation{ClientID: c(), Kind: checker.OpStatus, Key: id, Output: checker.Output{Status: 200, State: StateFulfilled}, Call: sc, Return: sc + d(), Outcome: verdict.OutcomeOK})
		}
	}
	return checker.History{Ops: ops}
}

// scaleLedger is one effect per unit of h: each executed once.
func scaleLedger(h checker.History) checker.Ledger {
	var l checker.Ledger
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Kind == OpClaim && op.Outcome == verdict.OutcomeOK && op.Key != "" {
			l.Effects = append(l.Effects, checker.Effect{Key: "k" + strconv.Itoa(i/10), Intent: op.Key, Worker: "w" + strconv.Itoa(op.ClientID), Token: op.Output.Token, At: op.Return + 1000})
		}
	}
	return l
}

// TestScaleSmoke checks a 10k-operation generated history: it must pass.
// (Timing is for `make bench`, not for tests.)
func TestScaleSmoke(t *testing.T) {
	h := scaleHistory(10_000, 1_000, 1)
	l := scaleLedger(h)
	if len(l.Effects) != 1_000 {
		t.Fatalf("generator: %d effects, want 1000", len(l.Effects))
	}
	r := Check(h, l, Options{})
	if v := r.Verdict(); v != verdict.Pass {
		t.Fatalf("verdict %s on a correct generated history: %s", v, explain(r))
	}
	if r.Queue.Acknowledged != 1_000 || r.Queue.Fulfilled != 1_000 || r.Queue.Effected != 1_000 {
		t.Errorf("queue stats %+v, want 1000 acknowledged, effected and fulfilled", r.Queue)
	}
	// The same history with one unit's lease broken must fail, on that unit.
	bad := checker.History{Ops: append([]checker.Operation(nil), h.Ops...)}
	for i := range bad.Ops {
		op := &bad.Ops[i]
		if op.Kind == OpFulfill && op.Outcome == verdict.OutcomeFailed {
			op.Outcome, op.Output.Status = verdict.OutcomeOK, 200 // the retried fulfill succeeds
			break
		}
	}
	r = Check(bad, l, Options{})
	if r.Verdict() != verdict.Fail || r.Counts[FulfilledTwice] != 1 || len(r.FailingPartitions) != 1 {
		t.Errorf("broken unit: verdict %s, counts %v, %d failing partitions; want FAIL, one fulfilled-twice, one partition",
			r.Verdict(), r.Counts, len(r.FailingPartitions))
	}
}

// BenchmarkCheckScale checks generated correct histories of 10k, 100k and 1M
// operations over ops/10 units. Run: go test -run '^$' -bench CheckScale -benchtime 1x ./checker
func BenchmarkCheckScale(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			h := scaleHistory(n, n/10, 1)
			l := scaleLedger(h)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ResetTimer()
			var r checker.Report
			for range b.N {
				r = Check(h, l, Options{})
			}
			b.StopTimer()
			runtime.ReadMemStats(&after)
			if r.Verdict() != verdict.Pass {
				b.Fatalf("verdict %s on a correct history: %s", r.Verdict(), explain(r))
			}
			perOp := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(len(h.Ops))/perOp, "ops/s")
			b.ReportMetric(perOp, "s/check")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/(1<<20), "MB-alloc/check")
			b.ReportMetric(float64(after.HeapSys)/(1<<20), "MB-heap-sys")
		})
	}
}
