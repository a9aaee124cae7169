package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Variants the matrix certifies each row under, in page order.
var Variants = []string{"ietf", "t0", "stripe"}

// The layout of a row's runs under the runs folder (default
// conformance/.work/runs):
//
//	<slug>/row.json              RowStatus: certified, or why not
//	<slug>/<variant>/result.json idscheck run --strict's report (index.html beside it)
//	<slug>/chaos/result.json     idscheck chaos's report (chaos.json, check.json, output.txt)
//	<slug>/probe.json            the probe's behaviour table (probe-error.txt when it failed)

// RowStatus is what the driver did with a row, kept in row.json.
type RowStatus struct {
	ID       string  `json:"id"`
	Status   string  `json:"status"` // "certified", "install failed", "start failed", "run failed"
	Error    string  `json:"error,omitempty"`
	Finished string  `json:"finished"` // RFC 3339, UTC
	Seconds  float64 `json:"seconds"`
	Commit   string  `json:"commit,omitempty"` // the repository's commit the row was certified at (git rev-parse HEAD, "+modified" when tracked files differ)
}

// runResult is what the pages read of a result.json.
type runResult struct {
	Tool struct {
		Version string `json:"version"`
	} `json:"tool"`
	Started  string `json:"started"`
	Strict   bool   `json:"strict"`
	ExitCode int    `json:"exit_code"`
	Rules    []struct {
		Rule struct {
			ID    string `json:"id"`
			Level string `json:"level"`
			Quote string `json:"quote"`
		} `json:"rule"`
		Result struct {
			RuleID    string `json:"rule_id"`
			Verdict   string `json:"verdict"`
			Reason    string `json:"reason"`
			BlockedBy string `json:"blocked_by"`
			Variant   string `json:"variant"`
		} `json:"result"`
	} `json:"rules"`
	Summary struct {
		Counts  map[string]int `json:"counts"`
		Verdict string         `json:"verdict"`
		Judged  int            `json:"judged"`
	} `json:"summary"`
}

// chaosCheck is what the pages read of a chaos run's check.json.
type chaosCheck struct {
	Anomalies []struct {
		Kind        string `json:"kind"`
		Explanation string `json:"explanation"`
		Ops         []struct {
			Call int64 `json:"call"`
			Ret  int64 `json:"ret"`
		} `json:"ops"`
	} `json:"anomalies"`
	Queue  map[string]int `json:"queue"`
	Counts map[string]int `json:"counts"`
	Models []struct {
		Model  string `json:"model"`
		Result string `json:"result"`
	} `json:"models"`
}

type chaosRun struct {
	Start    time.Time `json:"start"`
	Timeline []struct {
		Fault string    `json:"fault"`
		Start time.Time `json:"start"`
		End   time.Time `json:"end"`
	} `json:"timeline"`
	Command  string `json:"command"`
	Faults   string `json:"faults"`
	Summary  string `json:"summary"`
	Coverage []struct {
		Fault    string `json:"fault"`
		Status   string `json:"status"`
		Injected int    `json:"injected"`
	} `json:"coverage"`
}

// RunView is one variant's run of one row, as the pages show it.
type RunView struct {
	Variant  string
	ExitCode int
	Verdicts map[string]string
	Blocked  map[string]string
	Reasons  map[string]string
	Counts   map[string]int
	Judged   int
	Gate     string
	Report   string // the report's file, to copy (absolute)
	Link     string // the link from the page (relative), set by the page writer
	Anchors  map[string]string
}

// ChaosView is a row's chaos run.
type ChaosView struct {
	ExitCode  int
	Anomalies []string // "duplicated 3", "IETF-… 2": what the checker found
	Replay    string
	Faults    string
	Summary   string
	NotDone   []string // requested faults never injected
	Example   string   // the first anomaly the checker kept, and the faults injected while its deliveries ran
	Report    string
	Link      string
}

// RowView is one row with everything the pages show of it.
type RowView struct {
	Impl      *Impl
	Row       Row
	Slug      string
	Status    *RowStatus // nil: never run
	Runs      map[string]*RunView
	Chaos     *ChaosView
	Probe     *Table
	ProbeErr  string
	Agreement map[string][]Disagreement // per variant with a run and a probe
}

// Gate is a strict run's verdicts read as the two gates: a plain run passes
// unless a MUST failed (FAIL), --strict unless a SHOULD failed too
// (NON-STRICT). Undecided rules (BLOCKED, UNKNOWN) with nothing failed make
// neither gate pass; a run that judged nothing passes nothing.
func Gate(counts map[string]int, judged int) string {
	switch {
	case counts["FAIL"] > 0:
		return "FAIL"
	case counts["BLOCKED"]+counts["UNKNOWN"] > 0 && counts["NON-STRICT"] > 0:
		return "UNDECIDED; FAIL with --strict"
	case counts["BLOCKED"]+counts["UNKNOWN"] > 0:
		return "UNDECIDED"
	case judged == 0:
		return "NOTHING JUDGED"
	case counts["NON-STRICT"] > 0:
		return "PASS only without --strict"
	default:
		return "PASS"
	}
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// RuleInfo is a rule's level and quote, for a column's header.
type RuleInfo struct{ Level, Quote string }

// Matrix is everything the pages show.
type Matrix struct {
	Rows    []*RowView
	Version string // idscheck's version, from the result.json read last, with the commit the rows were run at
	Rules   map[string]RuleInfo
}

// LoadMatrix reads what the runs folder holds for every row of impls. A row
// never run has a nil Status and no runs. Agreement is computed here, from
// the probe's table and each variant's verdicts.
func LoadMatrix(impls []*Impl, runs string) (*Matrix, error) {
	m := &Matrix{Rules: map[string]RuleInfo{}}
	var rows []*RowView
	version := ""
	for _, im := range impls {
		for _, r := range im.Rows {
			rv := &RowView{Impl: im, Row: im.Of(r), Slug: Slug(r.ID), Runs: map[string]*RunView{}, Agreement: map[string][]Disagreement{}}
			dir := filepath.Join(runs, rv.Slug)
			var st RowStatus
			if err := readJSON(filepath.Join(dir, "row.json"), &st); err == nil {
				rv.Status = &st
			} else if !os.IsNotExist(err) {
				return nil, err
			}
			for _, v := range Variants {
				p := filepath.Join(dir, v, "result.json")
				var res runResult
				if err := readJSON(p, &res); err != nil {
					if os.IsNotExist(err) {
						continue
					}
					return nil, err
				}
				if res.Tool.Version != "" {
					version = res.Tool.Version
				}
				run := &RunView{Variant: v, ExitCode: res.ExitCode, Verdicts: map[string]string{}, Blocked: map[string]string{},
					Reasons: map[string]string{}, Counts: res.Summary.Counts, Judged: res.Summary.Judged, Anchors: map[string]string{}}
				for i, rr := range res.Rules {
					id := rr.Result.RuleID
					run.Verdicts[id] = rr.Result.Verdict
					if rr.Result.BlockedBy != "" {
						run.Blocked[id] = rr.Result.BlockedBy
					}
					if rr.Result.Variant != "" || strings.HasPrefix(rr.Result.Reason, "untestable:") {
						run.Reasons[id] = "-" // out of this variant's scope, or untestable by any run
					} else {
						run.Reasons[id] = rr.Result.Reason
					}
					run.Anchors[id] = fmt.Sprintf("rule-%s-%d", id, i)
					m.Rules[id] = RuleInfo{Level: rr.Rule.Level, Quote: rr.Rule.Quote}
				}
				run.Gate = Gate(run.Counts, run.Judged)
				if rep := filepath.Join(dir, v, "index.html"); fileExists(rep) {
					run.Report = rep
				}
				rv.Runs[v] = run
			}
			if c, err := loadChaos(filepath.Join(dir, "chaos")); err != nil {
				return nil, err
			} else {
				rv.Chaos = c
			}
			var t Table
			if err := readJSON(filepath.Join(dir, "probe.json"), &t); err == nil {
				rv.Probe = &t
			} else if !os.IsNotExist(err) {
				return nil, err
			}
			if b, err := os.ReadFile(filepath.Join(dir, "probe-error.txt")); err == nil {
				rv.ProbeErr = strings.TrimSpace(string(b))
			}
			if rv.Probe != nil {
				for v, run := range rv.Runs {
					rv.Agreement[v] = probeAgree(rv.Probe, v, run.Verdicts, run.Blocked)
				}
			}
			rows = append(rows, rv)
		}
	}
	commits := map[string]bool{}
	for _, rv := range rows {
		if rv.Status != nil && rv.Status.Commit != "" {
			commits[rv.Status.Commit] = true
		}
	}
	if len(commits) > 0 {
		version += " (commit " + strings.Join(sortedKeys(commits), ", ") + ")"
	}
	m.Rows, m.Version = rows, strings.TrimSpace(version)
	return m, nil
}

func loadChaos(dir string) (*ChaosView, error) {
	var res struct {
		ExitCode int `json:"exit_code"`
	}
	if err := readJSON(filepath.Join(dir, "result.json"), &res); err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	c := &ChaosView{ExitCode: res.ExitCode}
	var cr chaosRun
	if err := readJSON(filepath.Join(dir, "chaos.json"), &cr); err == nil {
		c.Replay = cr.Command
		c.Faults = cr.Faults
		c.Summary = cr.Summary
		for _, f := range cr.Coverage {
			if f.Injected == 0 {
				c.NotDone = append(c.NotDone, f.Fault+" ("+f.Status+")")
			}
		}
	}
	var ck chaosCheck
	if err := readJSON(filepath.Join(dir, "check.json"), &ck); err == nil {
		for _, k := range []string{"lost", "duplicated", "unexpected"} {
			if n := ck.Queue[k]; n > 0 {
				c.Anomalies = append(c.Anomalies, fmt.Sprintf("%s %d", k, n))
			}
		}
		for _, k := range sortedKeys(ck.Counts) {
			if n := ck.Counts[k]; n > 0 {
				c.Anomalies = append(c.Anomalies, fmt.Sprintf("%s %d", k, n))
			}
		}
		for _, m := range ck.Models {
			if m.Result != "Ok" {
				c.Anomalies = append(c.Anomalies, fmt.Sprintf("model %s: %s", m.Model, m.Result))
			}
		}
		if len(ck.Anomalies) > 0 {
			a := ck.Anomalies[0]
			c.Example = a.Explanation
			if len(a.Ops) > 0 && !cr.Start.IsZero() {
				from, to := a.Ops[0].Call, a.Ops[0].Ret
				for _, op := range a.Ops {
					from, to = min(from, op.Call), max(to, op.Ret)
				}
				var during []string
				for _, f := range cr.Timeline {
					s, e := f.Start.Sub(cr.Start).Nanoseconds(), f.End.Sub(cr.Start).Nanoseconds()
					if s <= to && e >= from {
						during = append(during, fmt.Sprintf("%s %.1f–%.1f s", f.Fault, float64(s)/1e9, float64(e)/1e9))
					}
				}
				span := fmt.Sprintf("its deliveries ran %.1f–%.1f s into the run", float64(from)/1e9, float64(to)/1e9)
				if len(during) > 0 {
					c.Example += " (" + span + ", under " + strings.Join(during, ", ") + ")"
				} else {
					c.Example += " (" + span + ", no fault injected meanwhile: the workload's own duplicate deliveries)"
				}
			}
		}
	}
	if rep := filepath.Join(dir, "index.html"); fileExists(rep) {
		c.Report = rep
	}
	return c, nil
}

// ChaosText is the chaos cell's text.
func (c *ChaosView) Text() string {
	switch {
	case c == nil:
		return "not run"
	case c.ExitCode == 1 && len(c.Anomalies) > 0:
		return "anomalies: " + strings.Join(c.Anomalies, ", ")
	case c.ExitCode == 1:
		return "anomalies (see the report)"
	case c.ExitCode == 0:
		return "no anomaly"
	case c.ExitCode == 4 && len(c.NotDone) > 0:
		return "undecided: not injected: " + strings.Join(c.NotDone, ", ")
	case c.ExitCode == 4:
		return "undecided (exit 4)"
	case c.ExitCode == 3:
		return "target unreachable (exit 3)"
	default:
		return fmt.Sprintf("not judged (exit %d)", c.ExitCode)
	}
}

// AgreementText is the agreement cell of variant v: "agrees", the
// disagreements, or why it was not measured.
func (rv *RowView) AgreementText(v string) (string, bool) {
	if _, ok := rv.Runs[v]; !ok {
		return "no run", false
	}
	if rv.Probe == nil {
		if rv.ProbeErr != "" {
			return "not measured: " + rv.ProbeErr, false
		}
		return "not measured", false
	}
	ds := rv.Agreement[v]
	if len(ds) == 0 {
		return "agrees", true
	}
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%s: %s wants %s, got %s", d.Behaviour, d.Rule, d.Want, d.Got))
	}
	return strings.Join(parts, "; "), false
}

// Problems lists what makes the matrix fail for row rv: not certified, a
// variant not run, a disagreement, an agreement not measured.
func (rv *RowView) Problems() []string {
	var out []string
	if rv.Status == nil {
		return []string{rv.Row.ID + ": never run"}
	}
	if rv.Status.Status != "certified" {
		out = append(out, fmt.Sprintf("%s: %s: %s", rv.Row.ID, rv.Status.Status, rv.Status.Error))
	}
	if rv.Probe == nil && len(rv.Runs) > 0 {
		txt, _ := rv.AgreementText(Variants[0])
		return append(out, fmt.Sprintf("%s: agreement %s", rv.Row.ID, txt))
	}
	for _, v := range Variants {
		if _, ok := rv.Runs[v]; !ok {
			continue
		}
		if txt, ok := rv.AgreementText(v); !ok {
			out = append(out, fmt.Sprintf("%s under %s: %s", rv.Row.ID, v, txt))
		}
	}
	return out
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// ruleColumns are the rules variant v's table shows, in report order: those
// some row's run could judge (neither another variant's nor untestable).
func ruleColumns(rows []*RowView, v string) []string {
	var order []string
	seen := map[string]bool{}
	keep := map[string]bool{}
	for _, rv := range rows {
		run := rv.Runs[v]
		if run == nil {
			continue
		}
		ids := sortedKeys(run.Verdicts)
		sort.SliceStable(ids, func(i, j int) bool { return anchorIndex(run.Anchors[ids[i]]) < anchorIndex(run.Anchors[ids[j]]) })
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				order = append(order, id)
			}
			if run.Reasons[id] != "-" {
				keep[id] = true
			}
		}
	}
	var out []string
	for _, id := range order {
		if keep[id] {
			out = append(out, id)
		}
	}
	return out
}

func anchorIndex(a string) int {
	i := strings.LastIndexByte(a, '-')
	n := 0
	fmt.Sscanf(a[i+1:], "%d", &n)
	return n
}
