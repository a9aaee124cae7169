package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeBuildStampsTheRevision (issue 28, case 11): reports recorded
// "idscheck devel" because make build did not ask for -buildvcs=true (a
// GOFLAGS of -buildvcs=false, or a build the go command does not stamp by
// itself, then leaves the commit out). make build asks for it.
func TestMakeBuildStampsTheRevision(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("make", "-n", "-C", root, "build").Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, " build ") && strings.Contains(line, "./cmd/idscheck") {
			if !strings.Contains(line, "-buildvcs=true") {
				t.Errorf("make build runs %q: without -buildvcs=true the binary records no commit", line)
			}
			return
		}
	}
	t.Errorf("make -n build runs no go build of ./cmd/idscheck:\n%s", out)
}
