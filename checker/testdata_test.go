package checker

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite checker/testdata from the failing table cases")

// savedExpect is what a saved run must keep producing.
type savedExpect struct {
	Name    string              `json:"name"`
	Options Options             `json:"options"`
	Verdict Verdict             `json:"verdict"`
	Counts  map[AnomalyKind]int `json:"counts"`
	Failing []string            `json:"failing_partitions,omitempty"` // model/key
}

func expectOf(name string, opts Options, r Report) savedExpect {
	e := savedExpect{Name: name, Options: opts, Verdict: r.Verdict(), Counts: map[AnomalyKind]int{}}
	for k, n := range r.Counts {
		if n > 0 {
			e.Counts[k] = n
		}
	}
	for _, p := range r.FailingPartitions {
		e.Failing = append(e.Failing, p.Model+"/"+p.Key)
	}
	return e
}

// TestSavedRuns re-checks every saved failing run under testdata/ (a run
// directory: history.jsonl, ledger.jsonl, expect.json) and expects the same
// anomalies. With -update it first rewrites testdata from the failing table
// cases of TestCheck.
func TestSavedRuns(t *testing.T) {
	if *update {
		writeSavedRuns(t)
	}
	dirs, err := filepath.Glob(filepath.Join("testdata", "*", expectFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no saved runs under testdata/")
	}
	for _, ef := range dirs {
		dir := filepath.Dir(ef)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			raw, err := os.ReadFile(ef)
			if err != nil {
				t.Fatal(err)
			}
			var want savedExpect
			if err := json.Unmarshal(raw, &want); err != nil {
				t.Fatalf("%s: %v", ef, err)
			}
			h, l, err := Load(os.DirFS(dir))
			if err != nil {
				t.Fatal(err)
			}
			got := expectOf(want.Name, want.Options, Check(h, l, want.Options))
			if got.Verdict != want.Verdict || !maps.Equal(got.Counts, want.Counts) || strings.Join(got.Failing, ",") != strings.Join(want.Failing, ",") {
				t.Errorf("re-check of %s:\n got  %+v\n want %+v", dir, got, want)
			}
			if want.Verdict == Pass {
				t.Errorf("%s: a saved run must be a failing one", dir)
			}
		})
	}
}

// expectFile is the expectation of a saved run in testdata.
const expectFile = "expect.json"

func writeSavedRuns(t *testing.T) {
	t.Helper()
	for _, tc := range checkCases {
		if tc.verdict != Fail {
			continue
		}
		name := strings.NewReplacer("fail/", "", " ", "-").Replace(tc.name)
		dir := filepath.Join("testdata", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		h, l := History{Ops: tc.ops}, Ledger{Effects: tc.effects}
		var hb, lb bytes.Buffer
		hb.WriteString("# " + tc.name + ": saved by go test ./checker -run TestSavedRuns -update\n")
		if err := h.WriteJSONL(&hb); err != nil {
			t.Fatal(err)
		}
		if err := l.WriteJSONL(&lb); err != nil {
			t.Fatal(err)
		}
		exp, err := json.MarshalIndent(expectOf(tc.name, tc.opts, Check(h, l, tc.opts)), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		for f, b := range map[string][]byte{HistoryFile: hb.Bytes(), LedgerFile: lb.Bytes(), expectFile: append(exp, '\n')} {
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
