package main

import (
	"bufio"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/profiles"
)

const modulePath = "github.com/idscheck/idscheck/"

// engineImports is the engine (../shared/ARCHITECTURE.md): each package and
// the engine packages it may import. verdict and spec are leaves; checker
// judges histories and knows no transport; features judges scenarios, not
// histories; harness assembles a run. No engine package imports a profile
// (profiles, profiles/<name>, sut/...), and cmd/idscheck reads the registry
// alone.
var engineImports = map[string][]string{
	"verdict":      {},
	"spec":         {},
	"faults":       {"redact"},
	"redact":       {},
	"sink":         {"verdict"},
	"client":       {"verdict", "spec"},
	"checker":      {"spec", "verdict", "rundir"},
	"reports":      {"spec", "checker", "verdict", "redact", "rundir"},
	"rundir":       {},
	"pgcluster":    {},
	"pgtest":       {"pgcluster"},
	"chaos":        {"checker", "client", "faults", "spec", "verdict", "sink", "redact", "rundir"},
	"features":     {"spec", "verdict", "faults", "client", "sink", "redact", "rundir"},
	"harness":      {"spec", "verdict", "features", "checker", "client", "chaos", "faults", "sink", "reports", "redact", "rundir"},
	"cmd/idscheck": {"spec", "verdict", "features", "checker", "client", "chaos", "faults", "sink", "reports", "redact", "rundir", "harness", "profiles", "pgcluster"},
}

// allowedImport says whether package pkg (module-relative) may import dep.
func allowedImport(pkg, dep string) (bool, string) {
	top, rest, _ := strings.Cut(pkg, "/")
	depTop, depRest, _ := strings.Cut(dep, "/")
	switch {
	case pkg == "cmd/idscheck" || (top != "profiles" && top != "sut" && engineImports[top] != nil):
		key := top
		if pkg == "cmd/idscheck" {
			key = pkg
		}
		if depTop == top && key != "cmd/idscheck" {
			return true, ""
		}
		if dep == "profiles" && key == "cmd/idscheck" {
			return true, ""
		}
		if depRest == "" && slices.Contains(engineImports[key], dep) {
			return true, ""
		}
		return false, key + " is engine: it may import only " + strings.Join(engineImports[key], ", ")
	case pkg == "profiles":
		return dep == "harness" || dep == "spec" || (depTop == "profiles" && depRest != ""), "the registry imports harness, spec and the profiles' folders"
	case top == "profiles":
		name, _, _ := strings.Cut(rest, "/")
		if depTop == "profiles" {
			return strings.HasPrefix(depRest, name) && (depRest == name || strings.HasPrefix(depRest, name+"/")), "a profile imports no other profile and not the registry"
		}
		if depTop == "sut" {
			return depRest == name || strings.HasPrefix(depRest, name+"/") || strings.HasPrefix(depRest, "internal/"), "a profile imports its own bundled server alone"
		}
		_, engine := engineImports[depTop]
		return engine && depTop != "cmd", "a profile imports the engine, its own folder and its own server"
	case top == "sut":
		name, _, _ := strings.Cut(rest, "/")
		return depTop == "sut" && (strings.HasPrefix(depRest, name) || strings.HasPrefix(depRest, "internal/")), "a bundled server is a leaf: it imports its own folder and sut/internal alone"
	}
	return true, ""
}

// layoutViolations reads `go list -f '{{.ImportPath}} {{join .Imports " "}}'`
// lines and returns every import the layout forbids, and how many packages
// it ruled on.
func layoutViolations(lines []string) (bad []string, ruled int) {
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(fields[0], modulePath) {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], modulePath)
		ruled++
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, modulePath) {
				continue
			}
			if ok, why := allowedImport(pkg, strings.TrimPrefix(imp, modulePath)); !ok {
				bad = append(bad, pkg+" imports "+imp+": "+why)
			}
		}
	}
	return bad, ruled
}

func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	bad, ruled := layoutViolations(strings.Split(strings.TrimSpace(string(out)), "\n"))
	if ruled < 10 {
		t.Fatalf("go list saw only %d packages: is the pattern right?\n%s", ruled, out)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

func TestImportDirectionCatchesABackwardImport(t *testing.T) {
	for _, line := range []string{
		modulePath + "spec " + modulePath + "checker",
		modulePath + "checker fmt " + modulePath + "reports",
		modulePath + "faults " + modulePath + "sut/intent",
		modulePath + "sut/store " + modulePath + "checker",
		modulePath + "features " + modulePath + "profiles/toy",
		modulePath + "chaos " + modulePath + "spec/intent",
		modulePath + "cmd/idscheck " + modulePath + "profiles/toy",
		modulePath + "cmd/idscheck " + modulePath + "sut/ids",
		modulePath + "profiles/ids " + modulePath + "profiles/atp",
		modulePath + "profiles/ids " + modulePath + "sut/atp",
		modulePath + "sut/ids " + modulePath + "sut/atp",
		modulePath + "harness " + modulePath + "profiles",
	} {
		if bad, _ := layoutViolations([]string{line}); len(bad) != 1 {
			t.Errorf("%q: got violations %q, want exactly one", line, bad)
		}
	}
	for _, line := range []string{
		modulePath + "reports " + modulePath + "checker " + modulePath + "spec",
		modulePath + "profiles/ids " + modulePath + "sut/ids " + modulePath + "features " + modulePath + "harness",
		modulePath + "sut/ids " + modulePath + "sut/internal/groupcommit",
		modulePath + "cmd/idscheck " + modulePath + "profiles " + modulePath + "harness",
		modulePath + "profiles " + modulePath + "profiles/ids " + modulePath + "harness",
	} {
		if bad, _ := layoutViolations([]string{line}); len(bad) != 0 {
			t.Errorf("an allowed import was flagged: %q", bad)
		}
	}
}

// profileWords matches a line of code that names a registered profile: its
// name as a string literal ("intent", "http-idempotency"), next to the word
// profile ("the ids profile", "--profile atp"), or the prefix of its rule
// IDs as an upper-case word (INTENT, IDS, ATP, IETF, …). The plain word
// "ids" (identifiers) or "intent" (a goal) names nothing.
func profileWords(t *testing.T) *regexp.Regexp {
	t.Helper()
	names, prefixes := map[string]bool{}, map[string]bool{}
	for _, name := range profiles.Names() {
		p, _ := profiles.Lookup(name)
		names[regexp.QuoteMeta(string(name))] = true
		names[regexp.QuoteMeta(strings.ReplaceAll(string(name), "-", ""))] = true
		for _, r := range p.Rules() {
			prefix, _, _ := strings.Cut(r.ID, "-")
			prefixes[regexp.QuoteMeta(prefix)] = true
		}
	}
	if len(names) < 4 || len(prefixes) < 4 {
		t.Fatalf("the registry names %d profiles and %d rule prefixes: is it empty?", len(names), len(prefixes))
	}
	n, p := strings.Join(slices.Sorted(maps.Keys(names)), "|"), strings.Join(slices.Sorted(maps.Keys(prefixes)), "|")
	return regexp.MustCompile(`"(` + n + `)"` +
		`|(?i:profiles?\s+(` + n + `)\b|\b(` + n + `)\s+profiles?\b)` +
		`|(^|[^\w/-])(` + p + `)($|[^\w-])`)
}

// engineLinesNaming returns "file:line: text" for every non-test line of the
// engine's Go files under root that re matches.
func engineLinesNaming(t *testing.T, root string, re *regexp.Regexp) []string {
	t.Helper()
	var hits []string
	for pkg := range engineImports {
		dir := filepath.Join(root, pkg)
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			sc.Buffer(nil, 1<<20)
			for n := 1; sc.Scan(); n++ {
				if re.MatchString(sc.Text()) {
					hits = append(hits, strings.TrimPrefix(f, root+"/")+":"+itoa(n)+": "+strings.TrimSpace(sc.Text()))
				}
			}
			fh.Close()
		}
	}
	slices.Sort(hits)
	return hits
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestEngineNamesNoProfile: no non-test line of an engine package names a
// registered profile; a protocol lives in its folder.
func TestEngineNamesNoProfile(t *testing.T) {
	for _, hit := range engineLinesNaming(t, "../..", profileWords(t)) {
		t.Error(hit)
	}
}

// TestEngineNamesNoProfileCatchesOne: a line naming a profile is found.
func TestEngineNamesNoProfileCatchesOne(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "checker"), 0o755)
	os.WriteFile(filepath.Join(root, "checker", "x.go"), []byte("package checker\n\n// the ATP rail\nvar x = 1\n"), 0o644)
	os.WriteFile(filepath.Join(root, "checker", "x_test.go"), []byte("package checker\n\n// the ATP rail in a test\n"), 0o644)
	hits := engineLinesNaming(t, root, profileWords(t))
	if len(hits) != 1 || !strings.Contains(hits[0], "checker/x.go:3") {
		t.Errorf("hits %q, want the one non-test line naming ATP", hits)
	}
}

// TestEachProfileHasItsFolder: the registry builds every profile it lists
// from a folder of its own, profiles/<name>, one folder a profile.
func TestEachProfileHasItsFolder(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "../../profiles").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var folders []string
	for _, imp := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(imp, modulePath+"profiles/"); ok && !strings.Contains(rest, "/") {
			folders = append(folders, rest)
		}
	}
	if len(folders) != len(profiles.Names()) {
		t.Errorf("the registry lists %d profiles %v from %d folders %v: want one folder each", len(profiles.Names()), profiles.Names(), len(folders), folders)
	}
}

// runOutput matches the paths of what a build or a run writes: binaries,
// databases, run and report folders, histories. None belongs in the
// repository (testdata/ excepted: golden runs a test reads).
var runOutput = regexp.MustCompile(`\.(db|db-wal|db-shm|sqlite|test|out)$|(^|/)bin/|(^|/)runs/|(^|/)idscheck-(chaos|report|mutants)[^/]*/|(^|/)(history|ledger)\.jsonl$`)

// trackedRunOutput returns the tracked paths among files that are build or
// run outputs.
func trackedRunOutput(files []string) []string {
	var out []string
	for _, f := range files {
		if runOutput.MatchString(f) && !strings.Contains(f, "/testdata/") {
			out = append(out, f)
		}
	}
	return out
}

// TestRepositoryHoldsNoRunOutput keeps run directories, databases and
// binaries out of the repository (a chaos run of 49 MB was tracked once,
// though .gitignore listed it: `make chaos` then rewrote tracked files).
func TestRepositoryHoldsNoRunOutput(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	out, err := exec.Command(git, "-C", "../..", "ls-files").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	if bad := trackedRunOutput(strings.Split(strings.TrimSpace(string(out)), "\n")); len(bad) > 0 {
		t.Errorf("build or run outputs are tracked (git rm --cached them; .gitignore lists their folders):\n%s", strings.Join(bad, "\n"))
	}
}

func TestRepositoryHoldsNoRunOutputCatchesOne(t *testing.T) {
	files := []string{"README.md", "idscheck-chaos-a2a/history.jsonl", "idscheck-chaos-a2a/index.html", "sut/intent/server.go",
		"profiles/intent/testdata/chaos/history.jsonl", "infrastructure.db", "bin/idscheck"}
	got := trackedRunOutput(files)
	want := []string{"idscheck-chaos-a2a/history.jsonl", "idscheck-chaos-a2a/index.html", "infrastructure.db", "bin/idscheck"}
	if !slices.Equal(got, want) {
		t.Errorf("trackedRunOutput = %v, want %v", got, want)
	}
}
