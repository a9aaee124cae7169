package ids

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

//go:embed ids.feature
var feature embed.FS

// Suite is the profile's feature file and its step definitions.
func Suite() features.Suite {
	return features.Suite{FS: feature, Paths: []string{"ids.feature"}, Steps: idsSteps}
}

// idsSteps registers the step definitions of ids.feature. A fresh
// idsWorld serves every scenario.
func idsSteps(sc *godog.ScenarioContext, env *features.Env) {
	w := &idsWorld{env: env, run: env.RunID}
	sc.Before(func(ctx context.Context, _ *godog.Scenario) (context.Context, error) {
		w.reset()
		return ctx, nil
	})
	sc.After(func(ctx context.Context, _ *godog.Scenario, err error) (context.Context, error) {
		w.releaseAll()
		return ctx, nil
	})
	features.Register(sc, env, w.steps())
}

// Rules that cover the preconditions of the steps below.
const (
	coversRegistry     = "IDS-VI-classified"
	coversOutcome      = "IDS-IX.A-same-outcome"
	coversConfirmation = "IDS-XIII-6-confirmation"
	coversEvidence     = "IDS-XII-decision"
	coversStatus       = "IDS-VIII.B-stored-fields"
	coversInProgress   = "IDS-XIII-4-in-progress"
)

// idsCommand is one logical command of a scenario and what it was answered.
type idsCommand struct {
	entry    RegistryEntry
	env      Envelope
	first    *client.Response // the first answer that is an outcome, or the first answer
	executed *client.Response // the answer that executed it (confirmation scenarios)
	token    string
	held     chan *client.Response // the first delivery's answer while the sink holds it
	baseline int                   // effects its key had before it was sent (a command sent under another's key)
	answers  []*client.Response    // the answer to every delivery of its envelope, in order
	dupBase  int                   // the sink's effects for its key when it was first sent again
	dupSet   bool                  // dupBase was taken
	sentAt   time.Time             // when its first delivery was sent
}

type idsWorld struct {
	env *features.Env
	run string // tags this process's tenants so two runs against one target never meet

	reg       Registry
	cmds      map[string]*idsCommand
	last      *client.Response
	storm     map[string][]*client.Response
	followed  map[string]*stormFollow // what followStorm read of a storm with no outcome among its answers
	evidence  map[string][]Evidence
	status    map[string]CommandStatus
	n         int    // fresh names drawn in this scenario
	lastAlias string // the command of the last answer

	candidates  []RegistryEntry // commands that may call the sink while they execute
	heldCalls   int             // sink calls for the held key when the duplicate was answered
	pending     chan *client.Response
	releases    []func()
	refused     *client.Response // the duplicate the rate limit refused
	rateElapsed time.Duration    // how long sendUntilRefused took
	i3          []string         // aliases of the I3 commands sent while the sink lost a reply
}

func (w *idsWorld) reset() {
	w.releaseAll()
	*w = idsWorld{env: w.env, run: w.run, cmds: map[string]*idsCommand{}, storm: map[string][]*client.Response{},
		followed: map[string]*stormFollow{}, evidence: map[string][]Evidence{}, status: map[string]CommandStatus{}}
}

func (w *idsWorld) releaseAll() {
	for _, r := range w.releases {
		r()
	}
	w.releases = nil
	if w.env.Sink != nil {
		w.env.Sink.LoseReplies(0)
	}
}

func (w *idsWorld) steps() []features.StepDef {
	q := `"(\w+)"`
	return []features.StepDef{
		{Pattern: `^the command registry of the target$`, Fn: w.loadRegistry, Kind: features.Action, Covers: coversRegistry},
		{Pattern: `^every command declares a class I0, I1, I2 or I3$`, Fn: w.everyClass, Kind: features.Check},
		{Pattern: `^every mutating command declares its dedupe window$`, Fn: w.everyWindow, Kind: features.Check},
		{Pattern: `^every I3 command declares a shielding strategy S1 to S4$`, Fn: w.everyShielding, Kind: features.Check},
		{Pattern: `^every financial command declares a window of at least 24 hours$`, Fn: w.financialWindow, Kind: features.Check},

		// choosing commands
		{Pattern: `^a mutating command ` + q + `$`, Fn: func(a string) error { return w.choose(a, w.mutating) }, Kind: features.Action},
		{Pattern: `^a mutating command ` + q + ` with args it refuses$`, Fn: w.chooseRefused, Kind: features.Action},
		{Pattern: `^an I1 command ` + q + `$`, Fn: func(a string) error {
			return w.choose(a, func(e RegistryEntry) bool { return w.mutating(e) && e.Class == "I1" })
		}, Kind: features.Action},
		{Pattern: `^a mutating command ` + q + ` whose window outlasts the scenario$`, Fn: w.chooseLongWindow, Kind: features.Action},
		{Pattern: `^a mutating command ` + q + ` whose window fits the budget$`, Fn: func(a string) error {
			return w.choose(a, func(e RegistryEntry) bool { return w.mutating(e) && w.windowFits(e) })
		}, Kind: features.Action},
		{Pattern: `^a mutating command ` + q + ` whose args have several members$`, Fn: func(a string) error {
			return w.choose(a, func(e RegistryEntry) bool {
				var m map[string]json.RawMessage
				return w.mutating(e) && json.Unmarshal(e.ArgsExamples[0], &m) == nil && len(m) >= 2
			})
		}, Kind: features.Action},
		{Pattern: `^a mutating command ` + q + ` whose outcome has private details$`, Fn: func(a string) error { return w.choose(a, w.mutating) }, Kind: features.Action},
		{Pattern: `^a command ` + q + ` that requires confirmation$`, Fn: func(a string) error {
			return w.choose(a, func(e RegistryEntry) bool { return w.effectful(e) && e.RequiresConfirmation })
		}, Kind: features.Action},
		{Pattern: `^a command ` + q + ` that requires confirmation and whose window fits the budget$`, Fn: func(a string) error {
			return w.choose(a, func(e RegistryEntry) bool { return w.effectful(e) && e.RequiresConfirmation && w.windowFits(e) })
		}, Kind: features.Action},
		{Pattern: `^a command ` + q + ` that calls the sink while it executes$`, Fn: w.chooseSynchronous, Kind: features.Action},
		{Pattern: `^the I3 commands of the registry$`, Fn: w.chooseI3, Kind: features.Action},

		// sending
		{Pattern: `^I send ` + q + `$`, Fn: func(ctx context.Context, a string) error { return w.send(ctx, a, nil) }, Kind: features.Action},
		{Pattern: `^I send ` + q + ` again$`, Fn: func(ctx context.Context, a string) error { return w.send(ctx, a, nil) }, Kind: features.Action},
		{Pattern: `^I send ` + q + ` again (\d+) times$`, Fn: w.sendTimes, Kind: features.Action},
		{Pattern: `^I send ` + q + ` again with a new (timestamp|message_id|trace_id|command_id)$`, Fn: w.sendWithNew, Kind: features.Action},
		{Pattern: `^I send ` + q + ` again with its args members in another order and other whitespace$`, Fn: w.sendRespelled, Kind: features.Action},
		{Pattern: `^I send a copy of ` + q + ` with another (tenant|actor|target|args) as ` + q + `$`, Fn: w.sendCopy, Kind: features.Action},
		{Pattern: `^another actor sends ` + q + ` again on behalf of its actor$`, Fn: w.sendOnBehalf, Kind: features.Action},
		{Pattern: `^(\d+) clients send ` + q + ` at once$`, Fn: w.sendStorm, Kind: features.Action},
		{Pattern: `^I follow the status URL of ` + q + ` until it reports an outcome, if no answer of the storm is one$`, Fn: w.followStorm, Kind: features.Action},
		{Pattern: `^I send another command ` + q + ` under the key of ` + q + `$`, Fn: w.sendUnderKey, Kind: features.Action},
		{Pattern: `^the first answer to ` + q + ` is an outcome$`, Fn: w.firstIsOutcome, Kind: features.Action, Covers: coversOutcome},
		{Pattern: `^the first answer to ` + q + ` has private details$`, Fn: w.firstHasPrivate, Kind: features.Action},
		{Pattern: `^I send ` + q + ` again until refused, at most the declared limit and 50 more$`, Fn: w.sendUntilRefused, Kind: features.Action},

		// answers
		{Pattern: `^the last answer is the first answer to ` + q + ` again$`, Fn: func(a string) error { return w.lastRepeats(a, false) }, Kind: features.Check},
		{Pattern: `^the last answer is the executed answer to ` + q + ` again$`, Fn: func(a string) error { return w.lastRepeats(a, true) }, Kind: features.Check},
		{Pattern: `^the last answer has the status and outcome document of the first answer to ` + q + `$`, Fn: w.sameDocument, Kind: features.Check},
		{Pattern: `^the last answer has the outcome_ref and command_id of the first answer to ` + q + `$`, Fn: w.sameReference, Kind: features.Check},
		{Pattern: `^the last answer is byte for byte the first answer to ` + q + `$`, Fn: w.sameBytes, Kind: features.Check},
		{Pattern: `^the last answer is byte for byte the answer before it to ` + q + `$`, Fn: w.sameAsPrevious, Kind: features.Check},
		{Pattern: `^the answer carries the key the binding derives for ` + q + `$`, Fn: w.keyDerived, Kind: features.Check},
		{Pattern: `^the answer's key is a digest of at least 256 bits$`, Fn: w.keyLength, Kind: features.Check},
		{Pattern: `^the answer to ` + q + ` is not an answer to ` + q + `$`, Fn: w.notAnswerTo, Kind: features.Check},
		{Pattern: `^the last answer carries the idempotency_key of the first answer to ` + q + `$`, Fn: w.sameKey, Kind: features.Gate},
		{Pattern: `^the sink saw no new effect for ` + q + ` since its first answer$`, Fn: w.noEffectSinceFirst, Kind: features.Check},
		{Pattern: `^the last answer is no new execution of ` + q + `$`, Fn: w.noNewExecution, Kind: features.Check},
		{Pattern: `^the last answer does not execute ` + q + `$`, Fn: w.notExecuted, Kind: features.Check},
		{Pattern: `^the storm converged on one outcome of ` + q + `: the same in every answer that is one, or at the status URL when none is$`, Fn: w.stormConverged, Kind: features.Check},
		{Pattern: `^the last answer is a replay or a new execution, and the report says which$`, Fn: w.replayOrNew, Kind: features.Check},
		{Pattern: `^the last answer shows none of the private details of the first answer to ` + q + `$`, Fn: w.noPrivate, Kind: features.Check},
		{Pattern: `^a duplicate of ` + q + ` was refused$`, Fn: w.wasRefused, Kind: features.Check},

		// the effect sink
		{Pattern: `^the sink saw at most 1 effect for ` + q + `$`, Fn: func(ctx context.Context, a string) error { return w.effects(ctx, a, 0, 1) }, Kind: features.Check},
		{Pattern: `^the sink saw exactly 1 effect for ` + q + `$`, Fn: func(ctx context.Context, a string) error { return w.effects(ctx, a, 1, 1) }, Kind: features.Check},
		{Pattern: `^the sink saw no effect for ` + q + `$`, Fn: func(ctx context.Context, a string) error { return w.effects(ctx, a, 0, 0) }, Kind: features.Check},
		{Pattern: `^the sink saw as many effects for ` + q + ` as for ` + q + `$`, Fn: w.asManyEffects, Kind: features.Check},

		// in progress
		{Pattern: `^I send ` + q + ` and the sink holds its effect$`, Fn: w.sendHeld, Kind: features.Action, Covers: coversInProgress},
		{Pattern: `^I send ` + q + ` again while the first delivery is held$`, Fn: w.sendWhileHeld, Kind: features.Action},
		{Pattern: `^the sink saw 1 call for ` + q + ` while the first delivery was held$`, Fn: w.oneCallWhileHeld, Kind: features.Check},
		{Pattern: `^the last answer says the command is processing$`, Fn: w.processing, Kind: features.Check},
		{Pattern: `^the last answer carries the original command_id and the key of ` + q + `$`, Fn: w.correlated, Kind: features.Check},
		{Pattern: `^the sink releases ` + q + `$`, Fn: w.release, Kind: features.Action},
		{Pattern: `^the status URL of the last answer reports ` + q + ` executed within the budget$`, Fn: w.statusURLReports, Kind: features.Probe},

		// collision and evidence
		{Pattern: `^the last answer rejects ` + q + ` as execution.rejected with reason idempotency_conflict$`, Fn: w.conflictAnswer, Kind: features.Check},
		{Pattern: `^the last answer refuses ` + q + `$`, Fn: func(string) error { return w.refusal() }, Kind: features.Check},
		{Pattern: `^I read the evidence of ` + q + `$`, Fn: w.readEvidence, Kind: features.Action, Covers: coversEvidence},
		{Pattern: `^the evidence of ` + q + ` records the conflict with the fingerprints of ` + q + ` and ` + q + `$`, Fn: w.conflictFingerprints, Kind: features.Check},
		{Pattern: `^the evidence of ` + q + ` records the conflict$`, Fn: w.conflictRecorded, Kind: features.Check},
		{Pattern: `^the evidence of ` + q + ` is first_seen then duplicate_replayed for every later delivery$`, Fn: w.evidenceDecisions, Kind: features.Check},
		{Pattern: `^the evidence of ` + q + ` says the first was executed and every later one replayed$`, Fn: w.evidenceExecuted, Kind: features.Check},
		{Pattern: `^every evidence item of ` + q + ` carries its original command_id and key$`, Fn: w.evidenceIDs, Kind: features.Check},
		{Pattern: `^every evidence item of ` + q + ` carries the outcome_ref of the first answer$`, Fn: w.evidenceOutcomeRef, Kind: features.Check},

		// the record and the window
		{Pattern: `^I read the status of ` + q + `$`, Fn: w.readStatus, Kind: features.Action, Covers: coversStatus},
		{Pattern: `^the status of ` + q + ` shows its key, original command_id, status, outcome_ref, created_at, updated_at and ttl_expires_at$`, Fn: w.statusFields, Kind: features.Check},
		{Pattern: `^I wait for the window of ` + q + ` to pass$`, Fn: w.waitWindow, Kind: features.Action},
		{Pattern: `^I wait for three quarters of the window of ` + q + `$`, Fn: w.waitWindowInside, Kind: features.Action},

		// confirmation
		{Pattern: `^I get a confirmation token for ` + q + `$`, Fn: w.getToken, Kind: features.Action, Covers: coversConfirmation},
		{Pattern: `^I send ` + q + ` with the token$`, Fn: w.sendWithToken, Kind: features.Action},
		{Pattern: `^I send ` + q + ` again with the token$`, Fn: w.sendWithToken, Kind: features.Action},
		{Pattern: `^I send ` + q + ` again without the token$`, Fn: func(ctx context.Context, a string) error { return w.send(ctx, a, nil) }, Kind: features.Action},
		{Pattern: `^I send ` + q + ` with the token but (another command_id|another key)$`, Fn: w.sendTokenMismatch, Kind: features.Action},
		{Pattern: `^I send ` + q + ` with a forged token of the same form$`, Fn: w.sendForgedToken, Kind: features.Action},
		{Pattern: `^the last answer to ` + q + ` is executed$`, Fn: w.lastExecuted, Kind: features.Action, Covers: coversConfirmation},
		{Pattern: `^I wait for the token to expire$`, Fn: w.waitToken, Kind: features.Action},

		// shielding
		{Pattern: `^I send each of them while the sink loses its first reply$`, Fn: w.sendI3Lossy, Kind: features.Action},
		{Pattern: `^the sink saw exactly 1 effect for each, once the target has resolved the lost reply$`, Fn: w.i3Effects, Kind: features.Check},
	}
}

// --- the registry ---------------------------------------------------------

func (w *idsWorld) client() (*client.Client, error) { return w.env.Client("ids") }

func (w *idsWorld) requestTimeout() time.Duration {
	if w.env.RequestTimeout > 0 {
		return w.env.RequestTimeout
	}
	return features.DefaultRequestTimeout
}

func (w *idsWorld) loadRegistry(ctx context.Context) error {
	c, err := w.client()
	if err != nil {
		return err
	}
	r, err := c.Do(ctx, client.Request{Method: http.MethodGet, Path: PathRegistry})
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return features.Mismatch("GET /registry answers 200", features.Describe(r))
	}
	var reg Registry
	if err := json.Unmarshal(r.Body, &reg); err != nil || len(reg.Commands) == 0 {
		return features.Mismatch("a registry of at least one command (docs/ids-binding.md)", fmt.Sprintf("%s (%v)", trimBody(r.Body), err))
	}
	w.reg = reg
	if w.env.Sink != nil {
		var s1 []string
		for _, e := range reg.Commands {
			if e.Shielding != nil && *e.Shielding == "S1" {
				s1 = append(s1, e.Command)
			}
		}
		w.env.Sink.HonourKeys(s1...)
	}
	return nil
}

func (w *idsWorld) everyClass() error {
	for _, e := range w.reg.Commands {
		if !slices.Contains([]string{"I0", "I1", "I2", "I3"}, e.Class) {
			return features.Mismatch("a class I0-I3 for every command", fmt.Sprintf("%s: class %q", e.Command, e.Class))
		}
	}
	return nil
}

func (w *idsWorld) everyWindow() error {
	for _, e := range w.reg.Commands {
		if e.Class != "I0" && (!e.HasTTL || (e.TTLSeconds != nil && *e.TTLSeconds <= 0)) {
			return features.Mismatch("ttl_seconds (a positive number, or null for a window that never ends) for every mutating command",
				fmt.Sprintf("%s declares none", e.Command))
		}
	}
	return nil
}

func (w *idsWorld) everyShielding() error {
	for _, e := range w.reg.Commands {
		if e.Class == "I3" && (e.Shielding == nil || !slices.Contains([]string{"S1", "S2", "S3", "S4"}, *e.Shielding)) {
			return features.Mismatch("a shielding strategy S1-S4 for every I3 command", fmt.Sprintf("%s: %v", e.Command, strOrNull(e.Shielding)))
		}
	}
	return nil
}

func (w *idsWorld) financialWindow() error {
	for _, e := range w.reg.Commands {
		if e.Financial && e.TTLSeconds != nil && *e.TTLSeconds < 86400 {
			return features.Mismatch("ttl_seconds ≥ 86400 for every financial command", fmt.Sprintf("%s: %g", e.Command, *e.TTLSeconds))
		}
	}
	return nil
}

func strOrNull(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

// --- choosing commands ----------------------------------------------------

// effectful is a command the binding says makes an effect: a mutation the
// harness can build (it has args examples).
func (w *idsWorld) effectful(e RegistryEntry) bool {
	return e.Class != "I0" && e.Class != "" && len(e.ArgsExamples) > 0
}

// mutating is an effectful command that needs no confirmation.
func (w *idsWorld) mutating(e RegistryEntry) bool {
	return w.effectful(e) && !e.RequiresConfirmation
}

// windowFits says whether the command's window, as the target runs it, ends
// within the scenario budget (with room to send after it).
func (w *idsWorld) windowFits(e RegistryEntry) bool {
	return e.TTLSeconds != nil && w.window(e)+time.Second <= w.env.Budget
}

func (w *idsWorld) window(e RegistryEntry) time.Duration {
	return w.env.Scaled(time.Duration(*e.TTLSeconds * float64(time.Second)))
}

// choose builds a fresh logical command of the first registry entry that
// ok accepts (the same command at every run): first those that declare an
// external effect (RegistryEntry.HasEffects: only theirs can be counted),
// made with no shielding, then S2-S4, then S1; then those without. A provider with idempotency
// support (S1) absorbs a second call under the same key, so a command
// shielded by S1 would hide a re-execution from the effect count; the
// others show every execution at the sink.
func (w *idsWorld) choose(alias string, ok func(RegistryEntry) bool) error {
	if c := w.byPreference(ok); len(c) > 0 {
		w.cmds[alias] = &idsCommand{entry: c[0], env: w.fresh(c[0], 0)}
		return nil
	}
	return features.NotApplicable("the registry has no command this scenario needs")
}

// byPreference lists the entries ok accepts in choose's order.
func (w *idsWorld) byPreference(ok func(RegistryEntry) bool) []RegistryEntry {
	rank := func(e RegistryEntry) int {
		r := 1
		switch {
		case e.Shielding == nil:
			r = 0
		case *e.Shielding == "S1":
			r = 2
		}
		if !e.HasEffects() {
			r += 3 // its executions cannot be counted at the sink: last
		}
		return r
	}
	var out []RegistryEntry
	for r := 0; r < 6; r++ {
		for _, e := range w.reg.Commands {
			if ok(e) && rank(e) == r {
				out = append(out, e)
			}
		}
	}
	return out
}

// scenarioBound is the longest a scenario runs (the runner's default
// scenario timeout: the budget and three request timeouts).
func (w *idsWorld) scenarioBound() time.Duration {
	return w.env.Budget + 3*w.requestTimeout()
}

// outlasts says whether e's window, as the target runs it, is longer than
// a scenario: every delivery of the scenario falls inside it.
func (w *idsWorld) outlasts(e RegistryEntry) bool {
	return e.TTLSeconds == nil || w.window(e) > w.scenarioBound()
}

// chooseLongWindow chooses, in choose's order, a command whose window
// outlasts the scenario: a storm of concurrent duplicates that took
// longer than the window would meet a record the text lets expire, and a
// delivery after it may execute again (§VIII.C). Among those whose
// executions the sink counts it prefers one whose window outlasts the
// scenario, else the longest; sendStorm says when a storm still outlasted
// it.
func (w *idsWorld) chooseLongWindow(alias string) error {
	all := w.byPreference(w.mutating)
	if len(all) == 0 {
		return features.NotApplicable("the registry has no command this scenario needs")
	}
	longer := func(a, b RegistryEntry) bool { // a's window is longer than b's
		return b.TTLSeconds != nil && (a.TTLSeconds == nil || *a.TTLSeconds > *b.TTLSeconds)
	}
	best := -1
	for i, e := range all {
		if e.HasEffects() && w.outlasts(e) {
			best = i
			break
		}
	}
	for i, e := range all {
		if best < 0 || (e.HasEffects() && !w.outlasts(all[best]) && (!all[best].HasEffects() || longer(e, all[best]))) {
			best = i
		}
	}
	w.cmds[alias] = &idsCommand{entry: all[best], env: w.fresh(all[best], 0)}
	return nil
}

func (w *idsWorld) chooseRefused(alias string) error {
	for _, e := range w.reg.Commands {
		if w.mutating(e) && len(e.ArgsRejected) > 0 {
			c := &idsCommand{entry: e, env: w.fresh(e, 0)}
			c.env.Args = e.ArgsRejected
			w.cmds[alias] = c
			return nil
		}
	}
	return features.NotApplicable("no command of the registry declares args_rejected")
}

// chooseSynchronous lists the commands that may call the sink while the
// first delivery is open: S1 first, then those without shielding, then the
// other I3 commands. sendHeld tries them in turn.
func (w *idsWorld) chooseSynchronous(alias string) error {
	if w.env.Sink == nil {
		return features.NotApplicable("the run has no effect sink (declare effect_sink in the target file)")
	}
	rank := func(e RegistryEntry) int {
		switch {
		case e.Shielding != nil && *e.Shielding == "S1":
			return 0
		case e.Shielding == nil:
			return 1
		}
		return 2
	}
	w.candidates = nil
	for r := 0; r < 3; r++ {
		for _, e := range w.reg.Commands {
			if w.mutating(e) && e.HasEffects() && rank(e) == r {
				w.candidates = append(w.candidates, e)
			}
		}
	}
	if len(w.candidates) == 0 {
		return features.NotApplicable("the registry has no mutating command without confirmation that declares an external effect (\"effects\", docs/ids-binding.md): none calls the sink while it executes")
	}
	w.cmds[alias] = &idsCommand{entry: w.candidates[0], env: w.fresh(w.candidates[0], 0)}
	return nil
}

func (w *idsWorld) chooseI3() error {
	if w.env.Sink == nil {
		return features.NotApplicable("the run has no effect sink (declare effect_sink in the target file)")
	}
	for _, e := range w.reg.Commands {
		if e.Class == "I3" && w.effectful(e) && e.HasEffects() {
			alias := fmt.Sprintf("I3-%s", e.Command)
			w.cmds[alias] = &idsCommand{entry: e, env: w.fresh(e, 0)}
			w.i3 = append(w.i3, alias)
		}
	}
	if len(w.i3) == 0 {
		return features.NotApplicable("the registry has no I3 command")
	}
	return nil
}

// fresh returns a new logical command of entry: a tenant, actor, target
// and command_id no other scenario uses, with the example args ex.
func (w *idsWorld) fresh(e RegistryEntry, ex int) Envelope {
	entity, action, _ := strings.Cut(e.Command, ".")
	return Envelope{
		CommandID: w.name("cmd"), TenantID: w.name("tenant"), ActorID: w.name("actor"),
		Intent:      Intent{Entity: entity, Action: action, Target: w.name("target")},
		Args:        e.ArgsExamples[ex%len(e.ArgsExamples)],
		CommandKind: e.Class,
	}
}

func (w *idsWorld) name(kind string) string {
	w.n++
	return fmt.Sprintf("%s-%s-%x-%d", kind, w.run, w.env.Fresh().Uint32(), w.n)
}

func (w *idsWorld) cmd(alias string) (*idsCommand, error) {
	c, ok := w.cmds[alias]
	if !ok {
		return nil, fmt.Errorf("%w: no command %q in this scenario", features.ErrRunnerBug, alias)
	}
	return c, nil
}

// --- sending --------------------------------------------------------------

// post sends one envelope and returns the answer.
func (w *idsWorld) post(ctx context.Context, e Envelope) (*client.Response, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return w.postRaw(ctx, body)
}

func (w *idsWorld) postRaw(ctx context.Context, body []byte) (*client.Response, error) {
	c, err := w.client()
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return c.Do(ctx, client.Request{Method: http.MethodPost, Path: PathCommands, Header: h, Body: body})
}

// send sends the command's envelope (changed by edit, if given) and keeps
// the answer as the last one, and as the first when it is the first.
func (w *idsWorld) send(ctx context.Context, alias string, edit func(*Envelope)) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	e := c.env
	e.ConfirmationToken = ""
	if edit != nil {
		edit(&e)
	}
	if c.first != nil && !c.dupSet && w.env.Sink != nil {
		c.dupBase, c.dupSet = w.env.Sink.Effects(w.sinkKey(c)), true
	}
	if c.first == nil && c.sentAt.IsZero() {
		c.sentAt = time.Now()
	}
	r, err := w.post(ctx, e)
	if err != nil {
		return err
	}
	if r, err = w.followRateLimit(ctx, c, e, r); err != nil {
		return err
	}
	w.answered(c, r)
	w.lastAlias = alias
	return nil
}

// rateRetries bounds how often followRateLimit sends a duplicate again.
const rateRetries = 3

// followRateLimit: a duplicate refused 429 under the duplicate_rate_limit
// the registry declares is an answer the binding allows (IDS §XV:
// "rate-limit repeated duplicate submissions"), not the answer the
// scenario's checks judge. It waits as Retry-After says (1 s without it)
// and sends the duplicate again, at most rateRetries times within the
// budget; what the duplicate is then answered is judged. A wait beyond
// the budget makes the scenario N/A, with the reason. A refusal leaves no
// decision (docs/ids-binding.md), so the refused deliveries are not
// among the command's answers.
func (w *idsWorld) followRateLimit(ctx context.Context, c *idsCommand, e Envelope, r *client.Response) (*client.Response, error) {
	rl := w.reg.DuplicateRateLimit
	if c.first == nil || rl == nil || rl.Max <= 0 {
		return r, nil
	}
	start := time.Now()
	for tries := 0; r.Status == http.StatusTooManyRequests; tries++ {
		wait := time.Second
		if secs, err := strconv.Atoi(strings.TrimSpace(r.Header.Get("Retry-After"))); err == nil && secs > 0 {
			wait = time.Duration(secs) * time.Second
		}
		if tries == rateRetries || time.Since(start)+wait > w.env.Budget {
			return nil, features.NotApplicable(fmt.Sprintf("a duplicate of %s was refused 429 under the declared duplicate_rate_limit (%d per %g s) %d time(s), and waiting as Retry-After says (%s) goes beyond the scenario budget %s: the duplicate this scenario judges could not be sent within the limit",
				c.entry.Command, rl.Max, rl.WindowSeconds, tries+1, wait, w.env.Budget))
		}
		w.env.Logger.Info("duplicate rate-limited: waiting as Retry-After says", "command", c.entry.Command, "wait", wait)
		features.Sleep(ctx, wait)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var err error
		if r, err = w.post(ctx, e); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (w *idsWorld) answered(c *idsCommand, r *client.Response) {
	w.last = r
	c.answers = append(c.answers, r)
	if c.first == nil {
		c.first = r
	}
}

func (w *idsWorld) sendTimes(ctx context.Context, alias string, n int) error {
	for i := 0; i < n; i++ {
		if err := w.send(ctx, alias, nil); err != nil {
			return err
		}
	}
	return nil
}

func (w *idsWorld) sendWithNew(ctx context.Context, alias, field string) error {
	v := w.name(field)
	return w.send(ctx, alias, func(e *Envelope) {
		switch field {
		case "timestamp":
			e.Timestamp = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(w.n) * time.Second).Format(time.RFC3339)
		case "message_id":
			e.MessageID = v
		case "trace_id":
			e.TraceID = v
		case "command_id":
			e.CommandID = v
		}
	})
}

// sendRespelled sends the envelope with the members of args in reverse
// order and spaces around every token: the same JSON value.
func (w *idsWorld) sendRespelled(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(c.env.Args, &members); err != nil || len(members) < 2 {
		return features.NotApplicable("the command's args example has fewer than two members to reorder")
	}
	names := make([]string, 0, len(members))
	for k := range members {
		names = append(names, k)
	}
	slices.Sort(names)
	slices.Reverse(names)
	var b bytes.Buffer
	b.WriteString("{ ")
	for i, k := range names {
		if i > 0 {
			b.WriteString(" ,\n ")
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteString(" :  ")
		b.Write(members[k])
	}
	b.WriteString(" }")
	return w.send(ctx, alias, func(e *Envelope) { e.Args = b.Bytes() })
}

// sendCopy sends, as a new command, a copy of alias with one key input
// changed.
func (w *idsWorld) sendCopy(ctx context.Context, alias, input, as string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	e := c.env
	e.CommandID = w.name("cmd")
	switch input {
	case "tenant":
		e.TenantID = w.name("tenant")
	case "actor":
		e.ActorID = w.name("actor")
	case "target":
		e.Intent.Target = w.name("target")
	case "args":
		if len(c.entry.ArgsExamples) < 2 {
			return features.NotApplicable(c.entry.Command + " declares one args example: no other args to send")
		}
		e.Args = c.entry.ArgsExamples[1]
	}
	w.cmds[as] = &idsCommand{entry: c.entry, env: e}
	return w.send(ctx, as, nil)
}

// sendOnBehalf resends alias from another actor that names the original
// actor as its effective actor: the same principal, so the same key.
func (w *idsWorld) sendOnBehalf(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	principal := c.env.Principal()
	return w.send(ctx, alias, func(e *Envelope) {
		e.CommandID = w.name("cmd")
		e.ActorID = w.name("bot")
		e.EffectiveActorID = principal
	})
}

// sendStorm sends n identical deliveries released at once by one barrier.
func (w *idsWorld) sendStorm(ctx context.Context, n int, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if n < 1 || n > 1000 {
		return fmt.Errorf("%w: a storm of %d", features.ErrRunnerBug, n)
	}
	body, err := json.Marshal(c.env)
	if err != nil {
		return err
	}
	out := make([]*client.Response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if r, err := w.postRaw(ctx, body); err == nil {
				out[i] = r
			}
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	span := time.Since(began)
	w.storm[alias] = out
	for _, r := range out {
		if r != nil {
			w.answered(c, r)
		}
	}
	if c.first == nil {
		return features.Mismatch("an answer to at least one of the storm's requests", "none answered")
	}
	if c.entry.TTLSeconds != nil && span >= w.window(c.entry) {
		return features.NotApplicable(fmt.Sprintf("the %d deliveries took %s, as long as %s's window as the target runs it (%s): a delivery past the window may execute again (§VIII.C), so convergence cannot be judged; the registry has no command with a longer window",
			n, span.Round(time.Millisecond), c.entry.Command, w.window(c.entry)))
	}
	return nil
}

// sendUnderKey sends B: A with another target (so another envelope) that
// names A's key as its idempotency_key.
func (w *idsWorld) sendUnderKey(ctx context.Context, as, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	e := c.env
	e.CommandID = w.name("cmd")
	e.Intent.Target = w.name("target")
	e.IdempotencyKey = w.sinkKey(c) // the key the target stored A under (its answer says)
	b := &idsCommand{entry: c.entry, env: e}
	if w.env.Sink != nil {
		lo := 0
		if c.entry.HasEffects() {
			lo = 1 // A's own effect is in before B is counted
		}
		b.baseline = w.waitEffects(ctx, e.IdempotencyKey, lo)
	}
	w.cmds[as] = b
	return w.send(ctx, as, nil)
}

// isOutcome says whether r is an outcome document: a terminal answer the
// binding says a replay repeats (not processing, not a refusal before a
// decision).
func isOutcome(r *client.Response) bool {
	if r == nil {
		return false
	}
	var o Outcome
	if json.Unmarshal(r.Body, &o) != nil {
		return false
	}
	return slices.Contains([]string{StatusExecuted, StatusRejected, StatusFailed, StatusCompensated}, o.Status)
}

func outcomeOf(r *client.Response) Outcome {
	var o Outcome
	if r != nil {
		json.Unmarshal(r.Body, &o)
	}
	return o
}

// firstIsOutcome makes sure the first answer the scenario compares with is
// an outcome: when the first delivery was answered "processing" (its effect
// was not finished), it follows the status URL until the command is
// terminal, then resends, and that answer becomes the first.
func (w *idsWorld) firstIsOutcome(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if isOutcome(c.first) {
		return nil
	}
	if c.first == nil || outcomeOf(c.first).Status != StatusProcessing {
		return features.Mismatch("an outcome document (status executed, rejected, failed or compensated) or processing", features.Describe(c.first))
	}
	if err := w.pollStatus(ctx, outcomeOf(c.first).StatusURL, nil); err != nil {
		return err
	}
	e := c.env
	r, err := w.post(ctx, e)
	if err != nil {
		return err
	}
	c.answers = append(c.answers, r)
	if !isOutcome(r) {
		return features.Mismatch("an outcome once the status URL said the command ended", features.Describe(r))
	}
	c.first, w.last = r, r
	return nil
}

// firstHasPrivate makes sure alias's outcome carries result.private: when
// it does not, it tries the other mutating commands in turn (each sent
// once, its answer made an outcome) until one does.
func (w *idsWorld) firstHasPrivate(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	hasPrivate := func(r *client.Response) bool { o := outcomeOf(r); return o.Result != nil && o.Result["private"] != nil }
	if hasPrivate(c.first) {
		return nil
	}
	for _, e := range w.byPreference(w.mutating) {
		if e.Command == c.entry.Command {
			continue
		}
		w.cmds[alias] = &idsCommand{entry: e, env: w.fresh(e, 0)}
		if err := w.send(ctx, alias, nil); err != nil {
			return err
		}
		if err := w.firstIsOutcome(ctx, alias); err != nil {
			return err
		}
		if hasPrivate(w.cmds[alias].first) {
			return nil
		}
	}
	return features.NotApplicable("no command's outcome has result.private: nothing to leak")
}

// rateSenders is how many duplicates sendUntilRefused has in flight at
// once: the declared limit counts duplicates within a window, so they are
// sent fast enough to fall in one window as the target runs it.
const rateSenders = 8

// rateCap bounds the duplicates one scenario sends; a declared limit above
// it is not judged.
const rateCap = 5000

// sendUntilRefused sends the declared max duplicates and 50 more, rateSenders
// at a time, until one is refused with a 4xx. The text sets no threshold:
// without a declared duplicate_rate_limit there is nothing to judge.
func (w *idsWorld) sendUntilRefused(ctx context.Context, alias string) error {
	rl := w.reg.DuplicateRateLimit
	if rl == nil || rl.Max <= 0 {
		return features.NotApplicable("the registry declares no duplicate_rate_limit: the text sets no threshold to judge")
	}
	if rl.Max+50 > rateCap {
		return features.NotApplicable(fmt.Sprintf("the declared limit %d is beyond the %d duplicates a scenario sends", rl.Max, rateCap))
	}
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	n := rl.Max + 50
	start := time.Now()
	var mu sync.Mutex
	var firstErr error
	sent := 0
	next := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if sent >= n || w.refused != nil || firstErr != nil {
			return false
		}
		sent++
		return true
	}
	var wg sync.WaitGroup
	for range rateSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next() {
				r, err := w.post(ctx, c.env)
				mu.Lock()
				switch {
				case err != nil:
					if firstErr == nil {
						firstErr = err
					}
				default:
					w.last = r
					if r.Status >= 400 && r.Status < 500 && w.refused == nil {
						w.refused = r
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	w.rateElapsed = time.Since(start)
	return nil
}

// --- answers --------------------------------------------------------------

// sameDoc is the outcome reading of §IX.A: the same status and the same
// outcome document (as JSON values).
func sameDoc(a, b *client.Response) (bool, string) {
	if a == nil || b == nil {
		return false, "no answer"
	}
	if a.Status != b.Status {
		return false, fmt.Sprintf("status %d, the first was %d", b.Status, a.Status)
	}
	ca, err1 := Canonical(a.Body)
	cb, err2 := Canonical(b.Body)
	if err1 != nil || err2 != nil || !bytes.Equal(ca, cb) {
		return false, "another outcome document: " + trimBody(b.Body)
	}
	return true, ""
}

// sameRef is the reference reading of §IX.A: the same outcome_ref and the
// same original command_id.
func sameRef(a, b *client.Response) (bool, string) {
	if a == nil || b == nil {
		return false, "no answer"
	}
	oa, ob := outcomeOf(a), outcomeOf(b)
	switch {
	case oa.OutcomeRef == nil:
		return false, "the first answer has no outcome_ref"
	case ob.OutcomeRef == nil || *ob.OutcomeRef != *oa.OutcomeRef:
		return false, fmt.Sprintf("outcome_ref %s, the first was %s", strOrNull(ob.OutcomeRef), *oa.OutcomeRef)
	case ob.CommandID != oa.CommandID:
		return false, fmt.Sprintf("command_id %q, the first was %q", ob.CommandID, oa.CommandID)
	}
	return true, ""
}

// lastRepeats checks that the last answer replays the reference answer
// under either reading of §IX.A (the readings are judged apart where the
// feature names them).
func (w *idsWorld) lastRepeats(alias string, executed bool) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	ref := c.first
	if executed {
		ref = c.executed
	}
	if ref == nil {
		return fmt.Errorf("%w: no reference answer for %s", features.ErrRunnerBug, alias)
	}
	ok1, why1 := sameDoc(ref, w.last)
	ok2, why2 := sameRef(ref, w.last)
	if ok1 || ok2 {
		return nil
	}
	return features.Mismatch("a replay: the first outcome again (the same status and document, or the same outcome_ref and command_id)",
		why1+"; "+why2)
}

func (w *idsWorld) sameDocument(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if ok, why := sameDoc(c.first, w.last); !ok {
		return features.Mismatch("the first answer's status and outcome document", why)
	}
	return nil
}

func (w *idsWorld) sameReference(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if ok, why := sameRef(c.first, w.last); !ok {
		return features.Mismatch("the first answer's outcome_ref and command_id", why)
	}
	return nil
}

func (w *idsWorld) sameBytes(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if c.first == nil || w.last == nil || c.first.Status != w.last.Status || !bytes.Equal(c.first.Body, w.last.Body) {
		return features.Mismatch("the first answer byte for byte: "+features.Describe(c.first), features.Describe(w.last))
	}
	return nil
}

// sameAsPrevious: the last two answers to alias (two replays) are the
// same bytes: §IX.C's "stable across replays", which holds under either
// reading of replay-form (a reference replay is not the first answer).
func (w *idsWorld) sameAsPrevious(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	n := len(c.answers)
	if n < 3 {
		return fmt.Errorf("%w: %q has %d answers, not two replays", features.ErrRunnerBug, alias, n)
	}
	a, b := c.answers[n-2], c.answers[n-1]
	if a == nil || b == nil || a.Status != b.Status || !bytes.Equal(a.Body, b.Body) {
		return features.Mismatch("the replay before it byte for byte: "+features.Describe(a), features.Describe(b))
	}
	return nil
}

func (w *idsWorld) keyDerived(ctx context.Context) error {
	c, err := w.cmd(w.lastAlias)
	if err != nil {
		return err
	}
	want, err := c.env.Key()
	if err != nil {
		return err
	}
	if err := serverErred(w.last); err != nil {
		return err
	}
	got := outcomeOf(w.last).IdempotencyKey
	if got != want {
		jcsText, _ := c.env.KeyInputsJCS()
		return features.Mismatch("idempotency_key "+want+" = SHA-256 of "+string(jcsText), fmt.Sprintf("%q", got))
	}
	return nil
}

func (w *idsWorld) keyLength() error {
	if err := serverErred(w.last); err != nil {
		return err
	}
	k := outcomeOf(w.last).IdempotencyKey
	if len(k) < 64 || strings.Trim(strings.ToLower(k), "0123456789abcdef") != "" {
		return features.Mismatch("a hex digest of at least 64 digits (256 bits)", fmt.Sprintf("%q", k))
	}
	return nil
}

// sameKey: the redelivery was derived the key of the first delivery (every
// answer carries idempotency_key: outcome, processing and 409 alike). The
// key rules judge the key; what the target does with a duplicate is §IX's.
func (w *idsWorld) sameKey(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if err := serverErred(c.first); err != nil {
		return err
	}
	if err := serverErred(w.last); err != nil {
		return err
	}
	want := outcomeOf(c.first).IdempotencyKey
	if want == "" {
		return features.Mismatch(fmt.Sprintf("an idempotency_key in the first answer to %q", alias), features.Describe(c.first))
	}
	if got := outcomeOf(w.last).IdempotencyKey; got != want {
		return features.Mismatch("idempotency_key "+want+", the key of the first delivery", fmt.Sprintf("%q in %s", got, features.Describe(w.last)))
	}
	return nil
}

// noEffectSinceFirst: the deliveries after the first added no effect at
// the sink (an effect of the first delivery is no re-execution).
func (w *idsWorld) noEffectSinceFirst(ctx context.Context, alias string) error {
	if w.env.Sink == nil {
		return features.NotApplicable("the run has no effect sink (declare effect_sink in the target file)")
	}
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if err := w.countable(c); err != nil {
		return err
	}
	if !c.dupSet {
		return fmt.Errorf("%w: %q was never sent again", features.ErrRunnerBug, alias)
	}
	key := w.sinkKey(c)
	if n := w.waitEffects(ctx, key, c.dupBase) - c.dupBase; n != 0 {
		return features.Mismatch(fmt.Sprintf("no effect at the sink for key %s after the first delivery's %d", key, c.dupBase), w.sinkReport(key))
	}
	return nil
}

func (w *idsWorld) notAnswerTo(b, a string) error {
	cb, err := w.cmd(b)
	if err != nil {
		return err
	}
	ca, err := w.cmd(a)
	if err != nil {
		return err
	}
	if err := serverErred(cb.first); err != nil {
		return err
	}
	ob, oa := outcomeOf(cb.first), outcomeOf(ca.first)
	switch {
	case cb.first == nil:
		return features.Mismatch("an answer", "none")
	case cb.first.Status < 200 || cb.first.Status > 299:
		return features.Mismatch("a 2xx: "+cb.entry.Command+" executed as a command of its own", features.Describe(cb.first))
	case ob.CommandID == oa.CommandID || (ob.OutcomeRef != nil && oa.OutcomeRef != nil && *ob.OutcomeRef == *oa.OutcomeRef):
		return features.Mismatch("another command: its own command_id and outcome", "the answer to the first command: "+trimBody(cb.first.Body))
	}
	return nil
}

// serverErred is what a check that reads whether a delivery executed
// returns for a 5xx: the request erred, so whether it ran is not decided
// by its answer (the effect sink's count, judged by its own assertion,
// decides that). The check is BLOCKED, never passed nor failed on it.
func serverErred(r *client.Response) error {
	if r == nil || r.Status < 500 {
		return nil
	}
	return &features.BlockedError{Blocker: "the target's 5xx answer",
		Reason: fmt.Sprintf("%s answered %s: a server error, so this check's answer is undecided (the effect sink's count is judged apart)",
			requestOf(r), features.Describe(r))}
}

// requestOf names the request r answers ("POST /commands").
func requestOf(r *client.Response) string {
	if r == nil || r.Exchange.Method == "" {
		return "the request"
	}
	return r.Exchange.Method + " " + r.Exchange.Path
}

// noNewExecution: the last answer is a refusal, or a replay of the first
// answer (its original command_id), never an execution of its own.
func (w *idsWorld) noNewExecution(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if w.last == nil {
		return features.Mismatch("an answer", "none")
	}
	if err := serverErred(w.last); err != nil {
		return err
	}
	if w.last.Status >= 400 && w.last.Status < 500 {
		return nil
	}
	ref := c.executed
	if ref == nil {
		ref = c.first
	}
	if !freshExecution(ref, w.last) {
		return nil
	}
	return features.Mismatch("a refusal (4xx) or a replay of the original outcome (command_id "+outcomeOf(ref).CommandID+", outcome_ref "+strOrNull(outcomeOf(ref).OutcomeRef)+")", features.Describe(w.last))
}

// freshExecution reports whether last is an execution of its own rather
// than a replay of ref: a 2xx outcome whose command_id and outcome_ref are
// both not the original's (where the original has no outcome_ref, whose
// command_id is not). A replay with one of them wrong (the delivery's
// command_id and the original outcome_ref, or the original command_id and
// a fresh outcome_ref) replayed the outcome with a wrong identifier:
// IDS-IX.A-same-outcome judges that, and the sink's count whether anything
// executed again.
func freshExecution(ref, last *client.Response) bool {
	if last == nil || last.Status < 200 || last.Status > 299 {
		return false
	}
	o, or := outcomeOf(last), outcomeOf(ref)
	if o.Status == StatusProcessing || o.Status == StatusConfirm {
		return false
	}
	newRef := or.OutcomeRef == nil || o.OutcomeRef == nil || *o.OutcomeRef != *or.OutcomeRef
	return newRef && o.CommandID != or.CommandID
}

func (w *idsWorld) notExecuted(alias string) error {
	if w.last == nil {
		return features.Mismatch("an answer", "none")
	}
	if err := serverErred(w.last); err != nil {
		return err
	}
	if w.last.Status >= 400 && w.last.Status < 500 {
		return nil
	}
	// The text gives no status for "not yet confirmed": a 2xx that says so
	// (and the sink's count, judged apart) is no execution either.
	if w.last.Status < 300 && outcomeOf(w.last).Status == StatusConfirm {
		return nil
	}
	return features.Mismatch("a refusal (4xx) or status confirmation_required: the command must not run", features.Describe(w.last))
}

func (w *idsWorld) refusal() error { return w.notExecuted("") }

// stormFollow is what followStorm read for a storm none of whose answers
// was an outcome: the status URLs it followed, what each last reported,
// and the bound it read them within.
type stormFollow struct {
	urls     []string
	statuses []CommandStatus    // the last status read at each URL
	lasts    []*client.Response // the last answer read at each URL
	terminal []bool
	reads    int
	elapsed  time.Duration
	bound    time.Duration
	named    bool // the URLs are those the processing answers named (else the binding's status route)
}

// stormStatusURLs caps the distinct status URLs followStorm follows.
const stormStatusURLs = 5

// followStorm: when no answer of alias's storm is an outcome (the binding
// lets every one be 202 processing, and past a declared
// duplicate_rate_limit 429), the outcome is at the status URL the
// processing answers name (IDS §IX.B "how to query"): it reads each
// (at most stormStatusURLs) until it reports a terminal status, within the
// scenario budget, and records what it read for stormConverged to judge.
// With no URL named, it reads the binding's status route of the command.
func (w *idsWorld) followStorm(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	var urls []string
	for _, r := range w.storm[alias] {
		if isOutcome(r) {
			return nil // the answers show the outcome
		}
		if o := outcomeOf(r); o.Status == StatusProcessing && o.StatusURL != "" && !slices.Contains(urls, o.StatusURL) && len(urls) < stormStatusURLs {
			urls = append(urls, o.StatusURL)
		}
	}
	f := &stormFollow{urls: urls, named: len(urls) > 0, bound: w.env.Budget}
	if !f.named {
		f.urls = []string{PathCommands + "/" + url.PathEscape(c.env.CommandID) + "?" + url.Values{"tenant_id": {c.env.TenantID}}.Encode()}
	}
	w.followed[alias] = f
	start := time.Now()
	deadline := start.Add(f.bound)
	for _, u := range f.urls {
		st, last, reads, terminal, err := w.readUntilTerminal(ctx, u, deadline)
		f.reads += reads
		f.statuses, f.lasts, f.terminal = append(f.statuses, st), append(f.lasts, last), append(f.terminal, terminal)
		if err != nil {
			return err
		}
	}
	f.elapsed = time.Since(start)
	return nil
}

// stormTally says what a storm was answered, by status (and body status).
func (w *idsWorld) stormTally(answers []*client.Response) string {
	counts := map[string]int{}
	var order []string
	for _, r := range answers {
		k := "no answer"
		if r != nil {
			k = fmt.Sprint(r.Status)
			if st := outcomeOf(r).Status; st != "" {
				k += " " + st
			} else if code := outcomeOf(r).Code; code != "" {
				k += " " + code
			}
		}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	parts := make([]string, 0, len(order))
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d × %s", counts[k], k))
	}
	s := fmt.Sprintf("%d answers: %s", len(answers), strings.Join(parts, ", "))
	if rl := w.reg.DuplicateRateLimit; rl != nil && rl.Max > 0 {
		s += fmt.Sprintf(" (the registry declares a duplicate_rate_limit of %d per %g s)", rl.Max, rl.WindowSeconds)
	}
	return s
}

// stormConverged judges §XIII's "Concurrent duplicates converge to one
// execution" (and §VIII.A's atomicity) on the storm's answers: every
// answer that is an outcome is the same outcome. Answers that are not
// outcomes are answers the binding allows a duplicate (202 processing, 429
// under the declared rate limit) and say nothing against convergence; when
// none is an outcome, the outcome is the one the status URL reported
// (followStorm), which must be terminal within the bound.
func (w *idsWorld) stormConverged(alias string) error {
	var ref *client.Response
	outcomes := 0
	answers := w.storm[alias]
	for _, r := range answers {
		if !isOutcome(r) {
			continue
		}
		outcomes++
		if ref == nil {
			ref = r
			continue
		}
		ok1, why1 := sameDoc(ref, r)
		ok2, why2 := sameRef(ref, r)
		if !ok1 && !ok2 {
			return features.Mismatch("one outcome for every answer of the storm", why1+"; "+why2)
		}
	}
	tally := w.stormTally(answers)
	if outcomes > 0 {
		return features.Observed("one outcome among the storm's answers", fmt.Sprintf("%d outcome(s), all the same; %s", outcomes, tally))
	}
	f := w.followed[alias]
	if f == nil {
		return fmt.Errorf("%w: the storm of %q had no outcome and its status URL was not followed", features.ErrRunnerBug, alias)
	}
	where := "the status URL the processing answers name"
	if !f.named {
		where = "the binding's status route (no processing answer named a status URL)"
	}
	expected := fmt.Sprintf("an outcome among the storm's answers, or a terminal status (executed, rejected, failed or compensated) at %s within %s (%s)",
		where, f.bound, statusPolling)
	var refs []string
	for i, u := range f.urls {
		if !f.terminal[i] {
			return features.Mismatch(expected, fmt.Sprintf("no outcome among the %s; GET %s read %d time(s) in %s, the last: %s",
				tally, u, f.reads, f.elapsed.Round(time.Millisecond), features.Describe(f.lasts[i])))
		}
		if r := f.statuses[i].OutcomeRef; r != nil && !slices.Contains(refs, *r) {
			refs = append(refs, *r)
		}
	}
	if len(refs) > 1 {
		return features.Mismatch("one outcome at every status URL the storm's answers name", fmt.Sprintf("outcome_refs %s at %s", strings.Join(refs, ", "), strings.Join(f.urls, ", ")))
	}
	st := f.statuses[0]
	return features.Observed(expected, fmt.Sprintf("no outcome among the %s; GET %s reported status %s, outcome_ref %s after %d read(s) in %s",
		tally, strings.Join(f.urls, ", "), st.Status, strOrNull(st.OutcomeRef), f.reads, f.elapsed.Round(time.Millisecond)))
}

func (w *idsWorld) replayOrNew() error {
	if err := serverErred(w.last); err != nil {
		return err
	}
	if w.last == nil || w.last.Status < 200 || w.last.Status > 299 {
		return features.Mismatch("a replay or a new execution (2xx)", features.Describe(w.last))
	}
	w.env.Logger.Info("window passed", "answer", trimBody(w.last.Body))
	return nil
}

func (w *idsWorld) noPrivate(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if w.last == nil {
		return features.Mismatch("an answer", "none")
	}
	if err := serverErred(w.last); err != nil {
		return err
	}
	if w.last.Status >= 400 {
		return nil // a refusal shows nothing
	}
	priv := outcomeOf(c.first).Result["private"]
	for _, v := range leaves(priv) {
		if len(v) >= 4 && bytes.Contains(w.last.Body, []byte(v)) {
			return features.Mismatch("none of the original actor's private values", fmt.Sprintf("%q appears in %s", v, trimBody(w.last.Body)))
		}
	}
	if freshExecution(c.first, w.last) {
		// Executed afresh (IDS-VII.E and IDS-IX.A judge that): its private
		// details are its own, and nothing of the original's leaked.
		return features.NotApplicable(fmt.Sprintf("the resend was executed afresh (outcome_ref %s, not the original's %s), not replayed: no replay to judge, and none of the original actor's private values appears in it",
			strOrNull(outcomeOf(w.last).OutcomeRef), strOrNull(outcomeOf(c.first).OutcomeRef)))
	}
	if o := outcomeOf(w.last); o.Result != nil && o.Result["private"] != nil {
		return features.Mismatch("no result.private in a replay to another actor", trimBody(w.last.Body))
	}
	return nil
}

// leaves lists the string values inside v.
func leaves(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case map[string]any:
		var out []string
		for _, x := range t {
			out = append(out, leaves(x)...)
		}
		return out
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, leaves(x)...)
		}
		return out
	}
	return nil
}

func (w *idsWorld) wasRefused(string) error {
	if w.refused != nil {
		return nil
	}
	rl := w.reg.DuplicateRateLimit
	if rl == nil {
		return features.NotApplicable("the registry declares no duplicate_rate_limit")
	}
	if rl.WindowSeconds > 0 {
		if win := w.env.Scaled(time.Duration(rl.WindowSeconds * float64(time.Second))); w.rateElapsed > win {
			return features.NotApplicable(fmt.Sprintf("the %d duplicates took %s, longer than the declared window as the target runs it (%s): the limit was never exceeded within one window",
				rl.Max+50, w.rateElapsed.Round(time.Millisecond), win))
		}
	}
	return features.Mismatch(fmt.Sprintf("a 4xx for some duplicate past the declared limit %d", rl.Max), "every duplicate answered: "+features.Describe(w.last))
}

// --- the effect sink ------------------------------------------------------

// settle is how long a count of effects waits for a late one (an outbox
// dispatch, a second parallel execution) once the expected ones are in.
const settle = 250 * time.Millisecond

// effects checks lo ≤ effects ≤ hi at the sink for alias's key. It waits
// (within the budget) for at least lo effects and for every reply the sink
// lost to be resolved, then a short settle for a late duplicate.
func (w *idsWorld) effects(ctx context.Context, alias string, lo, hi int) error {
	if w.env.Sink == nil {
		return features.NotApplicable("the run has no effect sink (declare effect_sink in the target file)")
	}
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if err := w.countable(c); err != nil {
		return err
	}
	key := w.sinkKey(c)
	n := w.waitEffects(ctx, key, c.baseline+lo) - c.baseline
	what := "effect(s)"
	if c.baseline > 0 {
		what = fmt.Sprintf("new effect(s) (beyond the %d the key had before %s was sent)", c.baseline, alias)
	}
	if n > hi {
		return features.Mismatch(fmt.Sprintf("at most %d %s at the sink for key %s", hi, what, key), w.sinkReport(key))
	}
	if n < lo {
		return features.Mismatch(fmt.Sprintf("%d %s at the sink for key %s within %s", lo, what, key, w.env.Budget), w.sinkReport(key))
	}
	return nil
}

// countable says whether c's effects can be counted at the sink: its
// command declares an external effect (RegistryEntry.HasEffects); else the
// assertion is N/A, and the scenario's other assertions judge the rule by
// the answers.
func (w *idsWorld) countable(c *idsCommand) error {
	if c.entry.HasEffects() {
		return nil
	}
	return features.NotApplicable(fmt.Sprintf("%s (%s) declares no external effect (registry \"effects\" false, or absent for I0-I2: docs/ids-binding.md): its executions cannot be counted at the sink; this scenario's other assertions judge the rule by the answers", c.entry.Command, c.entry.Class))
}

// asManyEffects checks that b, a command of its own, made as many effects
// at the sink as a: the binding does not say a command has an external
// effect at all, only that every one it has goes to the sink, so b is
// held to what a, the same command with one input changed, did.
func (w *idsWorld) asManyEffects(ctx context.Context, b, a string) error {
	if w.env.Sink == nil {
		return features.NotApplicable("the run has no effect sink (declare effect_sink in the target file)")
	}
	ca, err := w.cmd(a)
	if err != nil {
		return err
	}
	cb, err := w.cmd(b)
	if err != nil {
		return err
	}
	if err := w.countable(ca); err != nil {
		return err
	}
	ka, kb := ca.env.MustKey(), cb.env.MustKey()
	na := w.waitEffects(ctx, ka, 0)
	nb := w.waitEffects(ctx, kb, na)
	if nb != na {
		return features.Mismatch(fmt.Sprintf("%d effect(s) at the sink for key %s, as many as %q made", na, kb, a), w.sinkReport(kb))
	}
	return nil
}

// sinkKey is the key alias's effects are filed under at the sink: the one
// the target reported in its first answer (it posts its own key to the
// sink), else the binding's. Counting under the binding's key when the
// target uses another would see no effect at all: a re-execution would
// pass, and a missing key derivation would fail rules about effects.
func (w *idsWorld) sinkKey(c *idsCommand) string {
	if c.env.IdempotencyKey != "" {
		return c.env.IdempotencyKey
	}
	if k := outcomeOf(c.first).IdempotencyKey; k != "" {
		return k
	}
	return c.env.MustKey()
}

func (w *idsWorld) waitEffects(ctx context.Context, key string, lo int) int {
	s := w.env.Sink
	deadline := time.Now().Add(w.env.Budget)
	for time.Now().Before(deadline) && ctx.Err() == nil && (s.Effects(key) < lo || !s.Resolved(key)) {
		features.Sleep(ctx, 20*time.Millisecond)
	}
	features.Sleep(ctx, settle)
	return s.Effects(key)
}

func (w *idsWorld) sinkReport(key string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d effect(s)", w.env.Sink.Effects(key))
	for _, c := range w.env.Sink.AllCalls() {
		if c.Key != key {
			continue
		}
		fmt.Fprintf(&b, "; call %d (command_id %s): effect %s new=%v lost=%v", c.Seq, c.CommandID, c.EffectID, c.New, c.Lost)
	}
	return b.String()
}

// --- in progress ----------------------------------------------------------

// sendHeld sends alias while the sink holds its effect, and waits until
// the effect call is at the sink. A candidate whose first delivery is
// answered before any call reaches the sink does not execute its effect
// while the command is open; the next candidate is tried.
func (w *idsWorld) sendHeld(ctx context.Context, alias string) error {
	for i, e := range w.candidates {
		c := &idsCommand{entry: e, env: w.fresh(e, 0)}
		w.cmds[alias] = c
		key := c.env.MustKey()
		release := w.env.Sink.Hold(key)
		w.releases = append(w.releases, release)
		c.held = make(chan *client.Response, 1)
		go func(e Envelope) {
			r, _ := w.post(context.WithoutCancel(ctx), e)
			c.held <- r
		}(c.env)
		wctx, cancel := context.WithTimeout(ctx, w.env.Budget)
		called := make(chan error, 1)
		go func() { called <- w.env.Sink.WaitCalls(wctx, key, 1) }()
		select {
		case err := <-called:
			cancel()
			if err == nil {
				return nil
			}
			return features.Mismatch("the effect call of "+e.Command+" at the sink within "+w.env.Budget.String(), "none")
		case r := <-c.held:
			cancel()
			release()
			c.first = r
			w.env.Logger.Info("candidate answered before its effect", "command", e.Command, "index", i)
		}
	}
	return features.NotApplicable("no command of the registry calls the sink while its first delivery is open")
}

// sendWhileHeld sends a duplicate while the first delivery is held at the
// sink. It waits for the duplicate's answer, or for a second effect call
// for the key (a parallel execution, held in turn).
func (w *idsWorld) sendWhileHeld(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	key := c.env.MustKey()
	w.pending = make(chan *client.Response, 1)
	go func(e Envelope) {
		r, _ := w.post(context.WithoutCancel(ctx), e)
		w.pending <- r
	}(c.env)
	wctx, cancel := context.WithTimeout(ctx, w.requestTimeout())
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- w.env.Sink.WaitCalls(wctx, key, 2) }()
	select {
	case r := <-w.pending:
		w.pending = nil
		w.last = r
		if r == nil {
			return features.Mismatch("an answer to the duplicate", "no answer")
		}
	case err := <-second:
		if err != nil {
			return features.Mismatch("an answer to the duplicate", "none within the request timeout")
		}
		w.last = nil // the duplicate is executing: it has no answer yet
	}
	w.heldCalls = w.env.Sink.Arrived(key)
	return nil
}

func (w *idsWorld) oneCallWhileHeld(string) error {
	if w.heldCalls != 1 {
		return features.Mismatch("1 effect call at the sink while the first delivery was open", fmt.Sprintf("%d: the duplicate executed too", w.heldCalls))
	}
	return nil
}

func (w *idsWorld) processing() error {
	if w.last == nil {
		return features.Mismatch("an answer saying processing", "no answer: the duplicate was executing (its effect call reached the sink)")
	}
	if o := outcomeOf(w.last); o.Status != StatusProcessing {
		return features.Mismatch(`status "processing"`, features.Describe(w.last))
	}
	return nil
}

func (w *idsWorld) correlated(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if w.last == nil {
		return features.Mismatch("an answer", "none")
	}
	o := outcomeOf(w.last)
	if key := w.sinkKey(c); o.CommandID != c.env.CommandID || o.IdempotencyKey != key {
		return features.Mismatch(fmt.Sprintf("command_id %s and idempotency_key %s", c.env.CommandID, key),
			fmt.Sprintf("command_id %q, idempotency_key %q", o.CommandID, o.IdempotencyKey))
	}
	return nil
}

// release lets the held effect go and collects the answers held with it.
func (w *idsWorld) release(ctx context.Context, alias string) error {
	w.releaseAll()
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	timeout := time.After(w.requestTimeout())
	if c.held != nil {
		select {
		case r := <-c.held:
			c.first = r
		case <-timeout:
		}
	}
	if w.pending != nil {
		select {
		case r := <-w.pending:
			if w.last == nil {
				w.last = r
			}
		case <-timeout:
		}
	}
	return nil
}

func (w *idsWorld) statusURLReports(ctx context.Context, alias string) error {
	if w.last == nil {
		return features.Mismatch("an answer with a status URL", "none")
	}
	u := outcomeOf(w.last).StatusURL
	if u == "" {
		return features.Mismatch("a status_url in the processing answer", trimBody(w.last.Body))
	}
	return w.pollStatus(ctx, u, func(st CommandStatus) error {
		if st.Status != StatusExecuted {
			return features.Mismatch("status executed", st.Status)
		}
		return nil
	})
}

// A status URL that reports the command in progress is read again after
// statusPollFirst, then after twice as long each time, at most
// statusPollMax: bounded polling that does not flood the target (nor the
// evidence) however long the budget.
const (
	statusPollFirst = 50 * time.Millisecond
	statusPollMax   = 500 * time.Millisecond
)

// statusPolling says how a status URL is read, for the evidence.
var statusPolling = fmt.Sprintf("read after %s, then twice as long each time up to %s", statusPollFirst, statusPollMax)

// pollStatus reads a status URL until it reports a terminal status (within
// the budget); check, when given, judges the terminal status.
func (w *idsWorld) pollStatus(ctx context.Context, statusURL string, check func(CommandStatus) error) error {
	st, last, _, terminal, err := w.readUntilTerminal(ctx, statusURL, time.Now().Add(w.env.Budget))
	if err != nil {
		return err
	}
	if !terminal {
		if last == nil {
			return features.Mismatch("a status URL", fmt.Sprintf("%q", statusURL))
		}
		return features.Mismatch("a terminal status at "+statusURL+" within "+w.env.Budget.String(), features.Describe(last))
	}
	if check != nil {
		return check(st)
	}
	return nil
}

// terminalStatus says whether a status of the record (IDS §VIII.B) is
// terminal: every one the text names but in_progress (a target that says
// "processing" there is read again).
func terminalStatus(s string) bool {
	return slices.Contains([]string{StatusExecuted, StatusRejected, StatusFailed, StatusCompensated}, s)
}

// readUntilTerminal reads statusURL (its path and query, on the target),
// as statusPolling says, until it answers 200 with a terminal status, or
// deadline passes (it reads at least once). It returns the last status
// read, the last answer, how many reads it made and whether the status is
// terminal; err only when the target did not answer. A URL with no path
// is read never (last nil).
func (w *idsWorld) readUntilTerminal(ctx context.Context, statusURL string, deadline time.Time) (st CommandStatus, last *client.Response, reads int, terminal bool, err error) {
	p, err := url.Parse(statusURL)
	if err != nil || p.Path == "" {
		return st, nil, 0, false, nil
	}
	path := p.Path
	if p.RawQuery != "" {
		path += "?" + p.RawQuery
	}
	c, err := w.client()
	if err != nil {
		return st, nil, 0, false, err
	}
	wait := statusPollFirst
	for {
		r, err := c.Do(ctx, client.Request{Method: http.MethodGet, Path: path})
		if err != nil {
			return st, last, reads, false, err
		}
		reads++
		last = r
		st = CommandStatus{}
		if r.Status == http.StatusOK && json.Unmarshal(r.Body, &st) == nil && terminalStatus(st.Status) {
			return st, last, reads, true, nil
		}
		if !time.Now().Before(deadline) {
			return st, last, reads, false, nil
		}
		features.Sleep(ctx, min(wait, time.Until(deadline)+time.Millisecond))
		wait = min(2*wait, statusPollMax)
	}
}

// --- collision and evidence -----------------------------------------------

func (w *idsWorld) conflictAnswer(string) error {
	if w.last == nil || w.last.Status < 400 || w.last.Status > 499 {
		return features.Mismatch("a 4xx rejection", features.Describe(w.last))
	}
	o := outcomeOf(w.last)
	if o.Event != EventRejected || o.Reason != ReasonConflict {
		return features.Mismatch(`event "execution.rejected", reason "idempotency_conflict"`, trimBody(w.last.Body))
	}
	return nil
}

func (w *idsWorld) readEvidence(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	cl, err := w.client()
	if err != nil {
		return err
	}
	// The target's own key (the one its answers carry): whether it is the
	// binding's is the key rules' business (IDS-VII.D-key-function).
	q := url.Values{"tenant_id": {c.env.TenantID}, "idempotency_key": {w.sinkKey(c)}}
	r, err := cl.Do(ctx, client.Request{Method: http.MethodGet, Path: PathEvidence + "?" + q.Encode()})
	if err != nil {
		return err
	}
	var body struct {
		Evidence []Evidence `json:"evidence"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &body) != nil {
		return features.Mismatch("200 with an evidence list", features.Describe(r))
	}
	w.evidence[alias] = body.Evidence
	w.last = r
	return nil
}

func (w *idsWorld) conflictFingerprints(alias, a, b string) error {
	ca, err := w.cmd(a)
	if err != nil {
		return err
	}
	cb, err := w.cmd(b)
	if err != nil {
		return err
	}
	fa, _ := ca.env.Fingerprint()
	fb, _ := cb.env.Fingerprint()
	for _, ev := range w.evidence[alias] {
		if ev.Decision != DecisionConflicted {
			continue
		}
		if ev.Fingerprints == nil || ev.Fingerprints.Stored == "" || ev.Fingerprints.Received == "" || ev.Fingerprints.Stored == ev.Fingerprints.Received {
			return features.Mismatch("two different envelope fingerprints in the conflict's evidence (the binding's: stored "+fa+", received "+fb+")",
				fmt.Sprintf("%+v", ev.Fingerprints))
		}
		return nil
	}
	return features.Mismatch("an evidence item with decision conflict_rejected", fmt.Sprintf("%d items, none", len(w.evidence[alias])))
}

func (w *idsWorld) conflictRecorded(alias string) error {
	for _, ev := range w.evidence[alias] {
		if ev.Decision == DecisionConflicted {
			return nil
		}
	}
	return features.Mismatch("an evidence item with decision conflict_rejected", fmt.Sprintf("%d items, none", len(w.evidence[alias])))
}

// evidenceDecisions: one item per delivery, first_seen then
// duplicate_replayed for each later one. The first delivery may have been
// answered processing (the binding's 202), and then the harness resent
// the envelope once it was terminal: that resend is a delivery too.
func (w *idsWorld) evidenceDecisions(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	want := []string{DecisionFirstSeen}
	for range len(c.answers) - 1 {
		want = append(want, DecisionReplayed)
	}
	var got []string
	for _, ev := range w.evidence[alias] {
		got = append(got, ev.Decision)
	}
	if !slices.Equal(got, want) {
		return features.Mismatch(fmt.Sprintf("decisions %v, one per delivery", want), fmt.Sprint(got))
	}
	return nil
}

// evidenceExecuted: executed true for the first delivery, false for every
// later one.
func (w *idsWorld) evidenceExecuted(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	ev := w.evidence[alias]
	ok := len(ev) == len(c.answers) && len(ev) >= 2
	for i, e := range ev {
		ok = ok && e.Executed != nil && *e.Executed == (i == 0)
	}
	if !ok {
		return features.Mismatch(fmt.Sprintf("%d items, executed true for the first delivery and false for the later ones", len(c.answers)), evidenceSummary(ev))
	}
	return nil
}

func (w *idsWorld) evidenceIDs(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	ev := w.evidence[alias]
	if len(ev) == 0 {
		return features.Mismatch("evidence items", "none")
	}
	for _, e := range ev {
		if e.OriginalCommandID != c.env.CommandID || e.IdempotencyKey != w.sinkKey(c) {
			return features.Mismatch(fmt.Sprintf("original_command_id %s and idempotency_key %s in every item", c.env.CommandID, w.sinkKey(c)), evidenceSummary(ev))
		}
	}
	return nil
}

func (w *idsWorld) evidenceOutcomeRef(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	ref := outcomeOf(c.first).OutcomeRef
	if ref == nil {
		return features.Mismatch("an outcome_ref in the first answer", trimBody(c.first.Body))
	}
	ev := w.evidence[alias]
	if len(ev) == 0 {
		return features.Mismatch("evidence items", "none")
	}
	for i, e := range ev {
		// "null while in progress": an item of a delivery answered
		// processing may carry no outcome_ref.
		if e.OutcomeRef == nil && i < len(c.answers) && outcomeOf(c.answers[i]).Status == StatusProcessing {
			continue
		}
		if e.OutcomeRef == nil || *e.OutcomeRef != *ref {
			return features.Mismatch("outcome_ref "+*ref+" in every item (null allowed for a delivery answered processing)", evidenceSummary(ev))
		}
	}
	return nil
}

func evidenceSummary(ev []Evidence) string {
	var parts []string
	for _, e := range ev {
		ex := "null"
		if e.Executed != nil {
			ex = fmt.Sprint(*e.Executed)
		}
		parts = append(parts, fmt.Sprintf("{decision %s executed %s command_id %s original %s key %s outcome_ref %s}",
			e.Decision, ex, e.CommandID, e.OriginalCommandID, e.IdempotencyKey, strOrNull(e.OutcomeRef)))
	}
	return fmt.Sprintf("%d items: %s", len(ev), strings.Join(parts, ", "))
}

// --- the record and the window --------------------------------------------

func (w *idsWorld) readStatus(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	cl, err := w.client()
	if err != nil {
		return err
	}
	r, err := cl.Do(ctx, client.Request{Method: http.MethodGet, Path: PathCommands + "/" + url.PathEscape(c.env.CommandID)})
	if err != nil {
		return err
	}
	var st CommandStatus
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &st) != nil {
		return features.Mismatch("200 with the command's record", features.Describe(r))
	}
	w.status[alias] = st
	w.last = r
	return nil
}

func (w *idsWorld) statusFields(alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	st := w.status[alias]
	var members map[string]json.RawMessage
	json.Unmarshal(w.last.Body, &members)
	var missing []string
	for _, m := range []string{"idempotency_key", "command_id", "status", "outcome_ref", "created_at", "updated_at", "ttl_expires_at"} {
		if _, ok := members[m]; !ok {
			missing = append(missing, m)
		}
	}
	switch {
	case len(missing) > 0:
		return features.Mismatch("every stored field of §VIII.B", "missing: "+strings.Join(missing, ", "))
	case st.IdempotencyKey != w.sinkKey(c) || st.CommandID != c.env.CommandID:
		return features.Mismatch("the key and the original command_id of "+alias, fmt.Sprintf("key %q, command_id %q", st.IdempotencyKey, st.CommandID))
	case !slices.Contains([]string{StatusInProgress, StatusExecuted, StatusFailed, StatusRejected, StatusCompensated}, st.Status):
		return features.Mismatch("status in_progress, executed, failed, rejected or compensated", st.Status)
	case st.OutcomeRef == nil || st.CreatedAt == "" || st.UpdatedAt == "":
		return features.Mismatch("an outcome_ref, created_at and updated_at", trimBody(w.last.Body))
	case st.TTLExpiresAt == nil && c.entry.TTLSeconds != nil:
		return features.Mismatch("a ttl_expires_at (the command's window is "+fmt.Sprint(*c.entry.TTLSeconds)+" s)", "null")
	}
	return nil
}

func (w *idsWorld) waitWindow(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if c.entry.TTLSeconds == nil {
		return features.NotApplicable(c.entry.Command + "'s window never ends")
	}
	d := w.window(c.entry) + w.window(c.entry)/10 + 100*time.Millisecond
	if d > w.env.Budget {
		return features.NotApplicable(fmt.Sprintf("%s's window is %s as the target runs it, beyond the budget %s", c.entry.Command, w.window(c.entry), w.env.Budget))
	}
	features.Sleep(ctx, d)
	return ctx.Err()
}

// waitWindowInside waits until three quarters of alias's window as the
// target runs it have passed since its first delivery was sent (the window
// runs from the record's created_at, which is no earlier): a duplicate
// sent then is inside the window with a quarter of it to spare (IDS §IX.A:
// "within the active window"). A first delivery whose outcome took longer
// than that (answered processing, its status URL followed) leaves no
// duplicate to send safely inside: N/A, with the reason.
func (w *idsWorld) waitWindowInside(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	if c.entry.TTLSeconds == nil {
		return features.NotApplicable(c.entry.Command + "'s window never ends")
	}
	win := w.window(c.entry)
	if win < 400*time.Millisecond {
		return features.NotApplicable(fmt.Sprintf("%s's window is %s as the target runs it: too short to send inside it with a margin", c.entry.Command, win))
	}
	if c.sentAt.IsZero() {
		return fmt.Errorf("%w: %q was never sent", features.ErrRunnerBug, alias)
	}
	if late := time.Since(c.sentAt); late > win*3/4 {
		return features.NotApplicable(fmt.Sprintf("the outcome of %s's first delivery came %s after it was sent, past three quarters of its window as the target runs it (%s): no duplicate can be sent inside the window with a margin",
			c.entry.Command, late.Round(time.Millisecond), win))
	}
	features.Sleep(ctx, time.Until(c.sentAt.Add(win*3/4)))
	return ctx.Err()
}

// --- confirmation ---------------------------------------------------------

// sendForgedToken sends alias with a token the target never issued, of the
// form of the one it issued for alias (same prefix up to its last "_",
// same length, same alphabet): a forgery the target must verify, not take
// on its form.
func (w *idsWorld) sendForgedToken(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	real := c.token
	i := strings.LastIndex(real, "_") + 1
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	forged := []byte(real)
	for j := i; j < len(forged); j++ {
		for {
			ch := alphabet[w.env.Rand.IntN(len(alphabet)-1)] // no '_': the prefix stays the only one
			if ch != forged[j] {
				forged[j] = ch
				break
			}
		}
	}
	return w.send(ctx, alias, func(e *Envelope) { e.ConfirmationToken = string(forged) })
}

func (w *idsWorld) getToken(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	cl, err := w.client()
	if err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]string{"tenant_id": c.env.TenantID, "actor_id": c.env.ActorID,
		"command_id": c.env.CommandID, "idempotency_key": w.sinkKey(c)})
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	r, err := cl.Do(ctx, client.Request{Method: http.MethodPost, Path: PathConfirmations, Header: h, Body: body})
	if err != nil {
		return err
	}
	var tok struct {
		Token string `json:"token"`
	}
	if r.Status != http.StatusCreated || json.Unmarshal(r.Body, &tok) != nil || tok.Token == "" {
		return features.Mismatch("201 with a token", features.Describe(r))
	}
	c.token = tok.Token
	return nil
}

func (w *idsWorld) sendWithToken(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	return w.send(ctx, alias, func(e *Envelope) { e.ConfirmationToken = c.token })
}

func (w *idsWorld) sendTokenMismatch(ctx context.Context, alias, what string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	return w.send(ctx, alias, func(e *Envelope) {
		e.ConfirmationToken = c.token
		if what == "another command_id" {
			e.CommandID = w.name("cmd")
			return
		}
		// another key: the same command_id, another target (so another key)
		e.Intent.Target = w.name("target")
	})
}

func (w *idsWorld) lastExecuted(ctx context.Context, alias string) error {
	c, err := w.cmd(alias)
	if err != nil {
		return err
	}
	r := w.last
	if o := outcomeOf(r); r != nil && o.Status == StatusProcessing {
		if err := w.pollStatus(ctx, o.StatusURL, nil); err != nil {
			return err
		}
		if r, err = w.post(ctx, c.env); err != nil {
			return err
		}
	}
	if r == nil || r.Status < 200 || r.Status > 299 || outcomeOf(r).Status != StatusExecuted {
		return features.Mismatch("2xx with status executed", features.Describe(r))
	}
	c.executed, w.last = r, r
	return nil
}

func (w *idsWorld) waitToken(ctx context.Context) error {
	if w.reg.ConfirmationTTLSeconds == nil {
		return features.NotApplicable("the registry declares no confirmation_ttl_seconds")
	}
	ttl := w.env.Scaled(time.Duration(*w.reg.ConfirmationTTLSeconds * float64(time.Second)))
	d := ttl + ttl/10 + 100*time.Millisecond
	if d > w.env.Budget {
		return features.NotApplicable(fmt.Sprintf("a token lives %s as the target runs it, beyond the budget %s", ttl, w.env.Budget))
	}
	features.Sleep(ctx, d)
	return ctx.Err()
}

// --- shielding ------------------------------------------------------------

func (w *idsWorld) sendI3Lossy(ctx context.Context) error {
	for _, alias := range w.i3 {
		c := w.cmds[alias]
		if c.entry.RequiresConfirmation {
			if err := w.getToken(ctx, alias); err != nil {
				return err
			}
			c.env.ConfirmationToken = c.token
		}
		// The loss is this command's own: a loss for any key would go to
		// whichever POST comes next, e.g. the resumer reconciling the
		// previous command's lost reply, and this command's effect would
		// never be put to the test.
		key := c.env.MustKey()
		w.env.Sink.LoseReplyOf(key)
		r, err := w.post(ctx, c.env)
		if err == nil {
			w.answered(c, r)
		}
		// An answer lost on the way back is the target's business: the
		// effect count decides. Wait for the lost reply to be taken (or,
		// for a target that files its effects under a key of its own, for
		// its call under that key: the loss was aimed at the binding's).
		deadline := time.Now().Add(w.env.Budget)
		for time.Now().Before(deadline) && w.env.Sink.Calls(key) == 0 {
			if own := w.sinkKey(c); own != key && w.env.Sink.Calls(own) > 0 {
				break
			}
			features.Sleep(ctx, 20*time.Millisecond)
		}
		w.env.Sink.LoseReplies(0)
	}
	return nil
}

func (w *idsWorld) i3Effects(ctx context.Context) error {
	var bad, unaimed []string
	judged := 0
	for _, alias := range w.i3 {
		c := w.cmds[alias]
		// Counted under the key the target reported (it posts its own key
		// to the sink): under the binding's, a target that derives another
		// key (a key-derivation or tenant-scope bug, which other rules
		// judge) would show 0 effects for each command.
		key := w.sinkKey(c)
		if key != c.env.MustKey() && w.env.Sink.Calls(c.env.MustKey()) == 0 {
			// The lost reply was aimed at the binding's key and never met
			// this command: its shielding was not put to the test.
			unaimed = append(unaimed, fmt.Sprintf("%s (its key %s)", c.entry.Command, key))
			continue
		}
		judged++
		n := w.waitEffects(ctx, key, 1)
		if n != 1 {
			resolved := "resolved"
			if !w.env.Sink.Resolved(key) {
				resolved = "never came back for the lost reply"
			}
			bad = append(bad, fmt.Sprintf("%s (shielding %s): %s, %s", c.entry.Command, strOrNull(c.entry.Shielding), w.sinkReport(key), resolved))
		}
	}
	if len(bad) > 0 {
		return features.Mismatch("exactly 1 effect per I3 command", strings.Join(bad, "; "))
	}
	if judged == 0 && len(unaimed) > 0 {
		return features.NotApplicable("the target files its effects under keys of its own, not the binding's (" + strings.Join(unaimed, "; ") +
			"): the lost reply, aimed at the binding's key, never met its call, so no shielding was put to the test (the key rules judge the key)")
	}
	return nil
}

// trimBody quotes a body for a Mismatch, whitespace collapsed and cut.
func trimBody(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
