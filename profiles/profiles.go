// Package profiles is the registry of certifiable protocol texts: the one
// list of profiles, read by cmd alone. A profile is one folder,
// profiles/<name>, that returns a harness.Profile; adding one adds its
// folder and one line to builtin, and edits no engine file.
package profiles

import (
	"fmt"
	"slices"
	"sync"

	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/profiles/a2a"
	"github.com/idscheck/idscheck/profiles/atp"
	"github.com/idscheck/idscheck/profiles/httpidem"
	"github.com/idscheck/idscheck/profiles/ids"
	"github.com/idscheck/idscheck/profiles/intent"
	"github.com/idscheck/idscheck/spec"
)

// Profile is a registered profile (harness.Profile, named here for cmd).
type Profile = harness.Profile

var (
	mu       sync.Mutex
	registry []Profile
)

// builtin is the list of profiles idscheck ships: one line each.
var builtin = []func() harness.Profile{
	intent.Profile,
	ids.Profile,
	atp.Profile,
	httpidem.Profile,
	a2a.Profile,
}

func init() {
	for _, p := range builtin {
		if err := Register(p()); err != nil {
			panic(err)
		}
	}
}

// Register adds a profile; a name registered twice is an error.
func Register(p Profile) error {
	mu.Lock()
	defer mu.Unlock()
	if p.Name == "" || p.Rules == nil {
		return fmt.Errorf("profiles: a profile needs a name and rules")
	}
	for _, r := range p.Rules() {
		if r.Profile != p.Name {
			return fmt.Errorf("profiles: rule %s of %q says it is of profile %q", r.ID, p.Name, r.Profile)
		}
	}
	if slices.ContainsFunc(registry, func(q Profile) bool { return q.Name == p.Name }) {
		return fmt.Errorf("profiles: %q is registered twice", p.Name)
	}
	registry = append(registry, p)
	return nil
}

// Deregister removes a profile registered by Register: for a test that
// registers a profile of its own (the toy) and leaves the registry as it
// found it.
func Deregister(name spec.Profile) {
	mu.Lock()
	defer mu.Unlock()
	registry = slices.DeleteFunc(registry, func(q harness.Profile) bool { return q.Name == name })
}

// Lookup returns the profile of that name.
func Lookup(name spec.Profile) (Profile, bool) {
	mu.Lock()
	defer mu.Unlock()
	for _, p := range registry {
		if p.Name == name {
			return p, true
		}
	}
	return Profile{}, false
}

// Names lists the registered profiles, in registration order.
func Names() []spec.Profile {
	mu.Lock()
	defer mu.Unlock()
	var out []spec.Profile
	for _, p := range registry {
		out = append(out, p.Name)
	}
	return out
}
