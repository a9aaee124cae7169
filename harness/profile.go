// Package harness holds what the engine knows of a profile: the Profile
// value a protocol's folder (profiles/<name>) fills in and the registry
// (profiles) lists, and the pipelines that run one. It names no protocol.
package harness

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/sink"
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
	// effects to the harness's effect sink: run starts one and
	// hands it to the bundled handler and the scenarios.
	EffectSink bool
	// EffectsWithoutSink says, for a target described as described (the
	// profile's section of the target file), what judges the rules that
	// count effects when no effect sink is declared ("the declared count
	// read GET /v1/payments"); "" (or nil): nothing does, they are N/A.
	EffectsWithoutSink func(described any) string
	// BundledTimeScale is the time scale its bundled server runs at when
	// none is given (0: the default of every profile, 60). A profile whose
	// longest duration is a day (a key kept 24 h) runs faster.
	BundledTimeScale float64
	// Credentials are the named secrets its targets take besides the API
	// key (nil: none).
	Credentials []Credential
	// APIKeyRequired says every call of the protocol carries the API key: a
	// target URL without one is a usage error, before anything runs.
	APIKeyRequired bool
	// Section is its part of the target file and its flags (nil: none).
	Section *TargetSection
	// Serve runs its bundled server as a process (nil: it has none).
	Serve *ServeCommand
	// Preflight proves the target speaks the protocol and its credentials
	// work, before any scenario (nil: GET /health alone).
	Preflight Preflight
	// Chaos is the profile's chaos workload (idscheck chaos --profile);
	// nil when it has none.
	Chaos *ChaosWorkload
}

// ChaosWorkload is a profile's chaos workload: what a unit of work is, how
// it is retried, what its effect is, what the harness must host for it,
// and how a recorded run is judged.
type ChaosWorkload struct {
	// Summary says in one line what the workload does, for chaos's output.
	Summary string
	// Sink says the target's commands have external effects: the harness
	// hosts the effect sink (docs/ids-binding.md), behind a proxy when the
	// sink's faults are asked for, and gives its URL to the target.
	Sink bool
	// SinkOptional says a target that declares no effect sink is judged
	// without one (by what it answers alone); otherwise a --target of a
	// Sink workload must say where the sink listens.
	SinkOptional bool
	// NeedsDescription says a --target must be described in the profile's
	// section of the target file (the workload reads ChaosConfig.Described).
	NeedsDescription bool
	// AnyAnswer says its targets need not serve GET /health: one that
	// answers anything over HTTP is reachable.
	AnyAnswer bool
	// Faults are the workload's own faults (beyond faults.All), built on
	// what they act on: the proxy in front of the sink and the sink (either
	// may be nil: the fault is then listed, unavailable). Called with nils
	// for their names. nil: none.
	Faults func(sinkProxy *chaos.SinkProxy, s *sink.Sink) []faults.Fault
	// StormMin and StormMax bound its duplicate storms by default (the
	// chaos command's --storm-max overrides StormMax, never below StormMin).
	StormMin, StormMax int
	// Failpoints are the crash points of the bundled server (failpoint
	// path → term), armed in its child process over GO_FAILPOINTS_HTTP.
	Failpoints map[string]string
	// FailpointTriggers drive the bundled server at baseURL, whose
	// credentials are t's (ServeCommand.Child), to each failpoint the
	// workload may not reach by itself while it is armed (see
	// faults.RemoteFailpoint.Trigger), by failpoint path. nil: none.
	FailpointTriggers func(baseURL string, t features.Target) map[string]func(context.Context) error
	// OptionsFile is the file of ChaosRecord.Files that holds the options
	// Check judges under, for run directories recorded before Files were:
	// their chaos.json kept those options in "check_options", handed to
	// Check under this name. "": none.
	OptionsFile string
	// Columns name the progress lines' counts in the protocol's words
	// (zero: chaos.DefaultColumns).
	Columns chaos.Columns
	// Tally words the check's counts of units in one line of chaos's
	// output (nil: a line of keys delivered, answered, executed, …).
	Tally func(q checker.QueueStats) string
	// Run drives the target through the faults and records what happened.
	Run func(ctx context.Context, c ChaosConfig) (*ChaosResult, error)
	// Check judges a recorded run (pure: the same record, the same report).
	Check func(r ChaosRecord) checker.Report
}

// ChaosConfig is one chaos run of a workload.
type ChaosConfig struct {
	BaseURL string // the target, through the network proxy when network faults run
	// Replicas are the base URLs of the target's other replicas (one
	// service behind several processes over one store): the workload
	// spreads each logical request's deliveries over BaseURL and these
	// (client.Options.Replicas).
	Replicas []string
	APIKey   string // its credentials ("" when it wants none)
	// RunID is the run's own nonce (rundir.NewRunID), recorded in its
	// directory: every key, id and unique value the workload sends is
	// drawn through rundir.Fresh with it, so that runs of one seed never
	// share a key ("": the workload draws one).
	RunID     string
	Sink      *sink.Sink // the harness's effect sink (ChaosWorkload.Sink), nil otherwise
	Seed      uint64
	Duration  time.Duration // how long the load and the faults run (then a drain)
	Workers   int
	StormMax  int     // largest duplicate storm
	TimeScale float64 // the target's time scale (declared durations run this much faster)
	// TimeScaleAssumed says the target neither declared nor published its
	// time scale: TimeScale (1) is an assumption, and the workload judges
	// durations from what the target answers (a lease's end, a key's
	// expiry), never from TimeScale.
	TimeScaleAssumed bool
	Timeout          time.Duration // per request
	// Faults are the usable faults the schedule draws from.
	Faults   []faults.Fault
	Recorder *chaos.Recorder // receives every operation (nil: the workload makes one)
	Logger   *slog.Logger
	Progress func(chaos.Progress)
	// Described is what the target file's section of the profile declares
	// (the profile's own type, from its TargetSection), or what its bundled
	// server declares of itself; nil when the profile has no such section.
	Described any
	// Readings are the readings the target declares where the text leaves
	// a choice open (decision ID -> reading name; nil: none declared, and
	// every reading the text allows is accepted). The workload records
	// them for its Check (ChaosRecord.Readings).
	Readings map[string]string
}

// ChaosResult is what a chaos run recorded.
type ChaosResult struct {
	Start, End time.Time
	Namespace  string
	Schedule   []faults.Planned
	Timeline   []faults.Injection
	History    checker.History
	Ledger     checker.Ledger
	Series     []chaos.Bucket
	// Drained is false when the drain ran out of time: units still under
	// way are pending, not lost.
	Drained bool
	// Files are the records the checks need besides history and ledger,
	// by file name in the run directory (written as they are).
	Files map[string][]byte
	// Summary is one line on what was done (commands sent, …).
	Summary string
}

// ChaosRecord is a recorded run as its check reads it, from a run
// directory or straight from Run.
type ChaosRecord struct {
	History   checker.History
	Ledger    checker.Ledger
	Files     map[string][]byte
	Undrained bool
	// Readings are the readings the target declared (ChaosConfig.Readings),
	// as the run directory recorded them: a check of a declared decision
	// is held to that reading; of one not declared, to any reading the
	// text allows.
	Readings map[string]string
}

// Mutant is one deliberate bug of a bundled handler.
type Mutant struct {
	Name, Description string
	Breaks            string // the ID of the rule it breaks
	// Failpoints widen a racy mutant's race window while it is certified
	// (name -> term, github.com/pingcap/failpoint); they act in its branch
	// alone.
	Failpoints map[string]string
	// Variant is the variant whose run must kill it ("": the default).
	Variant string
	// Replicas says it is correct on one replica and breaks its rule only
	// over several sharing a store: idscheck chaos --replicas N kills it;
	// the mutants matrix (one replica) leaves it out.
	Replicas bool
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
	// whose commands have external effects: the handler sends every
	// external effect there (its binding page says how). Empty: none.
	SinkURL string
	// Variant is the variant the handler follows (a profile whose text has
	// variants); "": its default.
	Variant string
}

// Bundled is a started reference handler and what the harness needs to
// talk to it (its credentials are drawn for the run).
type Bundled struct {
	Handler http.Handler
	Target  features.Target // BaseURL left empty: the caller serves Handler
	Close   func() error
}

// DefaultTimeScale is the time scale the bundled server runs at when none
// is given.
func (p Profile) DefaultTimeScale() float64 {
	if p.BundledTimeScale > 0 {
		return p.BundledTimeScale
	}
	return 60
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

// Credential is a named secret a profile's targets take besides the API
// key (the Intent bus's admin token, …). cmd gives each a flag --NAME, a
// target-file field NAME (dashes as underscores) and NAME_env, and the
// variable IDSCHECK_NAME; its value reaches the steps in
// features.Target.Credentials[Name] and is redacted from every output.
type Credential struct {
	Name string // e.g. "admin-token"
	Help string // one line for -h: what it is and what is N/A without it
}

// TargetSection is a profile's own part of the target description: one key
// of the target file and the flags that override it. Its value reaches the
// steps in features.Target.Described and the chaos workload in
// ChaosConfig.Described.
type TargetSection struct {
	Key  string // the target file's key, e.g. "http_idempotency"
	Help string // its schema, appended to -h of every subcommand with a target
	// Flags registers the section's flags on fs; once fs is parsed, the
	// function it returns merges the file's raw section (nil: absent) with
	// the flags given into the profile's value (nil: nothing declared).
	// Secrets lists every secret the value holds, for redaction.
	Flags func(fs *flag.FlagSet) func(raw json.RawMessage, getenv func(string) string) (value any, secrets []string, err error)
	// Check judges the value once the whole description is known: target
	// says a target URL was given (without one the bundled server describes
	// itself). nil: nothing more to check.
	Check func(value any, target bool) error
	// Variant is the variant the value declares, for a profile whose text
	// has variants ("": its default). nil: the profile has none.
	Variant func(value any) string
	// Encode writes the value back as the section's JSON, its secrets moved
	// into environment variables it names (NAME=value entries), for a child
	// run handed the same description in a file. nil: the section has no
	// value to hand on.
	Encode func(value any) (raw json.RawMessage, env []string, err error)
	// Published are the section's numbers its targets may publish on GET
	// /health (nil: none): a run uses one the section leaves out, and
	// refuses one it declares otherwise (SectionParam).
	Published []SectionParam
}

// ServeCommand runs a profile's bundled server as a process of its own
// (idscheck serve --profile NAME).
type ServeCommand struct {
	// Flags registers the server's own flags on fs (beyond the common
	// --addr, --db, --time-scale, --mutant) and returns the function that
	// runs it until ctx ends.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, c ServeConfig) error
	// Env documents the variables it reads its secrets from, for -h.
	Env string
	// DBEnv is the variable it also reads its database file from ("":
	// none): idscheck serve leaves the file to it when the variable is
	// set and --db is not given.
	DBEnv string
	// Child is what a harness that runs the server as its own child
	// process (idscheck chaos) hands it and gets back: given secret, which
	// draws a fresh secret, and described, the value of the profile's
	// target section given (its TargetSection; nil: none — the variant
	// it is to follow, …), the environment that carries its secrets (the variables
	// Env documents), its own flags, and the server as a target. nil: the
	// server cannot be started so.
	Child func(secret func() string, described any) ServeChild
	// Readings are the server's own flags that make it follow the readings
	// a run declares (decision ID -> reading name), for a harness that
	// starts it as its child (idscheck chaos --reading ...); nil, or nil
	// flags: it follows its defaults.
	Readings func(readings map[string]string) []string
	// SharedStore says the server keeps its state in PostgreSQL when
	// given ServeConfig.Store, so that several replicas of it are one
	// server (idscheck run|chaos --replicas N --store postgres://…).
	// false: it runs on its own SQLite file alone.
	SharedStore bool
}

// ChildWithAPIKey is ServeCommand.Child of a server that takes one secret,
// its API key, in the variable env.
func ChildWithAPIKey(env string) func(secret func() string, described any) ServeChild {
	return func(secret func() string, _ any) ServeChild {
		key := secret()
		return ServeChild{Env: []string{env + "=" + key}, Target: features.Target{APIKey: key}, Secrets: []string{key}}
	}
}

// ServeChild is a served bundled server as its parent sees it.
type ServeChild struct {
	Env  []string // NAME=value: its secrets
	Args []string // its own flags beyond the common ones (e.g. its variant)
	// Target is the server as the workload talks to it: its API key, its
	// named credentials, what it declares of itself (Described); BaseURL
	// and TimeScale are the parent's.
	Target features.Target
	// Secrets are every secret value given, for redaction.
	Secrets []string
}

// ServeConfig is what every bundled server is served with.
type ServeConfig struct {
	Addr string // host:port to listen on (loopback by default)
	DB   string // its database file
	// Store is a PostgreSQL URL (postgres://…) the server keeps its state
	// in, shared with its other replicas ("": its SQLite file DB); given
	// only to a server whose ServeCommand.SharedStore is set.
	Store string
	// ReplicaID names this replica among those sharing Store, stable
	// across its restarts ("": its Addr).
	ReplicaID string
	TimeScale float64
	Mutant    string // "" for the correct server
	Seed      uint64
	Logger    *slog.Logger
	Getenv    func(string) string
	// Ready is called once the server listens, with its base URL (cmd
	// prints "listening on URL": a test or a script waits for that line).
	Ready          func(baseURL string)
	Stdout, Stderr io.Writer
}
