package reports

import (
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"html/template"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/idscheck/idscheck/checker"
)

// localName is a file name a report may link to: a plain relative path in
// the run directory.
var localName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$`)

// maxAnomalyOps bounds the operations shown per anomaly in the HTML report
// (result.json keeps what the checker kept).
const maxAnomalyOps = 12

// FaultCoverage is one requested fault of a chaos run and what became of it:
// Status "injected" (at least one injection took effect without error), or
// "unavailable", "not-drawn", "not-run", "no-effect", "failed" with Reason.
// Plain fields: the chaos command maps faults.Coverage into them.
type FaultCoverage struct {
	Fault     string `json:"fault"`
	Kind      string `json:"kind,omitempty"`
	Status    string `json:"status"`
	Scheduled int    `json:"scheduled"`
	Injected  int    `json:"injected"`
	Errors    int    `json:"errors"`
	NoEffect  int    `json:"no_effect,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// OK reports whether the run went through the fault.
func (f FaultCoverage) OK() bool { return f.Status == "injected" }

type chaosView struct {
	C *Chaos
	// Missing are the requested faults never injected: the reason the
	// verdict is UNKNOWN when the histories alone would pass.
	Missing   []FaultCoverage
	Counts    []anomalyCount
	Anomalies []anomalyView
	// Found counts the anomalies the checker found, of every kind; the
	// report, like result.json and check.json, keeps Anomalies, examples.
	Found    int
	Models   []modelView
	Timeline []faultRow
	SVG      template.HTML // generated here, every text in it escaped
	// Visualizations are the local file names of Chaos.Visualizations.
	Visualizations []string
	Span           string
}

type anomalyView struct {
	checker.Anomaly
	Open        bool // a violation: shown unfolded
	OpLines     []string
	EffectLines []string
	More        int // operations and effects left out
}

// modelView is one model's linearizability result with its failing keys:
// the first few shown, the rest folded, and how many there were in all.
type modelView struct {
	checker.ModelCheck
	Shown, Rest []string
	Total       int // failing partitions found (FailingTotal, or the keys listed)
}

// openAnomalies is how many violations the report shows unfolded.
const openAnomalies = 3

// shownKeys is how many failing keys (or anomaly keys) a report shows
// before folding the rest.
const shownKeys = 5

type faultRow struct {
	FaultSpan
	From, To, Took, Params string
}

func newChaosView(c *Chaos) *chaosView {
	v := &chaosView{C: c, Counts: sortedCounts(c.Counts)}
	for _, n := range c.Counts {
		v.Found += n
	}
	for _, m := range c.Models {
		mv := modelView{ModelCheck: m, Total: max(m.FailingTotal, len(m.Failing))}
		mv.Shown = m.Failing[:min(shownKeys, len(m.Failing))]
		mv.Rest = m.Failing[len(mv.Shown):]
		v.Models = append(v.Models, mv)
	}
	for _, f := range c.Coverage {
		if !f.OK() {
			v.Missing = append(v.Missing, f)
		}
	}
	// Violations first, then the rest (recovered), each in the checker's order.
	anomalies := append([]checker.Anomaly(nil), c.Anomalies...)
	sort.SliceStable(anomalies, func(i, j int) bool { return anomalies[i].Kind.Violation() && !anomalies[j].Kind.Violation() })
	opened := 0
	for _, a := range anomalies {
		// The first violations unfolded; the rest are listed folded, so
		// forty examples of one kind do not make a wall.
		av := anomalyView{Anomaly: a, Open: a.Kind.Violation() && opened < openAnomalies}
		if av.Open {
			opened++
		}
		for i, op := range a.Ops {
			if i == maxAnomalyOps {
				av.More += len(a.Ops) - i
				break
			}
			av.OpLines = append(av.OpLines, opLine(op))
		}
		for i, e := range a.Effects {
			if i == maxAnomalyOps {
				av.More += len(a.Effects) - i
				break
			}
			av.EffectLines = append(av.EffectLines, effectLine(e))
		}
		v.Anomalies = append(v.Anomalies, av)
	}
	for _, f := range c.Timeline {
		row := faultRow{FaultSpan: f, From: since(f.Start, c.Start), To: since(f.End, c.Start), Params: params(f.Params)}
		if !f.End.IsZero() && !f.Start.IsZero() {
			row.Took = f.End.Sub(f.Start).Round(time.Millisecond).String()
		}
		v.Timeline = append(v.Timeline, row)
	}
	if !c.Start.IsZero() && c.End.After(c.Start) {
		v.Span = c.End.Sub(c.Start).Round(time.Millisecond).String()
	}
	v.SVG = template.HTML(chaosSVG(c))
	// Only files of the run directory are linked: a report never points
	// anywhere else.
	var viz []string
	for _, name := range c.Visualizations {
		if localName.MatchString(name) && filepath.IsLocal(name) {
			viz = append(viz, name)
		}
	}
	v.Visualizations = viz
	return v
}

func params(p map[string]string) string {
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + p[k]
	}
	return strings.Join(parts, " ")
}

// opLine renders one operation on one line: times in ms since the run
// started, kind, key, what was sent and what came back.
func opLine(op checker.Operation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s, %s] client %d %s", msOf(op.Call), msOf(op.Return), op.ClientID, op.Kind)
	if op.Key != "" {
		fmt.Fprintf(&b, " %s", op.Key)
	}
	in := op.Input
	for _, kv := range [][2]string{{"body", in.Body}, {"token", in.Token}, {"worker", in.Worker}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
		}
	}
	if in.ExtendNs != 0 {
		fmt.Fprintf(&b, " extend=%s", time.Duration(in.ExtendNs))
	}
	fmt.Fprintf(&b, " → %s", op.Outcome)
	if op.Outcome != verdict.OutcomeUnknown {
		out := op.Output
		if out.Status != 0 {
			fmt.Fprintf(&b, " %d", out.Status)
		}
		for _, kv := range [][2]string{{"id", out.ID}, {"body", out.Body}, {"token", out.Token}, {"state", out.State}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, " %s=%s", kv[0], kv[1])
			}
		}
		if out.Attempts != 0 {
			fmt.Fprintf(&b, " attempts=%d", out.Attempts)
		}
		if out.LeaseNs != 0 {
			fmt.Fprintf(&b, " lease=%s", time.Duration(out.LeaseNs))
		}
	}
	return b.String()
}

func effectLine(e checker.Effect) string {
	s := fmt.Sprintf("[%s] effect of %s", msOf(e.At), e.Key)
	if e.Intent != "" {
		s += " intent=" + e.Intent
	}
	if e.Worker != "" {
		s += " by " + e.Worker
	}
	if e.Token != "" {
		s += " token=" + e.Token
	}
	return s
}

func msOf(ns int64) string {
	if ns == math.MaxInt64 {
		return "∞"
	}
	return fmt.Sprintf("%.3fs", float64(ns)/1e9)
}

// SVG geometry of the chaos chart: fault lanes on top, then throughput, then
// latency, sharing one time axis so a fault lines up with its effect.
const (
	svgWidth  = 960
	svgLeft   = 150 // room for lane and axis labels
	svgRight  = 20
	svgLaneH  = 18
	svgPanelH = 110
	svgGap    = 28
)

// chaosSVG draws the fault timeline beside throughput and latency over time
// as one inline SVG. Every text in it goes through template.HTMLEscapeString;
// the rest is numbers this function formats. Series are told apart by dash
// pattern as well as colour, so the chart prints in black and white.
func chaosSVG(c *Chaos) string {
	esc := template.HTMLEscapeString
	total := time.Duration(0)
	if !c.Start.IsZero() && c.End.After(c.Start) {
		total = c.End.Sub(c.Start)
	}
	width := time.Second
	if len(c.Series) > 1 && c.Series[1].At > c.Series[0].At {
		width = c.Series[1].At - c.Series[0].At
	}
	if n := len(c.Series); n > 0 {
		total = max(total, c.Series[n-1].At+width)
	}
	for _, f := range c.Timeline {
		if !f.End.IsZero() && !c.Start.IsZero() {
			total = max(total, f.End.Sub(c.Start))
		}
	}
	if total <= 0 {
		total = time.Second
	}
	plotW := float64(svgWidth - svgLeft - svgRight)
	x := func(d time.Duration) float64 {
		return svgLeft + plotW*math.Max(0, math.Min(1, float64(d)/float64(total)))
	}
	at := func(t time.Time) time.Duration {
		if t.IsZero() || c.Start.IsZero() {
			return 0
		}
		return t.Sub(c.Start)
	}

	// Lanes: one per fault name, in order of first injection.
	var lanes []string
	lane := map[string]int{}
	for _, f := range c.Timeline {
		if _, ok := lane[f.Name]; !ok {
			lane[f.Name] = len(lanes)
			lanes = append(lanes, f.Name)
		}
	}
	lanesTop := 24.0
	lanesH := float64(max(1, len(lanes))) * svgLaneH
	thrTop := lanesTop + lanesH + svgGap
	latTop := thrTop + svgPanelH + svgGap
	axisY := latTop + svgPanelH
	height := axisY + 36

	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %.0f" width="100%%" role="img" aria-label="fault timeline, throughput and latency over time">`, svgWidth, height)
	b.WriteString(`<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#b45309" stroke-width="2"/></pattern></defs>`)
	fmt.Fprintf(&b, `<text x="4" y="14" class="ttl">faults</text>`)

	// Vertical bands of every fault behind the panels, so its effect lines up.
	for _, f := range c.Timeline {
		x0, x1 := x(at(f.Start)), x(total)
		if !f.End.IsZero() {
			x1 = x(at(f.End))
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="band"/>`, x0, thrTop, math.Max(1, x1-x0), axisY-thrTop)
	}
	for i, name := range lanes {
		y := lanesTop + float64(i)*svgLaneH
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="lbl" text-anchor="end">%s</text>`, svgLeft-6, y+svgLaneH-5, esc(shorten(name, 22)))
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, svgLeft, y+svgLaneH, svgWidth-svgRight, y+svgLaneH)
	}
	for _, f := range c.Timeline {
		y := lanesTop + float64(lane[f.Name])*svgLaneH + 3
		x0, x1 := x(at(f.Start)), x(total)
		if !f.End.IsZero() {
			x1 = x(at(f.End))
		}
		cls := "fault"
		if f.Err != "" {
			cls = "fault err"
		}
		title := f.Name + " " + params(f.Params) + " from " + since(f.Start, c.Start) + " to " + since(f.End, c.Start)
		if f.Err != "" {
			title += " (error: " + f.Err + ")"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%d" class="%s"><title>%s</title></rect>`, x0, y, math.Max(2, x1-x0), svgLaneH-6, cls, esc(title))
	}
	if len(lanes) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="lbl">no fault injected</text>`, svgLeft, lanesTop+svgLaneH-5)
	}

	// Throughput: operations per second, and those without a response.
	maxRate := 1.0
	for _, s := range c.Series {
		maxRate = math.Max(maxRate, float64(s.Ops)/width.Seconds())
	}
	maxRate = niceCeil(maxRate)
	yThr := func(v float64) float64 { return thrTop + svgPanelH - svgPanelH*v/maxRate }
	panel(&b, thrTop, "ops/s", maxRate)
	var all, bad []string
	for _, s := range c.Series {
		xm := x(s.At + width/2)
		all = append(all, fmt.Sprintf("%.1f,%.1f", xm, yThr(float64(s.Ops)/width.Seconds())))
		bad = append(bad, fmt.Sprintf("%.1f,%.1f", xm, yThr(float64(s.Unknown+s.Failed)/width.Seconds())))
	}
	polyline(&b, all, "s-ops")
	polyline(&b, bad, "s-bad")
	legend(&b, thrTop-6, [][2]string{{"s-ops", "operations completed"}, {"s-bad", "unknown or failed outcome"}})

	// Latency: p50 and p99 of the operations that got a response.
	maxLat := time.Millisecond
	for _, s := range c.Series {
		maxLat = max(maxLat, s.P99, s.P50)
	}
	maxMs := niceCeil(float64(maxLat) / float64(time.Millisecond))
	yLat := func(d time.Duration) float64 {
		return latTop + svgPanelH - svgPanelH*(float64(d)/float64(time.Millisecond))/maxMs
	}
	panel(&b, latTop, "latency ms", maxMs)
	var p50, p99 []string
	for _, s := range c.Series {
		if s.Ops-s.Unknown-s.Failed <= 0 {
			continue // no response in this bucket: no latency to draw
		}
		xm := x(s.At + width/2)
		p50 = append(p50, fmt.Sprintf("%.1f,%.1f", xm, yLat(s.P50)))
		p99 = append(p99, fmt.Sprintf("%.1f,%.1f", xm, yLat(s.P99)))
	}
	polyline(&b, p99, "s-p99")
	polyline(&b, p50, "s-p50")
	legend(&b, latTop-6, [][2]string{{"s-p50", "p50"}, {"s-p99", "p99"}})

	// Time axis.
	step := niceStep(total)
	for t := time.Duration(0); t <= total && t/step <= 100; t += step {
		xt := x(t)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="tick"/>`, xt, axisY, xt, axisY+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="lbl" text-anchor="middle">%s</text>`, xt, axisY+18, esc(t.String()))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="lbl" text-anchor="end">time since start</text>`, svgWidth-svgRight, axisY+32)
	b.WriteString(`</svg>`)
	return b.String()
}

// panel draws a chart panel from 0 to top value maxV, with a labelled tick
// and a grid line at every step of niceTicks between.
func panel(b *strings.Builder, top float64, name string, maxV float64) {
	fmt.Fprintf(b, `<rect x="%d" y="%.1f" width="%d" height="%d" class="panel"/>`, svgLeft, top, svgWidth-svgLeft-svgRight, svgPanelH)
	fmt.Fprintf(b, `<text x="%d" y="%.1f" class="ttl" text-anchor="end">%s</text>`, svgLeft-46, top+svgPanelH/2+4, template.HTMLEscapeString(name))
	for _, v := range niceTicks(maxV) {
		y := top + svgPanelH - svgPanelH*v/maxV
		if v > 0 && v < maxV {
			fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="grid"/>`, svgLeft, y, svgWidth-svgRight, y)
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" class="tick"/>`, svgLeft-4, y, svgLeft, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" class="lbl" text-anchor="end">%s</text>`, svgLeft-6, y+4, template.HTMLEscapeString(fmt.Sprintf("%g", v)))
	}
}

// niceTicks returns 0, maxV and the round values between them, one step of
// 1, 2 or 5 times a power of ten apart, at most five steps.
func niceTicks(maxV float64) []float64 {
	if maxV <= 0 {
		return []float64{0}
	}
	step := niceCeil(maxV / 5)
	var out []float64
	for i := 0; ; i++ {
		v := float64(i) * step
		if v >= maxV*(1-1e-9) {
			break
		}
		out = append(out, math.Round(v*1e6)/1e6)
	}
	return append(out, maxV)
}

func polyline(b *strings.Builder, pts []string, cls string) {
	if len(pts) == 0 {
		return
	}
	if len(pts) == 1 {
		pts = append(pts, pts[0])
	}
	fmt.Fprintf(b, `<polyline points="%s" class="%s"/>`, strings.Join(pts, " "), cls)
}

func legend(b *strings.Builder, y float64, items [][2]string) {
	xpos := float64(svgLeft)
	for _, it := range items {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="%s"/>`, xpos, y-4, xpos+24, y-4, it[0])
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" class="lbl">%s</text>`, xpos+30, y, template.HTMLEscapeString(it[1]))
		xpos += 40 + 7*float64(len(it[1]))
	}
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// niceStep is a tick spacing giving about ten ticks over total.
func niceStep(total time.Duration) time.Duration {
	for _, s := range []time.Duration{100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
		time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour} {
		if total/s <= 10 {
			return s
		}
	}
	return total / 10
}

func shorten(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n-1]) + "…"
}
