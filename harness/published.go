package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Published is what a target says of itself on GET /health that a run
// depends on: the members of the JSON object it answered there. A target
// publishes a parameter (its time scale, a key's lifetime, the reading it
// follows where its text leaves a choice) by naming it there; a run uses
// it where the user declared none, and refuses a contradiction (Resolve).
type Published struct {
	// Members are the top-level members of the JSON object GET /health
	// answered with 200; nil when it answered none (no /health, a body that
	// is no JSON object).
	Members map[string]json.RawMessage
}

// ReadPublished asks GET baseURL/health once (bounded by timeout) and
// returns what the answer publishes. Anything but a 200 with a JSON object
// publishes nothing: the health wait and the preflight judge the answer,
// not this.
func ReadPublished(ctx context.Context, baseURL string, timeout time.Duration) Published {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/health", nil)
	if err != nil {
		return Published{}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Published{}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Published{}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Published{}
	}
	return ParsePublished(b)
}

// ParsePublished reads what a GET /health body publishes.
func ParsePublished(body []byte) Published {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return Published{}
	}
	return Published{Members: m}
}

// Number is the member name when it is a number > 0 (ok false otherwise:
// absent, null, not a number, or not positive).
func (p Published) Number(name string) (float64, bool) {
	raw, ok := p.Members[name]
	if !ok {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || !(f > 0) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// Strings is the member name when it is an object of strings (nil
// otherwise).
func (p Published) Strings(name string) map[string]string {
	raw, ok := p.Members[name]
	if !ok {
		return nil
	}
	var m map[string]string
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

// PublishedHealth names where a published value comes from, in messages.
const PublishedHealth = "GET /health of the target"

// Param is one number a run depends on that its target may publish on GET
// /health: its member's name there, and what the user declared (0: none)
// and where ("--time-scale", `"time_scale" in t.json`).
type Param struct {
	Name     string  // the member of GET /health: "time_scale"
	Declared float64 // 0: not declared
	From     string  // where Declared came from
}

// Resolution is the value a run uses for a Param: Value, and From, where it
// came from (the declaration, or PublishedHealth); Note, when set, is the
// line that says a published value is used ("the target publishes
// time_scale 60: using it").
type Resolution struct {
	Value float64
	From  string
	Note  string
}

// ContradictionError is a parameter the user declared that the target
// publishes with another value: the run stops (exit 2) naming both.
type ContradictionError struct {
	Name               string
	Declared           float64
	DeclaredFrom       string
	Published          float64
	PublishedFrom      string
	DeclaredText, Text string // the values as words, for a parameter that is no number (readings)
}

func (e *ContradictionError) Error() string {
	d, p := e.DeclaredText, e.Text
	if d == "" {
		d = FormatNumber(e.Declared)
		if math.IsInf(e.Declared, 1) {
			d = "never" // a lifetime declared "never" (key_ttl_seconds): said as the target file says it
		}
	}
	if p == "" {
		p = FormatNumber(e.Published)
	}
	return fmt.Sprintf("%s is %s by %s, but the target publishes %s %s (%s): the two contradict; drop %s to use the target's, or correct one of them",
		e.Name, d, e.DeclaredFrom, e.Name, p, e.PublishedFrom, e.DeclaredFrom)
}

// Resolve is the value of p a run uses given what the target published: the
// declared one when the target publishes none or the same; the published
// one, with a note, when none was declared; a *ContradictionError when the
// two differ.
func (p Param) Resolve(pub Published) (Resolution, error) {
	v, ok := pub.Number(p.Name)
	switch {
	case !ok:
		return Resolution{Value: p.Declared, From: p.From}, nil
	case p.Declared <= 0:
		return Resolution{Value: v, From: PublishedHealth,
			Note: fmt.Sprintf("the target publishes %s %s: using it", p.Name, FormatNumber(v))}, nil
	case SameNumber(v, p.Declared):
		return Resolution{Value: p.Declared, From: p.From}, nil
	}
	return Resolution{}, &ContradictionError{Name: p.Name, Declared: p.Declared, DeclaredFrom: p.From, Published: v, PublishedFrom: PublishedHealth}
}

// SameNumber says two published or declared numbers are one value (equal
// within a relative 1e-9: 60 and 60.0 and a float's rounding). An infinite
// value ("never") is the same only as itself.
func SameNumber(a, b float64) bool {
	if a == b {
		return true
	}
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return false
	}
	return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b))
}

// FormatNumber writes a parameter's value as a person writes it: 60, 0.5.
func FormatNumber(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// ResolveReadings merges the readings a target publishes (GET /health's
// "readings": decision ID -> reading name) into those declared: a decision
// of decisions (with its readings) that the target publishes and the user
// did not declare is judged by the published reading, with a note; a
// declared one the target publishes otherwise is a *ContradictionError. A
// published key that is no such decision, or names no reading of it, is
// left alone (a server publishes its other answers too). from says where
// the declared reading of a decision came from.
func ResolveReadings(pub Published, decisions map[string][]string, declared map[string]string, from func(decision string) string) (map[string]string, []string, error) {
	published := pub.Strings("readings")
	out := maps.Clone(declared)
	var used []string
	for _, d := range slices.Sorted(maps.Keys(published)) {
		name := published[d]
		if !slices.Contains(decisions[d], name) {
			continue
		}
		if have, ok := declared[d]; ok {
			if have != name {
				return nil, nil, &ContradictionError{Name: "the reading of " + d, DeclaredText: have, DeclaredFrom: from(d),
					Text: name, PublishedFrom: PublishedHealth}
			}
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[d] = name
		used = append(used, d+"="+name)
	}
	if len(used) == 0 {
		return out, nil, nil
	}
	return out, []string{fmt.Sprintf("the target publishes its readings %s: judging it by them", strings.Join(used, ", "))}, nil
}

// SectionParam is a number of a profile's target section that its targets
// may publish on GET /health under the same name (http-idempotency's
// key_ttl_seconds): Get reads what the section's value declares (0: none;
// value may be nil), Set returns the value with it set to v (nil when the
// section has no value to hold it).
type SectionParam struct {
	Name string
	Get  func(value any) float64
	Set  func(value any, v float64) any
}
