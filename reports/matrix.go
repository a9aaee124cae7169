package reports

import (
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"html/template"
	"io"
	"regexp"
)

// MatrixColumn is one run in a comparison matrix: a name for its column
// header, its Result, and the relative path of its run directory from where
// the matrix is written (its cells link to that run's index.html).
type MatrixColumn struct {
	Name   string
	Link   string // relative path of the run directory, e.g. "../mutant-no-replay"; empty: no links
	Result *Result
}

// relLink is a relative path a matrix may link to: no scheme, not absolute.
var relLink = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$`)

type matrixView struct {
	Columns []matrixHead
	Rows    []matrixRow
}

type matrixHead struct {
	Name, Target, Mutant, Link string
	Seed                       uint64
	Sum                        Summary
}

type matrixRow struct {
	ID, Section, Level, Quote string
	Cells                     []matrixCell
}

type matrixCell struct {
	Verdict  verdict.Verdict
	Label    string // the verdict as shown ("READING: immediate")
	Reason   string
	Href     string
	Expected bool
	Missing  bool
}

var matrixTemplate = template.Must(template.New("matrix").Funcs(template.FuncMap{"vclass": verdictClass}).Parse(matrixSource))

// WriteMatrix writes one self-contained HTML page comparing runs: a row per
// rule (in the order the runs list them, first run first), a column per run,
// each cell the rule's verdict in that run, linked to the rule in that run's
// index.html. Everything from the runs is escaped, as in WriteHTML.
func WriteMatrix(w io.Writer, cols []MatrixColumn) error {
	if len(cols) == 0 {
		return errors.New("matrix: no run to compare")
	}
	var v matrixView
	rowOf := map[string]int{}
	for ci, col := range cols {
		r := redacted(col.Result)
		link := col.Link
		if link != "" && !relLink.MatchString(link) {
			link = "" // never a link out of the report's tree
		}
		v.Columns = append(v.Columns, matrixHead{Name: col.Name, Target: r.Target.URL, Mutant: r.Target.Mutant, Seed: r.Seed, Sum: r.Summary(), Link: link})
		for i, e := range r.Rules {
			ri, ok := rowOf[e.Rule.ID]
			if !ok {
				ri = len(v.Rows)
				rowOf[e.Rule.ID] = ri
				v.Rows = append(v.Rows, matrixRow{ID: e.Rule.ID, Section: e.Rule.Section, Level: string(e.Rule.Level), Quote: e.Rule.Quote,
					Cells: make([]matrixCell, len(cols))})
				for k := range v.Rows[ri].Cells {
					v.Rows[ri].Cells[k].Missing = true
				}
			}
			reason := e.Result.Reason
			label := verdictLabel(e.Result)
			switch {
			case e.Result.Verdict == verdict.Blocked && e.Result.BlockedBy != "":
				reason = "blocked by " + e.Result.BlockedBy + ": " + reason
			case label != string(e.Result.Verdict): // the pill may be cut: its title has it whole
				reason = label + ": " + reason
			}
			cell := matrixCell{Verdict: e.Result.Verdict, Label: label, Reason: oneLine(reason, 200), Expected: e.Expected}
			if link != "" {
				cell.Href = link + "/" + HTMLFile + "#" + anchor(e.Rule.ID, i)
			}
			v.Rows[ri].Cells[ci] = cell
		}
	}
	if err := matrixTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("matrix: %w", err)
	}
	return nil
}

// matrixSource shares the verdict styles of the report.
var matrixSource = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; form-action 'none'; base-uri 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>idscheck: {{len .Columns}} runs compared</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1a1a1a; margin: 0; padding: 16px 20px 48px; }
h1 { font-size: 22px; margin: 0 0 12px; }
table { border-collapse: collapse; }
th, td { text-align: left; vertical-align: top; padding: 3px 6px; border: 1px solid #d0d0d0; }
thead th { background: #f5f5f3; position: sticky; top: 0; font-size: 12px; }
td.id { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; white-space: nowrap; }
.muted { color: #555; }
.v { display: inline-block; white-space: nowrap; min-width: 84px; text-align: center; font-weight: 700; font-size: 12px; padding: 1px 6px; border: 1px solid; border-radius: 3px; text-decoration: none; }
` + verdictCSS + `
</style>
</head>
<body>
<h1>idscheck: {{len .Columns}} runs compared</h1>
<table>
<thead><tr><th>rule</th><th>level</th>{{range .Columns}}<th>{{if .Link}}<a href="{{.Link}}/index.html">{{.Name}}</a>{{else}}{{.Name}}{{end}}<br><span class="v {{vclass .Sum.Verdict}}">{{.Sum.Verdict}}</span><br><span class="muted">{{with .Mutant}}mutant {{.}}<br>{{end}}seed {{.Seed}}</span></th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr><td class="id" title="{{.Quote}}">{{.ID}} <span class="muted">§{{.Section}}</span></td><td>{{.Level}}</td>{{range .Cells}}<td>{{if .Missing}}<span class="muted">not run</span>{{else}}{{if .Href}}<a class="v {{vclass .Verdict}}" href="{{.Href}}" title="{{.Reason}}">{{.Label}}</a>{{else}}<span class="v {{vclass .Verdict}}" title="{{.Reason}}">{{.Label}}</span>{{end}}{{if .Expected}} <span class="muted">expected</span>{{end}}{{end}}</td>{{end}}</tr>
{{end}}
</tbody>
</table>
</body>
</html>
`

// verdictCSS is the verdict colours, each with its own border style so the
// verdicts stay apart in black and white: BLOCKED shares UNKNOWN's colours
// (both undecided) with a thick left bar; READING (never a failure) is a
// rounded pill, cut with an ellipsis past 22em (it carries the names of the
// readings; the label is its title, and the rule's section lists them).
const verdictCSS = `.v-pass { background: #dcfce7; color: #14532d; border-color: #14532d; }
.v-fail { background: #fee2e2; color: #7f1d1d; border: 3px double #7f1d1d; }
.v-nonstrict { background: #fef3c7; color: #78350f; border-color: #78350f; border-style: dashed; }
.v-unknown { background: #ede9fe; color: #3b0764; border-color: #3b0764; border-style: dotted; border-width: 2px; }
.v-na { background: #f1f5f9; color: #334155; border-color: #94a3b8; }
.v-blocked { background: #ede9fe; color: #3b0764; border-color: #3b0764; border-width: 1px 1px 1px 6px; }
.v-reading { background: #e0f2fe; color: #0c4a6e; border-color: #0c4a6e; border-radius: 10px; max-width: 22em; overflow: hidden; text-overflow: ellipsis; vertical-align: bottom; }
.v-other { background: #fff; color: #000; border-color: #000; }`
