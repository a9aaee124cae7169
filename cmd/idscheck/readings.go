package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/spec"
)

// declaredReadings is the repeatable --reading DECISION=NAME: the readings a
// target declares where the text contradicts itself or leaves a choice
// open. A declared reading is held strictly: its check is PASS or FAIL, not
// a reading verdict.
type declaredReadings map[string]string

func (r *declaredReadings) String() string {
	if r == nil || len(*r) == 0 {
		return ""
	}
	var parts []string
	for k, v := range *r {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (r *declaredReadings) Set(s string) error {
	d, name, ok := strings.Cut(s, "=")
	d, name = strings.TrimSpace(d), strings.TrimSpace(name)
	if !ok || d == "" || name == "" {
		return fmt.Errorf("want DECISION=READING (e.g. lease-expiry=immediate), got %q", s)
	}
	if *r == nil {
		*r = declaredReadings{}
	}
	if prev, dup := (*r)[d]; dup && prev != name {
		return fmt.Errorf("decision %s declared twice (%s and %s)", d, prev, name)
	}
	(*r)[d] = name
	return nil
}

// decisionsOf returns the decisions of a profile, from the registry.
func decisionsOf(p spec.Profile) []spec.Decision {
	if pr, ok := profiles.Lookup(p); ok && pr.Decisions != nil {
		return pr.Decisions()
	}
	return nil
}

// checkReadings validates declared readings against a profile's decisions;
// the error lists what may be declared.
func checkReadings(p spec.Profile, declared map[string]string) error {
	ds := decisionsOf(p)
	for id, name := range declared {
		var d *spec.Decision
		for i := range ds {
			if ds[i].ID == id && len(ds[i].Readings) > 1 {
				d = &ds[i]
			}
		}
		if d == nil {
			return fmt.Errorf("--reading %s=%s: profile %s has no decision %q with readings; it has: %s", id, name, p, id, readingChoices(ds))
		}
		if _, ok := d.ReadingByName(name); !ok {
			return fmt.Errorf("--reading %s=%s: decision %s has no reading %q; it has: %s", id, name, id, name, readingChoices([]spec.Decision{*d}))
		}
	}
	return nil
}

// readingChoices lists "decision=a|b" for every decision with readings.
func readingChoices(ds []spec.Decision) string {
	var out []string
	for _, d := range ds {
		if len(d.Readings) < 2 {
			continue
		}
		var names []string
		for _, r := range d.Readings {
			names = append(names, r.Name)
		}
		out = append(out, d.ID+"="+strings.Join(names, "|"))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// profileHas checks that a profile is registered and has what a command
// needs; the error lists the profiles that do.
func profileHas(name, what string, has func(profiles.Profile) bool) error {
	var ok []string
	for _, n := range profiles.Names() {
		if p, _ := profiles.Lookup(n); has(p) {
			ok = append(ok, string(n))
		}
	}
	p, found := profiles.Lookup(spec.Profile(name))
	switch {
	case !found:
		return errUnknownProfile(name)
	case !has(p):
		return fmt.Errorf("profile %s has no %s (profiles that have one: %s)", name, what, strings.Join(ok, ", "))
	}
	return nil
}
