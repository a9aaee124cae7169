package httpidem

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

// registerSteps registers the step definitions of http_idempotency.feature. A fresh httpWorld serves every
// scenario.
func registerSteps(sc *godog.ScenarioContext, env *features.Env) {
	// The run's own nonce names its requests and salts their keys and
	// unique values (features.Env.Fresh): the same seed and run ID send
	// the same requests; a rerun of the seed, fresh ones.
	w := &httpWorld{env: env, run: env.RunID, salt: env.Fresh()}
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

// The rule that covers the set-up steps.
const coversHTTPEndpoint = "IETF-2.6-first-request"

// httpRequest is one logical request of a scenario.
type httpRequest struct {
	unique Unique // replaces the unique placeholders in the body and the count read
	key    string
	caller int
	first  *client.Response // its first answer
	// erred is its first answer that was an unprovoked 5xx (nil: none).
	erred *client.Response
	// before is what a difference count read saw before it was first
	// sent (-1: not read).
	before int
	// effectsBefore is the sink's total effects when its first retry was
	// sent (-1 before that): what the retries added is judged against it.
	effectsBefore int
	counted       int // what the count read saw at "I count what … created" (-1: not counted)
	// outside says how its key is outside the format the endpoint
	// publishes, or the variant's text allows ("": a key in it): such a
	// request is not well formed, so a 5xx to it is no server-error
	// finding but an answer that did not refuse the key.
	outside string
	// rejection is the endpoint's answer to it made invalid (nil: none).
	rejection *client.Response
	// slow: it was sent as the endpoint's declared slow request, so every
	// later delivery of it carries the slow members too: a retry or a
	// duplicate is the identical request, not another payload (a
	// middleware that compares payloads refuses one that drops them).
	slow bool
}

// httpHeld is a request sent to be in flight (or a duplicate of one).
type httpHeld struct {
	done     chan heldAnswer
	sent     time.Time
	got      bool
	answer   *client.Response
	answered time.Time
}

type heldAnswer struct {
	resp *client.Response
	at   time.Time
}

type httpWorld struct {
	env *features.Env
	run string
	// salt is the run's own randomness, mixed into every key and unique
	// value: two runs with one seed against one long-lived endpoint send
	// different keys (else the second run meets the first's replays).
	salt *mrand.Rand
	ep   *Endpoint

	reqs    map[string]*httpRequest
	last    *client.Response
	lastReq *httpRequest // the logical request the last answer answered
	lastHow string       // how it was sent (request's how: "", "nokey", "vary", "invalid")
	n       int
	// provoked: the scenario makes the endpoint fail (the effect sink
	// fails a call), so a 5xx is the answer it asked for, not a finding.
	provoked bool
	release  func()
	released time.Time
	first    *httpHeld // the original, held at the sink
	dup      *httpHeld // its duplicate
	// dup2 is a second duplicate, sent once the first was answered (or
	// after the window a waiting target keeps it), the original still in
	// flight: a layer whose rejection of the first duplicate released the
	// original's claim executes it.
	dup2     *httpHeld
	heldReq  *httpRequest
	slowTook time.Duration // how long the declared slow request took
	effects0 int           // the sink's effects when the scenario began
}

func (w *httpWorld) reset() {
	w.releaseAll()
	*w = httpWorld{env: w.env, run: w.run, salt: w.salt, reqs: map[string]*httpRequest{}}
}

func (w *httpWorld) releaseAll() {
	if w.release != nil {
		w.release()
		w.release = nil
	}
	for _, h := range []*httpHeld{w.first, w.dup, w.dup2} {
		h.collect(10 * time.Second)
	}
}

func (w *httpWorld) steps() []features.StepDef {
	q := `"(\w+)"`
	return []features.StepDef{
		{Pattern: `^the endpoint the target describes$`, Fn: w.describe, Kind: features.Action, Covers: coversHTTPEndpoint},
		{Pattern: `^the endpoint follows the (ietf|t0|stripe) variant$`, Fn: w.variant, Kind: features.Action},
		{Pattern: `^the endpoint requires a key$`, Fn: w.requiresKey, Kind: features.Action},
		{Pattern: `^the endpoint declares a request it rejects$`, Fn: w.declaresInvalid, Kind: features.Action},
		{Pattern: `^the endpoint documents a replay header$`, Fn: w.documentsReplayHeader, Kind: features.Action},
		{Pattern: `^the last answer does not carry the documented replay header$`, Fn: w.notMarkedReplay, Kind: features.Check},
		{Pattern: `^two callers$`, Fn: w.twoCallers, Kind: features.Action},
		{Pattern: `^the endpoint's key is scoped to the caller$`, Fn: w.callerScoped, Kind: features.Action},
		{Pattern: `^a request ` + q + `$`, Fn: func(a string) error { return w.newRequest(a, 0, "") }, Kind: features.Action},
		{Pattern: `^a request ` + q + ` whose key needs escaping as a String$`, Fn: w.escapedKey, Kind: features.Action},
		{Pattern: `^a request ` + q + ` whose key is 255 characters long$`, Fn: w.longKey, Kind: features.Action},
		{Pattern: `^a request ` + q + ` of the second caller under the key of ` + q + `$`, Fn: w.secondCaller, Kind: features.Action},
		{Pattern: `^a request ` + q + ` with the body of ` + q + ` under a new key$`, Fn: w.sameBody, Kind: features.Action},
		{Pattern: `^a request ` + q + ` whose key is outside the published format$`, Fn: w.outsideKey, Kind: features.Action},
		{Pattern: `^a request ` + q + ` whose key is one character longer than the published maximum$`, Fn: w.overLongKey, Kind: features.Action},
		{Pattern: `^the last answer is not the rejection of ` + q + ` replayed$`, Fn: w.notRejectionReplayed, Kind: features.Check},
		{Pattern: `^the duplicate's answer is an error or the result of the first answer to ` + q + `$`, Fn: w.dupErrorOrResult, Kind: features.Check},
		{Pattern: `^no request of this scenario was answered with a 5xx$`, Fn: w.noServerError, Kind: features.Check},
		{Pattern: `^the last answer is a 4xx refusal$`, Fn: w.keyRefused, Kind: features.Gate},
		{Pattern: `^the endpoint declares a key lifetime under 24 hours$`, Fn: w.shortLifetime, Kind: features.Action},
		{Pattern: `^I wait past the declared key lifetime$`, Fn: w.waitPastLifetime, Kind: features.Action},
		{Pattern: `^` + q + ` and ` + q + ` together created exactly two things$`, Fn: func(ctx context.Context, a, _ string) error { return w.created(ctx, a, 2) }, Kind: features.Probe},
		{Pattern: `^` + q + ` and ` + q + ` together created exactly one thing$`, Fn: func(ctx context.Context, a, _ string) error { return w.created(ctx, a, 1) }, Kind: features.Probe},

		{Pattern: `^I send ` + q + `$`, Fn: func(ctx context.Context, a string) error { return w.send(ctx, a, "") }, Kind: features.Action, Covers: coversHTTPEndpoint},
		{Pattern: `^I send ` + q + ` again$`, Fn: func(ctx context.Context, a string) error { return w.send(ctx, a, "") }, Kind: features.Action},
		{Pattern: `^I send ` + q + ` again (\d+) times$`, Fn: w.sendTimes, Kind: features.Action},
		{Pattern: `^I send ` + q + ` without a key( again)?$`, Fn: func(ctx context.Context, a, _ string) error { return w.send(ctx, a, "nokey") }, Kind: features.Action},
		{Pattern: `^I send ` + q + ` with another payload( again)?$`, Fn: func(ctx context.Context, a, _ string) error { return w.send(ctx, a, "vary") }, Kind: features.Action},
		{Pattern: `^I send ` + q + ` made invalid$`, Fn: func(ctx context.Context, a string) error { return w.send(ctx, a, "invalid") }, Kind: features.Action},
		{Pattern: `^I send ` + q + ` and its effect is held$`, Fn: w.sendHeld, Kind: features.Action},
		{Pattern: `^I send ` + q + ` again while the first is held$`, Fn: w.sendDuplicate, Kind: features.Action},
		{Pattern: `^I send ` + q + ` a third time while the first is held$`, Fn: w.sendSecondDuplicate, Kind: features.Action},
		{Pattern: `^the second duplicate's answer is 409 Conflict$`, Fn: func() error {
			return w.onSecond(func() error {
				return w.documented(w.lastNamed(409, 409, "409 Conflict, the resource conflict error", "a resource conflict error"), "in-flight")
			})
		}, Kind: features.Check},
		{Pattern: `^the second duplicate was answered after the release, with the status and body of the first answer to ` + q + `$`, Fn: func(a string) error { return w.onSecond(func() error { return w.dupWaited(a) }) }, Kind: features.Check},
		{Pattern: `^the second duplicate's answer is a 2xx$`, Fn: func() error { return w.onSecond(w.dupIs2xx) }, Kind: features.Check},
		{Pattern: `^the second duplicate's answer is an error or the result of the first answer to ` + q + `$`, Fn: func(a string) error { return w.onSecond(func() error { return w.dupErrorOrResult(a) }) }, Kind: features.Check},
		{Pattern: `^the effect is released$`, Fn: w.releaseHeld, Kind: features.Action},
		{Pattern: `^I wait half of 24 hours$`, Fn: w.waitHalfDay, Kind: features.Action},
		{Pattern: `^the effect sink fails the next call$`, Fn: w.sinkFails, Kind: features.Action},
		{Pattern: `^the first answer to ` + q + ` is a 5xx$`, Fn: w.first5xx, Kind: features.Action},
		{Pattern: `^the effect sink saw no further effect after the first answer to ` + q + `$`, Fn: w.noFurtherEffect, Kind: features.Probe},
		{Pattern: `^I count what ` + q + ` created$`, Fn: w.countNow, Kind: features.Action},
		{Pattern: `^` + q + ` created nothing since it was counted$`, Fn: w.nothingSinceCounted, Kind: features.Probe},
		{Pattern: `^the endpoint rejected it$`, Fn: w.rejected, Kind: features.Action},
		{Pattern: `^the last answer has the outcome of the first answer to ` + q + `$`, Fn: w.sameOutcome, Kind: features.Check},

		{Pattern: `^the last answer is a 2xx$`, Fn: func() error { return w.lastIn(200, 299, "a 2xx") }, Kind: features.Gate},
		{Pattern: `^the last answer is a 4xx$`, Fn: func() error { return w.documented(w.lastIn(400, 499, "a 4xx (the text names no status)"), "mismatch") }, Kind: features.Gate},
		{Pattern: `^the endpoint refused it$`, Fn: w.refusedIt, Kind: features.Action},
		{Pattern: `^the last answer is a 4xx that fails the request$`, Fn: w.failsRequest, Kind: features.Gate},
		{Pattern: `^the last answer is 409 Conflict$`, Fn: func() error {
			return w.documented(w.lastNamed(409, 409, "409 Conflict, the resource conflict error", "a resource conflict error"), "in-flight")
		}, Kind: features.Gate},
		{Pattern: `^the last answer is 409 with a problem description$`, Fn: w.problem409, Kind: features.Check},
		{Pattern: `^the last answer is (400|422) with a link to documentation$`, Fn: w.withLink, Kind: features.Check},
		{Pattern: `^the last answer has the status and body of the first answer to ` + q + `$`, Fn: w.sameAsFirst, Kind: features.Check},
		{Pattern: `^the last answer is a 2xx that is not the first answer to ` + q + `$`, Fn: w.notFirst, Kind: features.Check},
		{Pattern: `^the first answer to ` + q + ` is a 2xx$`, Fn: w.firstIs2xx, Kind: features.Check},
		{Pattern: `^the duplicate was answered after the release, with the status and body of the first answer to ` + q + `$`, Fn: w.dupWaited, Kind: features.Check},
		{Pattern: `^the duplicate's answer is a 2xx$`, Fn: w.dupIs2xx, Kind: features.Check},
		{Pattern: `^` + q + ` created exactly one thing$`, Fn: func(ctx context.Context, a string) error { return w.created(ctx, a, 1) }, Kind: features.Probe},
		{Pattern: `^` + q + ` created at most one thing$`, Fn: func(ctx context.Context, a string) error { return w.createdAtMost(ctx, a, 1) }, Kind: features.Probe},
		{Pattern: `^` + q + ` created nothing$`, Fn: func(ctx context.Context, a string) error { return w.created(ctx, a, 0) }, Kind: features.Probe},
	}
}

// --- set-up ---------------------------------------------------------------

func (w *httpWorld) describe() error {
	ep, _ := w.env.Target.Described.(*Endpoint)
	if ep == nil {
		return features.NotApplicable("the target describes no endpoint (\"http_idempotency\" in the target file: docs/http-idempotency.md)")
	}
	e := *ep
	e.Defaults()
	if err := e.Validate(); err != nil {
		return fmt.Errorf("%w: %v", features.ErrRunnerBug, err)
	}
	w.ep = &e
	if w.env.Sink != nil {
		w.effects0 = w.env.Sink.TotalEffects()
	}
	return nil
}

func (w *httpWorld) variant(v string) error {
	if w.ep.Variant != v {
		return features.NotThisVariant(v, fmt.Sprintf("the target declares the %s variant; this scenario judges the %s variant's text, which disagrees with it where it matters", w.ep.Variant, v))
	}
	return nil
}

func (w *httpWorld) requiresKey() error {
	if !w.ep.RequiresKey {
		return features.NotApplicable("the endpoint does not declare that it requires a key (requires_key)")
	}
	return nil
}

func (w *httpWorld) declaresInvalid() error {
	if len(w.ep.Invalid) == 0 {
		return features.NotApplicable("the endpoint declares no request it rejects (invalid)")
	}
	return nil
}

// documentsReplayHeader: the target declares the header its replays carry
// (documented.replay_header): the server's own word that an answer is a
// replay, which the rejection rules can read.
func (w *httpWorld) documentsReplayHeader() error {
	if d := w.ep.Documented; d == nil || d.ReplayHeader == "" || d.ReplayHeader == NoReplayHeader {
		return features.NotApplicable("the target declares no replay header (documented.replay_header): a replayed rejection cannot be told from one evaluated again")
	}
	return nil
}

// notMarkedReplay: the last answer does not carry the replay header the
// endpoint documents: by its own word, the endpoint did not replay it. A
// rejection it marks as a replay was committed to replay ("a rejected or
// declined call commits nothing to replay").
func (w *httpWorld) notMarkedReplay() error {
	if err := w.erred(w.last); err != nil {
		return err
	}
	if w.last == nil {
		return features.Mismatch("an answer to the rejected request sent again", "none")
	}
	spec := w.ep.Documented.ReplayHeader
	name, value, hasValue := strings.Cut(spec, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	for _, v := range w.last.Header.Values(name) {
		if !hasValue || strings.EqualFold(strings.TrimSpace(v), value) {
			return features.Mismatch(fmt.Sprintf("the rejection evaluated again, not replayed (without the documented replay header %q)", spec),
				fmt.Sprintf("the rejection replayed, marked %s: %s: %s", name, v, w.describeLast()))
		}
	}
	return nil
}

func (w *httpWorld) twoCallers() error {
	if w.ep.KeyScope == KeyScopeNone {
		return features.NotApplicable("the target declares the endpoint authenticates no caller (key_scope none): there is no caller or client identity to scope a key to")
	}
	if len(w.ep.Callers) < 2 {
		return features.NotApplicable("the target declares fewer than two callers (callers)")
	}
	return nil
}

// callerScoped: t-0 scopes a key to the authenticated caller, except the
// keys its table makes global (t-0-minted ids, unique by construction):
// a receiver that deduplicates those across callers follows the table.
func (w *httpWorld) callerScoped() error {
	if w.ep.KeyScope == "global" {
		return features.NotApplicable("the target declares the key global (key_scope), as t-0's table makes its t-0-minted ids: no caller scope to judge")
	}
	return nil
}

// rnd draws from the seed and the run's salt together.
func (w *httpWorld) rnd() uint32 { return w.env.Rand.Uint32() ^ w.salt.Uint32() }

func (w *httpWorld) fresh() Unique {
	w.n++
	return NewUnique(w.run, int64(w.n), w.rnd)
}

// newKey makes a key in the endpoint's published format (KeySpec).
func (w *httpWorld) newKey() (string, error) {
	k, err := w.ep.KeySpec.NewKey(w.rnd)
	if err != nil {
		return "", fmt.Errorf("%w: key_spec: %v", features.ErrRunnerBug, err)
	}
	return k, nil
}

func (w *httpWorld) newRequest(alias string, caller int, key string) error {
	if key == "" {
		var err error
		if key, err = w.newKey(); err != nil {
			return err
		}
	}
	w.reqs[alias] = &httpRequest{unique: w.fresh(), key: key, caller: caller, effectsBefore: -1, counted: -1, before: -1}
	return nil
}

// sameBody: alias is a request with the body of of, under a new key.
func (w *httpWorld) sameBody(alias, of string) error {
	o, err := w.req(of)
	if err != nil {
		return err
	}
	if err := w.newRequest(alias, o.caller, ""); err != nil {
		return err
	}
	w.reqs[alias].unique = o.unique
	return nil
}

// outsideKey: alias's key is a well-formed header value outside the
// endpoint's published key format.
func (w *httpWorld) outsideKey(alias string) error {
	if w.ep.KeySpec == nil {
		return features.NotApplicable("the endpoint publishes no key format (key_spec): no key is outside it")
	}
	k, ok := w.ep.KeySpec.Outside(w.rnd)
	if !ok {
		return features.NotApplicable("every printable key fits the published key format (key_spec)")
	}
	return w.newOutside(alias, k, "outside the published key format (key_spec): "+w.ep.KeySpec.Allows(k))
}

// newOutside: alias's key is outside what the endpoint publishes or the
// variant's text allows (why says how).
func (w *httpWorld) newOutside(alias, key, why string) error {
	if err := w.newRequest(alias, 0, key); err != nil {
		return err
	}
	w.reqs[alias].outside = why
	return nil
}

// overLongKey: alias's key is one character longer than the published
// max_length and follows the published format otherwise (its pattern,
// its min_length): only its length is wrong.
func (w *httpWorld) overLongKey(alias string) error {
	ks := w.ep.KeySpec
	if ks == nil || ks.MaxLength == 0 {
		return features.NotApplicable("the endpoint publishes no maximum key length (key_spec.max_length)")
	}
	if ks.UUID {
		return features.NotApplicable("the published key format is a UUID (key_spec.uuid): no longer key is a UUID otherwise, and the key outside the format is judged on its own")
	}
	base, err := w.newKey()
	if err != nil {
		return err
	}
	k := strings.Repeat(base, ks.MaxLength/len(base)+2)[:ks.MaxLength+1]
	if (&KeySpec{MinLength: ks.MinLength, Pattern: ks.Pattern}).Allows(k) != "" {
		return features.NotApplicable("idscheck makes no key one character over max_length that fits the published pattern otherwise (key_spec)")
	}
	return w.newOutside(alias, k, fmt.Sprintf("%d characters, one over the published max_length %d (key_spec)", len(k), ks.MaxLength))
}

// keyRefused: the last request, whose key is outside the published
// format, was refused with a 4xx. A 5xx is no refusal: the key is outside
// the format, so the request is not well formed and the 5xx is evidence
// against the rule that judges the key (not a server-error finding that
// blocks it).
func (w *httpWorld) keyRefused() error {
	const want = "a 4xx: the key refused before the request is processed"
	if r := w.lastReq; r != nil && r.outside != "" {
		if w.last == nil || w.last.Status < 400 || w.last.Status > 499 {
			obs := w.describeLast()
			if w.last != nil && w.last.Status >= 500 {
				obs += " (a server error, not a refusal of the key)"
			}
			return features.Mismatch(want+" (its key is "+r.outside+")", obs)
		}
		return nil
	}
	return w.lastIn(400, 499, want)
}

func (w *httpWorld) escapedKey(alias string) error {
	if w.ep.KeyFormat != "sf-string" {
		return features.NotApplicable("the endpoint declares its keys are raw tokens, not RFC 8941 Strings (key_format)")
	}
	k, err := w.newKey()
	if err != nil {
		return err
	}
	if k2 := `k"` + k + `\x`; w.ep.KeySpec.Allows(k2) == "" {
		return w.newRequest(alias, 0, k2)
	}
	return features.NotApplicable("the endpoint's published key format (key_spec) admits no key with a \" or a \\ to escape")
}

// longKey: a key of 255 characters, Stripe's longest. The endpoint's own
// published format does not excuse a refusal: the stripe variant's text
// accepts such keys (the report shows the endpoint's format beside it).
func (w *httpWorld) longKey(alias string) error {
	var b strings.Builder
	for b.Len() < 255 {
		b.WriteString(fmt.Sprintf("%08x", w.rnd()))
	}
	return w.newRequest(alias, 0, b.String()[:255])
}

func (w *httpWorld) secondCaller(alias, of string) error {
	o, err := w.req(of)
	if err != nil {
		return err
	}
	return w.newRequest(alias, 1, o.key)
}

func (w *httpWorld) req(alias string) (*httpRequest, error) {
	r, ok := w.reqs[alias]
	if !ok {
		return nil, fmt.Errorf("%w: no request %q in this scenario", features.ErrRunnerBug, alias)
	}
	return r, nil
}

// --- sending --------------------------------------------------------------

// request builds one HTTP request of r: how is "" (as declared), "nokey",
// "vary" (another payload) or "invalid" (a body the endpoint rejects). A
// request sent slow (r.slow) carries the slow members every time, under
// the members that make it another payload or an invalid one.
func (w *httpWorld) request(r *httpRequest, how string) (client.Request, error) {
	body := Fill(w.ep.Body, r.unique).(map[string]any)
	if r.slow && w.ep.Slow != nil {
		for k, v := range Fill(w.ep.Slow.Members, r.unique).(map[string]any) {
			body[k] = v
		}
	}
	switch how {
	case "vary":
		if len(w.ep.Vary) == 0 {
			return client.Request{}, features.NotApplicable("the endpoint declares no other payload (vary)")
		}
		for k, v := range Fill(w.ep.Vary, r.unique).(map[string]any) {
			body[k] = v
		}
	case "invalid":
		for k, v := range Fill(w.ep.Invalid, r.unique).(map[string]any) {
			body[k] = v
		}
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	if how != "nokey" {
		switch {
		case w.ep.Key.Body != "":
			body[w.ep.Key.Body] = r.key
		case w.ep.KeyFormat == "sf-string":
			v, ok := SFString(r.key)
			if !ok {
				return client.Request{}, fmt.Errorf("%w: key %q is no sf-string", features.ErrRunnerBug, r.key)
			}
			h.Set(w.ep.Key.Header, v)
		default:
			h.Set(w.ep.Key.Header, r.key)
		}
	}
	if r.caller < len(w.ep.Callers) {
		for k, v := range w.ep.Callers[r.caller].Headers {
			h.Set(k, v)
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return client.Request{}, err
	}
	req := client.Request{Method: w.ep.Method, Path: w.ep.Path, Header: h, Body: raw}
	if how != "nokey" {
		// On replicas, the requests under one caller's key are the
		// deliveries of one logical request: each goes to another replica.
		req.Spread = fmt.Sprintf("%d\x00%s", r.caller, r.key)
	}
	return req, nil
}

func (w *httpWorld) do(ctx context.Context, req client.Request) (*client.Response, error) {
	c, err := w.env.Client("http")
	if err != nil {
		return nil, err
	}
	return c.Do(ctx, req)
}

func (w *httpWorld) send(ctx context.Context, alias, how string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	req, err := w.request(r, how)
	if err != nil {
		return err
	}
	if r.first != nil && how == "" && r.effectsBefore < 0 && w.env.Sink != nil {
		r.effectsBefore = w.env.Sink.TotalEffects()
	}
	if err := w.baseline(ctx, r); err != nil {
		return err
	}
	resp, err := w.do(ctx, req)
	if err != nil {
		return err
	}
	w.last, w.lastReq, w.lastHow = resp, r, how
	w.env.Answered(resp)
	w.answered(r, resp)
	if r.first == nil && how == "" {
		r.first = resp
	}
	if how == "invalid" && r.rejection == nil {
		r.rejection = resp
	}
	return nil
}

// answered notes an answer to r: an unprovoked 5xx is a finding.
func (w *httpWorld) answered(r *httpRequest, resp *client.Response) {
	if resp != nil && resp.Status >= 500 && !w.provoked && r.erred == nil && r.outside == "" {
		r.erred = resp
	}
}

// baseline reads a difference count before r is first sent.
func (w *httpWorld) baseline(ctx context.Context, r *httpRequest) error {
	if w.ep.Count == nil || !w.ep.Count.Difference || r.before >= 0 {
		return nil
	}
	n, err := w.readCount(ctx, r)
	if err != nil {
		return err
	}
	r.before = n
	return nil
}

// erred is the reason a check that reads resps is blocked: one of them
// is an unprovoked 5xx ("" when none is).
func (w *httpWorld) erred(resps ...*client.Response) error {
	if w.provoked {
		return nil
	}
	for _, resp := range resps {
		if resp != nil && resp.Status >= 500 {
			return features.BlockedByFinding(RuleServerError, fmt.Sprintf("%s %s answered %d %s to a well-formed request: the server erred, so the check it was making is not decided",
				w.ep.Method, w.ep.Path, resp.Status, features.Clip(resp.Body)))
		}
	}
	return nil
}

// noServerError: no request of the scenario was answered with a 5xx it
// did not provoke.
func (w *httpWorld) noServerError() error {
	for _, a := range slices.Sorted(maps.Keys(w.reqs)) {
		if r := w.reqs[a]; r.erred != nil {
			return features.Mismatch(fmt.Sprintf("no 5xx to the well-formed request %q", a), fmt.Sprintf("%d %s", r.erred.Status, features.Clip(r.erred.Body)))
		}
	}
	return nil
}

func (w *httpWorld) sendTimes(ctx context.Context, alias string, n int) error {
	for range n {
		if err := w.send(ctx, alias, ""); err != nil {
			return err
		}
	}
	return nil
}

// sendHeld sends alias so that it is in flight when its duplicate comes:
// while the effect sink holds every call, once its effect call is there;
// without the sink, as the endpoint's declared slow request (slow), once
// a calibration request has shown how long one takes.
func (w *httpWorld) sendHeld(ctx context.Context, alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	w.heldReq = r
	if w.env.Sink == nil {
		return w.sendSlow(ctx, r)
	}
	req, err := w.request(r, "")
	if err != nil {
		return err
	}
	if err := w.baseline(ctx, r); err != nil {
		return err
	}
	before := w.env.Sink.TotalArrivals()
	w.release = w.env.Sink.HoldAll()
	w.first = w.async(ctx, req)
	wctx, cancel := context.WithTimeout(ctx, w.env.Budget)
	defer cancel()
	if err := w.env.Sink.WaitArrivals(wctx, before+1); err != nil {
		return fmt.Errorf("the endpoint never called the effect sink for %q within %v: %w", alias, w.env.Budget, err)
	}
	return nil
}

// minSlow is the least a slow request may take for a duplicate to be sent
// while it runs with room to spare on either side.
const minSlow = 300 * time.Millisecond

// sendSlow sends r as the endpoint's slow request, after timing one of
// its own (a fresh request, so r's count is its own): the duplicate goes
// a quarter of that time after r, and counts as in flight only if r's
// answer then comes at least half of it later (releaseHeld).
func (w *httpWorld) sendSlow(ctx context.Context, r *httpRequest) error {
	if w.ep.Slow == nil {
		return features.NotApplicable("a duplicate in flight needs the effect sink (effect_sink in the target file), where the endpoint's effect call is held, or a slow request the endpoint declares (slow)")
	}
	probe := &httpRequest{unique: w.fresh(), caller: r.caller, before: -1, slow: true}
	var err error
	if probe.key, err = w.newKey(); err != nil {
		return err
	}
	preq, err := w.request(probe, "")
	if err != nil {
		return err
	}
	t0 := time.Now()
	presp, err := w.do(ctx, preq)
	if err != nil {
		return err
	}
	w.slowTook = time.Since(t0)
	w.answered(probe, presp)
	if presp.Status >= 500 {
		return w.erred(presp)
	}
	if presp.Status > 299 {
		return features.NotApplicable(fmt.Sprintf("the endpoint refused its declared slow request (slow): %d %s", presp.Status, features.Clip(presp.Body)))
	}
	if w.slowTook < minSlow {
		return features.NotApplicable(fmt.Sprintf("the declared slow request (slow) took %v, under %v: too quick for a duplicate to be sent while it runs", w.slowTook.Round(time.Millisecond), minSlow))
	}
	r.slow = true
	req, err := w.request(r, "")
	if err != nil {
		return err
	}
	if err := w.baseline(ctx, r); err != nil {
		return err
	}
	w.first = w.async(ctx, req)
	features.Sleep(ctx, w.slowTook/4)
	return ctx.Err()
}

// async sends req and keeps its answer and when it came.
func (w *httpWorld) async(ctx context.Context, req client.Request) *httpHeld {
	h := &httpHeld{done: make(chan heldAnswer, 1), sent: time.Now()}
	go func() {
		resp, _ := w.do(ctx, req)
		h.done <- heldAnswer{resp, time.Now()}
	}()
	return h
}

// collect waits up to d for h's answer.
func (h *httpHeld) collect(d time.Duration) {
	if h == nil || h.got {
		return
	}
	select {
	case a := <-h.done:
		h.answer, h.answered, h.got = a.resp, a.at, true
	case <-time.After(d):
	}
}

// sendDuplicate sends alias again while the first is held; it keeps the
// answer when one comes within a second (a target that waits answers
// after the release, and releaseHeld makes that answer the last one).
func (w *httpWorld) sendDuplicate(ctx context.Context, alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	req, err := w.request(r, "") // the identical request: slow members too, if it was sent slow
	if err != nil {
		return err
	}
	w.dup = w.async(ctx, req)
	w.last, w.lastReq, w.lastHow = nil, r, ""
	if w.env.Sink != nil {
		w.dup.collect(min(time.Second, w.env.Budget/4))
		w.last = w.dup.answer
	}
	return nil
}

// sendSecondDuplicate sends alias a third time while the original is
// still in flight: once the first duplicate was answered or, when the
// target keeps that one waiting, once the window it was given has passed.
// A layer whose rejection of the first duplicate released the original's
// claim executes this one (Powertools' Middy integration: two payments
// under one key). With the sink, the original is held there, so it is in
// flight whatever the timing; the step then waits until the second
// duplicate was answered or its effect call reached the sink (the layer
// executed it), up to the same window (a layer that waits does neither;
// when the first duplicate is still waiting, a quarter of it).
// Without the sink, the first duplicate's answer is awaited until 3/8 of
// a slow request's time after the original was sent, and releaseHeld
// judges nothing unless the original's answer came at least half of that
// time after the second duplicate was sent (the first duplicate's rule).
func (w *httpWorld) sendSecondDuplicate(ctx context.Context, alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	if w.first == nil || w.dup == nil {
		return fmt.Errorf("%w: %q sent a third time before it and a duplicate were in flight", features.ErrRunnerBug, alias)
	}
	req, err := w.request(r, "") // the identical request, as the first duplicate
	if err != nil {
		return err
	}
	if w.env.Sink == nil {
		if wait := time.Until(w.first.sent.Add(w.slowTook * 3 / 8)); wait > 0 {
			w.dup.collect(wait)
		}
		w.dup2 = w.async(ctx, req)
		return nil
	}
	// A layer that keeps the first duplicate waiting released no claim
	// by answering it: the second needs only to reach it before the
	// release, and the hold stays short of the 2 s a sink call commonly
	// waits (the bundled endpoint's SinkTimeout).
	window := min(time.Second, w.env.Budget/4)
	if !w.dup.got {
		window /= 4
	}
	before := w.env.Sink.TotalArrivals()
	w.dup2 = w.async(ctx, req)
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	arrived := make(chan struct{})
	go func() {
		if w.env.Sink.WaitArrivals(wctx, before+1) == nil {
			close(arrived)
		}
	}()
	select {
	case a := <-w.dup2.done:
		w.dup2.answer, w.dup2.answered, w.dup2.got = a.resp, a.at, true
	case <-arrived:
	case <-wctx.Done():
	}
	return nil
}

// answeredWhen says when h was answered, counted from t0.
func (h *httpHeld) answeredWhen(t0 time.Time) string {
	if h == nil || !h.got {
		return "not in time: the second was sent while it waited"
	}
	return fmt.Sprintf("%v after the original was sent", h.answered.Sub(t0).Round(time.Millisecond))
}

// onSecond runs check on the second duplicate's answer as on the first
// duplicate's: the same rule judges both.
func (w *httpWorld) onSecond(check func() error) error {
	if w.dup2 == nil {
		return fmt.Errorf("%w: no second duplicate was sent", features.ErrRunnerBug)
	}
	dup, last := w.dup, w.last
	w.dup, w.last = w.dup2, w.dup2.answer
	defer func() { w.dup, w.last = dup, last }()
	return check()
}

// releaseHeld lets the original complete (the sink's hold ends) and
// collects both answers. Without the sink, the original's answer is the
// release, and the duplicate counts as in flight only if it was sent at
// least half a slow request's time before that answer came.
func (w *httpWorld) releaseHeld(ctx context.Context) error {
	w.released = time.Now()
	if w.release != nil {
		w.release()
		w.release = nil
	}
	for _, h := range []*httpHeld{w.first, w.dup, w.dup2} {
		h.collect(w.env.Budget)
	}
	if w.env.Sink == nil && w.first != nil && w.first.got {
		w.released = w.first.answered
		if w.dup != nil && w.dup.sent.After(w.released.Add(-w.slowTook/2)) {
			return fmt.Errorf("the duplicate was sent only %v before the original's answer (a slow request takes %v): it may not have been in flight, so nothing is judged",
				w.released.Sub(w.dup.sent).Round(time.Millisecond), w.slowTook.Round(time.Millisecond))
		}
		// the same rule for the second duplicate: what it created or was
		// answered is judged only if the original was still in flight
		if w.dup2 != nil && w.dup2.sent.After(w.released.Add(-w.slowTook/2)) {
			return fmt.Errorf("the second duplicate was sent only %v before the original's answer (a slow request takes %v; the first duplicate was answered %s): it may not have been in flight, so nothing is judged",
				w.released.Sub(w.dup2.sent).Round(time.Millisecond), w.slowTook.Round(time.Millisecond), w.dup.answeredWhen(w.first.sent))
		}
	}
	if r := w.heldReq; r != nil {
		for _, h := range []*httpHeld{w.first, w.dup, w.dup2} {
			if h != nil {
				w.answered(r, h.answer)
			}
		}
	}
	// The duplicate's answer, whenever it came, is the last answer: a
	// server that waits before it answers the conflict still answers it.
	for _, h := range []*httpHeld{w.first, w.dup, w.dup2} {
		if h != nil {
			w.env.Answered(h.answer)
		}
	}
	if w.dup != nil {
		w.last = w.dup.answer
	}
	if w.first != nil && w.first.answer != nil {
		for _, r := range w.reqs {
			if r.first == nil {
				r.first = w.first.answer
			}
		}
	}
	return nil
}

func (w *httpWorld) waitHalfDay(ctx context.Context) error {
	d := w.env.Scaled(12 * time.Hour)
	if d > w.env.Budget {
		return features.NotApplicable(fmt.Sprintf("half of 24 hours lasts %v at this time scale, beyond the budget of %v (give --time-scale)", d, w.env.Budget))
	}
	features.Sleep(ctx, d)
	return ctx.Err()
}

// shortLifetime: the endpoint publishes a key lifetime under Stripe's
// 24 hours (key_ttl_seconds).
func (w *httpWorld) shortLifetime() error {
	if w.ep.KeyTTLSeconds.Never() {
		return features.NotApplicable("the endpoint declares its keys never expire (key_ttl_seconds \"never\"): no lifetime under 24 hours")
	}
	if w.ep.KeyTTLSeconds <= 0 || w.ep.KeyTTLSeconds >= 24*3600 {
		return features.NotApplicable("the endpoint publishes no key lifetime under 24 hours (key_ttl_seconds)")
	}
	return nil
}

// waitPastLifetime waits a tenth beyond the published key lifetime.
func (w *httpWorld) waitPastLifetime(ctx context.Context) error {
	d := w.env.Scaled(time.Duration(float64(w.ep.KeyTTLSeconds)*1.1*float64(time.Second))) + 100*time.Millisecond
	if d > w.env.Budget {
		return features.NotApplicable(fmt.Sprintf("the published key lifetime (key_ttl_seconds %g) lasts %v at this time scale, beyond the budget of %v (give --time-scale, or a longer --budget)", float64(w.ep.KeyTTLSeconds), d, w.env.Budget))
	}
	features.Sleep(ctx, d)
	return ctx.Err()
}

func (w *httpWorld) sinkFails() error {
	if w.env.Sink == nil {
		return features.NotApplicable("failing the endpoint's side effect needs the effect sink (effect_sink in the target file)")
	}
	w.env.Sink.FailNext(1)
	w.provoked = true
	return nil
}

// first5xx: the endpoint answered the processor's failure with a 5xx; one
// that absorbed it (retried and succeeded) gives nothing to judge here.
func (w *httpWorld) first5xx(alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	w.env.Sink.FailNext(0)
	if r.first == nil || r.first.Status < 500 {
		got := "no answer"
		if r.first != nil {
			got = fmt.Sprint(r.first.Status)
		}
		return features.NotApplicable("the endpoint did not answer its processor's failure with a 5xx (" + got + "): there is no error result to replay")
	}
	return nil
}

// noFurtherEffect: the retries of alias made no effect at the sink beyond
// what there was when the first retry was sent. The binding does not say
// how many sink calls one request makes (effect_sink is "where idscheck's
// effect sink listens, if your endpoint calls it"), only the retries are
// held to none.
func (w *httpWorld) noFurtherEffect(alias string) error {
	if w.env.Sink == nil {
		return features.NotApplicable("counting side effects needs the effect sink (effect_sink in the target file)")
	}
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	if r.effectsBefore < 0 {
		return fmt.Errorf("%q was never sent again", alias)
	}
	// A 5xx never passes the rule its request was testing: an endpoint
	// that erred caused no effect, and proved nothing by it.
	if r.erred != nil {
		return w.erred(r.erred)
	}
	want := fmt.Sprintf("no side effect at the effect sink after the first answer to %q", alias)
	total := w.env.Sink.TotalEffects()
	if got := total - r.effectsBefore; got != 0 {
		return features.Mismatch(want, fmt.Sprintf("%d more", got))
	}
	return features.Observed(want, fmt.Sprintf("none more (%d effects in all, as before the retries)", total))
}

// countNow reads what alias created so far, for nothingSinceCounted; an
// endpoint without a count read leaves it uncounted (that check is N/A).
func (w *httpWorld) countNow(ctx context.Context, alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	if w.ep.Count == nil {
		return nil
	}
	n, err := w.count(ctx, alias)
	if err != nil {
		return err
	}
	r.counted = n
	return nil
}

func (w *httpWorld) nothingSinceCounted(ctx context.Context, alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	if r.counted < 0 {
		return features.NotApplicable("the endpoint declares no count read (count): idscheck cannot see what a request created")
	}
	n, err := w.count(ctx, alias)
	if err != nil {
		return err
	}
	if n != r.counted {
		return features.Mismatch(fmt.Sprintf("still %d thing(s) created by %q, as after its first answer", r.counted, alias), fmt.Sprint(n))
	}
	return nil
}

// rejected: the endpoint rejected the request the target file declares
// invalid, with a 4xx or, as t-0's asynchronous endpoints acknowledge a
// rejection, with a body that says rejected. One that accepted it was
// misdescribed: nothing is judged.
func (w *httpWorld) rejected() error {
	if err := w.erred(w.last); err != nil {
		return err
	}
	if w.last != nil && w.last.Status >= 400 && w.last.Status < 500 {
		return nil
	}
	if w.last != nil && w.last.Status >= 200 && w.last.Status < 300 {
		var doc map[string]any
		if json.Unmarshal(w.last.Body, &doc) == nil && (doc["rejectionCode"] != nil || doc["rejected"] != nil || doc["status"] == "rejected" || doc["result"] == "rejected") {
			return nil
		}
	}
	return features.NotApplicable("the endpoint did not reject the request the target file declares invalid (" + w.describeLast() + "): there is no rejection to judge")
}

// --- answers --------------------------------------------------------------

func (w *httpWorld) describeLast() string {
	if w.last == nil {
		return "no answer within the budget"
	}
	return fmt.Sprintf("%d %s", w.last.Status, features.Clip(w.last.Body))
}

// lastNamed is lastIn for a check whose rule names the class or status
// of the answer it wants (§2.6's "resource conflict error", §2.7's 409,
// 422 and 400): a 5xx is none of them under any reading, so it decides the
// rule (serverErrorNot) instead of blocking it. not says what the 5xx is
// not, for the evidence.
func (w *httpWorld) lastNamed(lo, hi int, want, not string) error {
	if err := w.serverErrorNot(w.last, want, not, w.lastWellFormed()); err != nil {
		return err
	}
	return w.lastIn(lo, hi, want)
}

// serverErrorNot judges an unprovoked 5xx a where the rule's text names
// the class or status of the answer it wants: the 5xx is the evidence (a
// FAIL of a MUST, NON-STRICT of a SHOULD), as a 5xx to a key outside the
// published format is for IETF-5-validate-key, and the server-error
// finding is recorded beside it when the request was well formed (one
// without its required key is not, as one with a key outside the format
// is not). nil when a is no unprovoked 5xx. Where the 5xx leaves the rule
// undecidable (a replay of a first answer that was itself a 5xx), the
// checks keep erred: BLOCKED by the finding.
func (w *httpWorld) serverErrorNot(a *client.Response, want, not string, wellFormed bool) error {
	if a == nil || a.Status < 500 || w.provoked {
		return nil
	}
	mm := &features.MismatchError{Expected: want, Observed: fmt.Sprintf("%d %s (a server error, not %s)", a.Status, features.Clip(a.Body), not)}
	if wellFormed {
		var be *features.BlockedError
		if errors.As(w.erred(a), &be) {
			mm.Finding = be
		}
	}
	return mm
}

// lastWellFormed: the last request had its body as declared (or another
// payload, or the endpoint's invalid one) and a key in the published
// format; one sent without its key, or with a key outside the format, is
// not well formed.
func (w *httpWorld) lastWellFormed() bool {
	return w.lastHow != "nokey" && (w.lastReq == nil || w.lastReq.outside == "")
}

func (w *httpWorld) lastIn(lo, hi int, want string) error {
	if err := w.erred(w.last); err != nil {
		return err
	}
	if w.last == nil || w.last.Status < lo || w.last.Status > hi {
		return features.Mismatch(want, w.describeLast())
	}
	return nil
}

// documented puts beside a failed status check the status the endpoint
// documents for that case (Endpoint.Documented): the variant's rule is
// still judged by its own text, and the report says whether the endpoint
// did what it documents instead.
func (w *httpWorld) documented(err error, kind string) error {
	var mm *features.MismatchError
	if err == nil || w.ep.Documented == nil || !errors.As(err, &mm) || w.last == nil {
		return err
	}
	want := map[string]int{"mismatch": w.ep.Documented.MismatchStatus, "in-flight": w.ep.Documented.InFlightStatus, "missing": w.ep.Documented.MissingKeyStatus}[kind]
	if want == 0 {
		return err
	}
	how := "as it documents"
	if w.last.Status != want {
		how = fmt.Sprintf("not the %d it documents either", want)
	}
	return &features.MismatchError{Expected: mm.Expected, Observed: fmt.Sprintf("%s (the endpoint documents %d for this case: it answered %s)", mm.Observed, want, how), Finding: mm.Finding}
}

// refusedIt is the precondition of §2.7's MUST ("Error scenarios above
// describe the status of failed idempotent requests … Clients MUST correct
// the requests before performing a retry operation, or the resource server
// MUST fail the request"): the request the retry repeats was failed. An
// endpoint that did not refuse it (a replay, say) answered what only a
// SHOULD forbids, judged under the SHOULD that names the status: there is
// no failed request whose retry the MUST is about, so the checks that
// rest on it are N/A, not BLOCKED by that SHOULD.
func (w *httpWorld) refusedIt() error {
	if err := w.erred(w.last); err != nil {
		return err
	}
	if w.last != nil && w.last.Status >= 400 && w.last.Status < 500 {
		return nil
	}
	return features.NotApplicable("the request was not refused (" + w.describeLast() + "): §2.7's MUST is about the uncorrected retry of a request the server failed (the answer itself is judged under the SHOULD that names its status)")
}

// failsRequest: §2.7 "the resource server MUST fail the request and
// return one of the above errors". The statuses of those errors are
// SHOULDs ("SHOULD reply with an HTTP 400", "… 422"), so the MUST holds
// for any client error that fails the request; the exact codes are judged
// under IETF-2.7-missing-400 and IETF-2.7-mismatch-422.
func (w *httpWorld) failsRequest() error {
	return w.lastIn(400, 499, "a 4xx that fails the request (the MUST names the errors of §2.7, whose statuses are SHOULDs)")
}

func (w *httpWorld) problem409() error {
	if err := w.documented(w.lastNamed(409, 409, "409", "a 409 with a problem description"), "in-flight"); err != nil {
		return err
	}
	if !describesProblem(w.last.Body) {
		return features.Mismatch("409 with a body containing a problem description (a problem document's title, detail or type, an error message, or a text)", w.describeLast())
	}
	return nil
}

// describesProblem: §2.7 asks for a "body containing problem description"
// and names no format for it (its RFC 7807 example is for the 400): a
// problem document, a JSON object with a non-empty string that says what
// went wrong (title, detail, message, error, …), or a non-empty text that
// is not JSON. An empty body, or a JSON document that says nothing ({},
// null, []), describes nothing.
func describesProblem(body []byte) bool {
	text := strings.TrimSpace(string(body))
	if text == "" {
		return false
	}
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return true // a text
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		s, isString := doc.(string)
		return isString && strings.TrimSpace(s) != ""
	}
	for k, v := range obj {
		switch name := strings.ToLower(k); {
		case name == "title" || name == "detail" || name == "type" || name == "message" || name == "description" || strings.Contains(name, "error"):
			if s, ok := v.(string); ok && strings.TrimSpace(s) != "" {
				return true
			}
			if m, ok := v.(map[string]any); ok && len(m) > 0 {
				return describesProblem(mustJSON(m))
			}
		}
	}
	return false
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (w *httpWorld) withLink(code int) error {
	kind := "mismatch"
	if code == 400 {
		kind = "missing"
	}
	if err := w.documented(w.lastNamed(code, code, fmt.Sprint(code), fmt.Sprintf("a %d with a link to documentation", code)), kind); err != nil {
		return err
	}
	link := strings.Join(w.last.Header.Values("Link"), ", ")
	if strings.Contains(link, `rel="describedby"`) || bytes.Contains(w.last.Body, []byte("http://")) || bytes.Contains(w.last.Body, []byte("https://")) || docReference(w.last.Body) {
		return nil
	}
	return features.Mismatch(fmt.Sprintf("%d with a link to documentation (in the body, or a Link header rel=\"describedby\")", code), w.describeLast()+" Link: "+link)
}

// docReference: a JSON body whose member naming documentation (a problem
// document's "type", or "href", "link", or a member named for docs or
// help) is a URI reference: a relative one ("/problems/key-missing") is a
// link too. RFC 9457's "about:blank" points at no documentation.
func docReference(body []byte) bool {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return false
	}
	for k, v := range doc {
		s, ok := v.(string)
		name := strings.ToLower(k)
		if !ok || s == "" || s == "about:blank" || !(name == "type" || name == "href" || name == "link" || strings.Contains(name, "doc") || strings.Contains(name, "help")) {
			continue
		}
		u, err := url.Parse(s)
		if err == nil && (u.Scheme == "http" || u.Scheme == "https" || (u.Scheme == "" && strings.Contains(u.Path, "/"))) {
			return true
		}
	}
	return false
}

// same says how two answers differ as results ("" when they are the same
// result): the status, and the declared identifier or else the body.
func (w *httpWorld) same(a, b *client.Response) string {
	if a.Status != b.Status {
		return fmt.Sprintf("status %d, then %d", a.Status, b.Status)
	}
	if w.ep.ID != "" && a.Status < 300 {
		var x, y map[string]any
		json.Unmarshal(a.Body, &x)
		json.Unmarshal(b.Body, &y)
		if fmt.Sprint(x[w.ep.ID]) != fmt.Sprint(y[w.ep.ID]) || x[w.ep.ID] == nil {
			return fmt.Sprintf("%s %v, then %v", w.ep.ID, x[w.ep.ID], y[w.ep.ID])
		}
		return ""
	}
	if !features.SameDocument(a.Body, b.Body) {
		return fmt.Sprintf("body %s, then %s", features.Clip(a.Body), features.Clip(b.Body))
	}
	return ""
}

// sameOutcome: "the same outcome" of t-0's retry, not the same bytes: the
// same status and, where the target declares one, the same identifier.
func (w *httpWorld) sameOutcome(alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	if err := w.erred(r.first, w.last); err != nil {
		return err
	}
	if r.first == nil || w.last == nil {
		return features.Mismatch("the first answer's outcome again", w.describeLast())
	}
	if r.first.Status != w.last.Status {
		return features.Mismatch(fmt.Sprintf("status %d, as the first answer to %q", r.first.Status, alias), w.describeLast())
	}
	if w.ep.ID != "" && r.first.Status < 300 {
		var x, y map[string]any
		json.Unmarshal(r.first.Body, &x)
		json.Unmarshal(w.last.Body, &y)
		if x[w.ep.ID] == nil || fmt.Sprint(x[w.ep.ID]) != fmt.Sprint(y[w.ep.ID]) {
			return features.Mismatch(fmt.Sprintf("%s %v, as the first answer to %q", w.ep.ID, x[w.ep.ID], alias), fmt.Sprint(y[w.ep.ID]))
		}
	}
	return nil
}

func (w *httpWorld) sameAsFirst(alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	if err := w.erred(r.first, w.last); err != nil {
		return err
	}
	if r.first == nil || w.last == nil {
		return features.Mismatch("the first answer again", w.describeLast())
	}
	if d := w.same(r.first, w.last); d != "" {
		return features.Mismatch(fmt.Sprintf("the status and body of the first answer to %q (%d %s)", alias, r.first.Status, features.Clip(r.first.Body)), d)
	}
	if note := w.replayNote(r.first, w.last); note != "" {
		return features.Passed(note)
	}
	return nil
}

// replayNote says, beside a passed replay, whether the replay carried the
// header the endpoint documents for replays (documented.replay_header:
// "Name" or "Name: value") and the first answer did not, and whether both
// echoed the key where the endpoint documents it echoes it on every answer
// (documented.key_echo: an echo marks no replay). No variant's text asks
// for either, so it is a remark, not a verdict.
func (w *httpWorld) replayNote(first, replay *client.Response) string {
	d := w.ep.Documented
	if d == nil || first == nil || replay == nil {
		return ""
	}
	var notes []string
	if d.KeyEcho && w.ep.Key.Header != "" {
		h := w.ep.Key.Header
		switch a, b := first.Header.Get(h) != "", replay.Header.Get(h) != ""; {
		case a && b:
			notes = append(notes, fmt.Sprintf("the endpoint documents that every answer echoes %s: the first answer and the replay both did (an echo marks no replay)", h))
		default:
			notes = append(notes, fmt.Sprintf("the endpoint documents that every answer echoes %s, but the first answer echoed it: %v, the replay: %v (no variant's text asks for an echo: a remark, not a verdict)", h, a, b))
		}
	}
	switch spec := d.ReplayHeader; spec {
	case "":
	case NoReplayHeader:
		notes = append(notes, "the endpoint documents no replay header; no variant's text asks for one")
	default:
		name, value, hasValue := strings.Cut(spec, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		has := func(resp *client.Response) bool {
			for _, v := range resp.Header.Values(name) {
				if !hasValue || strings.EqualFold(strings.TrimSpace(v), value) {
					return true
				}
			}
			return false
		}
		switch {
		case has(replay) && !has(first):
			notes = append(notes, fmt.Sprintf("the endpoint documents %q on a replay: the replay carried it, the first answer did not", spec))
		case !has(replay):
			notes = append(notes, fmt.Sprintf("the endpoint documents %q on a replay, but the replay did not carry it (no variant's text asks for it: a remark, not a verdict)", spec))
		default:
			notes = append(notes, fmt.Sprintf("the endpoint documents %q on a replay, but the first answer carried it too (no variant's text asks for it: a remark, not a verdict)", spec))
		}
	}
	return strings.Join(notes, "; ")
}

func (w *httpWorld) notFirst(alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	if err := w.erred(r.first); err != nil {
		return err
	}
	if err := w.lastIn(200, 299, "a 2xx"); err != nil {
		return err
	}
	if r.first != nil && w.same(r.first, w.last) == "" {
		return features.Mismatch(fmt.Sprintf("another result than the first answer to %q (another caller's request)", alias), w.describeLast())
	}
	return nil
}

func (w *httpWorld) firstIs2xx(alias string) error {
	if w.first != nil {
		if err := w.erred(w.first.answer); err != nil {
			return err
		}
	}
	if w.first == nil || w.first.answer == nil || w.first.answer.Status > 299 || w.first.answer.Status < 200 {
		got := "no answer"
		if w.first != nil && w.first.answer != nil {
			got = fmt.Sprintf("%d %s", w.first.answer.Status, features.Clip(w.first.answer.Body))
		}
		return features.Mismatch(fmt.Sprintf("the original %q answered 2xx once released", alias), got)
	}
	return nil
}

func (w *httpWorld) dupWaited(alias string) error {
	if w.dup == nil || w.dup.answer == nil {
		return features.Mismatch("an answer to the duplicate", "none")
	}
	if err := w.dupServerError("the duplicate answered after the original completed, with the same response (\"Do not reject the duplicate, and do not return an error\")", "the original's response"); err != nil {
		return err
	}
	// Without the sink, the original completes just before its answer
	// leaves, and a duplicate that waited may be answered first: it waited
	// if it was answered no sooner than a quarter of a slow request's time
	// before the original's answer (sent right away it would answer three
	// quarters sooner).
	if w.dup.answered.Before(w.released.Add(-w.slowTook / 4)) {
		return features.Mismatch("the duplicate answered after the original completed (it waits)", fmt.Sprintf("answered while the original was in flight: %d %s", w.dup.answer.Status, features.Clip(w.dup.answer.Body)))
	}
	if w.first == nil || w.first.answer == nil {
		return features.Mismatch("an answer to the original", "none")
	}
	if d := w.same(w.first.answer, w.dup.answer); d != "" {
		return features.Mismatch("the same response to both", d)
	}
	return nil
}

// dupServerError judges an unprovoked 5xx to the duplicate under t-0's
// "Do not reject the duplicate, and do not return an error" (rules 2, 3):
// a 5xx is an error under any reading, so it is the evidence, the
// server-error finding beside it. When the original's answer was an
// unprovoked 5xx too, the same 5xx to both is what "return the same
// response to both" asks and what "do not return an error" forbids: the
// rule is not decided on it (BLOCKED by the finding). nil when the
// duplicate's answer is no 5xx.
func (w *httpWorld) dupServerError(want, not string) error {
	a := w.dup.answer
	if a == nil || a.Status < 500 || w.provoked {
		return nil
	}
	if w.first != nil && w.first.answer != nil && w.first.answer.Status >= 500 {
		return w.erred(a)
	}
	return w.serverErrorNot(a, want, not+": an error to a duplicate", true)
}

// dupErrorOrResult: Stripe's "If … the request conflicts with another
// request that's executing concurrently, we don't save the idempotent
// result because no API endpoint initiates the execution. You can retry
// these requests." The duplicate either met the original as a conflict
// (an error: any 4xx, the page names no status) or, where the layer
// waits instead, got the result the key saved ("Subsequent requests with
// the same key return the same result"). Another 2xx result, or no
// answer, is neither. A 5xx is an error (the page names no status, and a
// duplicate that met the original executing gets one: "You can retry
// these requests"), so the text allows it, and a 5xx never passes a
// rule: the check is BLOCKED by the server-error finding (a conflict is
// the client's, a 4xx, under RFC 9110), and since such a request is not
// saved, the later retry is judged on its own.
func (w *httpWorld) dupErrorOrResult(alias string) error {
	if w.dup == nil || w.dup.answer == nil {
		return features.Mismatch("an answer to the duplicate: an error (it conflicts with the request executing) or the original's result", "none")
	}
	if err := w.erred(w.dup.answer); err != nil {
		return err
	}
	if a := w.dup.answer; a.Status >= 400 && a.Status < 500 {
		return nil
	}
	if w.first == nil || w.first.answer == nil {
		return features.Mismatch("an answer to the original", "none")
	}
	if err := w.erred(w.first.answer); err != nil {
		return err
	}
	if d := w.same(w.first.answer, w.dup.answer); d != "" {
		return features.Mismatch(fmt.Sprintf("an error (the duplicate conflicts with the request executing) or the result of the first answer to %q (%d %s)", alias, w.first.answer.Status, features.Clip(w.first.answer.Body)),
			fmt.Sprintf("%d %s (%s)", w.dup.answer.Status, features.Clip(w.dup.answer.Body), d))
	}
	return nil
}

// notRejectionReplayed: the answer to the corrected request under the
// key of a rejected one is not that rejection again (t-0: "a rejected or
// declined call commits nothing to replay"; Stripe: a validation failure
// is not saved). A replayed rejection is the same status and body.
func (w *httpWorld) notRejectionReplayed(alias string) error {
	r, err := w.req(alias)
	if err != nil {
		return err
	}
	if r.rejection == nil {
		return fmt.Errorf("%w: %q was never sent made invalid", features.ErrRunnerBug, alias)
	}
	if err := w.erred(w.last); err != nil {
		return err
	}
	if w.last == nil {
		return features.Mismatch("an answer to the corrected request", "none")
	}
	if w.last.Status == r.rejection.Status && features.SameDocument(w.last.Body, r.rejection.Body) {
		return features.Mismatch(fmt.Sprintf("the corrected request under the rejected key evaluated afresh, not the rejection replayed (%d %s)", r.rejection.Status, features.Clip(r.rejection.Body)),
			fmt.Sprintf("the rejection replayed: %s", w.describeLast()))
	}
	return nil
}

func (w *httpWorld) dupIs2xx() error {
	if w.dup != nil {
		if err := w.dupServerError("a 2xx to the duplicate (a duplicate is not an error)", "a 2xx"); err != nil {
			return err
		}
	}
	if w.dup == nil || w.dup.answer == nil || w.dup.answer.Status < 200 || w.dup.answer.Status > 299 {
		got := "none"
		if w.dup != nil && w.dup.answer != nil {
			got = fmt.Sprintf("%d %s", w.dup.answer.Status, features.Clip(w.dup.answer.Body))
		}
		return features.Mismatch("a 2xx to the duplicate (a duplicate is not an error)", got)
	}
	return nil
}

// createdAtMost: alias's logical request created no more than max things
// (fewer is another rule's business).
func (w *httpWorld) createdAtMost(ctx context.Context, alias string, max int) error {
	n, err := w.count(ctx, alias)
	if err != nil {
		return err
	}
	if n > max {
		return features.Mismatch(fmt.Sprintf("at most %d thing(s) created by %q", max, alias), fmt.Sprint(n))
	}
	if n < 0 {
		return fmt.Errorf("the count read went down by %d while %q was sent: another client changes what it counts", -n, alias)
	}
	return nil
}

// created counts what alias's logical request created, with the declared
// count read.
func (w *httpWorld) created(ctx context.Context, alias string, want int) error {
	n, err := w.count(ctx, alias)
	if err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("the count read went down by %d while %q was sent: another client changes what it counts", -n, alias)
	}
	if r := w.reqs[alias]; n < want && r != nil && r.erred != nil {
		return w.erred(r.erred)
	}
	if n != want {
		return features.Mismatch(fmt.Sprintf("%d thing(s) created by %q", want, alias), fmt.Sprint(n))
	}
	return nil
}

// count reads, with the declared count read, how many things alias's
// logical request created: the read for its unique values, or with a
// difference read, the count now less the count before it was first sent.
func (w *httpWorld) count(ctx context.Context, alias string) (int, error) {
	r, err := w.req(alias)
	if err != nil {
		return 0, err
	}
	if w.ep.Count == nil {
		return 0, features.NotApplicable("the endpoint declares no count read (count): idscheck cannot see what a request created")
	}
	n, err := w.readCount(ctx, r)
	if err != nil {
		return 0, err
	}
	if w.ep.Count.Difference {
		if r.before < 0 {
			return 0, fmt.Errorf("%w: %q was counted before it was sent", features.ErrRunnerBug, alias)
		}
		return n - r.before, nil
	}
	return n, nil
}

// readCount sends the count read as r's caller.
func (w *httpWorld) readCount(ctx context.Context, r *httpRequest) (int, error) {
	h := http.Header{}
	if r.caller < len(w.ep.Callers) {
		for k, v := range w.ep.Callers[r.caller].Headers {
			h.Set(k, v)
		}
	}
	resp, err := w.do(ctx, client.Request{Method: http.MethodGet, Path: w.ep.Count.PathFor(r.unique), Header: h})
	if err != nil {
		return 0, err
	}
	if resp.Status != http.StatusOK {
		return 0, fmt.Errorf("the count read answered %d %s", resp.Status, features.Clip(resp.Body))
	}
	n, err := w.ep.Count.Extract(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, features.Clip(resp.Body))
	}
	return n, nil
}
