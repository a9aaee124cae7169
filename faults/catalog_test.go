package faults

import (
	"strings"
	"testing"
)

// TestCatalogIsDescribed: every fault of the catalog (the fixed list, the
// replicas' and their store's) says in one line what it does, is a name
// --faults accepts, and has its kind.
func TestCatalogIsDescribed(t *testing.T) {
	list := Catalog(Config{})
	text := Describe(list, "  ")
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != len(list) {
		t.Fatalf("%d lines for %d faults:\n%s", len(lines), len(list), text)
	}
	for i, f := range list {
		s, ok := f.(Summarizer)
		if !ok || s.Summary() == "" || strings.Contains(s.Summary(), "\n") {
			t.Errorf("%s says nothing of itself in one line", f.Name())
		}
		if !strings.HasPrefix(lines[i], "  "+f.Name()+" ") {
			t.Errorf("line %d is %q, want %s", i, lines[i], f.Name())
		}
		if _, err := ParseKinds(f.Name()); err != nil {
			t.Errorf("ParseKinds(%s): %v", f.Name(), err)
		}
		if k, ok := KindOf(f.Name()); !ok || k != f.Kind() {
			t.Errorf("KindOf(%s) = %q, %v; want %s", f.Name(), k, ok, f.Kind())
		}
		if !strings.Contains(FlagHelp(), f.Name()) {
			t.Errorf("FlagHelp lacks %s", f.Name())
		}
	}
	for _, name := range append([]string{(&ReplicaCrash{}).Name()}, StoreFaultNames()...) {
		if !strings.Contains(text, "  "+name+" ") {
			t.Errorf("the catalog lacks %s", name)
		}
	}
}
