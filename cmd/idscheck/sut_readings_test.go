package main

import (
	"slices"
	"testing"

	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/spec"
	sut "github.com/idscheck/idscheck/sut/intent"
)

// The reference server is a leaf: it writes its reading keys, names and
// quotes down itself (sut/readings.go), and the harness writes its decisions
// down in spec (decisions.go). This package imports both, so the two
// lists are held together here: the same decisions with readings, in the
// same order, with the same names, sections and quotes. Without it a reading
// renamed on one side would make `--readings alternate` certify the server
// under a name the harness does not know.

// TestSutReadingKeysMatchSpecDecisions: every decision of the harness that
// lists readings is a decision key of the server with the same names (first
// the default), section and quotes, in the harness's order; the server has
// no decision key the harness lacks; a key of the server's other answers is
// either a decision of the harness without readings or no decision at all.
func TestSutReadingKeysMatchSpecDecisions(t *testing.T) {
	keys := sut.ReadingKeys()
	byID := map[string]spec.Decision{}
	var want []string
	for _, d := range intent.Decisions() {
		byID[d.ID] = d
		if len(d.Readings) >= 2 {
			want = append(want, d.ID)
		}
	}
	var got []string
	for _, k := range keys {
		d, isDecision := byID[k.Key]
		if !k.Decision {
			if isDecision && len(d.Readings) > 0 {
				t.Errorf("server key %s is an allowed answer, but the harness judges decision %s under readings %v", k.Key, d.ID, readingNames(d))
			}
			continue
		}
		got = append(got, k.Key)
		if !isDecision {
			t.Errorf("server decision %s is not a decision of the harness", k.Key)
			continue
		}
		if names := readingNames(d); !slices.Equal(k.Names, names) {
			t.Errorf("%s: server names %q, harness readings %q (the first is the default)", k.Key, k.Names, names)
		}
		if k.Section != d.Section {
			t.Errorf("%s: server section %q, harness %q", k.Key, k.Section, d.Section)
		}
		if len(k.Quotes) != len(d.Readings) {
			t.Errorf("%s: %d server quotes for %d readings", k.Key, len(k.Quotes), len(d.Readings))
			continue
		}
		for i, r := range d.Readings {
			if spec.NormalizeSpace(k.Quotes[i]) != spec.NormalizeSpace(r.Quote) {
				t.Errorf("%s=%s: server quotes %q, harness %q", k.Key, r.Name, k.Quotes[i], r.Quote)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("server decision keys %q, harness decisions with readings %q", got, want)
	}
}

func readingNames(d spec.Decision) []string {
	var out []string
	for _, r := range d.Readings {
		out = append(out, r.Name)
	}
	return out
}

// FuzzCanonicalPathAgrees: the server's CANONICAL_PATH (sut, written from
// §5.2) and the harness's (intent.CanonicalPath, intent.CanonicalPathAsSent)
// agree on every input under both readings of query-repeated-order, and
// neither panics. They share no code; a disagreement is a bug in one of them.
func FuzzCanonicalPathAgrees(f *testing.F) {
	for _, v := range [][2]string{{"/intent", ""}, {"/claim", "namespace=x&goal=a"}, {"/get/a%2Fb", "x=1&x=&y"},
		{"/get/%zz", ""}, {"/a b", "k=v w"}, {"/", "&&="}, {"/claim", "a=%2F&a=%2f"}, {"/claim", "t=z&t=a&%C3%A9=1&~=2"},
		{"/get/%e2%82%ac+x", "a+b=c+d&a+b=%20"}} {
		f.Add(v[0], v[1])
	}
	f.Fuzz(func(t *testing.T, path, query string) {
		for _, asSent := range []bool{false, true} {
			got, ok := sut.CanonicalPath(path, query, asSent)
			harness := intent.CanonicalPath
			if asSent {
				harness = intent.CanonicalPathAsSent
			}
			want, wantOK := harness(path, query)
			if ok != wantOK || got != want {
				t.Fatalf("%q ? %q (as-sent %v): server %q (%v), harness %q (%v)", path, query, asSent, got, ok, want, wantOK)
			}
		}
	})
}
