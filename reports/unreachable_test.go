package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

func unreachableResult() *Result {
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	cause := "GET http://127.0.0.1:1/health did not answer 200 within --health-wait 10s (40 probes); the last: dial tcp 127.0.0.1:1: connect: connection refused; output: BUS_SECRET=s3cr3t-value"
	return &Result{
		Profile:     spec.Profile("intent"),
		Target:      Target{URL: "http://127.0.0.1:1", Command: "BUS_SECRET=s3cr3t-value ./bus"},
		Command:     "idscheck run --seed=1 --target-file=t.json",
		Started:     t0,
		Finished:    t0,
		ExitCode:    3,
		Unreachable: cause,
		Notes:       []string{"exit 3: target unreachable: " + cause},
		Redact:      []string{"s3cr3t-value"},
	}
}

// TestUnreachable: a run whose target never answered renders as one JUnit
// <error> testcase naming the cause, an HTML page that leads with it, and a
// result.json that keeps it; the verdict is UNKNOWN, never PASS; secrets
// in the cause are redacted everywhere.
func TestUnreachable(t *testing.T) {
	r := unreachableResult()
	if v := r.Summary().Verdict; v != verdict.Unknown {
		t.Errorf("verdict %s, want UNKNOWN", v)
	}
	var junit, html, js bytes.Buffer
	if err := WriteJUnit(&junit, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&html, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	doc := decodeJUnit(t, junit.Bytes())
	if doc.Tests != 1 || doc.Errors != 1 || doc.Failures != 0 || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 1 {
		t.Fatalf("want one testcase, one error:\n%s", junit.String())
	}
	c := doc.Suites[0].Cases[0]
	if c.Name != "target unreachable" || c.Error == nil || c.Error.Type != "unreachable" ||
		!strings.Contains(c.Error.Message, "connection refused") || !strings.Contains(c.Error.Body, "did not answer 200") {
		t.Errorf("testcase %+v", c)
	}
	page := html.String()
	for _, s := range []string{"Target unreachable: no rule was checked.", "connection refused", "UNKNOWN"} {
		if !strings.Contains(page, s) {
			t.Errorf("index.html lacks %q", s)
		}
	}
	if strings.Contains(page, "of 0 rules") {
		t.Error("index.html counts verdicts of a run that checked nothing")
	}
	for name, b := range map[string]string{"junit.xml": junit.String(), "index.html": page, "result.json": js.String()} {
		if strings.Contains(b, "s3cr3t-value") {
			t.Errorf("%s holds the secret", name)
		}
	}
	back, err := DecodeResult(&js)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(back.Unreachable, "connection refused") || back.ExitCode != 3 || back.Summary().Verdict != verdict.Unknown {
		t.Errorf("result.json round trip: %q exit %d", back.Unreachable, back.ExitCode)
	}
}

// TestRedactionCoversTheChaosSection: a secret the workload sent (in a key,
// an operation, an effect) is redacted from the chaos section as from the
// rest.
func TestRedactionCoversTheChaosSection(t *testing.T) {
	const secret = `k"ey<s3cr3t>`
	r := &Result{Profile: spec.Profile("intent"), Redact: []string{secret}, Chaos: &Chaos{
		Verdict: verdict.Fail, Counts: map[checker.AnomalyKind]int{checker.Duplicated: 1},
		Anomalies: []checker.Anomaly{{Kind: checker.Duplicated, Key: "key-" + secret, Explanation: "x",
			Ops:     []checker.Operation{{Key: "key-" + secret, Input: checker.Input{Body: secret}}},
			Effects: []checker.Effect{{Key: "key-" + secret}}}},
		Models:   []checker.ModelCheck{{Model: "idempotency", Failing: []string{"key-" + secret}}},
		Timeline: []FaultSpan{{Name: "storm", Params: map[string]string{"key": secret}}},
	}}
	for name, w := range map[string]func(*bytes.Buffer, *Result) error{
		"json":  func(b *bytes.Buffer, r *Result) error { return WriteJSON(b, r) },
		"html":  func(b *bytes.Buffer, r *Result) error { return WriteHTML(b, r) },
		"junit": func(b *bytes.Buffer, r *Result) error { return WriteJUnit(b, r) },
	} {
		var b bytes.Buffer
		if err := w(&b, r); err != nil {
			t.Fatal(err)
		}
		for _, form := range []string{secret, "s3cr3t", `k\"ey`} {
			if strings.Contains(b.String(), form) {
				t.Errorf("%s holds %q", name, form)
			}
		}
	}
	if r.Chaos.Anomalies[0].Key != "key-"+secret {
		t.Error("redaction changed the result it was given")
	}
}
