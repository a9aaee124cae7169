// Package profiles is the registry of certifiable protocol texts. A profile
// is one value: its rules and readings, its feature file and steps, its
// checker models, its bundled reference handler and its mutants. Only cmd
// reads the registry; adding a profile adds a package and a line to
// builtin, not edits of shared code.
package profiles

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/spec"
)

// Profile is one protocol text made certifiable.
type Profile struct {
	Name  spec.Profile
	Title string
	// Rules is the profile's catalog, in the order of its text.
	Rules func() []spec.Rule
	// Decisions are the places where the text contradicts itself or is
	// silent, with their readings (nil: none).
	Decisions func() []spec.Decision
	// Suite is the feature file and steps; nil while the profile has no
	// scenarios yet.
	Suite *features.Suite
	// Models are the checker models of its histories (nil: none yet).
	Models []checker.Model
	// Bundled starts the profile's reference handler; nil when it has none.
	Bundled func(ctx context.Context, c BundledConfig) (*Bundled, error)
	// AlternateReadings are the readings the bundled handler follows with
	// --readings alternate (the other reading at every decision); nil when
	// the profile has none.
	AlternateReadings func() map[string]string
	// Mutants are deliberate bugs of the bundled handler, each naming the
	// rule it breaks.
	Mutants []Mutant
	// EffectSink is set for a profile whose targets send their external
	// effects to the harness's effect sink (IDS, ATP): run starts one and
	// hands it to the bundled handler and the scenarios.
	EffectSink bool
}

// Mutant is one deliberate bug of a bundled handler.
type Mutant struct {
	Name, Description string
	Breaks            string // the ID of the rule it breaks
	// Failpoints widen a racy mutant's race window while it is certified
	// (name -> term, github.com/pingcap/failpoint); they act in its branch
	// alone.
	Failpoints map[string]string
}

// BundledConfig configures a bundled handler for one run.
type BundledConfig struct {
	Dir       string // a fresh directory for its state
	TimeScale float64
	Seed      uint64
	Mutant    string            // "" for the correct handler
	Readings  map[string]string // the readings it follows; nil: its defaults
	Logger    *slog.Logger
	// SinkURL is the base URL of the harness's effect sink, for profiles
	// whose commands have external effects (IDS, ATP): the handler sends
	// every external effect there (docs/ids-binding.md). Empty: none.
	SinkURL string
}

// Bundled is a started reference handler and what the harness needs to
// talk to it (its credentials are drawn for the run).
type Bundled struct {
	Handler http.Handler
	Target  features.Target // BaseURL left empty: the caller serves Handler
	Close   func() error
}

var (
	mu       sync.Mutex
	registry []Profile
)

// builtin is the list of profiles idscheck ships: one line each.
var builtin = []func() Profile{
	Intent,
	IDS,
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
	if slices.ContainsFunc(registry, func(q Profile) bool { return q.Name == p.Name }) {
		return fmt.Errorf("profiles: %q is registered twice", p.Name)
	}
	registry = append(registry, p)
	return nil
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

// Decision returns the decision of a profile with the given ID.
func (p Profile) Decision(id string) (spec.Decision, bool) {
	if p.Decisions == nil {
		return spec.Decision{}, false
	}
	for _, d := range p.Decisions() {
		if d.ID == id {
			return d, true
		}
	}
	return spec.Decision{}, false
}

// Run certifies a target against the profile's scenarios: cfg's Profile,
// Rules and Suite are the profile's.
func (p Profile) Run(ctx context.Context, cfg features.RunConfig) (*features.RunResult, error) {
	if p.Suite == nil {
		return nil, fmt.Errorf("profile %s has no scenarios yet", p.Name)
	}
	cfg.Profile, cfg.Rules, cfg.Suite = p.Name, p.Rules(), p.Suite
	return features.Run(ctx, cfg)
}
