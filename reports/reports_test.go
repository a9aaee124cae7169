package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"html/template"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/spec"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestSummary(t *testing.T) {
	entry := func(v verdict.Verdict, level spec.Level, expected bool) RuleEntry {
		id := "R-" + string(v) + "-" + string(level)
		return RuleEntry{Rule: spec.Rule{ID: id, Level: level}, Result: verdict.RuleResult{RuleID: id, Verdict: v}, Expected: expected}
	}
	for _, tc := range []struct {
		name    string
		strict  bool
		rules   []RuleEntry
		verdict verdict.Verdict
		newFail int
		nowPass int
	}{
		{"all pass", false, []RuleEntry{entry(verdict.Pass, spec.Must, false), entry(verdict.NA, spec.Must, false)}, verdict.Pass, 0, 0},
		{"a MUST fails", false, []RuleEntry{entry(verdict.Pass, spec.Must, false), entry(verdict.Fail, spec.Must, false)}, verdict.Fail, 1, 0},
		{"expected failure does not fail", false, []RuleEntry{entry(verdict.Fail, spec.Must, true)}, verdict.Pass, 0, 0},
		{"expected failure now passes fails the run", false, []RuleEntry{entry(verdict.Pass, spec.Must, true)}, verdict.Fail, 0, 1},
		{"unknown is never pass", false, []RuleEntry{entry(verdict.Pass, spec.Must, false), entry(verdict.Unknown, spec.Must, false)}, verdict.Unknown, 0, 0},
		{"fail beats unknown", false, []RuleEntry{entry(verdict.Unknown, spec.Must, false), entry(verdict.Fail, spec.Must, false)}, verdict.Fail, 1, 0},
		{"should broken, not strict", false, []RuleEntry{entry(verdict.NonStrict, spec.Should, false)}, verdict.NonStrict, 0, 0},
		{"should broken, strict", true, []RuleEntry{entry(verdict.NonStrict, spec.Should, false)}, verdict.Fail, 1, 0},
		{"unrecognised verdict is never pass", false, []RuleEntry{entry(verdict.Pass, spec.Must, false), entry("MAYBE", spec.Must, false)}, verdict.Unknown, 0, 0},
		{"may never fails, even strict", true, []RuleEntry{entry(verdict.NonStrict, spec.May, false)}, verdict.NonStrict, 0, 0},
		{"blocked is undecided", false, []RuleEntry{entry(verdict.Pass, spec.Must, false), entry(verdict.Blocked, spec.Must, false)}, verdict.Unknown, 0, 0},
		{"fail beats blocked", false, []RuleEntry{entry(verdict.Blocked, spec.Must, false), entry(verdict.Fail, spec.Must, false)}, verdict.Fail, 1, 0},
		{"reading never fails", true, []RuleEntry{entry(verdict.Pass, spec.Must, false), entry(verdict.Reading, spec.Must, false)}, verdict.Pass, 0, 0},
		{"reading of an expected failure is not a pass", false, []RuleEntry{entry(verdict.Reading, spec.Must, true)}, verdict.Pass, 0, 0},
		{"reading and a broken should", false, []RuleEntry{entry(verdict.Reading, spec.Must, false), entry(verdict.NonStrict, spec.Should, false)}, verdict.NonStrict, 0, 0},
		{"reading and blocked", false, []RuleEntry{entry(verdict.Reading, spec.Must, false), entry(verdict.Blocked, spec.Must, false)}, verdict.Unknown, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Strict: tc.strict, Rules: tc.rules}
			s := r.Summary()
			if s.Verdict != tc.verdict || len(s.NewFailures) != tc.newFail || len(s.NowPassing) != tc.nowPass {
				t.Errorf("summary = %+v, want verdict %s, %d new failures, %d now passing", s, tc.verdict, tc.newFail, tc.nowPass)
			}
			total := 0
			for _, n := range s.Counts {
				total += n
			}
			if total != len(tc.rules) || s.Total != len(tc.rules) {
				t.Errorf("counts %v add up to %d, total %d, want %d", s.Counts, total, s.Total, len(tc.rules))
			}
			for _, e := range tc.rules {
				if slices.Contains(Verdicts, e.Result.Verdict) && s.Counts[e.Result.Verdict] == 0 {
					t.Errorf("%s not counted: %v", e.Result.Verdict, s.Counts)
				}
			}
		})
	}
}

// decodeJUnit parses junit.xml back: the XML must be well formed.
func decodeJUnit(t *testing.T, data []byte) junitSuites {
	t.Helper()
	var doc junitSuites
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("junit.xml does not parse: %v\n%s", err, data)
	}
	return doc
}

func findCase(t *testing.T, doc junitSuites, id string) junitCase {
	t.Helper()
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			for _, p := range c.Properties {
				if p.Name == "rule_id" && p.Value == id {
					return c
				}
			}
		}
	}
	t.Fatalf("no testcase with rule_id %s", id)
	return junitCase{}
}

func TestJUnit(t *testing.T) {
	for _, strict := range []bool{false, true} {
		r := sampleResult()
		r.Strict = strict
		var b bytes.Buffer
		if err := WriteJUnit(&b, r); err != nil {
			t.Fatal(err)
		}
		doc := decodeJUnit(t, b.Bytes())
		if len(doc.Suites) != 1 || doc.Suites[0].Name != "idscheck.intent" {
			t.Fatalf("suites = %d, first %q; want one, idscheck.intent", len(doc.Suites), doc.Suites[0].Name)
		}
		names := map[string]bool{}
		n := 0
		for _, s := range doc.Suites {
			for _, c := range s.Cases {
				if names[c.Name] {
					t.Errorf("testcase name %q twice", c.Name)
				}
				names[c.Name] = true
				n++
				props := map[string]string{}
				for _, p := range c.Properties {
					props[p.Name] = p.Value
				}
				for _, k := range []string{"rule_id", "section", "level", "source", "verdict"} {
					if _, ok := props[k]; !ok {
						t.Errorf("%s: no property %s", c.Name, k)
					}
				}
				if !strings.HasPrefix(c.Name, props["rule_id"]) {
					t.Errorf("name %q does not start with the rule ID %q", c.Name, props["rule_id"])
				}
			}
		}
		if want := len(r.Rules) + len(r.NotCovered); n != want || doc.Tests != want {
			t.Errorf("%d testcases (tests=%d), want %d", n, doc.Tests, want)
		}
		for _, tc := range []struct {
			id   string
			want string // failure:<type>, error:<type>, skipped, pass
		}{
			{"INTENT-7.2-idem-replay", "failure:FAIL"},
			{"INTENT-7.3-idem-conflict", "skipped"}, // expected failure
			{"INTENT-6.1-claim", "pass"},
			{"INTENT-6.2-fixed", "failure:now-passes"},
			{"INTENT-6.4-lease-timeout", "error:unknown"},
			{"INTENT-8.1-retry-after", map[bool]string{false: "pass", true: "failure:non-strict"}[strict]},
			{"INTENT-8.2-may-hint", "pass"},
			{"INTENT-9.1-admin", "skipped"},
			{"INTENT-NOT-A-REAL-RULE", "skipped"},
			{"INTENT-6.5-lease-expiry", "pass"},   // READING never fails
			{"INTENT-6.6-claim-order", "skipped"}, // BLOCKED
		} {
			t.Run(tc.id+map[bool]string{false: "", true: "/strict"}[strict], func(t *testing.T) {
				c := findCase(t, doc, tc.id)
				got := "pass"
				switch {
				case c.Failure != nil:
					got = "failure:" + c.Failure.Type
				case c.Error != nil:
					got = "error:" + c.Error.Type
				case c.Skipped != nil:
					got = "skipped"
				}
				if got != tc.want {
					t.Errorf("%s is %s, want %s", tc.id, got, tc.want)
				}
			})
		}
		c := findCase(t, doc, "INTENT-7.2-idem-replay")
		if c.Classname != "intent.7.2" {
			t.Errorf("classname %q, want intent.7.2", c.Classname)
		}
		for _, want := range []string{"POST /intent?namespace=a", `{"id":"in-2","status":"open"}`, "expected: the first response again", "observed: 200"} {
			if !strings.Contains(c.Failure.Body, want) {
				t.Errorf("failure body lacks %q:\n%s", want, c.Failure.Body)
			}
		}
		if c := findCase(t, doc, "INTENT-9.1-admin"); !strings.Contains(c.Skipped.Message, "no admin token") {
			t.Errorf("N/A skipped message %q lacks its reason", c.Skipped.Message)
		}
		if c := findCase(t, doc, "INTENT-6.2-fixed"); !slices.Contains(c.Properties, junitProperty{"expected_failure_now_passes", "true"}) {
			t.Errorf("a now-passing expected failure is not flagged: %+v", c.Properties)
		}
		if c := findCase(t, doc, "INTENT-6.6-claim-order"); c.Skipped == nil ||
			c.Skipped.Message != "blocked by INTENT-7.2-idem-replay: its setup replays a publish, and the replay answered 200 instead of 201" ||
			!slices.Contains(c.Properties, junitProperty{"blocked_by", "INTENT-7.2-idem-replay"}) {
			t.Errorf("BLOCKED testcase does not name its blocker: %+v", c)
		}
		c = findCase(t, doc, "INTENT-6.5-lease-expiry")
		if c.SystemOut == nil || !strings.HasPrefix(c.SystemOut.Text, "follows reading immediate of lease-expiry\n") ||
			!slices.Contains(c.Properties, junitProperty{"reading_follows", "immediate"}) {
			t.Errorf("READING testcase does not say which reading it follows: %+v", c)
		}
	}
}

// TestJUnitHostileText: control characters and markup from the target still
// give well-formed XML.
func TestJUnitHostileText(t *testing.T) {
	r := sampleResult()
	r.Rules[0].Result.Evidence[0].Exchanges[1].RespBody = "\x00\x01\x1b[31m]]><!-- --> </failure><x>\xff\xfe"
	r.Rules[0].Result.Reason = "\"'<>&\x07"
	var b bytes.Buffer
	if err := WriteJUnit(&b, r); err != nil {
		t.Fatal(err)
	}
	doc := decodeJUnit(t, b.Bytes())
	c := findCase(t, doc, "INTENT-7.2-idem-replay")
	if !strings.Contains(c.Failure.Body, "</failure><x>") || !strings.Contains(c.Failure.Body, `\u0000\u0001`) || !strings.Contains(c.Failure.Body, `\xff\xfe`) {
		t.Errorf("hostile body lost instead of escaped:\n%s", c.Failure.Body)
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./reports -run TestGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (if intended: go test ./reports -run TestGolden -update)\n--- got:\n%s", name, got)
	}
}

func TestGolden(t *testing.T) {
	r := sampleResult()
	r.Chaos = sampleChaos()
	for _, tc := range []struct {
		name  string
		write func(*bytes.Buffer, *Result) error
	}{
		{"junit.xml", func(b *bytes.Buffer, r *Result) error { return WriteJUnit(b, r) }},
		{"result.json", func(b *bytes.Buffer, r *Result) error { return WriteJSON(b, r) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b, r); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b.Bytes())
		})
	}
}

// TestReRender: WriteAll, ReadResult, WriteAll again gives identical files,
// so result.json alone is enough to re-render.
func TestReRender(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chaos bool
		build func() *Result
	}{
		{"rules", false, sampleResult},
		{"rules and chaos", true, func() *Result { r := sampleResult(); r.Chaos = sampleChaos(); return r }},
		{"hostile", true, func() *Result {
			r := hostileResult(hostile[0])
			r.Rules[4].Result.Verdict = "ANOTHER" // two verdicts this build does not know
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.build()
			a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
			if err := WriteAll(a, r); err != nil {
				t.Fatal(err)
			}
			back, err := ReadResult(a)
			if err != nil {
				t.Fatal(err)
			}
			if len(back.Rules) != len(r.Rules) || back.Seed != r.Seed || (back.Chaos != nil) != tc.chaos {
				t.Fatalf("read back %d rules, seed %d, chaos %v", len(back.Rules), back.Seed, back.Chaos != nil)
			}
			if err := WriteAll(b, back); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{ResultFile, JUnitFile, HTMLFile} {
				x, err1 := os.ReadFile(filepath.Join(a, f))
				y, err2 := os.ReadFile(filepath.Join(b, f))
				if err := errors.Join(err1, err2); err != nil {
					t.Fatal(err)
				}
				if len(x) == 0 || !bytes.Equal(x, y) {
					t.Errorf("%s: re-rendered file differs (%d vs %d bytes)", f, len(x), len(y))
				}
			}
			left, _ := filepath.Glob(filepath.Join(a, ".*"))
			if len(left) > 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
}

func TestReadResultErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadResult(dir); !errors.Is(err, ErrNoResult) {
		t.Errorf("missing result.json: err = %v, want ErrNoResult", err)
	}
	for _, tc := range []struct {
		name, body, want string
	}{
		{"not json", "<html>", "read result"},
		{"no schema", `{"profile":"intent"}`, "no schema"},
		{"newer schema", `{"schema":99}`, "newer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(filepath.Join(dir, ResultFile), []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := ReadResult(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// TestRedaction: credential headers and the values of Result.Redact appear
// in no rendering, and the caller's Result is not modified.
func TestRedaction(t *testing.T) {
	r := sampleResult()
	r.Chaos = sampleChaos()
	r.Rules[0].Result.Evidence[0].Exchanges[1].RespBody = `{"echo":"sekret-key-1"}`
	r.Chaos.Anomalies[1].Explanation = "key sekret-key-1 leaked"
	r.Rules[0].Result.Evidence[0].Exchanges[0].ReqHeaders["Authorization"] = []string{"Bearer tok-abc-123"}
	dir := t.TempDir()
	if err := WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{ResultFile, JUnitFile, HTMLFile} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"sekret-key-1", "tok-abc-123"} {
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s contains the secret %q", f, secret)
			}
		}
		if !bytes.Contains(data, []byte(redactedText)) {
			t.Errorf("%s says nowhere that something was redacted", f)
		}
	}
	if got := r.Rules[0].Result.Evidence[0].Exchanges[0].ReqHeaders["X-Api-Key"][0]; got != "sekret-key-1" {
		t.Errorf("the caller's Result was modified: header is %q", got)
	}
	if r.Chaos.Anomalies[1].Explanation != "key sekret-key-1 leaked" {
		t.Errorf("the caller's chaos section was modified")
	}
}

// TestResultJSONSummary: result.json carries the computed summary for
// readers like jq, and ReadResult does not trust it.
func TestResultJSONSummary(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleResult()); err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(raw["summary"], &s); err != nil {
		t.Fatal(err)
	}
	if s.Verdict != verdict.Fail || s.Counts[verdict.Fail] != 2 || !slices.Equal(s.NowPassing, []string{"INTENT-6.2-fixed"}) ||
		s.Counts[verdict.Blocked] != 1 || s.Counts[verdict.Reading] != 1 {
		t.Errorf("summary in result.json = %+v", s)
	}
	if _, ok := raw["redact"]; ok || bytes.Contains(b.Bytes(), []byte("Redact")) {
		t.Errorf("result.json carries the redaction list")
	}
}

// hostile strings: every target-derived field of a Result gets one.
var hostile = []string{`<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`}

func hostileResult(h string) *Result {
	r := sampleResult()
	r.Redact = nil
	r.Target.URL = "http://127.0.0.1:1/" + h
	r.Target.Mutant = h
	r.Target.Command = h
	r.Command = "idscheck run --target " + h
	r.Notes = []string{h}
	r.Select = []string{h}
	r.ExpectedFailures = h
	r.NotCovered = append(r.NotCovered, h)
	for i := range r.Rules {
		e := &r.Rules[i]
		e.Rule.Quote, e.Rule.Explanation, e.Rule.Source, e.Rule.Section = h, h, h, h
		e.Result.Reason = h
		e.Result.Scenarios = []string{h}
		if e.Result.BlockedBy != "" {
			e.Result.BlockedBy = h // the rule whose ID is h below: linked by its anchor
		}
		if e.Result.Reading != nil {
			e.Result.Reading = &verdict.ReadingChoice{Decision: h, Follows: h + "," + h, Declared: h}
		}
		for j := range e.Result.Evidence {
			ev := &e.Result.Evidence[j]
			ev.Expected, ev.Observed = h, h
			for k := range ev.Exchanges {
				ex := &ev.Exchanges[k]
				ex.Client, ex.Method, ex.Path, ex.ReqBody, ex.RespBody, ex.Err = h, h, h, h, h, h
				ex.ReqHeaders = map[string][]string{h: {h}}
				ex.RespHeaders = map[string][]string{h: {h}}
				ex.Outcome = verdict.Outcome(h)
			}
		}
	}
	// A rule ID from a tampered result.json is hostile too.
	r.Rules[2].Rule.ID = h
	r.Rules[2].Result.RuleID = h
	r.Rules[3].Result.Verdict = verdict.Verdict(h)
	c := sampleChaos()
	c.Faults, c.Namespace = h, h
	c.Unavailable = map[string]string{h: h}
	a := &c.Anomalies[len(c.Anomalies)-1] // the one with evidence
	a.Key, a.Explanation = h, h
	a.Kind = checker.AnomalyKind(h)
	a.Ops[0].Key = h
	a.Effects[0].Worker = h
	c.Counts[checker.AnomalyKind(h)] = 1
	c.Models[0].Failing = []string{h}
	c.Timeline[0].Name, c.Timeline[0].Err = h, h
	c.Timeline[1].Params = map[string]string{h: h}
	c.Visualizations = []string{h, "javascript:alert(1)", "https://example.com/x.html", "../../etc/passwd", "/abs.html"}
	r.Chaos = c
	return r
}

func TestHTMLEscapesTargetText(t *testing.T) {
	for _, h := range hostile {
		t.Run(h, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteHTML(&b, hostileResult(h)); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, bad := range []string{"<script", "<img", "javascript:", "onerror=alert(1)>"} {
				if strings.Contains(strings.ToLower(out), bad) {
					i := strings.Index(strings.ToLower(out), bad)
					t.Errorf("raw %q in the HTML: …%s…", bad, out[max(0, i-80):min(len(out), i+80)])
				}
			}
			// The hostile text is shown, escaped, not dropped.
			if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") && !strings.Contains(out, "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;") {
				t.Errorf("the hostile text is not shown escaped")
			}
		})
	}
}

var (
	tagRe    = regexp.MustCompile(`<[a-zA-Z][^>]*>`)
	attrRe   = regexp.MustCompile(`\s([a-zA-Z:-]+)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)`)
	linkAttr = map[string]bool{"src": true, "href": true, "action": true, "formaction": true, "xlink:href": true, "srcset": true, "poster": true, "data": true}
	external = regexp.MustCompile(`(?i)(?:https?:)?//|url\(\s*['"]?(?:https?:|//)|@import|<link|<script|<iframe|<object|<embed`)
)

// externalRefs returns every link attribute that points outside the page or
// the run directory, and every reference to another origin in the markup
// (text between tags is left out: the target URL is shown as text). It
// returns the link attributes found too.
func externalRefs(page string) (bad, links []string) {
	for _, tag := range tagRe.FindAllString(page, -1) {
		for _, m := range attrRe.FindAllStringSubmatch(tag, -1) {
			if !linkAttr[strings.ToLower(m[1])] {
				continue
			}
			v := strings.Trim(m[2], `"'`)
			links = append(links, v)
			if !strings.HasPrefix(v, "#") && !regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`).MatchString(v) {
				bad = append(bad, m[0]+" in "+tag)
			}
		}
	}
	markup := regexp.MustCompile(`>[^<]*<`).ReplaceAllString(page, "><")
	for _, css := range regexp.MustCompile(`(?is)<style[^>]*>(.*?)</style>`).FindAllStringSubmatch(page, -1) {
		markup += css[1] // style sheets are code, not text
	}
	for _, m := range external.FindAllString(markup, -1) {
		bad = append(bad, m)
	}
	return bad, links
}

// TestExternalRefsCatches: the check of TestHTMLSelfContained flags what it
// must.
func TestExternalRefsCatches(t *testing.T) {
	for _, page := range []string{
		`<img src="https://cdn.example/x.png">`,
		`<a href='//example.com/'>x</a>`,
		`<a href=javascript:alert(1)>x</a>`,
		`<link rel="stylesheet" href="s.css">`,
		`<style>@import "x.css";</style>`,
		`<div style="background:url(http://x/y)">`,
		`<script>fetch(1)</script>`,
	} {
		if bad, _ := externalRefs(page); len(bad) == 0 {
			t.Errorf("externalRefs(%s) found nothing", page)
		}
	}
	if bad, _ := externalRefs(`<p>http://127.0.0.1:8080/ as text</p><a href="#rule-1">x</a><a href="linearization.html">v</a>`); len(bad) > 0 {
		t.Errorf("externalRefs flags text or local links: %v", bad)
	}
}

// TestHTMLSelfContained: no attribute points outside the page or the run
// directory, and nothing loads anything.
func TestHTMLSelfContained(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    *Result
	}{
		{"sample", func() *Result { r := sampleResult(); r.Chaos = sampleChaos(); return r }()},
		{"hostile", hostileResult(hostile[1])},
		{"empty", &Result{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteHTML(&b, tc.r); err != nil {
				t.Fatal(err)
			}
			bad, links := externalRefs(b.String())
			for _, x := range bad {
				t.Errorf("external reference: %s", x)
			}
			if tc.name == "sample" && !slices.Contains(links, "linearization.html") {
				t.Errorf("the sample's visualization is not linked: the check checks nothing (links %v)", links)
			}
			if !strings.Contains(b.String(), "Content-Security-Policy") {
				t.Errorf("no Content-Security-Policy")
			}
		})
	}
}

func TestHTMLContent(t *testing.T) {
	r := sampleResult()
	r.Chaos = sampleChaos()
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`<pre class="cmd">idscheck run --profile intent --seed 42 --mutant no-replay --api-key $API_KEY</pre>`,
		`<span class="v badge v-fail">FAIL</span>`,
		"POST /intent?namespace=a",
		"201 Created",
		"(no response)",
		"read tcp: i/o timeout",
		"no admin token given",                     // N/A shown with its reason
		"INTENT-NOT-A-REAL-RULE",                   // not covered shown
		"Now passing",                              // expected failure that passes flagged
		`href="linearization.html"`,                // chaos visualization linked
		"<svg class=\"chart\"",                     // chaos chart
		"unit k-7 took effect 2 times",             // anomaly explanation
		"[2.000s] effect of k-7 intent=in-7 by w1", // anomaly evidence
		`<details class="rule" open><summary><span class="v v-fail">VIOLATION</span> <span class="mono"><b>duplicated</b>`, // a violation unfolded
		`<details class="rule"><summary><span class="v v-na">not a violation</span> <span class="mono"><b>recovered</b>`,   // the rest folded
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the HTML lacks %q", want)
		}
	}
	// What needs reading open (FAIL, NON-STRICT, UNKNOWN, BLOCKED); PASS,
	// N/A and READING (never a failure) folded.
	open := regexp.MustCompile(`<details class="rule rule-item ([a-z-]+)" id="[^"]+"( open)?>`)
	seen := 0
	for _, m := range open.FindAllStringSubmatch(out, -1) {
		seen++
		wantOpen := m[1] != "f-pass" && m[1] != "f-na" && m[1] != "f-reading"
		if (m[2] != "") != wantOpen {
			t.Errorf("rule of class %s: open=%v, want %v", m[1], m[2] != "", wantOpen)
		}
	}
	if seen != len(r.Rules) {
		t.Errorf("%d rule sections, want %d", seen, len(r.Rules))
	}
}

func TestHTMLCutsLongBodies(t *testing.T) {
	r := sampleResult()
	r.Rules[0].Result.Evidence[0].Exchanges[1].RespBody = strings.Repeat("é", 3*maxShownBody)
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "report shows 4096 of 24576 bytes") {
		t.Errorf("long body not cut with a note")
	}
	if strings.Contains(b.String(), strings.Repeat("é", maxShownBody/2+1)) {
		t.Errorf("long body shown whole")
	}
}

func TestEntries(t *testing.T) {
	rules := []spec.Rule{{ID: "A"}, {ID: "B"}, {ID: "C"}}
	results := []verdict.RuleResult{
		{RuleID: "C", Verdict: verdict.Fail},
		{RuleID: "A", Verdict: verdict.Pass},
		{RuleID: "Z-unknown", Verdict: verdict.Unknown},
	}
	got := Entries(rules, results, map[string]bool{"C": true})
	var ids []string
	for _, e := range got {
		ids = append(ids, e.Rule.ID+":"+string(e.Result.Verdict))
		if e.Rule.ID != e.Result.RuleID {
			t.Errorf("rule %s paired with result %s", e.Rule.ID, e.Result.RuleID)
		}
	}
	if want := []string{"A:PASS", "C:FAIL", "Z-unknown:UNKNOWN"}; !slices.Equal(ids, want) {
		t.Errorf("entries %v, want %v", ids, want)
	}
	if !got[1].Expected || got[0].Expected {
		t.Errorf("expected flags wrong: %+v", got)
	}
}

func TestCurrentTool(t *testing.T) {
	tool := CurrentTool()
	if tool.Name != "idscheck" || tool.Version == "" || !strings.HasPrefix(tool.GoVersion, "go") {
		t.Errorf("CurrentTool() = %+v", tool)
	}
}

func TestChaosSetCheck(t *testing.T) {
	rep := checker.Report{Ops: 3, Effects: 2, Counts: map[checker.AnomalyKind]int{checker.Duplicated: 1},
		Anomalies: []checker.Anomaly{{Kind: checker.Duplicated, Key: "k"}}, Queue: checker.QueueStats{Duplicated: 1}}
	var c Chaos
	c.SetCheck(rep)
	if c.Verdict != verdict.Fail || c.Ops != 3 || c.Effects != 2 || len(c.Anomalies) != 1 || c.Queue.Duplicated != 1 {
		t.Errorf("SetCheck gave %+v", c)
	}
}

// TestRenderIgnoresMonotonicClock: a Result built from time.Now() renders
// like the same Result read back from result.json, where the monotonic
// reading is gone.
func TestRenderIgnoresMonotonicClock(t *testing.T) {
	r := sampleResult()
	r.Chaos = sampleChaos()
	now := time.Now()
	r.Started, r.Finished = now, now.Add(time.Second)
	r.Chaos.Start = now
	r.Chaos.Timeline[0].Start = now
	r.Rules[0].Result.Evidence[0].Exchanges[0].Call = now
	c := redacted(r)
	for _, tm := range []time.Time{c.Started, c.Finished, c.Chaos.Start, c.Chaos.Timeline[0].Start, c.Rules[0].Result.Evidence[0].Exchanges[0].Call} {
		if strings.Contains(tm.String(), "m=") {
			t.Errorf("time %s keeps its monotonic reading", tm)
		}
	}
	if !strings.Contains(r.Started.String(), "m=") {
		t.Errorf("the caller's Result was modified")
	}
}

func TestXMLText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain\ttext\r\n", "plain\ttext\r\n"},
		{"é ü 日本 🙂", "é ü 日本 🙂"},
		{"a\x00b\x1bc", `a\u0000b\u001bc`},
		{"bad \xff\xfe utf8", `bad \xff\xfe utf8`},
		{"non-char \uFFFE", `non-char \ufffe`},
	} {
		if got := xmlText(tc.in); got != tc.want {
			t.Errorf("xmlText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// htmlEsc escapes s as html/template does in element text.
func htmlEsc(s string) string {
	var b strings.Builder
	template.Must(template.New("").Parse("{{.}}")).Execute(&b, s)
	return b.String()
}

// ruleSection returns the <details> of the rule with the given ID.
func ruleSection(t *testing.T, page, id string) string {
	t.Helper()
	i := strings.Index(page, `id="`+anchor(id, 0)[:len(anchor(id, 0))-2])
	if i < 0 {
		t.Fatalf("no section for %s", id)
	}
	// Up to the next rule's section: a section holds folded details of its own.
	j := strings.Index(page[i:], `<details class="rule `)
	if j < 0 {
		j = strings.Index(page[i:], "</main>")
	}
	return page[i : i+j]
}

// TestHTMLReading: a READING rule shows the decision's question and every
// reading with its section and quote, the one the target follows marked, in
// its section and in the summary table; a declared reading is marked too.
func TestHTMLReading(t *testing.T) {
	d := fixtureDecision
	const id = "INTENT-6.5-lease-expiry"
	render := func(rr verdict.RuleResult) (page, section string) {
		r := sampleResult()
		for i := range r.Rules {
			if r.Rules[i].Rule.ID == id {
				r.Rules[i].Result = rr
			}
		}
		var b bytes.Buffer
		if err := WriteHTML(&b, r); err != nil {
			t.Fatal(err)
		}
		return b.String(), ruleSection(t, b.String(), id)
	}
	// rowOf returns the table row of the named reading.
	rowOf := func(section, name string) string {
		i := strings.Index(section, `<b class="mono">`+name+`</b>`)
		if i < 0 {
			t.Fatalf("reading %s not shown:\n%s", name, section)
		}
		start := strings.LastIndex(section[:i], "<tr")
		return section[start : i+strings.Index(section[i:], "</tr>")]
	}
	const follows, declared = "✔ the target follows this", "declared by the target"

	page, sec := render(verdict.RuleResult{RuleID: id, Verdict: verdict.Reading, Reason: "claimed at once",
		Reading: &verdict.ReadingChoice{Decision: d.ID, Follows: "immediate"}})
	for _, want := range []string{htmlEsc(d.Question), `<span class="v v-reading" title="READING: immediate">READING: immediate</span>`, "never fails the run"} {
		if !strings.Contains(sec, want) {
			t.Errorf("the READING section lacks %q:\n%s", want, sec)
		}
	}
	for _, rd := range d.Readings {
		row := rowOf(sec, rd.Name)
		for _, want := range []string{htmlEsc(rd.Quote), "§" + rd.Section, htmlEsc(rd.Means)} {
			if !strings.Contains(row, want) {
				t.Errorf("reading %s lacks %q:\n%s", rd.Name, want, row)
			}
		}
		if got, want := strings.Contains(row, follows), rd.Name == "immediate"; got != want {
			t.Errorf("reading %s marked as followed: %v, want %v", rd.Name, got, want)
		}
		if strings.Contains(row, declared) {
			t.Errorf("reading %s marked declared, the target declared none", rd.Name)
		}
	}
	if !strings.Contains(page, `<td><span class="v v-reading" title="READING: immediate">READING: immediate</span></td>`) {
		t.Errorf("the summary table does not show READING: immediate")
	}

	// Several readings followed, one declared: a plain FAIL held to it.
	_, sec = render(verdict.RuleResult{RuleID: id, Verdict: verdict.Fail, Reason: "requeued at once",
		Reading: &verdict.ReadingChoice{Decision: d.ID, Follows: "immediate,other", Declared: "backoff"}})
	if row := rowOf(sec, "backoff"); !strings.Contains(row, declared) || strings.Contains(row, follows) {
		t.Errorf("declared reading not marked as declared only:\n%s", row)
	}
	if row := rowOf(sec, "immediate"); !strings.Contains(row, follows) || strings.Contains(row, declared) {
		t.Errorf("followed reading not marked as followed only:\n%s", row)
	}
	for _, want := range []string{`<span class="v v-fail">FAIL</span>`, "held to the declared reading alone", "Not a reading of this decision in this build: other"} {
		if !strings.Contains(sec, want) {
			t.Errorf("the FAIL-against-a-declared-reading section lacks %q:\n%s", want, sec)
		}
	}

	// A decision this build does not know: shown by its ID and names alone.
	_, sec = render(verdict.RuleResult{RuleID: id, Verdict: verdict.Reading, Reading: &verdict.ReadingChoice{Decision: "gone", Follows: "a,b"}})
	for _, want := range []string{"READING: a, b", "is not in this build's catalog", "The target follows <b>a, b</b>"} {
		if !strings.Contains(sec, want) {
			t.Errorf("the unknown-decision section lacks %q:\n%s", want, sec)
		}
	}
	if strings.Contains(sec, "Not a reading of this decision") {
		t.Errorf("an unknown decision's readings are listed as unlisted too:\n%s", sec)
	}
}

// TestHTMLBlocked: a BLOCKED rule names what blocked it, linked to that
// rule's section when the report holds it, as text otherwise.
func TestHTMLBlocked(t *testing.T) {
	const id = "INTENT-6.6-claim-order"
	r := sampleResult()
	var b bytes.Buffer
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	link := `blocked by <a href="#rule-INTENT-7.2-idem-replay-0" class="mono">INTENT-7.2-idem-replay</a> — its setup replays a publish`
	if sec := ruleSection(t, page, id); !strings.Contains(sec, link) || !strings.Contains(sec, `<span class="v v-blocked">BLOCKED</span>`) {
		t.Errorf("the BLOCKED section lacks %q:\n%s", link, sec)
	}
	if strings.Count(page, link) != 2 {
		t.Errorf("the blocker is not linked both in the summary table and the rule's section")
	}
	for _, want := range []string{`<label for="f-blocked" class="v v-blocked" title="show the BLOCKED rules">BLOCKED: 1</label>`, `<label for="f-reading" class="v v-reading" title="show the READING rules">READING: 1</label>`, `id="f-blocked"`, `id="f-reading"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for i := range r.Rules {
		if r.Rules[i].Rule.ID == id {
			r.Rules[i].Result.BlockedBy = "setup: publish an intent"
		}
	}
	b.Reset()
	if err := WriteHTML(&b, r); err != nil {
		t.Fatal(err)
	}
	if sec := ruleSection(t, b.String(), id); !strings.Contains(sec, `blocked by <span class="mono">setup: publish an intent</span>`) || strings.Contains(sec, `href="#rule-setup`) {
		t.Errorf("a blocker outside the report is not plain text:\n%s", sec)
	}
}

// TestResultRoundTripsReadingAndBlocked: blocked_by and reading survive
// result.json, so a re-rendered report shows them.
func TestResultRoundTripsReadingAndBlocked(t *testing.T) {
	r := sampleResult()
	r.Rules[5].Result.Reading.Declared = "backoff"
	dir := t.TempDir()
	if err := WriteAll(dir, r); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"blocked_by": "INTENT-7.2-idem-replay"`, `"decision": "lease-expiry"`, `"follows": "immediate"`, `"declared": "backoff"`, `"BLOCKED": 1`, `"READING": 1`} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("result.json lacks %s", want)
		}
	}
	back, err := ReadResult(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, e := range r.Rules {
		got := back.Rules[i].Result
		if got.Verdict != e.Result.Verdict || got.BlockedBy != e.Result.BlockedBy || !reflect.DeepEqual(got.Reading, e.Result.Reading) {
			t.Errorf("%s read back as %s blocked_by %q reading %+v, want %s %q %+v", e.Rule.ID,
				got.Verdict, got.BlockedBy, got.Reading, e.Result.Verdict, e.Result.BlockedBy, e.Result.Reading)
		}
		if e.Result.BlockedBy != "" || e.Result.Reading != nil {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("the fixture has %d rules with blocked_by or reading, want 2", n)
	}
	if s := back.Summary(); s.Counts[verdict.Blocked] != 1 || s.Counts[verdict.Reading] != 1 {
		t.Errorf("summary of the result read back: %v", s.Counts)
	}
}

// TestSummaryJudgedNothingIsNoPass: a run whose testable rules were all N/A
// (or fewer judged than --min-judged) is UNKNOWN, never PASS; its N/A
// reasons are grouped.
func TestSummaryJudgedNothingIsNoPass(t *testing.T) {
	rule := func(id, untestable string) spec.Rule {
		r := fixtureRule(id, "1", spec.Must)
		r.Untestable = untestable
		return r
	}
	na := func(id, why string) RuleEntry {
		return RuleEntry{Rule: rule(id, ""), Result: verdict.RuleResult{RuleID: id, Verdict: verdict.NA, Reason: why}}
	}
	pass := func(id string) RuleEntry {
		return RuleEntry{Rule: rule(id, ""), Result: verdict.RuleResult{RuleID: id, Verdict: verdict.Pass}}
	}
	untestable := RuleEntry{Rule: rule("X-9", "a client's duty"), Result: verdict.RuleResult{RuleID: "X-9", Verdict: verdict.NA, Reason: "untestable"}}
	for _, tc := range []struct {
		name      string
		rules     []RuleEntry
		min       int
		want      verdict.Verdict
		judged    int
		testable  int
		topReason string
	}{
		{"all N/A", []RuleEntry{na("X-1", "no count read declared"), na("X-2", "no count read declared"), na("X-3", "no sink"), untestable}, 0, verdict.Unknown, 0, 3, "N/A: no count read declared"},
		{"one judged", []RuleEntry{pass("X-1"), na("X-2", "no sink"), untestable}, 0, verdict.Pass, 1, 2, "N/A: no sink"},
		{"fewer than --min-judged", []RuleEntry{pass("X-1"), na("X-2", "no sink")}, 2, verdict.Unknown, 1, 2, "N/A: no sink"},
		{"as many as --min-judged", []RuleEntry{pass("X-1"), pass("X-2")}, 2, verdict.Pass, 2, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Result{Profile: "x", Rules: tc.rules, MinJudged: tc.min}
			s := r.Summary()
			if s.Verdict != tc.want || s.Judged != tc.judged || s.Testable != tc.testable {
				t.Errorf("verdict %s judged %d of %d, want %s judged %d of %d", s.Verdict, s.Judged, s.Testable, tc.want, tc.judged, tc.testable)
			}
			if tc.topReason != "" && (len(s.NotJudged) == 0 || s.NotJudged[0].Reason != tc.topReason) {
				t.Errorf("not judged %+v, want %q first", s.NotJudged, tc.topReason)
			}
			var b bytes.Buffer
			if err := WriteHTML(&b, r); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("Judged %d of %d testable rules", tc.judged, tc.testable); !strings.Contains(b.String(), want) {
				t.Errorf("the report does not say %q", want)
			}
			b.Reset()
			if err := WriteJUnit(&b, r); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(b.String(), `type="coverage"`); got != (tc.want == verdict.Unknown) {
				t.Errorf("junit coverage error present %v, want %v:\n%s", got, tc.want == verdict.Unknown, b.String())
			}
		})
	}
}
