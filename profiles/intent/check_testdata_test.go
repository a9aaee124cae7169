package intent

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

var update = flag.Bool("update", false, "rewrite testdata/histories from the failing table cases")

// savedExpect is what a saved run must keep producing.
type savedExpect struct {
	Name    string                      `json:"name"`
	Why     string                      `json:"why,omitempty"`
	Options Options                     `json:"options"`
	Verdict verdict.Verdict             `json:"verdict"`
	Counts  map[checker.AnomalyKind]int `json:"counts"`
	Failing []string                    `json:"failing_partitions,omitempty"` // model/key
}

func expectOf(name string, opts Options, r checker.Report) savedExpect {
	e := savedExpect{Name: name, Options: opts, Verdict: r.Verdict(), Counts: map[checker.AnomalyKind]int{}}
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
	dirs, err := filepath.Glob(filepath.Join(savedDir, "*", expectFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no saved runs under testdata/")
	}
	for _, ef := range dirs {
		dir := filepath.Dir(ef)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			want, h, l := loadSaved(t, ef)
			got := expectOf(want.Name, want.Options, Check(h, l, want.Options))
			if got.Verdict != want.Verdict || !maps.Equal(got.Counts, want.Counts) || strings.Join(got.Failing, ",") != strings.Join(want.Failing, ",") {
				t.Errorf("re-check of %s:\n got  %+v\n want %+v", dir, got, want)
			}
			if want.Verdict == verdict.Pass {
				t.Errorf("%s: a saved run must be a failing one", dir)
			}
		})
	}
}

// savedDir holds the saved runs (testdata/histories).
const savedDir = "testdata/histories"

// expectFile is the expectation of a saved run in testdata.
const expectFile = "expect.json"

// savedRun is one run to save under testdata.
type savedRun struct {
	name string
	h    checker.History
	l    checker.Ledger
	opts Options
}

func writeSavedRuns(t *testing.T) {
	t.Helper()
	// runs saved from real chaos runs (testdata/real-*, trimmed to the keys
	// of their anomalies by hand): keep their name and options, refresh the
	// rest of expect.json from what Check says now
	reals, err := filepath.Glob(filepath.Join(savedDir, "real-*", expectFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, ef := range reals {
		raw, err := os.ReadFile(ef)
		if err != nil {
			t.Fatal(err)
		}
		var e savedExpect
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("%s: %v", ef, err)
		}
		h, l, err := checker.Load(os.DirFS(filepath.Dir(ef)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.MarshalIndent(expectOf(e.Name, e.Options, Check(h, l, e.Options)), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ef, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var runs []savedRun
	for _, tc := range checkCases {
		if tc.verdict == verdict.Fail {
			runs = append(runs, savedRun{tc.name, checker.History{Ops: tc.ops}, checker.Ledger{Effects: tc.effects}, tc.opts})
		}
	}
	// whole runs of the simulated bus with a defect: realistic shape
	for _, sb := range []struct {
		name string
		bug  simBug
	}{{"sim/lease hijack", bugHijack}, {"sim/stale token accepted", bugStaleToken}, {"sim/replay creates a new intent", bugReplayNewID}} {
		b := &simBus{rng: rand.New(rand.NewPCG(3, 42)), lease: 1e9, bug: sb.bug}
		for u := range 8 {
			b.unit(u, int64(u)*3e8)
		}
		runs = append(runs, savedRun{sb.name, checker.History{Ops: b.ops}, checker.Ledger{Effects: b.effects}, Options{MaxEffects: -1}})
	}
	for _, run := range runs {
		name := strings.NewReplacer("fail/", "", "sim/", "sim-", " ", "-").Replace(run.name)
		dir := filepath.Join(savedDir, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		h, l := run.h, run.l
		var hb, lb bytes.Buffer
		hb.WriteString("# " + run.name + ": saved by go test ./checker -run TestSavedRuns -update\n")
		if err := h.WriteJSONL(&hb); err != nil {
			t.Fatal(err)
		}
		if err := l.WriteJSONL(&lb); err != nil {
			t.Fatal(err)
		}
		exp, err := json.MarshalIndent(expectOf(run.name, run.opts, Check(h, l, run.opts)), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		for f, b := range map[string][]byte{checker.HistoryFile: hb.Bytes(), checker.LedgerFile: lb.Bytes(), expectFile: append(exp, '\n')} {
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestIssue12 re-checks the eight cases of issue 12 (testdata/issue12: the
// histories the checker used to get wrong), each against the verdict the
// protocol gives it, with the anomalies that name the cause.
func TestIssue12(t *testing.T) {
	names := map[string][]checker.AnomalyKind{ // what must name each failing case
		"1-slow-claim-reply-hides-a-double-lease": {DoubleLease},
		"2-extend-bound-too-weak":                 {DoubleLease},
		"3-claim-instant-bounded-by-a-later-read": {StaleTokenAccepted},
		"4a-loss-per-acknowledged-intent":         {checker.Duplicated, checker.Lost},
		"4b-one-intent-for-two-keys":              {checker.Lost},
		"5a-dead-after-the-first-fail":            {DeadTooEarly},
		"5b-dead-after-the-first-expiry":          {DeadTooEarly},
		"5c-dead-without-any-claim":               {DeadTooEarly},
		"6a-effect-before-the-publish":            {checker.Unexpected},
		"6b-claim-and-fulfil-before-the-publish":  {checker.Unexpected},
	}
	cases := loadIssue12(t)
	if len(cases) != 12 {
		t.Fatalf("%d saved runs under testdata/issue12, want 12", len(cases))
	}
	for _, c := range cases {
		name := filepath.Base(c.dir)
		t.Run(name, func(t *testing.T) {
			r := Check(c.h, c.l, c.want.Options)
			if v := r.Verdict(); v != c.want.Verdict {
				t.Fatalf("verdict %s, want %s (%s); anomalies:%s", v, c.want.Verdict, c.want.Why, explain(r))
			}
			for _, k := range names[name] {
				if r.Counts[k] == 0 {
					t.Errorf("no %s anomaly; anomalies:%s", k, explain(r))
				}
			}
			if r.Counts[checker.Recovered] > 0 && c.want.Verdict == verdict.Fail {
				t.Errorf("recovered in a failing case:%s", explain(r))
			}
			assertNamedAgreeWithModels(t, r)
			t.Logf("%s: %v%s", r.Verdict(), r.Counts, explain(r))
		})
	}
}

// loadSaved reads one saved run: its expected verdict (expectFile) and the
// history and ledger beside it.
func loadSaved(t *testing.T, expectPath string) (savedExpect, checker.History, checker.Ledger) {
	t.Helper()
	raw, err := os.ReadFile(expectPath)
	if err != nil {
		t.Fatal(err)
	}
	var want savedExpect
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("%s: %v", expectPath, err)
	}
	h, l, err := checker.Load(os.DirFS(filepath.Dir(expectPath)))
	if err != nil {
		t.Fatal(err)
	}
	return want, h, l
}
