package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// cannedResult is a result.json as idscheck run writes it, with the rules
// and verdicts given (id → verdict, "-" for a rule of another variant).
func cannedResult(t *testing.T, verdicts [][2]string, blocked map[string]string) []byte {
	t.Helper()
	type res struct {
		RuleID    string `json:"rule_id"`
		Verdict   string `json:"verdict"`
		Reason    string `json:"reason,omitempty"`
		BlockedBy string `json:"blocked_by,omitempty"`
		Variant   string `json:"variant,omitempty"`
	}
	type rule struct {
		Rule   map[string]string `json:"rule"`
		Result res               `json:"result"`
	}
	counts := map[string]int{}
	var rules []rule
	judged := 0
	for _, v := range verdicts {
		r := rule{Rule: map[string]string{"id": v[0], "level": "MUST", "quote": "the text of " + v[0]}, Result: res{RuleID: v[0], Verdict: v[1]}}
		switch v[1] {
		case "-":
			r.Result.Verdict, r.Result.Variant, r.Result.Reason = "N/A", "other", "the target declares another variant"
		case "N/A":
			r.Result.Reason = "untestable: an obligation of the client"
		case "BLOCKED":
			r.Result.BlockedBy = blocked[v[0]]
		default:
			judged++
		}
		counts[r.Result.Verdict]++
		rules = append(rules, r)
	}
	b, err := json.Marshal(map[string]any{"tool": map[string]string{"version": "v9.9.9"}, "strict": true, "exit_code": 1,
		"rules": rules, "summary": map[string]any{"counts": counts, "judged": judged}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// reportHTML is a run's report holding each rule's anchor (rule-ID-index).
func reportHTML(ids []string, pad int) []byte {
	var b strings.Builder
	b.WriteString("<html><body>")
	for i, id := range ids {
		fmt.Fprintf(&b, `<section id="rule-%s-%d">%s</section>`, id, i, id)
	}
	b.WriteString(strings.Repeat(" ", pad))
	b.WriteString("</body></html>")
	return []byte(b.String())
}

// cannedMatrix writes a runs folder of two implementations (go, node): the
// go row has every variant, a chaos run with a double charge and a probe
// table; the node memory row has ietf only and no probe; the node redis
// row failed to install.
func cannedMatrix(t *testing.T, pad int) ([]*Impl, string) {
	t.Helper()
	runs := t.TempDir()
	goImpl, err := ParseImpl([]byte(`{"name": "Fiber v2", "ecosystem": "go", "package": "github.com/gofiber/fiber/v2", "version": "v2.52.15",
		"source": "s", "install": "", "rows": [{"id": "fiber-v2", "store": "memory", "start": "{{fiberpay}} --listen 127.0.0.1:$PORT"}], "target": "target.json"}`), "fiber-v2")
	if err != nil {
		t.Fatal(err)
	}
	nodeImpl, err := ParseImpl([]byte(goodImpl), "express-idempotency")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string][][2]string{
		"ietf":   {{"RFC9110-15.6-server-error", "PASS"}, {"IETF-2.6-first-request", "PASS"}, {"IETF-2.6-concurrent-conflict", "FAIL"}, {"IETF-2.7-concurrent-409", "BLOCKED"}, {"IETF-2.1-one-header", "N/A"}, {"T0-R1-original-response", "-"}},
		"t0":     {{"RFC9110-15.6-server-error", "PASS"}, {"IETF-2.6-first-request", "-"}, {"T0-R1-original-response", "PASS"}, {"T0-R2-wait-in-flight", "NON-STRICT"}},
		"stripe": {{"RFC9110-15.6-server-error", "PASS"}, {"STRIPE-IDEM-same-result", "PASS"}, {"T0-R1-original-response", "-"}},
	}
	blocked := map[string]string{"IETF-2.7-concurrent-409": "IETF-2.6-concurrent-conflict"}
	for _, v := range Variants {
		var ids []string
		for _, r := range rules[v] {
			ids = append(ids, r[0])
		}
		write(t, filepath.Join(runs, "fiber-v2", v, "result.json"), cannedResult(t, rules[v], blocked))
		write(t, filepath.Join(runs, "fiber-v2", v, "index.html"), reportHTML(ids, pad))
	}
	write(t, filepath.Join(runs, "fiber-v2", "row.json"), []byte(`{"id": "fiber-v2", "status": "certified"}`))
	write(t, filepath.Join(runs, "fiber-v2", "chaos", "result.json"), []byte(`{"exit_code": 1}`))
	write(t, filepath.Join(runs, "fiber-v2", "chaos", "chaos.json"), []byte(`{"command": "idscheck chaos --seed 7 --faults net,storm", "faults": "net,storm",
		"start": "2026-11-28T12:00:00Z", "timeline": [{"fault": "latency", "start": "2026-11-28T12:00:01Z", "end": "2026-11-28T12:00:02Z"},
		{"fault": "storm", "start": "2026-11-28T12:00:05Z", "end": "2026-11-28T12:00:06Z"}],
		"coverage": [{"fault": "latency", "status": "injected", "injected": 2}]}`))
	write(t, filepath.Join(runs, "fiber-v2", "chaos", "check.json"), []byte(`{"queue": {"duplicated": 3, "lost": 0}, "counts": {"IETF-2.6-retry-result": 3},
		"models": [{"model": "http-idem-effects", "result": "Illegal"}],
		"anomalies": [{"kind": "IETF-2.6-retry-result", "explanation": "the request of caller1 under key \"k\" created 2 things",
			"ops": [{"call": 1500000000, "ret": 1600000000}, {"call": 1700000000, "ret": 2500000000}]}]}`))
	write(t, filepath.Join(runs, "fiber-v2", "chaos", "index.html"), reportHTML(nil, pad))
	tbl := Table{Behaviours: []Behaviour{{ID: "retry-after-complete", Situation: "a retry after the first answered", Observed: "201, same id, 1 payment",
		Expect: []Expectation{{Variant: "ietf", Rule: "IETF-2.6-first-request", Verdicts: []string{"PASS"}, Why: "returns the result"}}}}}
	b, _ := json.Marshal(tbl)
	write(t, filepath.Join(runs, "fiber-v2", "probe.json"), b)

	write(t, filepath.Join(runs, "express-idempotency-memory", "ietf", "result.json"), cannedResult(t, rules["ietf"][:3], nil))
	write(t, filepath.Join(runs, "express-idempotency-memory", "ietf", "index.html"), reportHTML(nil, pad))
	write(t, filepath.Join(runs, "express-idempotency-memory", "row.json"), []byte(`{"id": "express-idempotency/memory", "status": "certified"}`))
	write(t, filepath.Join(runs, "express-idempotency-memory", "probe-error.txt"), []byte("connection refused\n"))
	write(t, filepath.Join(runs, "express-idempotency-redis", "row.json"), []byte(`{"id": "express-idempotency/redis", "status": "install failed", "error": "npm ci: E404"}`))
	return []*Impl{goImpl, nodeImpl}, runs
}

var (
	hrefRe = regexp.MustCompile(`href="([^"]*)"`)
	cellRe = regexp.MustCompile(`<td class="v [a-z]+"([^>]*)>`)
)

// checkLinks asserts every link of the page names an existing file (and,
// with a fragment, an anchor in it).
func checkLinks(t *testing.T, page string, pageDir string) int {
	t.Helper()
	n := 0
	for _, m := range hrefRe.FindAllStringSubmatch(page, -1) {
		link := m[1]
		file, frag, _ := strings.Cut(link, "#")
		if strings.Contains(file, "://") {
			t.Errorf("a link leaves the page's folder: %s", link)
			continue
		}
		b, err := os.ReadFile(filepath.Join(pageDir, filepath.FromSlash(file)))
		if err != nil {
			t.Errorf("link %s: %v", link, err)
			continue
		}
		if frag != "" && !strings.Contains(string(b), `id="`+frag+`"`) {
			t.Errorf("link %s: no such anchor in the report", link)
		}
		n++
	}
	return n
}

func TestPagesFromCannedResults(t *testing.T) {
	impls, runs := cannedMatrix(t, 0)
	m, err := LoadMatrix(impls, runs)
	if err != nil {
		t.Fatal(err)
	}
	docs := t.TempDir()
	if err := WritePages(m, PageOptions{Docs: docs, Now: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), ChaosNote: "20s"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(docs, "conformance", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if n := checkLinks(t, page, filepath.Join(docs, "conformance")); n < 4 {
		t.Errorf("%d links, want one per run and chaos report at least", n)
	}
	if strings.Contains(page, " src=") || strings.Contains(page, "<link ") || strings.Contains(page, "@import") || strings.Contains(page, "url(") {
		t.Error("the page loads something from elsewhere; it must be self-contained")
	}
	cells := cellRe.FindAllStringSubmatchIndex(page, -1)
	if len(cells) == 0 {
		t.Fatal("no verdict cells")
	}
	for _, c := range cells {
		attrs := page[c[2]:c[3]]
		if !strings.Contains(attrs, `data-verdict="`) {
			t.Errorf("a cell without a filter attribute: %s", page[c[0]:c[1]])
		}
		// A cell of a run holds a link to its report (checkLinks: to a file that is there).
		body := page[c[1]:]
		body = body[:strings.Index(body, "</td>")]
		if !strings.Contains(attrs, `data-verdict="not run"`) && !strings.HasPrefix(body, `<a href="reports/`) {
			t.Errorf("a verdict cell without its report's link: %s%s", page[c[0]:c[1]], body)
		}
	}
	// Every verdict cell of a row with a run links to that run's report.
	for _, want := range []string{
		`data-verdict="FAIL" title="IETF-2.6-concurrent-conflict: FAIL"><a href="reports/fiber-v2-ietf.html#rule-IETF-2.6-concurrent-conflict-2">FAIL</a>`,
		`data-verdict="NON-STRICT"`, `data-verdict="not run"`,
		`data-ecosystem="node" data-store="redis"`, `data-ecosystem="go" data-store="memory"`,
		`<section data-variant="t0">`, `id="f-variant"`, `id="f-eco"`, `id="f-store"`, `id="f-verdict"`,
		`anomalies: duplicated 3, IETF-2.6-retry-result 3, model http-idem-effects: Illegal`, `<summary><small>replay</small></summary><small><code>idscheck chaos --seed 7 --faults net,storm</code>`,
		`created 2 things (its deliveries ran 1.5–2.5 s into the run, under latency 1.0–2.0 s)`,
		`install failed: npm ci: E404`, `not measured: connection refused`, `>agrees<`,
		`github.com/gofiber/fiber/v2 v2.52.15`, `idscheck v9.9.9`, `2026-11-28`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	// A rule no run of a variant could judge (untestable, another variant's) is no column.
	ietf := page[strings.Index(page, `<section data-variant="ietf">`):strings.Index(page, `<section data-variant="t0">`)]
	for _, gone := range []string{"IETF-2.1-one-header", "T0-R1-original-response"} {
		if strings.Contains(ietf, gone) {
			t.Errorf("the ietf table shows %s, which no ietf run could judge", gone)
		}
	}
	md, err := os.ReadFile(filepath.Join(docs, "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| fiber-v2 | github.com/gofiber/fiber/v2 v2.52.15 | go | memory | FAIL (1 FAIL, 1 BLOCKED, 3 judged) | PASS only without --strict (1 NON-STRICT, 3 judged) | PASS (2 judged) |",
		"express-idempotency/redis — install failed: npm ci: E404", "make matrix ONLY=fiber-v2", "2026-11-28",
		"under latency 1.0–2.0 s); replay: `idscheck chaos --seed 7 --faults net,storm` |",
		"ietf: 0 of 2 pass (0 with --strict); t0: 1 of 1 pass (0 with --strict); stripe: 1 of 1 pass (1 with --strict)",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("conformance.md lacks %q:\n%s", want, md)
		}
	}
	var problems []string
	for _, rv := range m.Rows {
		problems = append(problems, rv.Problems()...)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{"express-idempotency/redis: install failed", "express-idempotency/memory: agreement not measured: connection refused"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q: %s", want, got)
		}
	}
	if strings.Contains(got, "fiber-v2") {
		t.Errorf("fiber-v2 agrees and was certified, yet: %s", got)
	}
}

// Past 8 MB of reports the page links the runs' own reports, says so, and
// every link still names an existing file.
func TestPagesLinkTheRunsWhenTheReportsAreTooHeavy(t *testing.T) {
	impls, runs := cannedMatrix(t, maxReports/4)
	m, err := LoadMatrix(impls, runs)
	if err != nil {
		t.Fatal(err)
	}
	docs := t.TempDir()
	if err := WritePages(m, PageOptions{Docs: docs, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(docs, "conformance", "index.html"))
	if n := checkLinks(t, string(b), filepath.Join(docs, "conformance")); n < 4 {
		t.Errorf("%d links", n)
	}
	if !strings.Contains(string(b), "more than the 8 MB kept beside this page") {
		t.Error("the page does not say where its reports are")
	}
	if _, err := os.Stat(filepath.Join(docs, "conformance", "reports")); !os.IsNotExist(err) {
		t.Errorf("reports copied anyway: %v", err)
	}
}

func TestGate(t *testing.T) {
	for _, c := range []struct {
		counts map[string]int
		judged int
		want   string
	}{
		{map[string]int{"PASS": 3}, 3, "PASS"},
		{map[string]int{"PASS": 3, "NON-STRICT": 1}, 4, "PASS only without --strict"},
		{map[string]int{"FAIL": 1, "NON-STRICT": 1, "BLOCKED": 1}, 2, "FAIL"},
		{map[string]int{"PASS": 1, "BLOCKED": 1}, 1, "UNDECIDED"},
		{map[string]int{"NON-STRICT": 2, "BLOCKED": 2}, 2, "UNDECIDED; FAIL with --strict"},
		{map[string]int{"N/A": 4}, 0, "NOTHING JUDGED"},
	} {
		if got := Gate(c.counts, c.judged); got != c.want {
			t.Errorf("Gate(%v, %d) = %q, want %q", c.counts, c.judged, got, c.want)
		}
	}
}

// TestPagesMarkRowsFromOutside: a folder of --extra (built from a fetched
// repository's source, kept outside the repository) is on both pages,
// marked as not regenerated from a clean clone; the others are not marked.
func TestPagesMarkRowsFromOutside(t *testing.T) {
	impls, runs := cannedMatrix(t, 0)
	impls[len(impls)-1].Outside = true
	m, err := LoadMatrix(impls, runs)
	if err != nil {
		t.Fatal(err)
	}
	docs := t.TempDir()
	if err := WritePages(m, PageOptions{Docs: docs, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(docs, "conformance.md"))
	html, _ := os.ReadFile(filepath.Join(docs, "conformance", "index.html"))
	last := impls[len(impls)-1].Rows[0].ID
	if !strings.Contains(string(md), "| "+last+" †") || !strings.Contains(string(md), "does not regenerate these rows") {
		t.Errorf("conformance.md does not mark %s as built from outside:\n%s", last, md)
	}
	if first := impls[0].Rows[0].ID; len(impls) > 1 && strings.Contains(string(md), "| "+first+" †") {
		t.Errorf("conformance.md marks %s, a folder of the repository", first)
	}
	if !strings.Contains(string(html), "a clean clone's make matrix does not regenerate this row") {
		t.Error("index.html does not mark the row built from outside")
	}
}
