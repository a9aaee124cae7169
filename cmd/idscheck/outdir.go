package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/idscheck/idscheck/rundir"
)

// runKind is what an --out directory holds: a run's report, a chaos run, a
// mutants matrix, or no idscheck run.
type runKind string

const (
	kindNone    runKind = ""
	kindRun     runKind = "run"
	kindChaos   runKind = "chaos"
	kindMutants runKind = "mutants"
)

// describe names a run of kind k: "an idscheck run", "a chaos run".
func (k runKind) describe() string {
	switch k {
	case kindRun:
		return "the report of an idscheck run"
	case kindChaos:
		return "a chaos run"
	case kindMutants:
		return "a mutants kill matrix"
	}
	return "no run"
}

// mutantsFile is the kill matrix idscheck mutants writes.
const mutantsFile = "mutants.json"

// runFiles are the files a run of each kind writes in its directory
// (a chaos run also writes the records its chaos.json names).
var runFiles = map[runKind][]string{
	kindRun:     {rundir.Result, rundir.JUnit, rundir.HTML, rundir.History, rundir.Scenarios},
	kindChaos:   {rundir.Chaos, rundir.History, rundir.Ledger, rundir.Check, rundir.Linearization, rundir.Result, rundir.JUnit, rundir.HTML, "target.db", "target.db-wal", "target.db-shm"},
	kindMutants: {mutantsFile},
}

// outKind says what dir holds, and lists its files (not its folders nor
// its dot files). A directory that does not exist holds nothing.
func outKind(dir string) (runKind, []string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return kindNone, nil, nil
	}
	if err != nil {
		return kindNone, nil, err
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			files = append(files, e.Name())
		}
	}
	has := func(name string) bool { return slices.Contains(files, name) }
	switch {
	case has(rundir.Chaos):
		return kindChaos, files, nil
	case has(mutantsFile):
		return kindMutants, files, nil
	case has(rundir.Result):
		// A chaos run whose target was unreachable wrote its result alone:
		// its command says which.
		var head struct {
			Command string          `json:"command"`
			Chaos   json.RawMessage `json:"chaos"`
		}
		if b, err := readLimited(filepath.Join(dir, rundir.Result), 64<<20); err == nil && json.Unmarshal(b, &head) == nil &&
			(len(head.Chaos) > 0 && string(head.Chaos) != "null" || strings.Contains(head.Command, " chaos ")) {
			return kindChaos, files, nil
		}
		return kindRun, files, nil
	case has(rundir.Scenarios):
		return kindRun, files, nil
	}
	return kindNone, files, nil
}

// prepareOut makes dir ready for a run of kind want, so that two runs never
// mix in one directory (a run's history.jsonl over a chaos run's, check
// then failing): a directory of another kind of run, or of files that are
// no idscheck run, is refused unless force; a run of the same kind, or one
// force replaces, has its files removed first, so that none of it is left
// beside the new run. The error says what dir holds and what to do.
func prepareOut(dir string, want runKind, force bool) error {
	kind, files, err := outKind(dir)
	if err != nil {
		return fmt.Errorf("--out %s: %v", dir, err)
	}
	if len(files) == 0 {
		return nil
	}
	shown := files
	if len(shown) > 4 {
		shown = append(slices.Clone(shown[:4]), "…")
	}
	switch {
	case kind == kindNone && !force:
		return fmt.Errorf("--out %s holds files that are no idscheck run (%s): give a new or empty directory, or --force to write the report among them", dir, strings.Join(shown, ", "))
	case kind == kindNone:
		return nil
	case kind != want && !force:
		return fmt.Errorf("--out %s holds %s (%s): writing %s there would overwrite its files and mix the two; give another --out, or --force to replace it", dir, kind.describe(), strings.Join(shown, ", "), want.describe())
	}
	remove := slices.Clone(runFiles[kind])
	if kind == kindChaos {
		var run chaosRun
		if b, err := readLimited(filepath.Join(dir, rundir.Chaos), 64<<20); err == nil && json.Unmarshal(b, &run) == nil {
			for _, f := range run.Files {
				if f != "" && f == filepath.Base(f) && !strings.HasPrefix(f, ".") {
					remove = append(remove, f)
				}
			}
		}
	}
	for _, f := range remove {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("--out %s: removing the previous %s run's %s: %v", dir, kind, f, err)
		}
	}
	return nil
}
