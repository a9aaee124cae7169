package reports

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"html/template"
	"io"
	"regexp"
	"strings"
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
	// Differ counts the rows whose runs disagree; FirstDiffer is the
	// anchor of the first of them. Partial counts the rows some run did
	// not run: not a difference, the rule was not run there.
	Differ      int
	FirstDiffer string
	Partial     int
	Script      template.JS
	ScriptHash  string
}

type matrixHead struct {
	Name, Target, Mutant, Link string
	Seed                       uint64
	Sum                        Summary
	// Chips are the column's verdict counts, each linking to the first row
	// of that verdict in the column (the script filters on it).
	Chips []matrixChip
}

type matrixChip struct {
	Verdict verdict.Verdict
	N       int
	Href    string // anchor of the first row with that verdict in the column
}

type matrixRow struct {
	ID, Section, Level, Quote string
	Anchor                    string
	Cells                     []matrixCell
	// Differs: the runs that ran the row's rule do not all give it the
	// same verdict (a run that did not run it gives no answer: a rule
	// a subset of the rules left out is "not run" there, no difference).
	Differs bool
}

type matrixCell struct {
	Verdict  verdict.Verdict
	Label    string // the verdict as shown ("READING: immediate")
	Reason   string
	Href     string
	Expected bool
	Missing  bool
}

var matrixTemplate = template.Must(template.New("matrix").Funcs(template.FuncMap{"vclass": verdictClass, "lower": strings.ToLower}).Parse(matrixSource))

// WriteMatrix writes one self-contained HTML page comparing runs: a row per
// rule (in the order the runs list them, first run first), a column per run,
// each cell the rule's verdict in that run, linked to the rule in that run's
// index.html. Everything from the runs is escaped, as in WriteHTML.
func WriteMatrix(w io.Writer, cols []MatrixColumn) error {
	v, err := buildMatrix(cols)
	if err != nil {
		return err
	}
	if err := matrixTemplate.Execute(w, v); err != nil {
		return fmt.Errorf("matrix: %w", err)
	}
	return nil
}

// MatrixCounts says what a comparison of cols finds: how many rules it
// lists, how many differ between the runs that ran them, and how many
// some run did not run (no difference: not run there).
func MatrixCounts(cols []MatrixColumn) (rules, differ, notEverywhere int, err error) {
	v, err := buildMatrix(cols)
	if err != nil {
		return 0, 0, 0, err
	}
	return len(v.Rows), v.Differ, v.Partial, nil
}

func buildMatrix(cols []MatrixColumn) (matrixView, error) {
	if len(cols) == 0 {
		return matrixView{}, errors.New("matrix: no run to compare")
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
			case e.Result.Verdict == verdict.Blocked && e.Result.BlockedStep != "":
				reason = "blocked: " + reason // it names the failed step and its rule
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
	for i := range v.Rows {
		row := &v.Rows[i]
		row.Anchor = fmt.Sprintf("row-%d", i)
		var first *matrixCell
		for k := range row.Cells {
			c := &row.Cells[k]
			switch {
			case c.Missing:
			case first == nil:
				first = c
			case c.Label != first.Label:
				row.Differs = true
			}
		}
		for _, c := range row.Cells {
			if c.Missing {
				v.Partial++
				break
			}
		}
		if row.Differs {
			if v.Differ == 0 {
				v.FirstDiffer = row.Anchor
			}
			v.Differ++
		}
	}
	for ci := range v.Columns {
		for _, vd := range Verdicts {
			n, href := 0, ""
			for _, row := range v.Rows {
				if c := row.Cells[ci]; !c.Missing && c.Verdict == vd {
					if n == 0 {
						href = row.Anchor
					}
					n++
				}
			}
			if n > 0 {
				v.Columns[ci].Chips = append(v.Columns[ci].Chips, matrixChip{Verdict: vd, N: n, Href: href})
			}
		}
	}
	v.Script, v.ScriptHash = template.JS(matrixScript), matrixScriptHash
	return v, nil
}

// matrixScript filters the rows of the matrix: by text (rule ID, section,
// quote), to the rows that differ, and to one verdict of one column (a
// chip). It reads only the page's own attributes and writes only classes
// and counts: no data of a run goes through it. The page's
// Content-Security-Policy allows this script alone, by its hash.
const matrixScript = `(function () {
  var q = document.getElementById("q"), diff = document.getElementById("diff"),
      shown = document.getElementById("shown"), clear = document.getElementById("clear"),
      chipLabel = document.getElementById("chip"), rows = document.querySelectorAll("tbody tr.row"), chip = null;
  function apply() {
    var words = q.value.toLowerCase().split(/\s+/).filter(Boolean), n = 0;
    rows.forEach(function (tr) {
      var text = tr.getAttribute("data-text"), ok = words.every(function (w) { return text.indexOf(w) >= 0; });
      if (ok && diff.checked && !tr.classList.contains("differs")) ok = false;
      if (ok && chip && tr.cells[2 + chip.col].getAttribute("data-v") !== chip.v) ok = false;
      tr.hidden = !ok;
      if (ok) n++;
    });
    shown.textContent = n + " of " + rows.length + " rules shown";
    clear.hidden = !chip;
    chipLabel.textContent = chip ? "only " + chip.v + " in " + chip.name : "";
    document.querySelectorAll("a.chip").forEach(function (a) {
      a.classList.toggle("on", !!chip && a.getAttribute("data-col") == chip.col && a.getAttribute("data-v") === chip.v);
    });
  }
  q.addEventListener("input", apply);
  diff.addEventListener("change", apply);
  clear.addEventListener("click", function () { chip = null; apply(); });
  document.getElementById("differ").addEventListener("click", function (e) { e.preventDefault(); diff.checked = true; apply(); });
  document.querySelectorAll("a.chip").forEach(function (a) {
    a.addEventListener("click", function (e) {
      e.preventDefault();
      var c = { col: +a.getAttribute("data-col"), v: a.getAttribute("data-v"), name: a.getAttribute("data-name") };
      chip = chip && chip.col === c.col && chip.v === c.v ? null : c;
      apply();
      window.scrollTo(0, document.querySelector("table.matrix").offsetTop - 8);
    });
  });
  document.getElementById("controls").hidden = false;
  apply();
})();`

var matrixScriptHash = func() string {
	sum := sha256.Sum256([]byte(matrixScript))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}()

// matrixSource shares the verdict styles of the report. Without script, the
// chips and the count of differing rows are anchors to the first such row,
// and the differing rows are highlighted all the same.
var matrixSource = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src '{{.ScriptHash}}'; form-action 'none'; base-uri 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>idscheck: {{len .Columns}} runs compared</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1a1a1a; margin: 0; padding: 16px 20px 48px; }
h1 { font-size: 22px; margin: 0 0 12px; }
table { border-collapse: collapse; }
th, td { text-align: left; vertical-align: top; padding: 3px 6px; border: 1px solid #d0d0d0; }
thead th { background: #f5f5f3; position: sticky; top: 0; font-size: 12px; z-index: 1; }
td.id { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; white-space: nowrap; }
.muted { color: #555; }
.v { display: inline-block; white-space: nowrap; min-width: 84px; text-align: center; font-weight: 700; font-size: 12px; padding: 1px 6px; border: 1px solid; border-radius: 3px; text-decoration: none; }
.chips { display: flex; flex-wrap: wrap; gap: 3px; margin-top: 4px; max-width: 16em; }
.chips .v { min-width: 0; font-size: 11px; }
a.chip.on { outline: 3px solid #1d4ed8; }
tr.differs td { background: #fff7d6; }
tr.differs td.id { border-left: 6px solid #b45309; }
#controls { display: flex; gap: 14px; align-items: center; flex-wrap: wrap; margin: 8px 0 12px; }
#controls input[type=search] { font: inherit; padding: 3px 6px; width: 24em; }
tr:target td { outline: 2px solid #1d4ed8; }
` + verdictCSS + `
</style>
</head>
<body>
<h1>idscheck: {{len .Columns}} runs compared</h1>
<p>{{if .Differ}}<a href="#{{.FirstDiffer}}" id="differ"><b>{{.Differ}} of {{len .Rows}} rules differ</b></a> between the runs that ran them (highlighted){{else}}<span id="differ">Every rule has the same verdict in every run that ran it</span>{{end}}.{{with .Partial}} {{.}} rules were not run in every run ("not run": no difference).{{end}} A chip of a column shows the rules of that verdict in that run.</p>
<div id="controls" hidden>
<input type="search" id="q" placeholder="filter: rule ID, section or words of the quote" aria-label="filter rules">
<label><input type="checkbox" id="diff"> only rows that differ</label>
<span id="chip"></span> <button type="button" id="clear" hidden>show every verdict</button>
<span id="shown" class="muted"></span>
</div>
<table class="matrix">
<thead><tr><th>rule</th><th>level</th>{{range $ci, $c := .Columns}}<th>{{if .Link}}<a href="{{.Link}}/index.html">{{.Name}}</a>{{else}}{{.Name}}{{end}}<br><span class="v {{vclass .Sum.Verdict}}">{{.Sum.Verdict}}</span><br><span class="muted">{{with .Mutant}}mutant {{.}}<br>{{end}}seed {{.Seed}}</span><div class="chips">{{range .Chips}}<a class="v {{vclass .Verdict}} chip" href="#{{.Href}}" data-col="{{$ci}}" data-v="{{.Verdict}}" data-name="{{$c.Name}}" title="the {{.Verdict}} rules of {{$c.Name}}">{{.Verdict}} {{.N}}</a>{{end}}</div></th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr id="{{.Anchor}}" class="row{{if .Differs}} differs{{end}}" data-text="{{lower .ID}} §{{lower .Section}} {{lower .Quote}}"><td class="id" title="{{.Quote}}">{{.ID}} <span class="muted">§{{.Section}}</span></td><td>{{.Level}}</td>{{range .Cells}}<td data-v="{{if .Missing}}not run{{else}}{{.Verdict}}{{end}}">{{if .Missing}}<span class="muted">not run</span>{{else}}{{if .Href}}<a class="v {{vclass .Verdict}}" href="{{.Href}}" title="{{.Reason}}">{{.Label}}</a>{{else}}<span class="v {{vclass .Verdict}}" title="{{.Reason}}">{{.Label}}</span>{{end}}{{if .Expected}} <span class="muted">expected</span>{{end}}{{end}}</td>{{end}}</tr>
{{end}}
</tbody>
</table>
<script>{{.Script}}</script>
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
