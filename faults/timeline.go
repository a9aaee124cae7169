package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"
)

// Timeline is the record of every injection of a run, safe for concurrent
// use. Injections come back ordered by Start (then by order of recording);
// the JSON form is the list of injections, so a run directory's
// faults.json reads back with ReadTimeline. The zero value is ready to use.
type Timeline struct {
	mu  sync.Mutex
	ins []Injection
}

// Record appends one injection.
func (t *Timeline) Record(in Injection) {
	in.Params = cloneParams(in.Params)
	t.mu.Lock()
	t.ins = append(t.ins, in)
	t.mu.Unlock()
}

// Inject runs f for d and records the injection, whatever the outcome.
func (t *Timeline) Inject(ctx context.Context, rnd *rand.Rand, f Fault, d time.Duration) (Injection, error) {
	return t.inject(ctx, rnd, f, d, nil)
}

// inject is Inject, the injection recorded with params added to its own.
func (t *Timeline) inject(ctx context.Context, rnd *rand.Rand, f Fault, d time.Duration, params map[string]string) (Injection, error) {
	in, err := f.Inject(ctx, rnd, d)
	if len(params) > 0 {
		in.Params = cloneParams(in.Params)
		if in.Params == nil {
			in.Params = map[string]string{}
		}
		for k, v := range params {
			in.Params[k] = v
		}
	}
	if in.Fault == "" {
		in.Fault, in.Kind = f.Name(), f.Kind()
	}
	if err != nil && in.Err == "" {
		in.Err = err.Error()
	}
	t.Record(in)
	return in, err
}

// Injections returns a copy of every recorded injection, ordered by Start.
func (t *Timeline) Injections() []Injection {
	t.mu.Lock()
	out := make([]Injection, len(t.ins))
	copy(out, t.ins)
	t.mu.Unlock()
	for i := range out {
		out[i].Params = cloneParams(out[i].Params)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// During returns the injections in effect at some moment of [from, to]: the
// faults an operation with these call and return times may have met.
func (t *Timeline) During(from, to time.Time) []Injection {
	var out []Injection
	for _, in := range t.Injections() {
		if in.Overlaps(from, to) {
			out = append(out, in)
		}
	}
	return out
}

// MarshalJSON writes the injections as a JSON array, ordered by Start.
func (t *Timeline) MarshalJSON() ([]byte, error) {
	ins := t.Injections()
	if ins == nil {
		ins = []Injection{}
	}
	return json.Marshal(ins)
}

// UnmarshalJSON replaces the timeline's injections with a JSON array of them.
func (t *Timeline) UnmarshalJSON(b []byte) error {
	var ins []Injection
	if err := json.Unmarshal(b, &ins); err != nil {
		return err
	}
	t.mu.Lock()
	t.ins = ins
	t.mu.Unlock()
	return nil
}

// WriteJSON writes the timeline, indented, to w (the run directory's faults.json).
func (t *Timeline) WriteJSON(w io.Writer) error {
	ins := t.Injections()
	if ins == nil {
		ins = []Injection{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(ins); err != nil {
		return fmt.Errorf("timeline: write: %w", err)
	}
	return nil
}

// ReadTimeline reads what WriteJSON wrote.
func ReadTimeline(r io.Reader) (*Timeline, error) {
	var t Timeline
	if err := json.NewDecoder(r).Decode(&t); err != nil {
		return nil, fmt.Errorf("timeline: read: %w", err)
	}
	return &t, nil
}

func cloneParams(p map[string]string) map[string]string {
	if p == nil {
		return nil
	}
	out := make(map[string]string, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
