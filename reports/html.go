package reports

import (
	_ "embed"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"html/template"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/spec"
)

//go:embed report.html.tmpl
var htmlSource string

// htmlTemplate is parsed once; html/template escapes every value by its
// context, so nothing from the target can become markup.
var htmlTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"vclass": verdictClass,
	"fclass": func(v verdict.Verdict) string { return "f-" + strings.TrimPrefix(verdictClass(v), "v-") },
	"since":  func(t, from time.Time) string { return since(t, from) },
	"join":   strings.Join,
	// verdictCSS is a constant of this package, never data.
	"verdictCSS": func() template.CSS { return template.CSS(verdictCSS) },
}).Parse(htmlSource))

// WriteHTML writes r as one self-contained HTML page: no script, no external
// asset (a Content-Security-Policy forbids loading any), every target-derived
// string escaped by html/template. Layout: the verdict, the command that
// reproduces the run, target, seed and timings; a summary table of rules
// grouped by section; one <details> per rule (open unless it passed) with
// its quote, verdict, reason, expected vs observed and the transcript of
// each exchange; then the chaos section when chaos ran.
func WriteHTML(w io.Writer, r *Result) error {
	v := newHTMLView(redacted(r))
	if err := htmlTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("html: %w", err)
	}
	return nil
}

type htmlView struct {
	R          *Result
	Sum        Summary
	Counts     []verdictCount
	Duration   string
	Started    string
	Finished   string
	Groups     []sectionGroup
	Rules      []ruleView
	NotCovered []spec.Rule
	Chaos      *chaosView
	// Other is the rules of the variants of the text the target does not
	// declare (N/A for that alone), set apart from the others; nil: none.
	Other *otherVariants
}

// otherVariants is the rules of the other variants of a text: N/A, because
// the target declares another variant, and listed apart, folded.
type otherVariants struct {
	Rules     []ruleView
	ByVariant []variantCount
}

type variantCount struct {
	Variant string
	N       int
}

type verdictCount struct {
	Verdict verdict.Verdict
	N       int
}

// sectionGroup is the rules of one top-level section of one source, in
// catalog order.
type sectionGroup struct {
	Title string
	Rules []ruleView
}

type ruleView struct {
	RuleEntry
	Anchor   string
	Open     bool
	Failing  bool
	Duration string
	// Evidence is the first evidence of the rule (of a PASS: its proof),
	// shown; MoreEvidence the rest, folded.
	Evidence     []evidenceView
	MoreEvidence []evidenceView
	MoreLabel    string // what the folded MoreEvidence is
	NowPasses    bool
	// Label is the verdict as shown: "READING: immediate" for a reading.
	Label string
	// Blocked is set on a BLOCKED rule: what blocked it.
	Blocked *blockedView
	// Reading is set when the result rests on a reading of a decision (a
	// READING verdict, or a verdict judged against a declared reading).
	Reading *readingView
}

// blockedView is what blocked a rule: By is a rule ID or a step; Href is
// the anchor of that rule when the report holds it, else empty. Step is the
// step that failed (empty in a result of an older build), and ByVerdict the
// verdict of the rule By in this run: a rule may pass where it is checked on
// its own and fail as another scenario's precondition.
type blockedView struct {
	By, Href  string
	Step      string
	ByVerdict verdict.Verdict
}

// readingView is a decision of the text and the reading(s) the target
// follows or declared, with the words of the text behind each.
type readingView struct {
	verdict.ReadingChoice
	Found    bool // the decision is in the result (Result.Decisions)
	Question string
	Section  string
	Why      string
	Readings []readingRow
	// Follows are the reading names the target follows; Unlisted those of
	// Follows and Declared that the decision, when found, does not list.
	Follows  []string
	Unlisted []string
}

type readingRow struct {
	spec.Reading
	Follows  bool // the target's answers agree with this reading
	Declared bool // the target declared this reading
}

// verdictLabel is the verdict of rr as shown in a report cell: the verdict,
// and for a READING the reading(s) the target follows.
func verdictLabel(rr verdict.RuleResult) string {
	if rr.Verdict == verdict.Reading && rr.Reading != nil && rr.Reading.Follows != "" {
		return string(rr.Verdict) + ": " + strings.Join(splitNames(rr.Reading.Follows), ", ")
	}
	return string(rr.Verdict)
}

// splitNames splits a ReadingChoice.Follows ("a,b") into its names.
func splitNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// newReadingView shows the reading c of a rule with its decision, looked
// up among decisions (the result's); a decision not among them is shown by
// its ID and reading names alone.
func newReadingView(c verdict.ReadingChoice, decisions []spec.Decision) *readingView {
	v := &readingView{ReadingChoice: c, Follows: splitNames(c.Follows)}
	i := slices.IndexFunc(decisions, func(d spec.Decision) bool { return d.ID == c.Decision })
	var d spec.Decision
	ok := i >= 0
	if ok {
		d = decisions[i]
	}
	if ok {
		v.Found, v.Question, v.Section, v.Why = true, d.Question, d.Section, d.Why
	}
	listed := map[string]bool{}
	for _, r := range d.Readings {
		listed[r.Name] = true
		v.Readings = append(v.Readings, readingRow{Reading: r, Follows: slices.Contains(v.Follows, r.Name), Declared: c.Declared != "" && c.Declared == r.Name})
	}
	for _, n := range append(slices.Clone(v.Follows), c.Declared) {
		if ok && n != "" && !listed[n] && !slices.Contains(v.Unlisted, n) {
			v.Unlisted = append(v.Unlisted, n)
		}
	}
	return v
}

type evidenceView struct {
	verdict.Evidence
	N, Of int
	Proof bool // the proof of a PASS: what its check read
	// Shown are the exchanges shown (the answer the check read last, or
	// every exchange of a proof); Earlier, those before it, folded.
	Shown   []exchangeView
	Earlier []exchangeView
}

type exchangeView struct {
	verdict.Exchange
	N, Of       int
	At          string // call time since the run started
	Took        string
	StatusText  string
	ReqHeaders  []headerLine
	RespHeaders []headerLine
	ReqBody     string
	RespBody    string
}

type headerLine struct{ Name, Value string }

func newHTMLView(r *Result) *htmlView {
	v := &htmlView{R: r, Sum: r.Summary()}
	for _, vd := range Verdicts {
		v.Counts = append(v.Counts, verdictCount{vd, v.Sum.Counts[vd]})
	}
	var other []verdictCount // verdicts this build does not know still show, in a stable order
	for vd, n := range v.Sum.Counts {
		if verdictClass(vd) == "v-other" && n > 0 {
			other = append(other, verdictCount{vd, n})
		}
	}
	sort.Slice(other, func(i, j int) bool { return other[i].Verdict < other[j].Verdict })
	v.Counts = append(v.Counts, other...)
	v.Started = stamp(r.Started)
	v.Finished = stamp(r.Finished)
	if !r.Started.IsZero() && r.Finished.After(r.Started) {
		v.Duration = r.Finished.Sub(r.Started).Round(time.Millisecond).String()
	}
	anchors := map[string]string{} // rule ID -> anchor of its first entry
	verdicts := map[string]verdict.Verdict{}
	for i, e := range r.Rules {
		if _, ok := anchors[e.Rule.ID]; !ok {
			anchors[e.Rule.ID] = anchor(e.Rule.ID, i)
			verdicts[e.Rule.ID] = e.Result.Verdict
		}
	}
	others := otherVariantRules(r)
	for i, e := range r.Rules {
		rv := ruleView{RuleEntry: e, Anchor: anchor(e.Rule.ID, i), Failing: e.Failing(r.Strict), Label: verdictLabel(e.Result)}
		if e.Result.Verdict == verdict.Blocked {
			rv.Blocked = &blockedView{By: e.Result.BlockedBy, Href: anchors[e.Result.BlockedBy], Step: e.Result.BlockedStep, ByVerdict: verdicts[e.Result.BlockedBy]}
		}
		if e.Result.Reading != nil && e.Result.Reading.Decision != "" {
			rv.Reading = newReadingView(*e.Result.Reading, r.Decisions)
		}
		vd := e.Result.Verdict
		// What needs reading is open (a failure, the undecided); what
		// passed, does not apply or follows a reading is folded.
		rv.Open = vd != verdict.Pass && vd != verdict.NA && vd != verdict.Reading
		rv.NowPasses = e.Expected && vd == verdict.Pass
		if e.Result.Duration > 0 {
			rv.Duration = e.Result.Duration.Round(time.Millisecond).String()
		}
		proof := vd == verdict.Pass
		for j, ev := range e.Result.Evidence {
			evv := evidenceView{Evidence: ev, N: j + 1, Of: len(e.Result.Evidence), Proof: proof}
			for k, ex := range ev.Exchanges {
				xv := newExchangeView(ex, k+1, len(ev.Exchanges), r.Started)
				if proof || k == len(ev.Exchanges)-1 {
					evv.Shown = append(evv.Shown, xv)
				} else {
					evv.Earlier = append(evv.Earlier, xv)
				}
			}
			// A BLOCKED rule's evidence is the failed step's, which its
			// reason already sums up: folded, like every evidence after
			// the first.
			if j == 0 && vd != verdict.Blocked {
				rv.Evidence = append(rv.Evidence, evv)
			} else {
				rv.MoreEvidence = append(rv.MoreEvidence, evv)
			}
		}
		switch n := len(rv.MoreEvidence); {
		case n == 0:
		case vd == verdict.Blocked:
			rv.MoreLabel = "the evidence of the step that failed: what it expected and observed, and the exchanges of its scenario"
		case proof:
			rv.MoreLabel = fmt.Sprintf("%d more passing check%s of this rule", n, plural(n))
		default:
			rv.MoreLabel = fmt.Sprintf("%d more piece%s of evidence of this rule", n, plural(n))
		}
		if variant, ok := others[e.Rule.ID]; ok {
			if v.Other == nil {
				v.Other = &otherVariants{}
			}
			v.Other.Rules = append(v.Other.Rules, rv)
			if k := slices.IndexFunc(v.Other.ByVariant, func(c variantCount) bool { return c.Variant == variant }); k >= 0 {
				v.Other.ByVariant[k].N++
			} else {
				v.Other.ByVariant = append(v.Other.ByVariant, variantCount{variant, 1})
			}
			continue
		}
		v.Rules = append(v.Rules, rv)
		title := groupTitle(e.Rule)
		if n := len(v.Groups); n == 0 || v.Groups[n-1].Title != title {
			v.Groups = append(v.Groups, sectionGroup{Title: title})
		}
		g := &v.Groups[len(v.Groups)-1]
		g.Rules = append(g.Rules, rv)
	}
	for _, id := range r.NotCovered {
		rule, ok := spec.Lookup(id)
		if !ok {
			rule = spec.Rule{ID: id}
		}
		v.NotCovered = append(v.NotCovered, rule)
	}
	if r.Chaos != nil {
		v.Chaos = newChaosView(r.Chaos)
	}
	return v
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// otherVariantRules returns the rules of r that belong to a variant of the
// text other than the one the target declares, by rule ID, with that
// variant: those N/A for that alone (RuleResult.Variant), and the N/A
// rules of the same source texts where no rule of those texts was judged
// (the untestable rules of another variant's text). Empty when the result
// names no variant.
func otherVariantRules(r *Result) map[string]string {
	out := map[string]string{}
	sources := map[string]string{} // source text -> its variant
	for _, e := range r.Rules {
		if v := e.Result.Variant; v != "" && v != r.Target.Variant && e.Result.Verdict == verdict.NA {
			out[e.Rule.ID] = v
			if e.Rule.Source != "" {
				sources[e.Rule.Source] = v
			}
		}
	}
	for _, e := range r.Rules {
		if e.Result.Verdict != verdict.NA || (e.Result.Variant != "" && e.Result.Variant == r.Target.Variant) {
			delete(sources, e.Rule.Source) // a text judged in this run is not another variant's alone
		}
	}
	for _, e := range r.Rules {
		if v, ok := sources[e.Rule.Source]; ok && e.Result.Verdict == verdict.NA {
			if _, done := out[e.Rule.ID]; !done {
				out[e.Rule.ID] = v
			}
		}
	}
	return out
}

func newExchangeView(ex verdict.Exchange, n, of int, start time.Time) exchangeView {
	xv := exchangeView{Exchange: ex, N: n, Of: of, ReqBody: cutBody(ex.ReqBody), RespBody: cutBody(ex.RespBody)}
	if !ex.Call.IsZero() {
		xv.At = since(ex.Call, start)
	}
	if !ex.Call.IsZero() && !ex.Return.IsZero() {
		xv.Took = ex.Return.Sub(ex.Call).Round(time.Microsecond).String()
	}
	if ex.Status != 0 {
		xv.StatusText = http.StatusText(ex.Status)
	}
	xv.ReqHeaders = headerLines(ex.ReqHeaders)
	xv.RespHeaders = headerLines(ex.RespHeaders)
	return xv
}

func headerLines(h map[string][]string) []headerLine {
	var out []headerLine
	for _, k := range sortedKeys(h) {
		for _, v := range h[k] {
			out = append(out, headerLine{k, v})
		}
	}
	return out
}

// groupTitle is "<source> §<top-level section>".
func groupTitle(rule spec.Rule) string {
	top, _, _ := strings.Cut(rule.Section, ".")
	t := strings.TrimSpace(string(rule.Profile))
	if rule.Source != "" {
		t = strings.TrimSpace(t + " (" + rule.Source + ")")
	}
	if top == "" {
		return t
	}
	return t + " §" + top
}

// anchor turns a rule ID into an element id: letters, digits, '.', '-' and
// '_' kept, anything else '_'; the index keeps it unique.
func anchor(id string, i int) string {
	var b strings.Builder
	b.WriteString("rule-")
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == '_':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	fmt.Fprintf(&b, "-%d", i)
	return b.String()
}

// verdictClass is the CSS class of a verdict; every verdict is also shown as
// its text, so the report reads in black and white.
func verdictClass(v verdict.Verdict) string {
	switch v {
	case verdict.Pass:
		return "v-pass"
	case verdict.Fail:
		return "v-fail"
	case verdict.NonStrict:
		return "v-nonstrict"
	case verdict.Unknown:
		return "v-unknown"
	case verdict.NA:
		return "v-na"
	case verdict.Blocked:
		return "v-blocked"
	case verdict.Reading:
		return "v-reading"
	}
	return "v-other"
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
}

func since(t, from time.Time) string {
	if t.IsZero() || from.IsZero() {
		return ""
	}
	d := t.Sub(from)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return sign + d.Round(time.Millisecond).String()
}

// sortedCounts returns the anomaly counts in a stable order, kinds with a
// count first by count.
func sortedCounts(m map[checker.AnomalyKind]int) []anomalyCount {
	out := make([]anomalyCount, 0, len(m))
	for k, n := range m {
		out = append(out, anomalyCount{k, n, k.Violation()})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

type anomalyCount struct {
	Kind      checker.AnomalyKind
	N         int
	Violation bool
}
