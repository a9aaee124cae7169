package intent

import (
	"github.com/idscheck/idscheck/spec"
	"strings"
	"testing"
)

func TestCatalogInvariants(t *testing.T) {
	for _, msg := range spec.CheckCatalog(spec.Rules()) {
		t.Error(msg)
	}
}

// TestCatalogCheckFails proves each invariant of checkCatalog can fail.
func TestCatalogCheckFails(t *testing.T) {
	good := spec.Rule{ID: "INTENT-7.2-x", Profile: Name, Source: Source, Section: "7.2", Level: spec.Must,
		Quote: "The 204 response MUST include Retry-After: 1.", Explanation: "e"}
	if bad := spec.CheckCatalog([]spec.Rule{good}); len(bad) != 0 {
		t.Fatalf("a good rule is refused: %v", bad)
	}
	// Good too: a keyword in the binding, a glued keyword, a keyword-less
	// SHOULD, an untestable client obligation.
	for _, r := range []spec.Rule{
		with(good, func(r *spec.Rule) { r.Binding, r.Quote = "All responses MUST include:", "X-Frame-Options | DENY" }),
		with(good, func(r *spec.Rule) { r.Quote = "METHODMUST be uppercase" }),
		with(good, func(r *spec.Rule) { r.Quote = "SQLite version 3.35.0 or higher is STRICTLY REQUIRED" }),
		with(good, func(r *spec.Rule) { r.Level, r.Quote = spec.Should, "Default max_attempts: 3" }),
		with(good, func(r *spec.Rule) {
			r.Quote, r.Untestable = "Clients MUST include: X-API-KEY: <key>", "a client obligation"
		}),
	} {
		if bad := spec.CheckCatalog([]spec.Rule{r}); len(bad) != 0 {
			t.Errorf("a good rule is refused: %v", bad)
		}
	}
	cases := []struct {
		name   string
		rules  []spec.Rule
		substr string
	}{
		{"duplicate", []spec.Rule{good, good}, "duplicate"},
		{"bad id", []spec.Rule{with(good, func(r *spec.Rule) { r.ID = "intent_7.2_x" })}, "does not match"},
		{"section", []spec.Rule{with(good, func(r *spec.Rule) { r.Section = "7.3" })}, "section"},
		{"level", []spec.Rule{with(good, func(r *spec.Rule) { r.Level = "REQUIRED" })}, "level"},
		{"profile", []spec.Rule{with(good, func(r *spec.Rule) { r.Profile = "" })}, "profile"},
		{"explanation", []spec.Rule{with(good, func(r *spec.Rule) { r.Explanation = " " })}, "explanation"},
		{"seed", []spec.Rule{with(good, func(r *spec.Rule) { r.Source = "nope.txt" })}, "not embedded"},
		{"quote", []spec.Rule{with(good, func(r *spec.Rule) { r.Quote = "The 204 response MUST include Retry-After: 2." })}, "quote"},
		{"empty quote", []spec.Rule{with(good, func(r *spec.Rule) { r.Quote = "  " })}, "quote"},
		{"binding", []spec.Rule{with(good, func(r *spec.Rule) { r.Binding = "Implementations MUST provide everything:" })}, "binding is not in"},
		{"blank binding", []spec.Rule{with(good, func(r *spec.Rule) { r.Binding = " " })}, "binding is not in"},
		{"must without keyword", []spec.Rule{with(good, func(r *spec.Rule) { r.Quote = "Default max_attempts: 3" })}, "carry no uppercase"},
		{"lowercase keyword", []spec.Rule{with(good, func(r *spec.Rule) { r.Quote = "SQLite WAL mode is required; journal_modemust be set toWAL" })}, "carry no uppercase"},
		{"should binding", []spec.Rule{with(good, func(r *spec.Rule) {
			r.Binding, r.Quote = "Implementations SHOULD:", "Support multi-threaded concurrent request handling"
		})}, "carry no uppercase"},
		{"clients", []spec.Rule{with(good, func(r *spec.Rule) { r.Quote = "Clients MUST include: X-API-KEY: <key>" })}, "binds a client"},
		{"workers", []spec.Rule{with(good, func(r *spec.Rule) { r.Quote = "Workers MUST specify a namespace when claiming, defaulting to default." })}, "binds a client"},
		{"client binding", []spec.Rule{with(good, func(r *spec.Rule) { r.Binding, r.Quote = "Clients MUST include:", "X-API-KEY: <key>" })}, "binds a client"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := spec.CheckCatalog(c.rules)
			if len(bad) == 0 || !strings.Contains(strings.Join(bad, "\n"), c.substr) {
				t.Fatalf("want a complaint about %q, got %v", c.substr, bad)
			}
		})
	}
}

func with(r spec.Rule, f func(*spec.Rule)) spec.Rule { f(&r); return r }

func TestLookupAndRulesFor(t *testing.T) {
	r, ok := spec.Lookup("INTENT-7.2-idem-replay")
	if !ok || r.Level != spec.Must || r.Section != "7.2" {
		t.Fatalf("Lookup(INTENT-7.2-idem-replay) = %+v, %v", r, ok)
	}
	if _, ok := spec.Lookup("INTENT-99-nope"); ok {
		t.Fatal("Lookup found a rule that does not exist")
	}
	intent := spec.RulesFor(Name)
	if n := len(intent); n < 70 || n > 200 {
		t.Fatalf("intent has %d rules, want a complete catalog", n)
	}
	for _, r := range intent {
		if r.Profile != Name {
			t.Fatalf("RulesFor(intent) returned %s of profile %s", r.ID, r.Profile)
		}
	}
	if len(spec.RulesFor("nope")) != 0 {
		t.Fatal("RulesFor of an unknown profile is not empty")
	}
	a, b := spec.Rules(), spec.Rules()
	for i := range a {
		if a[i].ID != b[i].ID {
			t.Fatalf("Rules() order is not stable at %d: %s vs %s", i, a[i].ID, b[i].ID)
		}
	}
	a[0].ID = "changed"
	if spec.Rules()[0].ID == "changed" {
		t.Fatal("Rules() returns shared storage")
	}
}

func TestSeedText(t *testing.T) {
	for _, name := range []string{"000_10301691a56e9f75.txt", "001_cde8541928f420cc.txt", "002_58f6d1c48bb6cfb8.txt", "003_2a6a959a8422d25a.txt", Source} {
		if s, ok := spec.SeedText(name); !ok || len(s) < 1000 {
			t.Errorf("SeedText(%s): %d bytes, %v", name, len(s), ok)
		}
	}
	for _, name := range []string{"", "../catalog.go", "README.md", "nope.txt"} {
		if _, ok := spec.SeedText(name); ok {
			t.Errorf("SeedText(%q) found something", name)
		}
	}
}

// TestUntestableIsShort keeps the list of untestable rules honest: each has
// a reason, and they stay a small part of the catalog.
func TestUntestableIsShort(t *testing.T) {
	all := spec.RulesFor(Name)
	n := 0
	for _, r := range all {
		if r.Untestable != "" {
			n++
		}
	}
	if n*5 > len(all) {
		t.Fatalf("%d of %d intent rules are untestable", n, len(all))
	}
}

// checkDecisions returns one message per decision that breaks an invariant:
// unique IDs, none or at least two readings with unique names, every reading
// quote verbatim in the profile's seed, and every spec.Rule.Readings entry naming
// a decision with two or more readings.
func checkDecisions(ds []spec.Decision, rules []spec.Rule, source string) []string {
	var bad []string
	text, _ := spec.SeedText(source)
	norm := spec.NormalizeSpace(text)
	withReadings := map[string]bool{}
	seen := map[string]bool{}
	for _, d := range ds {
		if seen[d.ID] {
			bad = append(bad, d.ID+": duplicate decision")
		}
		seen[d.ID] = true
		if d.Question == "" || d.Choice == "" {
			bad = append(bad, d.ID+": no question or no choice")
		}
		if len(d.Readings) == 1 {
			bad = append(bad, d.ID+": a single reading is no choice")
		}
		names := map[string]bool{}
		for _, r := range d.Readings {
			if r.Name == "" || names[r.Name] {
				bad = append(bad, d.ID+": reading name "+r.Name+" empty or repeated")
			}
			names[r.Name] = true
			if q := spec.NormalizeSpace(r.Quote); q == "" || !strings.Contains(norm, q) {
				bad = append(bad, d.ID+"="+r.Name+": quote is not in "+source+": "+r.Quote)
			}
			if r.Means == "" {
				bad = append(bad, d.ID+"="+r.Name+": says nothing of what a target following it does")
			}
		}
		if len(d.Readings) >= 2 {
			withReadings[d.ID] = true
		}
	}
	for _, r := range rules {
		for _, id := range r.Readings {
			if !withReadings[id] {
				bad = append(bad, r.ID+": reading "+id+" names no decision with two or more readings")
			}
		}
	}
	return bad
}

func TestIntentDecisions(t *testing.T) {
	for _, msg := range checkDecisions(Decisions(), spec.RulesFor(Name), Source) {
		t.Error(msg)
	}
}

func TestDecisionCheckFails(t *testing.T) {
	good := spec.Decision{ID: "d", Question: "q", Choice: "c", Readings: []spec.Reading{
		{Name: "a", Quote: "Default max_attempts: 3", Means: "m"}, {Name: "b", Quote: "Default backoff_base: 5.0 seconds", Means: "m"}}}
	if bad := checkDecisions([]spec.Decision{good}, nil, Source); len(bad) != 0 {
		t.Fatalf("a good decision is refused: %v", bad)
	}
	one := good
	one.Readings = good.Readings[:1]
	misquoted := good
	plain := spec.Decision{ID: "plain", Question: "q", Choice: "c"}
	misquoted.Readings = []spec.Reading{good.Readings[0], {Name: "b", Quote: "Default backoff_base: 6.0 seconds", Means: "m"}}
	cases := []struct {
		name  string
		ds    []spec.Decision
		rules []spec.Rule
		want  string
	}{
		{"duplicate", []spec.Decision{good, good}, nil, "duplicate"},
		{"one reading", []spec.Decision{one}, nil, "single reading"},
		{"misquoted", []spec.Decision{misquoted}, nil, "quote is not in"},
		{"unknown reading", []spec.Decision{good}, []spec.Rule{{ID: "R", Readings: []string{"nope"}}}, "names no decision"},
		{"reading of a decision without readings", []spec.Decision{good, plain}, []spec.Rule{{ID: "R", Readings: []string{"plain"}}}, "R: reading plain names no decision"},
		{"reading of a one-reading decision", []spec.Decision{one}, []spec.Rule{{ID: "R", Readings: []string{"d"}}}, "R: reading d names no decision"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := checkDecisions(c.ds, c.rules, Source)
			if !strings.Contains(strings.Join(bad, "\n"), c.want) {
				t.Fatalf("want a complaint about %q, got %v", c.want, bad)
			}
		})
	}
}
