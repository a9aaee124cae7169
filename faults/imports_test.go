package faults

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestFaultsIsALeaf: faults imports the standard library, toxiproxy,
// failpoint and zerolog, and of idscheck only the redaction (itself a leaf
// of the standard library).
func TestFaultsIsALeaf(t *testing.T) {
	allowed := []string{"github.com/Shopify/toxiproxy/v2", "github.com/pingcap/failpoint", "github.com/rs/zerolog", "github.com/idscheck/idscheck/redact"}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first := strings.Split(path, "/")[0]
			if !strings.Contains(first, ".") {
				continue // standard library
			}
			ok := false
			for _, a := range allowed {
				ok = ok || path == a || strings.HasPrefix(path, a+"/")
			}
			if !ok {
				t.Errorf("%s imports %s: faults is a leaf", e.Name(), path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
