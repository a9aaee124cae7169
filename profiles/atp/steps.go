package atp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

// atpSteps registers the step definitions of profiles/atp/atp.feature. A fresh
// atpWorld serves every scenario; each scenario signs with a new agent key.
func atpSteps(sc *godog.ScenarioContext, env *features.Env) {
	w := &atpWorld{env: env, run: env.RunID, pause: features.Sleep}
	sc.Before(func(ctx context.Context, _ *godog.Scenario) (context.Context, error) {
		w.reset()
		return ctx, nil
	})
	sc.After(func(ctx context.Context, _ *godog.Scenario, err error) (context.Context, error) {
		w.releaseAll()
		return ctx, nil
	})
	RailOf(env.Sink) // the rail is served before the scenario's first request
	features.Register(sc, env, w.steps())
}

// rail is the payment rail the run's effect sink serves (nil without one).
func (w *atpWorld) rail() *Rail { return RailOf(w.env.Sink) }

// Rules that cover the preconditions of the steps below.
const (
	coversATPSetup    = RuleSignedBySiteKey
	coversATPRow      = RuleUniqueRow
	coversATPTerminal = RuleReconciliation
)

// atpSeen is one answer that carried a row of a transaction.
type atpSeen struct {
	state      string
	call, ret  time.Time
	row        Transaction
	resp       *client.Response
	afterFinal bool // answered after the transaction was seen terminal
}

// atpIntent is one signed intent of a scenario and its transaction.
type atpIntent struct {
	obj        Intent
	raw        []byte // the signed intent as sent
	key        string // the Idempotency-Key it is authorized and executed with
	otherKey   string // the key of a replay under another key
	seen       []atpSeen
	firstAuth  *atpSeen // the first answer of authorize that carried a row
	final      *atpSeen // the first answer that showed a terminal state
	consumedAt string   // first_consumed_at of the first 409
	last       *atpSeen // the last row read
}

type atpWorld struct {
	env *features.Env
	run string
	// pause is how the harness waits between two sends whose answers it
	// compares by the site's timestamps (stampGap): features.Sleep, or a
	// test's.
	pause func(context.Context, time.Duration)

	cfg  Config
	keys JWKSet
	// The scenario's agent.
	agentID string
	priv    ed25519.PrivateKey

	intents  map[string]*atpIntent
	lossy    bool // the scenario made the rail lose a reply: an execute may get no answer
	last     *client.Response
	releases []func()
	n        int
}

func (w *atpWorld) reset() {
	w.releaseAll()
	*w = atpWorld{env: w.env, run: w.run, pause: w.pause, intents: map[string]*atpIntent{}}
}

func (w *atpWorld) releaseAll() {
	for _, r := range w.releases {
		r()
	}
	w.releases = nil
	if r := w.rail(); r != nil {
		r.LoseReplies(0)
		r.DropAllCallbacks(false)
		r.DropCallbacks(0)
	}
}

func (w *atpWorld) steps() []features.StepDef {
	q := `"(\w+)"`
	return []features.StepDef{
		{Pattern: `^the site's configuration and public keys$`, Fn: w.setup, Kind: features.Action, Covers: coversATPSetup},
		{Pattern: `^a registered agent$`, Fn: w.registerAgent, Kind: features.Action, Covers: coversATPSetup},

		// intents
		{Pattern: `^a signed intent ` + q + `$`, Fn: func(a string) error { return w.newIntent(a, nil) }, Kind: features.Action},
		{Pattern: `^a signed intent ` + q + ` that expired a minute ago$`, Fn: func(a string) error {
			return w.newIntent(a, func(i *atpIntent) { i.obj.ExpiresAt = FormatTime(time.Now().Add(-time.Minute)) })
		}, Kind: features.Action},
		{Pattern: `^a signed intent ` + q + ` that expires in (\d+) seconds$`, Fn: func(a string, s int) error {
			return w.newIntent(a, func(i *atpIntent) { i.obj.ExpiresAt = FormatTime(time.Now().Add(time.Duration(s) * time.Second)) })
		}, Kind: features.Action},
		{Pattern: `^a signed intent ` + q + ` with a key that is (16 characters|128 characters|a UUIDv4|printable punctuation)$`, Fn: w.intentWithKey, Kind: features.Action},
		{Pattern: `^a signed intent ` + q + ` under the key of ` + q + `$`, Fn: w.intentUnderKey, Kind: features.Action},
		{Pattern: `^a signed intent ` + q + ` with action_dedup_key "([^"]+)"$`, Fn: func(a, k string) error {
			return w.newIntent(a, func(i *atpIntent) { i.obj.ActionDedupKey = k + "-" + w.run + "-" + w.agentID })
		}, Kind: features.Action},
		{Pattern: `^a signed intent ` + q + ` that requires ` + q + ` settled$`, Fn: w.intentRequires, Kind: features.Action},
		{Pattern: `^a signed intent ` + q + ` with the nonce of ` + q + `$`, Fn: w.intentWithNonceOf, Kind: features.Action},
		{Pattern: `^the site opts in to action_dedup_key$`, Fn: w.optsIn, Kind: features.Action},

		// the rail
		{Pattern: `^the rail will lose its answer to the next charge and drop its callbacks$`, Fn: func() error { return w.loseCharge(true) }, Kind: features.Action},
		{Pattern: `^the rail will lose its answer to the next charge$`, Fn: func() error { return w.loseCharge(false) }, Kind: features.Action},
		{Pattern: `^the rail holds the charges of ` + q + `$`, Fn: w.hold, Kind: features.Action},
		{Pattern: `^the rail refuses the charges of ` + q + `$`, Fn: w.refuse, Kind: features.Action},
		{Pattern: `^the rail releases ` + q + `$`, Fn: w.release, Kind: features.Action},
		{Pattern: `^the rail declines ` + q + `$`, Fn: w.decline, Kind: features.Action},
		{Pattern: `^the rail answers nothing about ` + q + ` but its creation$`, Fn: w.unreachable, Kind: features.Action},
		{Pattern: `^a forged callback says the rail charged ` + q + `$`, Fn: w.forgedCallback, Kind: features.Action},

		// requests
		{Pattern: `^I authorize ` + q + `$`, Fn: func(ctx context.Context, a string) error { return w.authorize(ctx, a, "same") }, Kind: features.Action, Covers: coversATPRow},
		{Pattern: `^I authorize ` + q + ` again under the same key$`, Fn: w.authorizeAgain, Kind: features.Action},
		{Pattern: `^I authorize ` + q + ` again under another key$`, Fn: func(ctx context.Context, a string) error { return w.authorize(ctx, a, "other") }, Kind: features.Action},
		{Pattern: `^I authorize ` + q + ` again under a third key$`, Fn: w.authorizeThird, Kind: features.Action},
		{Pattern: `^I authorize ` + q + ` without a key$`, Fn: func(ctx context.Context, a string) error { return w.authorize(ctx, a, "none") }, Kind: features.Action},
		{Pattern: `^I execute ` + q + `$`, Fn: func(ctx context.Context, a string) error { return w.execute(ctx, a, "same") }, Kind: features.Action, Covers: coversATPRow},
		{Pattern: `^I execute ` + q + ` again$`, Fn: func(ctx context.Context, a string) error { return w.execute(ctx, a, "same") }, Kind: features.Action},
		{Pattern: `^I execute ` + q + ` again (\d+) times$`, Fn: w.executeTimes, Kind: features.Action},
		{Pattern: `^I execute ` + q + ` under the other key$`, Fn: func(ctx context.Context, a string) error { return w.execute(ctx, a, "other") }, Kind: features.Action},
		{Pattern: `^I execute ` + q + ` without a key$`, Fn: func(ctx context.Context, a string) error { return w.execute(ctx, a, "none") }, Kind: features.Action},
		{Pattern: `^I execute ` + q + ` and give up waiting while the rail holds its charge$`, Fn: w.executeHeld, Kind: features.Action},
		{Pattern: `^(\d+) agents execute ` + q + ` at once$`, Fn: w.storm, Kind: features.Action},
		{Pattern: `^I read ` + q + `$`, Fn: w.read, Kind: features.Action, Covers: coversATPRow},
		{Pattern: `^` + q + ` reaches a terminal state$`, Fn: w.reachTerminal, Kind: features.Action, Covers: coversATPTerminal},
		{Pattern: `^I wait until ` + q + ` has expired$`, Fn: w.waitExpired, Kind: features.Action},
		{Pattern: `^I wait for a reconciliation sweep$`, Fn: w.waitSweep, Kind: features.Action, Covers: coversATPTerminal},
		{Pattern: `^I poll ` + q + ` until it is no longer authorized$`, Fn: w.pollPastAuthorized, Kind: features.Action},

		// answers
		{Pattern: `^the answer to ` + q + ` carries no receipt$`, Fn: w.answerNoReceipt, Kind: features.Check},
		{Pattern: `^the site answered ` + q + ` with its row$`, Fn: w.answeredRow, Kind: features.Action, Covers: coversATPRow},
		{Pattern: `^the last answer is a 2xx with the row of ` + q + `$`, Fn: w.lastIsRow, Kind: features.Check},
		{Pattern: `^the last answer carries no receipt$`, Fn: func() error { return w.noReceipt(w.last) }, Kind: features.Check},
		{Pattern: `^the last answer is (?:200|a 2xx) with ` + q + ` (authorized|settled)( and a receipt)?$`, Fn: w.lastIs200, Kind: features.Check},
		{Pattern: `^the last answer is the terminal row of ` + q + `$`, Fn: w.lastTerminal, Kind: features.Check},
		{Pattern: `^the last answer carries the body, receipt and signature of ` + q + ` byte for byte$`, Fn: w.lastVerbatim, Kind: features.Check},
		{Pattern: `^every answer to ` + q + ` since it settled carries its body, receipt and signature byte for byte$`, Fn: w.allVerbatim, Kind: features.Check},
		{Pattern: `^the last answer is the row of ` + q + ` as first authorized$`, Fn: w.lastIsFirstAuth, Kind: features.Check},
		{Pattern: `^the last answer is 409 nonce_consumed$`, Fn: w.nonceConsumed, Kind: features.Gate},
		{Pattern: `^the last answer carries first_consumed_at$`, Fn: w.firstConsumedAt, Kind: features.Check},
		{Pattern: `^the last answer carries the same first_consumed_at as before$`, Fn: w.sameConsumedAt, Kind: features.Check},
		{Pattern: `^the last answer is 410 intent_expired$`, Fn: w.intentExpired, Kind: features.Gate},
		{Pattern: `^the last answer is not 410 intent_expired$`, Fn: w.notExpired, Kind: features.Check},
		{Pattern: `^the last answer is a 4xx$`, Fn: w.is4xx, Kind: features.Gate},
		{Pattern: `^every answer to ` + q + ` carries one row: the same created_at and body$`, Fn: w.oneRow, Kind: features.Check},
		{Pattern: `^every answer to ` + q + ` that carries a receipt carries the same one$`, Fn: w.oneReceipt, Kind: features.Check},

		// the transaction
		{Pattern: `^` + q + ` is settled$`, Fn: func(a string) error { return w.isState(a, StateSettled) }, Kind: features.Check},
		{Pattern: `^` + q + ` is settled with a receipt signed with Ed25519 over the JCS form of its body$`, Fn: w.settledSigned, Kind: features.Check},
		{Pattern: `^the receipt of ` + q + ` verifies with the site's public key alone$`, Fn: w.receiptVerifies, Kind: features.Check},
		{Pattern: `^every answer that showed a receipt of ` + q + ` showed it on a settled row$`, Fn: w.receiptOnSettled, Kind: features.Check},
		{Pattern: `^the site's verify endpoint accepts the receipt of ` + q + ` without credentials$`, Fn: w.verifyAccepts, Kind: features.Probe},
		{Pattern: `^the site's verify endpoint refuses the receipt of ` + q + ` with its amount changed$`, Fn: w.verifyRefuses, Kind: features.Probe},
		{Pattern: `^the site's verify endpoint accepts the receipt of ` + q + ` re-serialized, its members reordered and indented$`, Fn: w.verifyAcceptsReserialized, Kind: features.Probe},
		{Pattern: `^the states seen for ` + q + ` never went back$`, Fn: w.neverBack, Kind: features.Check},
		{Pattern: `^the states seen for ` + q + ` never went from executing to authorized$`, Fn: w.neverExecutingToAuthorized, Kind: features.Check},
		{Pattern: `^` + q + ` is executing, or resolved as the rail says$`, Fn: w.executingOrResolved, Kind: features.Check},
		{Pattern: `^` + q + ` is settled or compensated, as the rail says$`, Fn: w.resolvedAsRail, Kind: features.Check},
		{Pattern: `^` + q + ` is compensated with a signed receipt referencing ` + q + `$`, Fn: w.compensated, Kind: features.Check},

		// charges at the rail
		{Pattern: `^the rail charged ` + q + ` exactly once$`, Fn: func(ctx context.Context, a string) error { return w.charges(ctx, a, 1, 1) }, Kind: features.Check},
		{Pattern: `^the rail charged ` + q + ` at most once$`, Fn: func(ctx context.Context, a string) error { return w.charges(ctx, a, 0, 1) }, Kind: features.Check},
		{Pattern: `^the rail did not charge ` + q + `$`, Fn: func(ctx context.Context, a string) error { return w.charges(ctx, a, 0, 0) }, Kind: features.Check},
	}
}

// --- set-up ---------------------------------------------------------------

func (w *atpWorld) client() (*client.Client, error) { return w.env.Client("atp") }

func (w *atpWorld) do(ctx context.Context, method, path, key string, body []byte, noAPIKey bool) (*client.Response, error) {
	c, err := w.client()
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	if key != "" {
		h.Set(HeaderKey, key)
	}
	return c.Do(ctx, client.Request{Method: method, Path: path, Header: h, Body: body, NoAPIKey: noAPIKey})
}

func (w *atpWorld) setup(ctx context.Context) error {
	r, err := w.do(ctx, http.MethodGet, PathConfig, "", nil, false)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &w.cfg) != nil {
		return features.Mismatch("GET "+PathConfig+" answers 200 with the configuration (docs/atp-binding.md)", fmt.Sprintf("%d %s", r.Status, features.Clip(r.Body)))
	}
	if w.cfg.Binding != Binding {
		return features.Mismatch("binding "+Binding, fmt.Sprintf("binding %q", w.cfg.Binding))
	}
	r, err = w.do(ctx, http.MethodGet, PathKeys, "", nil, true)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &w.keys) != nil || len(w.keys.Keys) == 0 {
		return features.Mismatch("GET "+PathKeys+" answers 200 with a JWK Set of at least one key, without credentials", fmt.Sprintf("%d %s", r.Status, features.Clip(r.Body)))
	}
	for _, k := range w.keys.Keys {
		if _, err := PublicKey(k); err != nil {
			return features.Mismatch("every key an Ed25519 OKP JWK", err.Error())
		}
	}
	if w.env.Sink != nil {
		// The rail calls the site back at the binding's path.
		w.rail().SetCallback(callbackURLs(w.env.Target.BaseURL, w.env.Target.Replicas)...)
	}
	return nil
}

func (w *atpWorld) registerAgent(ctx context.Context) error {
	seed := make([]byte, ed25519.SeedSize)
	fresh := w.env.Fresh() // the run's own agent: a rerun never signs with an earlier run's key
	for i := range seed {
		seed[i] = byte(fresh.Uint32())
	}
	w.priv = ed25519.NewKeyFromSeed(seed)
	w.agentID = w.name("agt")
	body, _ := json.Marshal(AgentRegistration{PublicKey: NewJWK("", w.priv.Public().(ed25519.PublicKey))})
	r, err := w.do(ctx, http.MethodPut, PathAgents+w.agentID, "", body, false)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK && r.Status != http.StatusCreated {
		return features.Mismatch("PUT "+PathAgents+"{agent_id} answers 201 or 200", fmt.Sprintf("%d %s", r.Status, features.Clip(r.Body)))
	}
	return nil
}

func (w *atpWorld) name(kind string) string {
	w.n++
	return fmt.Sprintf("%s_%s_%x_%d", kind, w.run, w.env.Fresh().Uint32(), w.n)
}

func (w *atpWorld) newKey() string {
	var b [16]byte
	fresh := w.env.Fresh()
	for i := range b {
		b[i] = byte(fresh.Uint32())
	}
	return "k-" + hex.EncodeToString(b[:]) // 34 characters
}

// newIntent draws a fresh intent of the scenario's agent (edited by edit),
// signs it, and draws its key.
func (w *atpWorld) newIntent(alias string, edit func(*atpIntent)) error {
	if w.priv == nil {
		return fmt.Errorf("%w: no agent registered before intent %q", features.ErrRunnerBug, alias)
	}
	i := &atpIntent{key: w.newKey(), obj: Intent{
		IntentID: w.name("int"), AgentID: w.agentID, Nonce: w.name("n"),
		ExpiresAt: FormatTime(time.Now().Add(time.Hour)),
		Amount:    int64(100 + w.env.Rand.IntN(100000)), Currency: "EUR", Payee: "merchant_" + w.run,
	}}
	if edit != nil {
		edit(i)
	}
	if err := w.sign(i); err != nil {
		return err
	}
	w.intents[alias] = i
	return nil
}

// sign signs i's intent and keeps it as sent: its members in the order of
// Intent (intent_id first, signature last), which is not their JCS order,
// so a site that re-encodes the body on a retry shows it in the body (§2:
// "same body") whatever its clock.
func (w *atpWorld) sign(i *atpIntent) error {
	i.obj.Signature = ""
	raw, err := json.Marshal(i.obj)
	if err != nil {
		return err
	}
	signed, err := SignIntent(raw, w.priv)
	if err != nil {
		return fmt.Errorf("%w: signing: %v", features.ErrRunnerBug, err)
	}
	var s struct {
		Signature string `json:"signature"`
	}
	if err := json.Unmarshal(signed, &s); err != nil || s.Signature == "" {
		return fmt.Errorf("%w: signing: no signature in %s", features.ErrRunnerBug, features.Clip(signed))
	}
	i.obj.Signature = s.Signature
	if i.raw, err = json.Marshal(i.obj); err != nil {
		return err
	}
	i.obj.Signature = ""
	return nil
}

func (w *atpWorld) intentWithKey(alias, kind string) error {
	if err := w.newIntent(alias, nil); err != nil {
		return err
	}
	i := w.intents[alias]
	switch kind {
	case "16 characters":
		i.key = i.key[:16]
	case "128 characters":
		i.key = strings.Repeat(i.key[2:], 4) // 32 × 4
	case "a UUIDv4":
		b, _ := hex.DecodeString(i.key[2:])
		b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
		h := hex.EncodeToString(b)
		i.key = h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	case "printable punctuation":
		i.key = "~!@#$%^&*()_+-=[]{}|;:',.<>/?`" + i.key[2:10]
	}
	return nil
}

func (w *atpWorld) intentUnderKey(alias, of string) error {
	o, err := w.intent(of)
	if err != nil {
		return err
	}
	if err := w.newIntent(alias, nil); err != nil {
		return err
	}
	w.intents[alias].key = o.key
	return nil
}

func (w *atpWorld) intentRequires(alias, of string) error {
	o, err := w.intent(of)
	if err != nil {
		return err
	}
	return w.newIntent(alias, func(i *atpIntent) { i.obj.Precondition = &Precondition{IntentSettled: o.obj.IntentID} })
}

// intentWithNonceOf draws a new intent (its own intent_id, amount and
// key) that reuses the nonce of another.
func (w *atpWorld) intentWithNonceOf(alias, of string) error {
	o, err := w.intent(of)
	if err != nil {
		return err
	}
	return w.newIntent(alias, func(i *atpIntent) { i.obj.Nonce = o.obj.Nonce })
}

func (w *atpWorld) optsIn() error {
	if w.cfg.ActionDedupWindowSeconds == nil || *w.cfg.ActionDedupWindowSeconds <= 0 {
		return features.NotApplicable("the site does not opt in to action_dedup_key (GET " + PathConfig + " declares no action_dedup_window_seconds)")
	}
	return nil
}

func (w *atpWorld) intent(alias string) (*atpIntent, error) {
	i, ok := w.intents[alias]
	if !ok {
		return nil, fmt.Errorf("%w: no intent %q in this scenario", features.ErrRunnerBug, alias)
	}
	return i, nil
}

// --- the rail -------------------------------------------------------------

// needRail is N/A when the run hosts no payment rail.
func (w *atpWorld) needRail() error {
	if w.env.Sink == nil {
		return features.NotApplicable("the run hosts no payment rail: give the target an effect sink (--effect-sink or effect_sink in the target file) and point its rail there")
	}
	return nil
}

func (w *atpWorld) loseCharge(dropCallbacks bool) error {
	if err := w.needRail(); err != nil {
		return err
	}
	w.rail().LoseReplies(1)
	w.rail().DropAllCallbacks(dropCallbacks)
	w.lossy = true
	return nil
}

func (w *atpWorld) hold(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if err := w.needRail(); err != nil {
		return err
	}
	w.releases = append(w.releases, w.rail().HoldConfirms(i.obj.IntentID))
	return nil
}

// refuse makes the rail answer 503 to the intent's confirms, charging
// nothing, until released.
func (w *atpWorld) refuse(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if err := w.needRail(); err != nil {
		return err
	}
	w.releases = append(w.releases, w.rail().RefuseConfirms(i.obj.IntentID))
	return nil
}

// unreachable makes the rail answer 503 to every call about the intent's
// payment intents but their creation, until released.
func (w *atpWorld) unreachable(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if err := w.needRail(); err != nil {
		return err
	}
	w.releases = append(w.releases, w.rail().Unreachable(i.obj.IntentID))
	return nil
}

// forgedCallback posts the site, at its callback path and without
// credentials (as the rail does), a payment_intent.succeeded for the
// payment intent the site created for alias, with a charge the rail never
// made. The callback is a notice (docs/atp-binding.md): whatever the site
// answers, it must not take it for the rail's word.
func (w *atpWorld) forgedCallback(ctx context.Context, alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if err := w.needRail(); err != nil {
		return err
	}
	pis := w.rail().PaymentIntents(i.obj.IntentID)
	if len(pis) == 0 {
		return features.Mismatch(fmt.Sprintf("a payment intent of %q created at the rail by its execute", alias), "none")
	}
	pi := pis[0]
	pi.Status, pi.ChargeID = RailSucceeded, "ch_forged_"+w.run
	body, _ := json.Marshal(RailEvent{Type: RailEventSucceeded, PaymentIntent: pi})
	if _, err := w.do(ctx, http.MethodPost, PathRailEvents, "", body, true); err != nil {
		return err
	}
	return nil
}

func (w *atpWorld) release(alias string) error {
	w.releaseAll()
	return nil
}

func (w *atpWorld) decline(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if err := w.needRail(); err != nil {
		return err
	}
	w.rail().Decline(i.obj.IntentID)
	return nil
}

// --- requests -------------------------------------------------------------

// keyFor returns the key a request of alias is sent under: its own, the
// other (drawn once), a third, or none.
func (w *atpWorld) keyFor(i *atpIntent, which string) string {
	switch which {
	case "other":
		if i.otherKey == "" {
			i.otherKey = w.newKey()
		}
		return i.otherKey
	case "third":
		return w.newKey()
	case "none":
		return ""
	}
	return i.key
}

// observe records an answer: when it carries a row of alias's transaction
// (its intent_id and key), the state it shows.
func (w *atpWorld) observe(i *atpIntent, key string, r *client.Response) *atpSeen {
	w.last = r
	if r == nil || r.Status < 200 || r.Status > 299 {
		return nil
	}
	var t Transaction
	if json.Unmarshal(r.Body, &t) != nil || t.IntentID != i.obj.IntentID || t.IdempotencyKey != key || t.State == "" {
		return nil
	}
	s := atpSeen{state: t.State, call: r.Exchange.Call, ret: r.Exchange.Return, row: t, resp: r, afterFinal: i.final != nil}
	i.seen = append(i.seen, s)
	p := &i.seen[len(i.seen)-1]
	if key == i.key {
		i.last = p
		if i.final == nil && Terminal(t.State) {
			i.final = p
		}
	}
	return p
}

func (w *atpWorld) authorize(ctx context.Context, alias, which string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	key := w.keyFor(i, which)
	r, err := w.do(ctx, http.MethodPost, PathAuthorize, key, i.raw, false)
	if err != nil {
		return err
	}
	if s := w.observe(i, key, r); s != nil && i.firstAuth == nil && key == i.key {
		i.firstAuth = s
	}
	return nil
}

// stampResolution is the coarsest tick the site's clock may have, judged
// from timestamps it printed: the place of the last nonzero digit of their
// fractions of a second, the finest any of them shows (a site whose clock
// ticks in milliseconds prints "….114Z"; "….000Z" or "…:02Z" may come
// from a clock that ticks in seconds). Unparsable or none: a second.
func stampResolution(stamps ...string) time.Duration {
	res, _ := stampTick(stamps...)
	return res
}

// stampTick is stampResolution, and whether any of stamps is a time.
func stampTick(stamps ...string) (time.Duration, bool) {
	res, seen := time.Second, false
	for _, s := range stamps {
		if _, err := ParseTime(s); err != nil {
			continue
		}
		seen = true
		dot := strings.IndexByte(s, '.')
		if dot < 0 {
			continue
		}
		end := dot + 1
		for end < len(s) && s[end] >= '0' && s[end] <= '9' {
			end++
		}
		digits := strings.TrimRight(s[dot+1:end], "0")
		if len(digits) > 9 {
			digits = digits[:9]
		}
		d := time.Second
		for range len(digits) {
			d /= 10
		}
		res = min(res, d)
	}
	return res, seen
}

// stampGap is how long the harness lets pass between two sends whose
// answers it compares by timestamps the site stamps then: longer than the
// tick stampResolution reads off stamps, so two distinct moments of the
// site always print two distinct stamps. Without it a check would rest on
// the chance that two sends fall in two ticks.
func stampGap(stamps ...string) time.Duration {
	r := stampResolution(stamps...)
	return r + r/2 + 5*time.Millisecond
}

// waitGap waits until stampGap(stamps) has passed since since (the return
// of the answer that showed them), bounded by the scenario's context.
// Without a stamp there is nothing to compare, and no wait.
func (w *atpWorld) waitGap(ctx context.Context, since time.Time, stamps ...string) error {
	if _, ok := stampTick(stamps...); !ok {
		return nil
	}
	if d := time.Until(since.Add(stampGap(stamps...))); d > 0 {
		if d > w.env.Budget {
			return features.NotApplicable(fmt.Sprintf("a wait of %v for the site's clock to tick exceeds the budget of %v", d, w.env.Budget))
		}
		w.pause(ctx, d)
	}
	return ctx.Err()
}

// authorizeAgain resends alias's signed intent under its key, once the
// site's clock has ticked past the stamps of its first answer: a row
// written again shows another created_at.
func (w *atpWorld) authorizeAgain(ctx context.Context, alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if f := i.firstAuth; f != nil {
		if err := w.waitGap(ctx, f.ret, f.row.CreatedAt, f.row.UpdatedAt); err != nil {
			return err
		}
	}
	return w.authorize(ctx, alias, "same")
}

// authorizeThird replays alias's signed intent under a third key, once the
// site's clock has ticked past the first_consumed_at it last answered: a
// first_consumed_at drawn at each replay shows.
func (w *atpWorld) authorizeThird(ctx context.Context, alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if w.last != nil {
		e, _ := w.lastError()
		if err := w.waitGap(ctx, w.last.Exchange.Return, e.FirstConsumedAt, i.consumedAt); err != nil {
			return err
		}
	}
	return w.authorize(ctx, alias, "third")
}

func (w *atpWorld) executeBody(i *atpIntent) []byte {
	b, _ := json.Marshal(Execute{IntentID: i.obj.IntentID})
	return b
}

// executeRetries bounds how often execute sends one request again after
// an answer the text says to retry (§5: 5xx, 408, 425, 429).
const executeRetries = 4

func (w *atpWorld) execute(ctx context.Context, alias, which string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	key := w.keyFor(i, which)
	r, err := w.do(ctx, http.MethodPost, PathExecute, key, w.executeBody(i), false)
	if err != nil {
		if which == "same" && w.lossy {
			w.last = nil // the site's answer may be lost with the rail's: the agent polls
			return nil
		}
		return err
	}
	if r, err = w.retryExecute(ctx, i, key, r); err != nil {
		return err
	}
	w.observe(i, key, r)
	return nil
}

// retryExecute follows an execute answered 5xx, 408, 425 or 429, which
// the binding allows ("A 5xx or a timeout is allowed too: the agent
// retries (§5)"): it sends the same request under the same key again, as
// the text's retry policy says (Retry-After when given, else its backoff,
// at the target's time scale), at most executeRetries times within the
// budget, and returns the last answer: the one the scenario's checks
// judge. Each answer is recorded (the report shows every retry).
func (w *atpWorld) retryExecute(ctx context.Context, i *atpIntent, key string, r *client.Response) (*client.Response, error) {
	p := Policy{Scale: w.env.Target.TimeScale, Rand: func() float64 { return w.env.Rand.Float64() }}
	start := time.Now()
	for n := 0; n < executeRetries && r != nil && Retryable(r.Status); n++ {
		d, ok := p.RetryAfter(r.Header)
		if !ok {
			d = p.Delay(n)
		}
		if time.Since(start)+d > w.env.Budget {
			break
		}
		w.env.Logger.Info("execute answered a status the text retries: retrying", "status", r.Status, "intent", i.obj.IntentID, "wait", d)
		features.Sleep(ctx, d)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next, err := w.do(ctx, http.MethodPost, PathExecute, key, w.executeBody(i), false)
		if err != nil {
			return nil, err
		}
		r = next
	}
	return r, nil
}

func (w *atpWorld) executeTimes(ctx context.Context, alias string, n int) error {
	for range n {
		if err := w.execute(ctx, alias, "same"); err != nil {
			return err
		}
	}
	return nil
}

// executeHeld sends execute while the rail holds the intent's charge, waits
// until the site's confirm is at the rail, and gives up on the answer (the
// agent's timeout). A site that answers before it confirms is fine too.
func (w *atpWorld) executeHeld(ctx context.Context, alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if err := w.needRail(); err != nil {
		return err
	}
	if len(w.releases) == 0 {
		w.releases = append(w.releases, w.rail().HoldConfirms(i.obj.IntentID))
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan *client.Response, 1)
	go func() {
		r, _ := w.do(rctx, http.MethodPost, PathExecute, i.key, w.executeBody(i), false)
		done <- r
	}()
	wctx, wcancel := context.WithTimeout(ctx, w.env.Budget)
	defer wcancel()
	confirmed := make(chan error, 1)
	go func() { confirmed <- w.rail().WaitConfirms(wctx, i.obj.IntentID, 1) }()
	select {
	case r := <-done:
		if r != nil {
			w.observe(i, i.key, r)
			return nil
		}
		return fmt.Errorf("execute of %q failed before the site confirmed at the rail", alias)
	case err := <-confirmed:
		if err != nil {
			return fmt.Errorf("the site never confirmed %q at the rail within %v: %w", alias, w.env.Budget, err)
		}
	}
	cancel() // the agent gives up waiting
	<-done
	w.last = nil
	return nil
}

func (w *atpWorld) storm(ctx context.Context, n int, alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if n < 2 || n > 1000 {
		return fmt.Errorf("%w: a storm of %d", features.ErrRunnerBug, n)
	}
	c, err := w.client()
	if err != nil {
		return err
	}
	body := w.executeBody(i)
	gate := make(chan struct{})
	out := make([]*client.Response, n)
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			h := http.Header{}
			h.Set("Content-Type", "application/json")
			h.Set(HeaderKey, i.key)
			out[k], _ = c.Do(ctx, client.Request{Method: http.MethodPost, Path: PathExecute, Header: h, Body: body})
		}()
	}
	close(gate)
	wg.Wait()
	answered := 0
	for _, r := range out {
		if r != nil {
			answered++
			w.observe(i, i.key, r)
		}
	}
	if answered == 0 {
		return fmt.Errorf("none of the %d executes of %q was answered", n, alias)
	}
	return nil
}

func (w *atpWorld) get(ctx context.Context, i *atpIntent) (*atpSeen, *client.Response, error) {
	r, err := w.do(ctx, http.MethodGet, PathIntents+url.PathEscape(i.obj.IntentID), i.key, nil, false)
	if err != nil {
		return nil, nil, err
	}
	return w.observe(i, i.key, r), r, nil
}

func (w *atpWorld) read(ctx context.Context, alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	s, r, err := w.get(ctx, i)
	if err != nil {
		return err
	}
	if s == nil {
		return features.Mismatch("GET "+PathIntents+"{intent_id} with its key answers 200 with the row", fmt.Sprintf("%d %s", r.Status, features.Clip(r.Body)))
	}
	return nil
}

// poll reads alias until done says so, at most bound; it returns whether
// done held.
func (w *atpWorld) poll(ctx context.Context, i *atpIntent, bound time.Duration, done func(*atpSeen) bool) (bool, error) {
	deadline := time.Now().Add(bound)
	for {
		s, _, err := w.get(ctx, i)
		if err != nil && ctx.Err() != nil {
			return false, err
		}
		if s != nil && done(s) {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		features.Sleep(ctx, 50*time.Millisecond)
	}
}

func (w *atpWorld) reachTerminal(ctx context.Context, alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	ok, err := w.poll(ctx, i, w.sweepBound(), func(s *atpSeen) bool { return Terminal(s.state) })
	if err != nil {
		return err
	}
	if !ok {
		return features.Mismatch(fmt.Sprintf("%q settled, compensated or expired within %v", alias, w.sweepBound()), "state "+w.lastState(i))
	}
	return nil
}

func (w *atpWorld) lastState(i *atpIntent) string {
	if i.last == nil {
		return "(no row read)"
	}
	return i.last.state
}

// sweepInterval is the site's declared reconciliation period, scaled.
func (w *atpWorld) sweepInterval() time.Duration {
	s := 60.0
	if w.cfg.ReconcileIntervalSeconds != nil && *w.cfg.ReconcileIntervalSeconds > 0 {
		s = *w.cfg.ReconcileIntervalSeconds
	}
	return w.env.Scaled(time.Duration(s * float64(time.Second)))
}

// sweepBound is how long a row may wait for a resolution: two sweeps and
// two seconds of slack, at least the budget.
func (w *atpWorld) sweepBound() time.Duration {
	return max(2*w.sweepInterval()+2*time.Second, w.env.Budget)
}

func (w *atpWorld) waitSweep(ctx context.Context) error {
	if 2*w.sweepInterval() > w.env.Budget {
		return features.NotApplicable(fmt.Sprintf("two reconciliation sweeps (%v) do not fit the budget of %v: give a --time-scale or a longer --budget", 2*w.sweepInterval(), w.env.Budget))
	}
	for _, i := range w.intents {
		if i.last == nil && i.firstAuth == nil {
			continue
		}
		if _, err := w.poll(ctx, i, w.sweepBound(), func(s *atpSeen) bool { return Terminal(s.state) }); err != nil {
			return err
		}
	}
	return nil
}

func (w *atpWorld) waitExpired(ctx context.Context, alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	at, err := ParseTime(i.obj.ExpiresAt)
	if err != nil {
		return fmt.Errorf("%w: %v", features.ErrRunnerBug, err)
	}
	wait := time.Until(at) + 2*time.Second // the binding's clock slack
	if wait > w.env.Budget {
		return features.NotApplicable(fmt.Sprintf("the expiry is %v away, beyond the budget of %v", wait, w.env.Budget))
	}
	features.Sleep(ctx, wait)
	return ctx.Err()
}

func (w *atpWorld) pollPastAuthorized(ctx context.Context, alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	ok, err := w.poll(ctx, i, w.env.Budget, func(s *atpSeen) bool { return s.state != StateAuthorized })
	if err != nil {
		return err
	}
	if !ok {
		return features.Mismatch(fmt.Sprintf("%q executing once its charge is at the rail", alias), "state "+w.lastState(i))
	}
	return nil
}

// --- answers --------------------------------------------------------------

func (w *atpWorld) noReceipt(r *client.Response) error {
	if r == nil {
		return fmt.Errorf("%w: no answer to check", features.ErrRunnerBug)
	}
	var t Transaction
	if json.Unmarshal(r.Body, &t) == nil && t.HasReceipt() && !receiptState(t.State) {
		return features.Mismatch("no receipt on a row in state "+t.State, "receipt "+features.Clip(t.Receipt))
	}
	return nil
}

// receiptState reports whether a row in state may carry a receipt (§4: on
// entry to settled or compensated, never before, none when expired).
func receiptState(state string) bool {
	return state == StateSettled || state == StateCompensated
}

// answeredRow: the last answer is a 2xx carrying alias's row under its
// key, the precondition of the checks that read that row.
func (w *atpWorld) answeredRow(alias string) error {
	return w.lastIsRow(alias)
}

func (w *atpWorld) lastIsRow(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	t, ok := w.lastRow()
	if !ok || t.IntentID != i.obj.IntentID || t.IdempotencyKey != i.key {
		return features.Mismatch(fmt.Sprintf("a 2xx with the row of %q under its key", alias), w.describeLast())
	}
	return nil
}

func (w *atpWorld) answerNoReceipt(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if len(i.seen) == 0 {
		return features.Mismatch("an answer with the row of "+alias, w.describeLast())
	}
	s := i.seen[len(i.seen)-1]
	if s.row.HasReceipt() && !receiptState(s.state) {
		return features.Mismatch("no receipt on a row in state "+s.state, "receipt "+features.Clip(s.row.Receipt))
	}
	return nil
}

func (w *atpWorld) describeLast() string {
	if w.last == nil {
		return "no answer (the agent gave up or the connection was lost)"
	}
	return fmt.Sprintf("%d %s", w.last.Status, features.Clip(w.last.Body))
}

func (w *atpWorld) lastRow() (Transaction, bool) {
	var t Transaction
	if w.last == nil || w.last.Status < 200 || w.last.Status > 299 || json.Unmarshal(w.last.Body, &t) != nil || t.State == "" {
		return t, false
	}
	return t, true
}

func (w *atpWorld) lastIs200(alias, state, receipt string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	t, ok := w.lastRow()
	// §9's retry example answers "200 OK"; an authorize is judged on what
	// it did, whatever its 2xx (lastRow takes any).
	exact := state == StateSettled
	want := fmt.Sprintf("a 2xx with the row of %q in state %s", alias, state)
	if exact {
		want = fmt.Sprintf("200 with the row of %q in state %s", alias, state)
	}
	if receipt != "" {
		want += " and a receipt"
	}
	if !ok || (exact && w.last.Status != http.StatusOK) || t.IntentID != i.obj.IntentID || t.State != state || (receipt != "" && !t.HasReceipt()) {
		return features.Mismatch(want, w.describeLast())
	}
	return nil
}

func (w *atpWorld) lastTerminal(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	t, ok := w.lastRow()
	if !ok || t.IntentID != i.obj.IntentID || !Terminal(t.State) {
		return features.Mismatch(fmt.Sprintf("the terminal row of %q", alias), w.describeLast())
	}
	return nil
}

// rowDiff says how two rows of one transaction differ in what §2 keeps
// verbatim ("" when they do not).
// verbatimDiff says how b differs from a in what §2's "verbatim" names:
// "same body, same receipt, same signature" (the signature is inside the
// receipt). updated_at, state and created_at are other rules' business.
func verbatimDiff(a, b Transaction) string {
	var d []string
	for _, f := range []struct {
		name string
		x, y []byte
	}{{"body", a.Body, b.Body}, {"receipt", a.Receipt, b.Receipt}} {
		if !bytes.Equal(features.CompactJSON(f.x), features.CompactJSON(f.y)) {
			d = append(d, fmt.Sprintf("%s %s then %s", f.name, features.Clip(f.x), features.Clip(f.y)))
		}
	}
	return strings.Join(d, "; ")
}

func rowDiff(a, b Transaction) string {
	var d []string
	for _, f := range []struct {
		name string
		x, y []byte
	}{
		{"body", a.Body, b.Body}, {"receipt", a.Receipt, b.Receipt},
		{"state", []byte(a.State), []byte(b.State)}, {"created_at", []byte(a.CreatedAt), []byte(b.CreatedAt)},
		{"updated_at", []byte(a.UpdatedAt), []byte(b.UpdatedAt)},
	} {
		if !bytes.Equal(features.CompactJSON(f.x), features.CompactJSON(f.y)) {
			d = append(d, fmt.Sprintf("%s %s then %s", f.name, features.Clip(f.x), features.Clip(f.y)))
		}
	}
	return strings.Join(d, "; ")
}

func (w *atpWorld) lastVerbatim(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	t, ok := w.lastRow()
	if !ok || i.final == nil {
		return features.Mismatch(fmt.Sprintf("the stored row of %q", alias), w.describeLast())
	}
	if d := verbatimDiff(i.final.row, t); d != "" {
		return features.Mismatch("the stored row's body, receipt and signature, byte for byte", d)
	}
	return nil
}

func (w *atpWorld) allVerbatim(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if i.final == nil {
		return fmt.Errorf("%w: %q never seen terminal", features.ErrRunnerBug, alias)
	}
	n := 0
	for _, s := range i.seen {
		if !s.afterFinal || s.row.IdempotencyKey != i.key {
			continue
		}
		n++
		if d := verbatimDiff(i.final.row, s.row); d != "" {
			return features.Mismatch("in every answer after settlement the stored row's body, receipt and signature, byte for byte", d)
		}
	}
	if n == 0 {
		return features.Mismatch("answers with the row after it settled", "none")
	}
	return nil
}

func (w *atpWorld) lastIsFirstAuth(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	t, ok := w.lastRow()
	if !ok || i.firstAuth == nil || w.last == i.firstAuth.resp {
		return features.Mismatch(fmt.Sprintf("200 with the row of %q", alias), w.describeLast())
	}
	if !bytes.Equal(features.CompactJSON(t.Body), features.CompactJSON(i.firstAuth.row.Body)) || t.CreatedAt != i.firstAuth.row.CreatedAt {
		return features.Mismatch("the row as first authorized (same body and created_at)", rowDiff(i.firstAuth.row, t))
	}
	return nil
}

func (w *atpWorld) lastError() (Error, bool) {
	var e Error
	if w.last == nil {
		return e, false
	}
	return e, json.Unmarshal(w.last.Body, &e) == nil
}

func (w *atpWorld) nonceConsumed() error {
	e, _ := w.lastError()
	if w.last == nil || w.last.Status != http.StatusConflict || e.Error != ErrNonceConsumed {
		return features.Mismatch(`409 {"error": "nonce_consumed"}`, w.describeLast())
	}
	return nil
}

func (w *atpWorld) firstConsumedAt() error {
	e, _ := w.lastError()
	if _, err := ParseTime(e.FirstConsumedAt); err != nil {
		return features.Mismatch("first_consumed_at, an RFC 3339 time", w.describeLast())
	}
	for _, i := range w.intents {
		if i.consumedAt == "" && i.otherKey != "" {
			i.consumedAt = e.FirstConsumedAt
		}
	}
	return nil
}

func (w *atpWorld) sameConsumedAt() error {
	e, _ := w.lastError()
	for _, i := range w.intents {
		if i.consumedAt != "" && e.FirstConsumedAt != i.consumedAt {
			return features.Mismatch("first_consumed_at "+i.consumedAt+" again (a deterministic 409)", "first_consumed_at "+e.FirstConsumedAt)
		}
	}
	return nil
}

func (w *atpWorld) intentExpired() error {
	e, _ := w.lastError()
	if w.last == nil || w.last.Status != http.StatusGone || e.Error != ErrIntentExpired {
		return features.Mismatch(`410 {"error": "intent_expired"}`, w.describeLast())
	}
	return nil
}

// notExpired: an answer that is not 410 intent_expired (any other is
// another rule's business).
func (w *atpWorld) notExpired() error {
	if err := serverErred(w.last); err != nil {
		return err
	}
	e, _ := w.lastError()
	if w.last != nil && w.last.Status == http.StatusGone && e.Error == ErrIntentExpired {
		return features.Mismatch("no 410 intent_expired before the intent's expires_at", w.describeLast())
	}
	return nil
}

// serverErred is what a check that can only be passed by an answer that
// is not the one it forbids returns for a 5xx: the request erred, and the
// 5xx decides nothing (it is not the 410 the check looks for, nor the
// answer the text asks for). BLOCKED, never passed.
func serverErred(r *client.Response) error {
	if r == nil || r.Status < 500 {
		return nil
	}
	return &features.BlockedError{Blocker: "the target's 5xx answer",
		Reason: fmt.Sprintf("%s %s answered %d %s: a server error decides nothing this check reads", r.Exchange.Method, r.Exchange.Path, r.Status, features.Clip(r.Body))}
}

func (w *atpWorld) is4xx() error {
	if w.last == nil || w.last.Status < 400 || w.last.Status > 499 {
		return features.Mismatch("a 4xx (the text names no status)", w.describeLast())
	}
	return nil
}

func (w *atpWorld) oneRow(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	var first *atpSeen
	for k := range i.seen {
		s := &i.seen[k]
		if s.row.IdempotencyKey != i.key {
			continue
		}
		if first == nil {
			first = s
			continue
		}
		if s.row.CreatedAt != first.row.CreatedAt || !bytes.Equal(features.CompactJSON(s.row.Body), features.CompactJSON(first.row.Body)) {
			return features.Mismatch("one row (one created_at, one body) in every answer", fmt.Sprintf("created_at %s and %s", first.row.CreatedAt, s.row.CreatedAt))
		}
	}
	if first == nil {
		return features.Mismatch("answers carrying the row of "+alias, "none")
	}
	return nil
}

func (w *atpWorld) oneReceipt(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	var rec []byte
	for _, s := range i.seen {
		if !s.row.HasReceipt() {
			continue
		}
		c := features.CompactJSON(s.row.Receipt)
		if rec == nil {
			rec = c
		} else if !bytes.Equal(rec, c) {
			return features.Mismatch("one receipt in every answer that carries one", fmt.Sprintf("%s and %s", features.Clip(rec), features.Clip(c)))
		}
	}
	return nil
}

// --- the transaction ------------------------------------------------------

func (w *atpWorld) isState(alias, state string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if i.last == nil || i.last.state != state {
		return features.Mismatch(fmt.Sprintf("%q %s", alias, state), "state "+w.lastState(i))
	}
	return nil
}

// receipt returns the receipt of alias's last row read, verified with the
// site's keys alone.
func (w *atpWorld) receipt(alias string) (*atpIntent, ReceiptBody, error) {
	i, err := w.intent(alias)
	if err != nil {
		return nil, ReceiptBody{}, err
	}
	if i.last == nil || !i.last.row.HasReceipt() {
		return i, ReceiptBody{}, features.Mismatch(fmt.Sprintf("a receipt on the row of %q", alias), fmt.Sprintf("state %s, no receipt", w.lastState(i)))
	}
	body, err := VerifyReceipt(i.last.row.Receipt, w.keys)
	if err != nil {
		return i, body, features.Mismatch("a receipt that the site's public keys verify (Ed25519 over the JCS form of its body)", err.Error()+": "+features.Clip(i.last.row.Receipt))
	}
	return i, body, nil
}

func (w *atpWorld) settledSigned(alias string) error {
	if err := w.isState(alias, StateSettled); err != nil {
		return err
	}
	_, _, err := w.receipt(alias)
	return err
}

func (w *atpWorld) receiptVerifies(alias string) error {
	_, _, err := w.receipt(alias)
	return err
}

// receiptOnSettled: "A receipt is only emitted after the row transitions
// to settled": every answer that showed a receipt on alias's row showed
// it in a state that carries one (settled, or compensated for the
// compensation receipt). What the receipt says is the binding's example,
// not a requirement.
func (w *atpWorld) receiptOnSettled(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	for _, s := range i.seen {
		if s.row.HasReceipt() && !receiptState(s.state) {
			return features.Mismatch(fmt.Sprintf("a receipt on the row of %q only once it is settled", alias), fmt.Sprintf("a receipt on the row in state %s", s.state))
		}
	}
	return nil
}

func (w *atpWorld) verify(ctx context.Context, doc []byte) (bool, string, error) {
	r, err := w.verifyAnswer(ctx, doc)
	if err != nil {
		return false, "", err
	}
	return verdictOf(r)
}

func (w *atpWorld) verifyAnswer(ctx context.Context, doc []byte) (*client.Response, error) {
	return w.do(ctx, http.MethodPost, PathVerify, "", doc, true)
}

// verdictOf reads a verify answer: 200 {"valid": …}, or a 4xx (not valid).
func verdictOf(r *client.Response) (bool, string, error) {
	var a VerifyAnswer
	switch {
	case r.Status == http.StatusOK && json.Unmarshal(r.Body, &a) == nil && a.Valid != nil:
		return *a.Valid, fmt.Sprintf("%d %s", r.Status, features.Clip(r.Body)), nil
	case r.Status >= 400 && r.Status <= 499:
		return false, fmt.Sprintf("%d %s", r.Status, features.Clip(r.Body)), nil
	}
	return false, fmt.Sprintf("%d %s", r.Status, features.Clip(r.Body)), features.Mismatch(`200 {"valid": true|false} or a 4xx`, fmt.Sprintf("%d %s", r.Status, features.Clip(r.Body)))
}

func (w *atpWorld) verifyAccepts(ctx context.Context, alias string) error {
	i, _, err := w.receipt(alias)
	if err != nil {
		return err
	}
	ok, got, err := w.verify(ctx, i.last.row.Receipt)
	if err != nil {
		return err
	}
	if !ok {
		return features.Mismatch(`200 {"valid": true} for a receipt the site's public key verifies, without credentials`, got)
	}
	return nil
}

func (w *atpWorld) verifyRefuses(ctx context.Context, alias string) error {
	i, _, err := w.receipt(alias)
	if err != nil {
		return err
	}
	var doc map[string]json.RawMessage
	var body map[string]any
	if json.Unmarshal(i.last.row.Receipt, &doc) != nil || json.Unmarshal(doc["body"], &body) != nil {
		return fmt.Errorf("%w: the receipt has no body object", features.ErrRunnerBug)
	}
	amount, _ := body["amount"].(float64)
	body["amount"] = amount + 1
	doc["body"], _ = json.Marshal(body)
	tampered, _ := json.Marshal(doc)
	r, err := w.verifyAnswer(ctx, tampered)
	if err != nil {
		return err
	}
	// A 5xx vouches for nothing, and passes nothing either.
	if err := serverErred(r); err != nil {
		return err
	}
	ok, got, err := verdictOf(r)
	if err != nil {
		return err
	}
	if ok {
		return features.Mismatch(`{"valid": false} or a 4xx for a receipt whose amount was changed`, got)
	}
	return nil
}

// verifyAcceptsReserialized sends the verify endpoint the receipt of alias
// as a third party's JSON library may write it back: the same members and
// values, in another order, indented. Its signature is over the JCS form
// of the body, which does not change: it still verifies.
func (w *atpWorld) verifyAcceptsReserialized(ctx context.Context, alias string) error {
	i, _, err := w.receipt(alias)
	if err != nil {
		return err
	}
	again, err := reorderJSON(i.last.row.Receipt, "")
	if err != nil {
		return fmt.Errorf("%w: re-serializing the receipt: %v", features.ErrRunnerBug, err)
	}
	ok, got, err := w.verify(ctx, again)
	if err != nil {
		return err
	}
	if !ok {
		return features.Mismatch(`200 {"valid": true} for a receipt the site's public key verifies, its members reordered and indented (the same JCS form)`, got)
	}
	return nil
}

// reorderJSON writes a JSON text again with every object's members in
// reverse order of their names, indented; other values are kept as they
// are.
func reorderJSON(raw []byte, indent string) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return raw, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	var b bytes.Buffer
	b.WriteString("{\n")
	for n, k := range names {
		v, err := reorderJSON(m[k], indent+"  ")
		if err != nil {
			return nil, err
		}
		name, _ := json.Marshal(k)
		fmt.Fprintf(&b, "%s  %s: %s", indent, name, v)
		if n < len(names)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(indent + "}")
	return b.Bytes(), nil
}

// sequential visits every pair of the transaction's observations in which
// one returned before the other was sent.
func (i *atpIntent) sequential(f func(a, b atpSeen) error) error {
	for x := range i.seen {
		for y := range i.seen {
			a, b := i.seen[x], i.seen[y]
			if a.row.IdempotencyKey != i.key || b.row.IdempotencyKey != i.key || !a.ret.Before(b.call) {
				continue
			}
			if err := f(a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *atpWorld) neverBack(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	for _, s := range i.seen {
		if Rank(s.state) < 0 {
			return features.Mismatch("a state of the state machine ("+strings.Join(States, ", ")+")", "state "+s.state)
		}
	}
	return i.sequential(func(a, b atpSeen) error {
		if Rank(b.state) < Rank(a.state) || (Terminal(a.state) && b.state != a.state) {
			return features.Mismatch("states that never go back", fmt.Sprintf("%s (answered %s) then %s (asked %s)", a.state, a.ret.Format(time.RFC3339Nano), b.state, b.call.Format(time.RFC3339Nano)))
		}
		return nil
	})
}

func (w *atpWorld) neverExecutingToAuthorized(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	return i.sequential(func(a, b atpSeen) error {
		if a.state == StateExecuting && b.state == StateAuthorized {
			return features.Mismatch("no executing → authorized edge", fmt.Sprintf("executing (answered %s) then authorized (asked %s)", a.ret.Format(time.RFC3339Nano), b.call.Format(time.RFC3339Nano)))
		}
		return nil
	})
}

// railSays is the state the rail's charges allow for a resolved row.
func (w *atpWorld) railSays(i *atpIntent) (string, int) {
	n := w.rail().Charges(i.obj.IntentID)
	if n > 0 {
		return StateSettled, n
	}
	return StateCompensated, n
}

// railCharged reports whether the rail ever moved money for i's intent
// (refunded charges included): a site may have learned of it.
func (w *atpWorld) railCharged(i *atpIntent) bool {
	for _, c := range w.rail().AllCharges() {
		if c.IntentID == i.obj.IntentID {
			return true
		}
	}
	return false
}

func (w *atpWorld) executingOrResolved(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if err := w.needRail(); err != nil {
		return err
	}
	if i.last == nil {
		return features.Mismatch("a row read", "none")
	}
	want, n := w.railSays(i)
	if i.last.state == StateExecuting || (Terminal(i.last.state) && i.last.state == want) {
		return nil
	}
	// "executed": the site learned of the charge (the rail's GET, its
	// callback) and has not committed the receipt yet (§4: "No
	// (pending)"): what the rail says, when the rail charged.
	if i.last.state == StateExecuted && w.railCharged(i) {
		return nil
	}
	return features.Mismatch(fmt.Sprintf("executing, or %s as the rail says (%d charge(s)), or executed once the rail charged", want, n), "state "+i.last.state)
}

func (w *atpWorld) resolvedAsRail(alias string) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if err := w.needRail(); err != nil {
		return err
	}
	if i.last == nil {
		return features.Mismatch("a row read", "none")
	}
	want, n := w.railSays(i)
	if i.last.state != want {
		return features.Mismatch(fmt.Sprintf("%s within %v, as the rail says (%d charge(s))", want, w.sweepBound(), n), "state "+i.last.state)
	}
	return nil
}

func (w *atpWorld) compensated(alias, of string) error {
	if err := w.isState(alias, StateCompensated); err != nil {
		return err
	}
	i, body, err := w.receipt(alias)
	if err != nil {
		return err
	}
	// The text asks of it: "Ed25519, separate document referencing the
	// original intent_id". A state, when it says one, is compensated.
	if body.ReferencesIntentID != i.obj.IntentID || (body.State != "" && body.State != StateCompensated) {
		return features.Mismatch(fmt.Sprintf("a compensation receipt with references_intent_id %s (and, if it names a state, compensated)", i.obj.IntentID),
			fmt.Sprintf("references_intent_id %q, state %q", body.ReferencesIntentID, body.State))
	}
	return nil
}

// charges checks the rail's net charges of alias's intent. A charge the
// site may still be making (the answer was lost) is waited for, bounded.
func (w *atpWorld) charges(ctx context.Context, alias string, lo, hi int) error {
	i, err := w.intent(alias)
	if err != nil {
		return err
	}
	if err := w.needRail(); err != nil {
		return err
	}
	n := w.rail().Charges(i.obj.IntentID)
	if n < lo || n > hi {
		want := fmt.Sprintf("%d to %d charge(s)", lo, hi)
		if lo == hi {
			want = fmt.Sprintf("%d charge(s)", lo)
		}
		return features.Mismatch(want+" at the rail for "+i.obj.IntentID, fmt.Sprintf("%d: %s", n, w.chargeReport(i)))
	}
	return nil
}

func (w *atpWorld) chargeReport(i *atpIntent) string {
	var b strings.Builder
	for _, c := range w.rail().AllCharges() {
		if c.IntentID == i.obj.IntentID {
			fmt.Fprintf(&b, "charge %s of payment intent %s (refunded %v, reply lost %v); ", c.ChargeID, c.PaymentIntent, c.Refunded, c.LostReply)
		}
	}
	return strings.TrimSuffix(b.String(), "; ")
}
