package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const modulePath = "github.com/idscheck/idscheck/"

// layoutAllowed is the agreed layout: verdict (the shared result types) and
// spec are leaves; spec ← checker ← reports; sut and faults are leaves (sut
// imports nothing of the harness, not even spec, so harness and server never
// share an oracle); only features, chaos and cmd/idscheck wire them. features
// judges scenarios, not histories: it does not import checker.
var layoutAllowed = map[string][]string{
	"verdict":  {},
	"spec":     {},
	"checker":  {"spec", "verdict"},
	"reports":  {"spec", "checker", "verdict"},
	"faults":   {},
	"sink":     {},
	"sut":      {"sut"},
	"client":   {"spec", "verdict"},
	"chaos":    {"checker", "client", "faults", "spec", "verdict", "sink"},
	"features": {"spec", "verdict", "faults", "client", "sink"},
	// profiles is the registry (read by cmd alone): it assembles each
	// profile from the packages above.
	"profiles": {"spec", "verdict", "features", "checker", "client", "sut", "chaos", "faults", "sink", "harness"},
	// harness is the Profile value and the pipelines that run one.
	"harness": {"spec", "verdict", "features", "checker", "client", "chaos", "faults", "sink"},
}

// layoutViolations reads `go list -f '{{.ImportPath}} {{join .Imports " "}}'`
// lines and returns every import the layout forbids, and how many packages
// it ruled on.
func layoutViolations(lines []string) (bad []string, ruled int) {
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], modulePath)
		top, _, _ := strings.Cut(pkg, "/")
		ok, isRuled := layoutAllowed[top]
		if !isRuled {
			continue
		}
		ruled++
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, modulePath) {
				continue
			}
			dep, _, _ := strings.Cut(strings.TrimPrefix(imp, modulePath), "/")
			if (dep == top && top != "sut") || slices.Contains(ok, dep) {
				continue
			}
			bad = append(bad, pkg+" imports "+imp+": "+top+" may import only "+strings.Join(ok, ", "))
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
	if ruled < 5 {
		t.Fatalf("go list saw only %d ruled packages: is the pattern right?\n%s", ruled, out)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

func TestImportDirectionCatchesABackwardImport(t *testing.T) {
	for _, line := range []string{
		modulePath + "spec " + modulePath + "checker",
		modulePath + "checker fmt " + modulePath + "reports",
		modulePath + "faults " + modulePath + "sut",
		modulePath + "sut/store " + modulePath + "checker",
	} {
		if bad, _ := layoutViolations([]string{line}); len(bad) != 1 {
			t.Errorf("%q: got violations %q, want exactly one", line, bad)
		}
	}
	if bad, _ := layoutViolations([]string{modulePath + "reports " + modulePath + "checker " + modulePath + "spec"}); len(bad) != 0 {
		t.Errorf("an allowed import was flagged: %q", bad)
	}
}
