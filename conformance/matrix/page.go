package main

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// maxReports is the most the copied reports may weigh in docs/conformance/
// reports; past it the page links the reports in the runs folder instead.
const maxReports = 8 << 20

// PageOptions says where the pages go and what they say about the run.
type PageOptions struct {
	Docs      string    // the docs folder: writes conformance.md, conformance/index.html, conformance/reports/
	Now       time.Time // the date the pages carry
	ChaosNote string    // the faults and duration of the chaos runs, for the page
}

// WritePages copies the reports and writes docs/conformance/index.html and
// docs/conformance.md from m. Every link it writes points at a file it
// copied (or, past maxReports, at the run's own report).
func WritePages(m *Matrix, o PageOptions) error {
	pageDir := filepath.Join(o.Docs, "conformance")
	repDir := filepath.Join(pageDir, "reports")
	var total int64
	var reports []*string
	var sources []string
	for _, rv := range m.Rows {
		for _, v := range Variants {
			if run := rv.Runs[v]; run != nil && run.Report != "" {
				reports, sources = append(reports, &run.Link), append(sources, run.Report)
				run.Link = rv.Slug + "-" + v + ".html"
			}
		}
		if c := rv.Chaos; c != nil && c.Report != "" {
			reports, sources = append(reports, &c.Link), append(sources, c.Report)
			c.Link = rv.Slug + "-chaos.html"
		}
	}
	for _, s := range sources {
		if st, err := os.Stat(s); err == nil {
			total += st.Size()
		}
	}
	inline := total <= maxReports
	if err := os.RemoveAll(repDir); err != nil {
		return err
	}
	if inline && len(sources) > 0 {
		if err := os.MkdirAll(repDir, 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(pageDir, 0o755); err != nil {
		return err
	}
	for i, s := range sources {
		if inline {
			if err := copyFile(s, filepath.Join(repDir, *reports[i])); err != nil {
				return err
			}
			*reports[i] = "reports/" + *reports[i]
			continue
		}
		abs, _ := filepath.Abs(s)
		absPage, _ := filepath.Abs(pageDir)
		rel, err := filepath.Rel(absPage, abs)
		if err != nil {
			return err
		}
		*reports[i] = filepath.ToSlash(rel)
	}
	var buf bytes.Buffer
	if err := renderHTML(&buf, m, o, inline, total); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pageDir, "index.html"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	buf.Reset()
	renderMarkdown(&buf, m, o)
	return os.WriteFile(filepath.Join(o.Docs, "conformance.md"), buf.Bytes(), 0o644)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// gateCell is a variant's gate with its counts: "FAIL (1 FAIL, 3 NON-STRICT)".
func gateCell(run *RunView) string {
	if run == nil {
		return "not run"
	}
	var parts []string
	for _, k := range []string{"FAIL", "NON-STRICT", "BLOCKED", "UNKNOWN"} {
		if n := run.Counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	parts = append(parts, fmt.Sprintf("%d judged", run.Judged))
	return run.Gate + " (" + strings.Join(parts, ", ") + ")"
}

func statusText(rv *RowView) string {
	if rv.Status == nil {
		return "not run"
	}
	if rv.Status.Status == "certified" {
		return ""
	}
	return rv.Status.Status + ": " + rv.Status.Error
}

// Headline counts, per variant, the rows whose strict and plain gates pass.
func headline(m *Matrix) []string {
	var out []string
	for _, v := range Variants {
		run, strict, plain := 0, 0, 0
		for _, rv := range m.Rows {
			r := rv.Runs[v]
			if r == nil {
				continue
			}
			run++
			switch r.Gate {
			case "PASS":
				strict++
				plain++
			case "PASS only without --strict":
				plain++
			}
		}
		out = append(out, fmt.Sprintf("%s: %d of %d pass (%d with --strict)", v, plain, run, strict))
	}
	return out
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func renderMarkdown(w *bytes.Buffer, m *Matrix, o PageOptions) {
	fmt.Fprintf(w, "# The conformance matrix: idempotency middlewares under idscheck\n\n")
	fmt.Fprintf(w, "Generated %s by `make matrix` with idscheck %s. The page with every rule's verdict, the\n", o.Now.UTC().Format("2006-01-02"), orDash(m.Version))
	fmt.Fprintf(w, "filters and each run's report: [conformance/index.html](conformance/index.html).\n\n")
	fmt.Fprintf(w, "Each row is a minimal payments endpoint (`conformance/<folder>/`, the contract in conformance/README.md)\n")
	fmt.Fprintf(w, "behind one middleware on one store, certified with `idscheck run --profile http-idempotency\n")
	fmt.Fprintf(w, "--strict` under each variant against a fresh server. A gate cell reads the strict run's verdicts:\n")
	fmt.Fprintf(w, "**PASS** (nothing failed), **PASS only without --strict** (only SHOULDs failed: NON-STRICT; a plain\n")
	fmt.Fprintf(w, "run, same verdicts, exits 0), **FAIL** (a MUST failed), **UNDECIDED** (rules BLOCKED or UNKNOWN, no MUST\n")
	fmt.Fprintf(w, "failed: a plain run exits 4; \"FAIL with --strict\" when a SHOULD failed too). Chaos: one `idscheck chaos` run per row%s. Agreement: the plain-HTTP probe\n", parenthesised(o.ChaosNote))
	fmt.Fprintf(w, "(`conformance/probe`, no idscheck code) against each variant's verdicts.\n\n")
	fmt.Fprintf(w, "Headline: %s.\n\n", strings.Join(headline(m), "; "))
	fmt.Fprintf(w, "| implementation | version | ecosystem | store | ietf | t0 | stripe | chaos | agreement |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	for _, rv := range m.Rows {
		name := rv.Row.ID
		if rv.Impl.Outside {
			name += " †"
		}
		if st := statusText(rv); st != "" {
			name += " — " + st
		}
		var gates, agree []string
		for _, v := range Variants {
			gates = append(gates, gateCell(rv.Runs[v]))
			if _, ok := rv.Runs[v]; ok && rv.Probe != nil {
				t, _ := rv.AgreementText(v)
				agree = append(agree, v+": "+t)
			}
		}
		if rv.Probe == nil && len(rv.Runs) > 0 {
			t, _ := rv.AgreementText(Variants[0])
			agree = []string{t}
		}
		fmt.Fprintf(w, "| %s | %s %s | %s | %s | %s | %s | %s | %s | %s |\n", mdEscape(name), mdEscape(rv.Row.Package), mdEscape(rv.Row.Version),
			rv.Impl.Ecosystem, mdEscape(rv.Row.Store), gates[0], gates[1], gates[2], mdEscape(chaosMD(rv.Chaos)), mdEscape(strings.Join(agree, "; ")))
	}
	for _, rv := range m.Rows {
		if rv.Impl.Outside {
			fmt.Fprintf(w, "\n† built from a fetched repository's source (its `source` names the commit), from a folder kept outside\n")
			fmt.Fprintf(w, "this repository (`make matrix MATRIX_FLAGS=--extra=DIR`): the repository may not commit a recipe that builds\n")
			fmt.Fprintf(w, "another project's code, so a clean clone's `make matrix` does not regenerate these rows.\n")
			break
		}
	}
	fmt.Fprintf(w, "\n## Regenerate\n\n")
	fmt.Fprintf(w, "```\nmake matrix                  # every row: installs, starts, certifies, probes, chaos; writes both pages\n")
	fmt.Fprintf(w, "make matrix ONLY=fiber-v2     # one folder or one row id; the other rows keep their last results\n```\n\n")
	fmt.Fprintf(w, "The runs are kept in `conformance/.work/runs/` (gitignored): a row the pages show as \"not run\" has no\n")
	fmt.Fprintf(w, "results there (a clean clone before its first `make matrix`). `make matrix` exits non-zero when a row\n")
	fmt.Fprintf(w, "could not be certified or when the probe and the verdicts disagree (printed). See conformance/README.md.\n")
}

// chaosMD is the chaos cell of conformance.md: what was found, an example
// with the faults injected meanwhile, and the line that replays the run.
func chaosMD(c *ChaosView) string {
	t := c.Text()
	if c != nil && c.ExitCode == 1 {
		if c.Example != "" {
			t += "; e.g. " + c.Example
		}
		if c.Replay != "" {
			t += "; replay: `" + c.Replay + "`"
		}
	}
	return t
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func parenthesised(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// cell is one verdict cell of the HTML page.
type cell struct {
	Verdict, Title, Link string
}

type htmlRow struct {
	*RowView
	Cells      []cell
	Gate       string
	GateClass  string
	Agreement  string
	Agrees     bool
	StatusText string
	ChaosText  string
	ChaosClass string
}

type htmlVariant struct {
	Name  string
	Rules []string
	Rows  []htmlRow
}

func verdictClass(v string) string {
	switch v {
	case "PASS":
		return "pass"
	case "FAIL":
		return "fail"
	case "NON-STRICT":
		return "nonstrict"
	case "BLOCKED", "UNKNOWN":
		return "undecided"
	case "READING":
		return "reading"
	case "N/A":
		return "na"
	}
	return "none"
}

func gateClass(g string) string {
	switch g {
	case "PASS":
		return "pass"
	case "FAIL":
		return "fail"
	case "PASS only without --strict":
		return "nonstrict"
	}
	return "undecided"
}

func renderHTML(w *bytes.Buffer, m *Matrix, o PageOptions, inline bool, total int64) error {
	var variants []htmlVariant
	ecos, stores := map[string]bool{}, map[string]bool{}
	for _, rv := range m.Rows {
		ecos[rv.Impl.Ecosystem] = true
		stores[rv.Row.Store] = true
	}
	for _, v := range Variants {
		hv := htmlVariant{Name: v, Rules: ruleColumns(m.Rows, v)}
		for _, rv := range m.Rows {
			hr := htmlRow{RowView: rv, StatusText: statusText(rv), ChaosText: rv.Chaos.Text()}
			hr.ChaosClass = "undecided"
			if rv.Chaos != nil && rv.Chaos.ExitCode == 0 {
				hr.ChaosClass = "pass"
			} else if rv.Chaos != nil && rv.Chaos.ExitCode == 1 {
				hr.ChaosClass = "fail"
			}
			run := rv.Runs[v]
			hr.Gate = gateCell(run)
			hr.GateClass = "none"
			if run != nil {
				hr.GateClass = gateClass(run.Gate)
			}
			hr.Agreement, hr.Agrees = rv.AgreementText(v)
			for _, id := range hv.Rules {
				c := cell{Verdict: "not run", Title: id + ": no run"}
				if run != nil {
					verdict, ok := run.Verdicts[id]
					if !ok {
						verdict = "—"
					}
					c.Verdict = verdict
					c.Title = id + ": " + verdict
					if r := run.Reasons[id]; r != "" && r != "-" {
						c.Title += " — " + r
					}
					if run.Link != "" {
						c.Link = run.Link
						if a := run.Anchors[id]; a != "" && reportHasAnchor(run.Report, a) {
							c.Link += "#" + a
						}
					}
				}
				hr.Cells = append(hr.Cells, c)
			}
			hv.Rows = append(hv.Rows, hr)
		}
		variants = append(variants, hv)
	}
	data := map[string]any{
		"Date":      o.Now.UTC().Format("2006-01-02 15:04 UTC"),
		"Version":   orDash(m.Version),
		"Variants":  variants,
		"Ecos":      sortedKeys(ecos),
		"Stores":    sortedKeys(stores),
		"Verdicts":  []string{"PASS", "FAIL", "NON-STRICT", "BLOCKED", "UNKNOWN", "READING", "N/A"},
		"Inline":    inline,
		"TotalMB":   fmt.Sprintf("%.1f", float64(total)/(1<<20)),
		"Rules":     m.Rules,
		"Rows":      m.Rows,
		"Headline":  headline(m),
		"ChaosNote": o.ChaosNote,
	}
	return pageTmpl.Execute(w, data)
}

var anchorCache = map[string]string{}

// reportHasAnchor says whether the report at path holds id="anchor".
func reportHasAnchor(path, anchor string) bool {
	if path == "" {
		return false
	}
	s, ok := anchorCache[path]
	if !ok {
		b, _ := os.ReadFile(path)
		s = string(b)
		anchorCache[path] = s
	}
	return strings.Contains(s, `id="`+anchor+`"`)
}

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"vclass": verdictClass,
	"short": func(id string) string {
		return id
	},
	"rule": func(rules map[string]RuleInfo, id string) string {
		r := rules[id]
		return strings.TrimSpace(r.Level + ": " + r.Quote)
	},
	"join": strings.Join,
	"sorted": func(ss []string) []string {
		c := append([]string(nil), ss...)
		sort.Strings(c)
		return c
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>idscheck conformance matrix: idempotency middlewares</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:3px 6px;vertical-align:top}
th.rule{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:normal;font-size:12px;white-space:nowrap}
td.v{text-align:center;font-size:12px;white-space:nowrap}
td.v a{color:inherit;text-decoration:none;display:block}
.pass{background:#c8efc8}.fail{background:#f6b5b5}.nonstrict{background:#fbe3a8}
.undecided{background:#d9d2f0}.reading{background:#bfe0f5}.na{background:#eee;color:#777}.none{background:#fff;color:#999}
td.dim{opacity:.2}
.rowhead small{color:#555;display:block}
.filters label{margin-right:1em}
.note{color:#555;max-width:70em}
details{margin:.3em 0}
</style></head><body>
<h1>Idempotency middlewares under idscheck's http-idempotency profile</h1>
<p class="note">Generated {{.Date}} by <code>make matrix</code> with idscheck {{.Version}}. Each row is a minimal
payments endpoint behind one middleware on one store (<code>conformance/&lt;folder&gt;/</code>), certified under each
variant with <code>idscheck run --strict</code> against a fresh server. A plain run's gate follows from the same
verdicts: it passes unless a rule is FAIL; <code>--strict</code> passes only with no NON-STRICT too. Chaos: one
<code>idscheck chaos</code> run per row{{if .ChaosNote}} ({{.ChaosNote}}){{end}}; its anomalies and the line that
replays it. Agreement: the plain-HTTP probe's behaviour table (<code>conformance/probe</code>, no idscheck code)
against each variant's verdicts. Each verdict links to its run's report{{if not .Inline}} — the reports weigh
{{.TotalMB}} MB, more than the 8 MB kept beside this page, so the links point into
<code>conformance/.work/runs/</code> (gitignored: present where <code>make matrix</code> ran){{end}}.</p>
<p><b>Headline</b>: {{join .Headline "; "}}.</p>
<div class="filters">
<label>variant <select id="f-variant"><option value="">all</option>{{range .Variants}}<option>{{.Name}}</option>{{end}}</select></label>
<label>ecosystem <select id="f-eco"><option value="">all</option>{{range .Ecos}}<option>{{.}}</option>{{end}}</select></label>
<label>store <select id="f-store"><option value="">all</option>{{range .Stores}}<option>{{.}}</option>{{end}}</select></label>
<label>verdict <select id="f-verdict"><option value="">all</option>{{range .Verdicts}}<option>{{.}}</option>{{end}}</select></label>
</div>
{{$rules := .Rules}}
{{range .Variants}}{{$v := .Name}}
<section data-variant="{{.Name}}">
<h2>Variant {{.Name}}</h2>
<table>
<thead><tr><th>implementation</th><th>gate</th>{{range .Rules}}<th class="rule" title="{{rule $rules .}}">{{.}}</th>{{end}}<th>chaos</th><th>agreement (probe vs verdicts)</th></tr></thead>
<tbody>
{{range .Rows}}<tr data-row="{{.Row.ID}}" data-ecosystem="{{.Impl.Ecosystem}}" data-store="{{.Row.Store}}">
<td class="rowhead"><b>{{.Row.ID}}</b><small>{{.Row.Package}} {{.Row.Version}} · {{.Impl.Ecosystem}} · store {{.Row.Store}}{{if .Row.Framework}} · {{.Row.Framework}}{{end}}</small><small>{{.Row.Source}}</small>{{if .Impl.Outside}}<small>† built from a fetched repository's source, from a folder outside this repository (--extra): a clean clone's make matrix does not regenerate this row</small>{{end}}{{if .StatusText}}<small class="fail">{{.StatusText}}</small>{{end}}</td>
<td class="{{.GateClass}}">{{.Gate}}</td>
{{range .Cells}}<td class="v {{vclass .Verdict}}" data-verdict="{{.Verdict}}" title="{{.Title}}">{{if .Link}}<a href="{{.Link}}">{{.Verdict}}</a>{{else}}{{.Verdict}}{{end}}</td>{{end}}
<td class="{{.ChaosClass}}">{{if .Chaos}}{{if .Chaos.Link}}<a href="{{.Chaos.Link}}">{{.ChaosText}}</a>{{else}}{{.ChaosText}}{{end}}{{if .Chaos.Example}}<br><small>e.g. {{.Chaos.Example}}</small>{{end}}{{if .Chaos.Replay}}<details><summary><small>replay</small></summary><small><code>{{.Chaos.Replay}}</code></small></details>{{end}}{{else}}not run{{end}}</td>
<td class="{{if .Agrees}}pass{{else}}undecided{{end}}">{{.Agreement}}</td>
</tr>
{{end}}</tbody></table>
</section>
{{end}}
<h2>Behaviour tables (the probe)</h2>
{{range .Rows}}<details data-row="{{.Row.ID}}" data-ecosystem="{{.Impl.Ecosystem}}" data-store="{{.Row.Store}}"><summary>{{.Row.ID}}{{if not .Probe}} — {{if .ProbeErr}}not measured: {{.ProbeErr}}{{else}}not measured{{end}}{{end}}</summary>
{{if .Probe}}<table><thead><tr><th>situation</th><th>observed</th><th>what each text says</th></tr></thead><tbody>
{{range .Probe.Behaviours}}<tr><td>{{.Situation}}</td><td title="{{join .Evidence "\n"}}">{{.Observed}}</td><td>{{range .Expect}}{{.Variant}}: {{if .Rule}}{{.Rule}} {{join .Verdicts "/"}}{{else}}a documented choice{{end}} — {{.Why}}<br>{{end}}</td></tr>
{{end}}</tbody></table>{{end}}
<p class="note">{{.Impl.Documented}}</p></details>
{{end}}
<script>
(function(){
  var q=function(id){return document.getElementById(id)};
  function apply(){
    var v=q('f-variant').value,e=q('f-eco').value,s=q('f-store').value,d=q('f-verdict').value;
    document.querySelectorAll('section[data-variant]').forEach(function(sec){sec.hidden=!!v&&sec.dataset.variant!==v});
    document.querySelectorAll('[data-ecosystem]').forEach(function(el){
      var show=(!e||el.dataset.ecosystem===e)&&(!s||el.dataset.store===s);
      if(el.tagName==='TR'){
        if(show&&d){show=el.querySelector('td[data-verdict="'+d+'"]')!==null}
        el.querySelectorAll('td[data-verdict]').forEach(function(td){td.classList.toggle('dim',!!d&&td.dataset.verdict!==d)});
      }
      el.hidden=!show;
    });
  }
  ['f-variant','f-eco','f-store','f-verdict'].forEach(function(id){q(id).addEventListener('change',apply)});
})();
</script>
</body></html>
`))
