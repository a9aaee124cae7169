package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/spec"
)

func runRules(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli(context.Background(), append([]string{"rules"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRulesCommand(t *testing.T) {
	intent := spec.RulesFor(intent.Name)
	cases := []struct {
		name     string
		args     []string
		code     int
		contains []string
		absent   []string
	}{
		{"table", nil, exitOK, []string{"ID", "INTENT-7.2-idem-replay", "MUST", "7.2"}, nil},
		{"profile", []string{"--profile", "intent"}, exitOK, []string{"INTENT-7.3-retry-after"}, nil},
		{"level should", []string{"--profile", "intent", "--level", "should"}, exitOK, []string{"INTENT-2-concurrent-requests"}, []string{"INTENT-7.2-idem-replay"}},
		{"untestable marked", []string{"--level", "MUST"}, exitOK, []string{"[untestable]"}, nil},
		{"bad level", []string{"--level", "REQUIRED"}, exitUsage, nil, nil},
		{"bad profile", []string{"--profile", "nope"}, exitUsage, nil, nil},
		{"stray arg", []string{"intent"}, exitUsage, nil, nil},
		{"help", []string{"-h"}, exitOK, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runRules(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, errs)
			}
			for _, s := range c.contains {
				if !strings.Contains(out, s) {
					t.Errorf("output lacks %q", s)
				}
			}
			for _, s := range c.absent {
				if strings.Contains(out, s) {
					t.Errorf("output has %q", s)
				}
			}
		})
	}
	_, out, _ := runRules(t, "--profile", "intent")
	if n := strings.Count(out, "\nINTENT-"); n != len(intent) {
		t.Fatalf("table lists %d rules, catalog has %d", n, len(intent))
	}
}

func TestRulesHelpNamesEveryFlag(t *testing.T) {
	_, out, _ := runRules(t, "-h")
	for _, f := range []string{"-profile", "-level", "-json", "-width"} {
		if !strings.Contains(out, f) {
			t.Errorf("help lacks %s", f)
		}
	}
}

func TestRulesJSON(t *testing.T) {
	code, out, errs := runRules(t, "--json", "--profile", "intent", "--level", "MUST")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got []spec.Rule
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	want := 0
	for _, r := range spec.RulesFor(intent.Name) {
		if r.Level == spec.Must {
			want++
		}
	}
	if len(got) != want || want == 0 {
		t.Fatalf("got %d rules, want %d", len(got), want)
	}
	for _, r := range got {
		if r.Level != spec.Must || r.Quote == "" || r.Explanation == "" {
			t.Fatalf("rule %s incomplete or of level %s", r.ID, r.Level)
		}
	}
	for _, g := range got {
		if r, _ := spec.Lookup(g.ID); !reflect.DeepEqual(r, g) {
			t.Fatalf("JSON round trip changed %s", r.ID)
		}
	}
}

// TestRulesShowsReadings: a rule whose check rests on a decision is marked in
// the table, and the decision follows with its rules and its readings' names
// and quotes; --json carries the field and the readings.
func TestRulesShowsReadings(t *testing.T) {
	lease, ok := intent.DecisionByID(intent.DecisionLeaseExpiry)
	if !ok || len(lease.Readings) < 2 {
		t.Fatalf("decision %s: %+v", intent.DecisionLeaseExpiry, lease)
	}
	code, out, errs := runRules(t, "--profile", "intent", "--width", "0")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	line := func(prefix string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line starts with %q in:\n%s", prefix, out)
		return ""
	}
	if l := line("INTENT-3.3-expiry-backoff "); !strings.HasSuffix(l, "[readings: lease-expiry]") {
		t.Errorf("expiry-backoff is not marked: %q", l)
	}
	if l := line("INTENT-3.3-lease-expiry "); strings.Contains(l, "[readings") {
		t.Errorf("a rule without readings is marked: %q", l)
	}
	block := out[strings.Index(out, "\nReadings:"):]
	if !strings.Contains(block, "\nlease-expiry (3.3, 7.3): "+lease.Question+"\n") ||
		!strings.Contains(block, "rules: INTENT-3.3-expiry-backoff, INTENT-7.3-immediate-reclaim\n") {
		t.Errorf("the readings block lacks lease-expiry or its rules:\n%s", block)
	}
	for _, rd := range lease.Readings {
		if !strings.Contains(block, rd.Name) || !strings.Contains(block, `"`+spec.NormalizeSpace(rd.Quote)+`"`) {
			t.Errorf("the readings block lacks reading %s with its quote:\n%s", rd.Name, block)
		}
	}
	n := 0
	for _, r := range spec.RulesFor(intent.Name) {
		if len(r.Readings) > 0 {
			n++
			if !strings.Contains(block, r.ID) {
				t.Errorf("the readings block does not name %s", r.ID)
			}
		}
	}
	if n == 0 || !strings.Contains(out, fmt.Sprintf(", %d judged under readings;", n)) {
		t.Errorf("the count of rules judged under readings (%d) is missing", n)
	}

	// A selection names only its own rules under a decision, and a selection
	// without readings has no readings block.
	_, out, _ = runRules(t, "--profile", "intent", "--level", "MUST")
	if !strings.Contains(out, "rules: INTENT-3.3-expiry-backoff\n") {
		t.Errorf("MUST rules: lease-expiry should name expiry-backoff alone:\n%s", out)
	}
	_, out, _ = runRules(t, "--level", "MAY")
	if strings.Contains(out, "Readings:") || strings.Contains(out, "[readings") {
		t.Errorf("MAY rules have no readings, yet:\n%s", out)
	}

	// --json: the field, and the decisions with their readings.
	_, out, _ = runRules(t, "--json", "--profile", "intent")
	var got []struct {
		spec.Rule
		Decisions []struct {
			ID       string         `json:"id"`
			Question string         `json:"question"`
			Readings []spec.Reading `json:"readings"`
		} `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	seen := false
	for _, r := range got {
		if len(r.Decisions) != len(r.Readings) {
			t.Errorf("%s: readings %v, decisions %d", r.ID, r.Readings, len(r.Decisions))
			continue
		}
		for i, d := range r.Decisions {
			want, _ := intent.DecisionByID(r.Readings[i])
			if d.ID != want.ID || d.Question != want.Question || !reflect.DeepEqual(d.Readings, want.Readings) {
				t.Errorf("%s: decision %+v, want %+v", r.ID, d, want)
			}
		}
		if r.ID == "INTENT-3.3-expiry-backoff" {
			seen = len(r.Decisions) == 1 && r.Decisions[0].ID == intent.DecisionLeaseExpiry
		}
	}
	if !seen {
		t.Error("--json: INTENT-3.3-expiry-backoff does not carry lease-expiry with its readings")
	}
	if strings.Contains(out, `"decisions": null`) || strings.Contains(out, `"decisions": []`) {
		t.Error("--json: a rule without readings carries an empty decisions field")
	}
}
