package features

import (
	"context"
	"errors"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/rundir"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/spec"
)

// Suite is a set of feature files and the step definitions that run them.
// Every profile has one, embedded in its folder; tests build their own over
// testdata.
type Suite struct {
	FS    fs.FS    // where the feature files are
	Paths []string // feature files or directories inside FS
	// Steps registers the step definitions of one scenario.
	Steps func(sc *godog.ScenarioContext, env *Env)
}

// Defaults of RunConfig.
const (
	DefaultBudget         = 10 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultMaxEvidence    = 20   // exchanges kept as the evidence of a check (its scenario's latest)
	DefaultMaxBody        = 2048 // bytes of a body kept in evidence
	DefaultMaxProof       = 2    // exchanges kept as the proof of a PASS, per check
	DefaultMaxProofBody   = 512  // bytes of a body kept in the proof of a PASS
	// DefaultEvidenceChecks bounds the checks whose evidence (or proof) a
	// rule keeps: the first ones, each with its own exchanges, so one
	// scenario's storm never evicts another check's exchanges.
	DefaultEvidenceChecks  = 4
	DefaultUnknownStreak   = 3 // consecutive transport-dead scenarios before the run gives up
	DefaultTransportLimit  = 6 // transport-dead scenarios in all before the run gives up
	minimumScenarioTimeout = 5 * time.Second
)

// RunConfig is everything one run needs. Zero values take the defaults above.
type RunConfig struct {
	Profile spec.Profile
	Target  Target
	Seed    uint64
	// RunID is the run's own nonce (rundir.NewRunID; "": drawn), mixed
	// into every key and id a step draws (Env.Fresh): the same seed makes
	// the same choices in the same order, the run ID the keys its own.
	RunID string
	// Rules is the catalog of the profile (spec.RulesFor): the rules that get a
	// verdict. Scenario tags that are not rule IDs of it are ignored.
	Rules []spec.Rule
	// Select holds rule-ID globs (path.Match syntax, e.g. "INTENT-7.*");
	// empty selects every rule and every scenario.
	Select []string
	// Budget is the longest protocol wait one scenario may do (Env.Budget).
	Budget time.Duration
	// ScenarioTimeout bounds one scenario, steps and requests included;
	// default Budget + 3 request timeouts.
	ScenarioTimeout time.Duration
	// RequestTimeout bounds one HTTP exchange of a step.
	RequestTimeout time.Duration
	// UnknownStreak: after this many consecutive scenarios that end UNKNOWN
	// on transport errors, the rest are not run (UNKNOWN, "target stopped
	// answering") so a dead target cannot make a run last hours.
	UnknownStreak int
	// TransportLimit: after this many scenarios in all that end UNKNOWN on
	// transport errors (timeouts, resets, malformed HTTP), consecutive or
	// not, the rest are not run either: a target that answers now and then
	// with resets and timeouts between cannot make a run last hours.
	TransportLimit int
	MaxEvidence    int // exchanges kept as the evidence of one check (per judgment)
	MaxBody        int // bytes kept of each body in evidence
	// MaxProof is how many exchanges a PASS keeps as its proof, per check
	// (DefaultEvidenceChecks checks a rule): the answers the deciding
	// checks read. MaxProofBody bounds each body of them.
	MaxProof     int
	MaxProofBody int
	// Progress receives one line per scenario (nil: none); when ProgressTTY
	// is set it receives a live line redrawn in place instead.
	Progress    io.Writer
	ProgressTTY bool
	Logger      *slog.Logger // nil: discard
	// Sink is the effect sink the target was given (Env.Sink); nil: none.
	Sink *sink.Sink
	// Suite replaces the profile's embedded suite (tests).
	Suite *Suite
}

// ScenarioResult is how one scenario ended.
type ScenarioResult struct {
	Name string `json:"name"`
	URI  string `json:"uri"`
	// Rules are the rules its assertions name, in order.
	Rules []string `json:"rules"`
	// Verdict sums the judgments up (the worst of them), or says how the
	// scenario ended when it judged nothing.
	Verdict verdict.Verdict `json:"verdict"`
	Reason  string          `json:"reason,omitempty"`
	// Judgments are the verdicts of its assertions, one per assertion (or
	// reading set), and those the scenario gave the assertions it did not
	// reach when it stopped early.
	Judgments []Judgment `json:"judgments,omitempty"`
	// Evidence, when the scenario stopped early: what the step that stopped
	// it expected and observed, and its last exchanges (bodies cut, see
	// TrimExchanges).
	Evidence verdict.Evidence `json:"evidence"`
	// Transport is set when the scenario ended on a transport failure (the
	// target did not answer), as opposed to a wrong answer.
	Transport bool `json:"transport,omitempty"`
	// Variant: the scenario is N/A because it judges this variant of the
	// text, and the target declares another (NotThisVariant).
	Variant  string        `json:"variant,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// RunResult is a finished run: a verdict per rule, the scenarios behind
// them and every exchange, in the order sent.
type RunResult struct {
	Profile   spec.Profile         `json:"profile"`
	Seed      uint64               `json:"seed"`
	RunID     string               `json:"run_id,omitempty"`
	Started   time.Time            `json:"started"`
	Finished  time.Time            `json:"finished"`
	Rules     []verdict.RuleResult `json:"rules"`
	Scenarios []ScenarioResult     `json:"scenarios"`
	// NotCovered lists the selected rules that no scenario is tagged with;
	// they get no verdict.
	NotCovered []string           `json:"not_covered,omitempty"`
	Exchanges  []verdict.Exchange `json:"-"`
}

// ErrNoSuchRules is returned when --rules selects nothing.
var ErrNoSuchRules = errors.New("no rule matches")

// ErrRunnerBug marks a scenario the runner itself could not run properly
// (a step wraps it when the scenario, not the target, is wrong).
var ErrRunnerBug = errors.New("runner bug")

// errRunAborted ends the scenarios left after the target stopped answering.
var errRunAborted = errors.New("not run: the target stopped answering")

// suiteMu serialises godog suites: godog sets process environment variables
// while it runs, so two suites in one process would race.
var suiteMu sync.Mutex

// Run runs the selected scenarios of the profile against the target, one at
// a time in file order, and returns a verdict per selected rule. Every
// scenario is bounded by ScenarioTimeout, so a target that hangs makes rules
// UNKNOWN, never a run that hangs. The error is for configuration problems
// only; a misbehaving target shows up in the verdicts.
func Run(ctx context.Context, cfg RunConfig) (*RunResult, error) {
	cfg = withDefaults(cfg)
	suite := cfg.Suite
	if suite == nil {
		return nil, fmt.Errorf("run: profile %q has no scenarios", cfg.Profile)
	}
	if u, err := url.Parse(cfg.Target.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("run: target must be an http:// or https:// URL, got %q", cfg.Target.BaseURL)
	}
	for _, g := range cfg.Select {
		if _, err := path.Match(g, ""); err != nil {
			return nil, fmt.Errorf("run: bad rule glob %q: %w", g, err)
		}
	}

	pickles, err := ListScenarios(*suite)
	if err != nil {
		return nil, fmt.Errorf("run: reading feature files: %w", err)
	}
	rules := selectRules(cfg.Rules, cfg.Select)
	if len(cfg.Select) > 0 && len(rules) == 0 {
		return nil, fmt.Errorf("run: %w %s in the %s catalog", ErrNoSuchRules, strings.Join(cfg.Select, ","), cfg.Profile)
	}
	selected, chosen := scenarioFilter(pickles, rules, len(cfg.Select) > 0)

	res := &RunResult{Profile: cfg.Profile, Seed: cfg.Seed, RunID: cfg.RunID, Started: time.Now()}
	rec := &client.Recorder{}
	env := &Env{
		Target:         cfg.Target,
		Rand:           rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		RunID:          cfg.RunID,
		Recorder:       rec,
		Budget:         cfg.Budget,
		RequestTimeout: cfg.RequestTimeout,
		Logger:         cfg.Logger,
		Sink:           cfg.Sink,
		spread:         client.NewSpreader(),
	}
	env.judge = &judge{env: env, maxProof: cfg.MaxProof, maxProofBody: cfg.MaxProofBody, levels: map[string]spec.Level{}}
	for _, r := range cfg.Rules {
		env.judge.levels[r.ID] = r.Level
	}
	h := &hooks{cfg: cfg, env: env, total: len(selected), runCtx: ctx, byKey: map[string]int{}, chosen: chosen}

	if len(selected) > 0 {
		status := runSuite(godog.TestSuite{
			Name: "idscheck-" + string(cfg.Profile),
			ScenarioInitializer: func(sc *godog.ScenarioContext) {
				h.setupErr = nil
				sc.Before(h.before)
				sc.After(h.after)
				sc.StepContext().Before(func(ctx context.Context, st *godog.Step) (context.Context, error) {
					if h.skip {
						return ctx, nil
					}
					return ctx, env.judge.beforeStep(st)
				})
				sc.StepContext().After(func(ctx context.Context, st *godog.Step, status godog.StepResultStatus, _ error) (context.Context, error) {
					if !h.skip {
						env.judge.afterStep(st, status)
					}
					return ctx, nil
				})
				h.register(sc, suite.Steps, env)
			},
			Options: &godog.Options{
				Format:         "progress",
				Output:         io.Discard,
				FS:             suite.FS,
				Paths:          suite.Paths,
				Strict:         true,
				Concurrency:    1,
				Randomize:      0,
				NoColors:       true,
				DefaultContext: ctx,
			},
		})
		cfg.Logger.Debug("godog suite finished", "status", status)
		h.endProgress()
	}

	// A selected scenario that never reached the After hook (no steps, a
	// godog error) is undecided, never silently passed.
	for _, p := range selected {
		if _, ok := h.byKey[pickleKey(p)]; !ok {
			rs := RulesOf(p.Steps)
			if len(rs) == 0 {
				rs = tagRules(p, rules) // it judges nothing: what its tags name stays undecided
			}
			r := ScenarioResult{
				Name: p.Name, URI: p.Uri, Rules: rs, Verdict: verdict.Unknown,
				Reason: "scenario did not run (no steps, or the runner could not start it)",
			}
			for _, id := range rs {
				r.Judgments = append(r.Judgments, Judgment{Rule: id, Verdict: verdict.Unknown, Reason: r.Reason})
			}
			h.results = append(h.results, r)
		}
	}
	res.Scenarios = h.results
	res.Exchanges = rec.Since(0)
	res.Rules, res.NotCovered = ruleVerdicts(rules, res.Scenarios, cfg.MaxEvidence, cfg.MaxProof)
	// The proof of a passing check is its rule's now: a scenario keeps what
	// its check observed, and history.jsonl every exchange.
	for i := range res.Scenarios {
		for j := range res.Scenarios[i].Judgments {
			if jd := &res.Scenarios[i].Judgments[j]; jd.Verdict == verdict.Pass {
				jd.Evidence.Exchanges = nil
			}
		}
	}
	res.Finished = time.Now()
	return res, nil
}

// runSuite runs one godog suite; one at a time per process (suiteMu).
func runSuite(ts godog.TestSuite) int {
	suiteMu.Lock()
	defer suiteMu.Unlock()
	return ts.Run()
}

func withDefaults(cfg RunConfig) RunConfig {
	if cfg.RunID == "" {
		cfg.RunID = rundir.NewRunID()
	}
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultBudget
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.ScenarioTimeout <= 0 {
		cfg.ScenarioTimeout = cfg.Budget + 3*cfg.RequestTimeout
	}
	if cfg.ScenarioTimeout < minimumScenarioTimeout {
		cfg.ScenarioTimeout = minimumScenarioTimeout
	}
	if cfg.UnknownStreak <= 0 {
		cfg.UnknownStreak = DefaultUnknownStreak
	}
	if cfg.TransportLimit <= 0 {
		cfg.TransportLimit = DefaultTransportLimit
	}
	if cfg.MaxEvidence <= 0 {
		cfg.MaxEvidence = DefaultMaxEvidence
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxProof <= 0 {
		cfg.MaxProof = DefaultMaxProof
	}
	if cfg.MaxProofBody <= 0 {
		cfg.MaxProofBody = DefaultMaxProofBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Target.TimeScale <= 0 {
		cfg.Target.TimeScale = 1
	}
	return cfg
}

// ListScenarios parses the suite's feature files the way godog does (same
// paths, same deterministic ids) and returns every scenario in file order.
func ListScenarios(s Suite) ([]*godog.Scenario, error) {
	feats, err := godog.TestSuite{Options: &godog.Options{FS: s.FS, Paths: s.Paths}}.RetrieveFeatures()
	if err != nil {
		return nil, err
	}
	var out []*godog.Scenario
	for _, f := range feats {
		out = append(out, f.Pickles...)
	}
	return out, nil
}

// selectRules returns the rules whose ID matches one of globs (all when
// globs is empty), in catalog order.
func selectRules(rules []spec.Rule, globs []string) []spec.Rule {
	if len(globs) == 0 {
		return rules
	}
	var out []spec.Rule
	for _, r := range rules {
		if MatchRule(r.ID, globs) {
			out = append(out, r)
		}
	}
	return out
}

// MatchRule reports whether id matches one of globs (path.Match syntax).
func MatchRule(id string, globs []string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, id); ok {
			return true
		}
	}
	return false
}

// scenarioFilter returns the scenarios whose assertions name one of rules
// (all of them with filter off), and the same as a set of pickle keys.
func scenarioFilter(pickles []*godog.Scenario, rules []spec.Rule, filter bool) ([]*godog.Scenario, map[string]bool) {
	want := map[string]bool{}
	for _, r := range rules {
		want[r.ID] = true
	}
	var sel []*godog.Scenario
	chosen := map[string]bool{}
	for _, p := range pickles {
		hit := !filter
		for _, id := range RulesOf(p.Steps) {
			hit = hit || want[id]
		}
		if hit {
			sel = append(sel, p)
			chosen[pickleKey(p)] = true
		}
	}
	return sel, chosen
}

func pickleKey(p *godog.Scenario) string {
	return p.Uri + "|" + strings.Join(p.AstNodeIds, ",")
}

// hooks is the runner's view of the scenario being run. godog runs one
// scenario at a time (Concurrency 1), so plain fields are enough.
type hooks struct {
	cfg    RunConfig
	env    *Env
	runCtx context.Context
	total  int

	n        int // scenarios started
	mark     int // Recorder.Len() at the start of the current scenario
	start    time.Time
	cancel   context.CancelFunc
	streak   int // consecutive transport-dead scenarios
	dead     int // transport-dead scenarios in all
	aborted  bool
	results  []ScenarioResult
	byKey    map[string]int
	liveLine bool
	setupErr error           // the step registrar of the current scenario panicked
	chosen   map[string]bool // pickle keys of the selected scenarios
	skip     bool            // the current scenario is not selected
}

// register calls the step registrar; a panic there is the runner's bug: it
// makes the scenario UNKNOWN instead of killing the process.
func (h *hooks) register(sc *godog.ScenarioContext, steps func(*godog.ScenarioContext, *Env), env *Env) {
	defer func() {
		if p := recover(); p != nil {
			h.setupErr = fmt.Errorf("%w: registering steps panicked: %v", ErrRunnerBug, p)
		}
	}()
	steps(sc, env)
}

func (h *hooks) before(ctx context.Context, sc *godog.Scenario) (context.Context, error) {
	h.skip = !h.chosen[pickleKey(sc)]
	if h.skip {
		return ctx, godog.ErrSkip
	}
	h.env.judge.reset(sc)
	h.n++
	h.mark = h.env.Recorder.Len()
	h.start = time.Now()
	if h.cfg.Progress != nil && h.cfg.ProgressTTY {
		fmt.Fprintf(h.cfg.Progress, "\r\033[K[%d/%d] %s", h.n, h.total, oneLine(sc.Name, 70))
		h.liveLine = true
	}
	sctx, cancel := context.WithTimeout(ctx, h.cfg.ScenarioTimeout)
	h.cancel = cancel
	if h.aborted || h.runCtx.Err() != nil {
		return sctx, errRunAborted
	}
	if h.setupErr != nil {
		return sctx, h.setupErr
	}
	return sctx, nil
}

func (h *hooks) after(ctx context.Context, sc *godog.Scenario, err error) (context.Context, error) {
	if h.skip {
		return ctx, nil
	}
	if h.cancel != nil {
		h.cancel()
		h.cancel = nil
	}
	exs := h.env.Recorder.Since(h.mark)
	r := Classify(err, exs)
	r.Evidence.Exchanges = TrimExchanges(r.Evidence.Exchanges, h.cfg.MaxEvidence, h.cfg.MaxBody)
	if r.Verdict == verdict.Pass {
		r.Evidence.Exchanges = nil // the run keeps every exchange; evidence is for what went wrong
	}
	r.Name, r.URI, r.Rules = sc.Name, sc.Uri, RulesOf(sc.Steps)
	r.Duration = time.Since(h.start)
	if errors.Is(err, errRunAborted) && h.runCtx.Err() != nil {
		r.Reason = "not run: the run was interrupted or ran out of time"
	}
	r.Judgments = h.env.judge.finish(r, err)
	for i := range r.Judgments {
		ev := &r.Judgments[i].Evidence
		if r.Judgments[i].Verdict == verdict.Pass {
			ev.Exchanges = TrimExchanges(ev.Exchanges, h.cfg.MaxProof, h.cfg.MaxProofBody)
			continue
		}
		if n := len(ev.Exchanges); n > h.cfg.MaxEvidence {
			ev.Omitted += n - h.cfg.MaxEvidence
		}
		ev.Exchanges = TrimExchanges(ev.Exchanges, h.cfg.MaxEvidence, h.cfg.MaxBody)
	}
	if len(r.Judgments) > 0 {
		r.Verdict = worstJudgment(r.Judgments)
		// The scenario's reason is that of its worst judgment, naming its rule.
		for _, j := range r.Judgments {
			if j.Verdict == r.Verdict && r.Verdict != verdict.Pass && !errors.Is(err, errRunAborted) {
				r.Reason = j.Rule + ": " + j.Reason
				break
			}
		}
	}
	if r.Transport && !errors.Is(err, errRunAborted) {
		h.streak++
		h.dead++
		switch {
		case h.aborted:
		case h.streak >= h.cfg.UnknownStreak:
			h.aborted = true
			h.cfg.Logger.Warn("target stopped answering; skipping the remaining scenarios", "after", h.streak)
		case h.dead >= h.cfg.TransportLimit:
			h.aborted = true
			h.cfg.Logger.Warn("target failed at the transport level too often; skipping the remaining scenarios", "scenarios", h.dead)
		}
	} else if !r.Transport {
		h.streak = 0
	}
	h.byKey[pickleKey(sc)] = len(h.results)
	h.results = append(h.results, r)
	h.progress(r)
	// The step error stays what godog reports; the verdict is ours.
	return ctx, nil
}

func (h *hooks) progress(r ScenarioResult) {
	w := h.cfg.Progress
	if w == nil {
		return
	}
	line := fmt.Sprintf("[%d/%d] %-10s %s (%s)", h.n, h.total, r.Verdict, oneLine(r.Name, 70), r.Duration.Round(time.Millisecond))
	if r.Verdict != verdict.Pass && r.Reason != "" {
		line += ": " + oneLine(r.Reason, 100)
	}
	if h.cfg.ProgressTTY {
		if r.Verdict == verdict.Pass {
			fmt.Fprintf(w, "\r\033[K%s", line)
			return
		}
		fmt.Fprintf(w, "\r\033[K%s\n", line)
		h.liveLine = false
		return
	}
	fmt.Fprintln(w, line)
}

func (h *hooks) endProgress() {
	if h.cfg.Progress != nil && h.cfg.ProgressTTY && h.liveLine {
		fmt.Fprint(h.cfg.Progress, "\r\033[K")
	}
}

// oneLine returns s on one line, at most n runes (OneLine).
func oneLine(s string, n int) string { return OneLine(s, n) }

// OneLine returns s on one line, at most n runes: a longer s is cut at the
// end of a word (mid-word only when its last word is longer than a third
// of n), with an ellipsis.
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n < 2 {
		return "…"
	}
	cut := n - 1
	for i := cut; i > 0; i-- {
		if r[i] == ' ' {
			if i >= 2*n/3 {
				cut = i
			}
			break
		}
	}
	return strings.TrimRight(string(r[:cut]), " ,;:") + "…"
}

// tagRules returns the rules of the catalog a scenario's tags name.
func tagRules(p *godog.Scenario, rules []spec.Rule) []string {
	var out []string
	for _, t := range p.Tags {
		id := strings.TrimPrefix(t.Name, "@")
		if slices.ContainsFunc(rules, func(r spec.Rule) bool { return r.ID == id }) {
			out = append(out, id)
		}
	}
	return out
}
