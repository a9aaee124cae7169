package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/spec"
)

// profileList lists the registered profiles: "a, b, c".
func profileList() string {
	var names []string
	for _, n := range profiles.Names() {
		names = append(names, string(n))
	}
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// errUnknownProfile is the error for a profile name the registry lacks.
func errUnknownProfile(name string) error {
	return fmt.Errorf("unknown profile %q; profiles: %s", name, profileList())
}

// profileNames lists the registered profiles for a user: "a, b or c".
func profileNames() string {
	var names []string
	for _, n := range profiles.Names() {
		names = append(names, string(n))
	}
	switch len(names) {
	case 0:
		return "(none)"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// defaultProfile is the profile a subcommand takes when --profile is not
// given: the first the registry lists.
func defaultProfile() string {
	if names := profiles.Names(); len(names) > 0 {
		return string(names[0])
	}
	return ""
}

// profileFlag registers --profile on fs: what it selects, the registered
// profiles, and the default (the first registered; "" for none).
func profileFlag(fs *flag.FlagSet, p *string, def, what string) {
	fs.StringVar(p, "profile", def, what+": "+profileNames())
}

// lookupProfile returns the registered profile of that name (any case), or
// an error that names every registered one.
func lookupProfile(name string) (harness.Profile, error) {
	if p, ok := profiles.Lookup(spec.Profile(strings.ToLower(name))); ok {
		return p, nil
	}
	return harness.Profile{}, errUnknownProfile(name)
}
