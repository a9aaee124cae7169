package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/spec"
)

func runRules(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli(context.Background(), append([]string{"rules"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestRulesCommand(t *testing.T) {
	intent := spec.RulesFor(spec.ProfileIntent)
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
	_, _, errs := runRules(t, "-h")
	for _, f := range []string{"-profile", "-level", "-json", "-width"} {
		if !strings.Contains(errs, f) {
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
	for _, r := range spec.RulesFor(spec.ProfileIntent) {
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
	r, _ := spec.Lookup(got[0].ID)
	if !reflect.DeepEqual(r, got[0]) {
		t.Fatalf("JSON round trip changed %s", r.ID)
	}
}
