package checker

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

// run is a stub until the checks land.
func (c *check) run() {}
