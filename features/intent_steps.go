package features

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/spec"
)

// intentStep is one step definition of features/intent.feature: a regular
// expression and its handler. The table form lets features/catalog_test.go
// check that every step of the file has exactly one definition.
type intentStep struct {
	pattern string
	fn      any
}

// intentSteps registers the step definitions of features/intent.feature.
// Per-scenario state lives in an intentWorld made fresh for every scenario.
func intentSteps(sc *godog.ScenarioContext, env *Env) {
	w := newIntentWorld(env)
	sc.Before(func(ctx context.Context, _ *godog.Scenario) (context.Context, error) {
		w.reset()
		return ctx, nil
	})
	for _, s := range w.steps() {
		sc.Step(s.pattern, s.fn)
	}
}

// steps returns the step table of one world.
func (w *intentWorld) steps() []intentStep {
	a := actorPattern
	return []intentStep{
		// target capabilities and keys
		{`^the target has an admin token$`, w.needAdmin},
		{`^the target has a dashboard password$`, w.needDashboard},
		{`^the target requires signatures$`, w.needSignatures},
		{`^a tester key "([a-z]+)"$`, w.testerKey},
		{`^I take the generated key as "([a-z]+)"$`, w.takeGenerated},
		{`^the next request has header "([^"]*)" set to "([^"]*)"$`, w.stageHeader},

		// plain requests
		{`^` + a + ` sends? (GET|POST) "([^"]*)"$`, w.sendPlain},
		{`^` + a + ` sends? (GET|POST) "([^"]*)" with body:$`, w.sendBody},
		{`^` + a + ` sends? (GET|POST) "([^"]*)" with (the API key as X-Admin-Token|X-Admin-Token "[^"]*"|Basic auth "[^"]*" "[^"]*"|the API key as Basic password)$`, w.sendAdminCredential},

		// publishing
		{`^` + a + ` publish(?:es)? intent "(\w+)"$`, w.publishDefault},
		{`^` + a + ` publish(?:es)? intent "(\w+)" with:$`, w.publishWith},
		{`^` + a + ` publish(?:es)? intent "(\w+)" without checking the status$`, w.publishUnchecked},
		{`^` + a + ` publish(?:es)? with Idempotency-Key "([^"]*)" the body:$`, w.publishIdem},
		{`^(\d+) clients publish concurrently with Idempotency-Key "([^"]*)" the body:$`, w.publishIdemStorm},
		{`^every one of them got the same id$`, w.sameIDs},
		{`^I remember the published id as "(\w+)"$`, w.rememberID},
		{`^I publish (\d+) public intents$`, w.publishPublic},
		{`^I publish (\d+) intents of priority (\d+) concurrently$`, w.publishPriority},
		{`^I publish (\d+) intents$`, w.publishMany},
		{`^every one of them was accepted$`, w.allAccepted},
		{`^` + a + ` publish(?:es)? (\d+) intents, paced by the rate limit$`, w.publishPaced},

		// claiming
		{`^` + a + ` claims?$`, w.claimPlain},
		{`^` + a + ` claims? with query "([^"]*)"$`, w.claimQuery},
		{`^` + a + ` claims? with header "([^"]*)" set to "([^"]*)"$`, w.claimHeader},
		{`^` + a + ` claims? intent "(\w+)"$`, w.claimIntent},
		{`^` + a + ` claims? intent "(\w+)" with query "([^"]*)"$`, w.claimIntentQuery},
		{`^` + a + ` claims? until intent "(\w+)" is returned$`, w.claimUntil},
		{`^the claim returns intent "(\w+)"$`, w.claimReturned},
		{`^the claim token is 32 lowercase hex characters$`, w.tokenFormat},
		{`^(\d+) workers claim concurrently$`, w.claimStorm},
		{`^(\d+) claims returned an intent$`, w.claimsReturned},
		{`^no intent is held by two live leases$`, w.noDoubleLease},
		{`^every claim token is distinct$`, w.distinctTokens},
		{`^I claim every intent in turn$`, w.claimAll},
		{`^the intents were claimed in the order "([^"]*)"$`, w.claimOrder},
		{`^I note the scheduling fields of every intent$`, w.noteSchedule},
		{`^the claim order is by priority desc, run_at, claim_attempts, created_at and id$`, w.checkSchedule},
		{`^` + a + ` sends (\d+) claims within one rate-limit window$`, w.rateBurst},
		{`^at least one was refused with 429 and code "([^"]*)"$`, w.burstRefused},

		// leases, failures, time
		{`^I fail "(\w+)" (\d+) times$`, w.failTimes},
		{`^the run_at of "(\w+)" is within the backoff window of attempt (\d+)(?: with base (\d+(?:\.\d+)?))? after the last fail$`, w.backoffWindow},
		{`^the lease of "(\w+)" has expired$`, w.leaseExpired},
		{`^"(\w+)" is due$`, w.due},
		{`^the lease of "(\w+)" ends at least (\d+) protocol seconds from now$`, w.leaseEndsAfter},
		{`^(\d+(?:\.\d+)?) protocol seconds pass$`, w.protocolPass},
		{`^the intent "(\w+)" expires (\d+) protocol seconds after it was created$`, w.expiresAfter},

		// intent state
		{`^the status of "(\w+)" is "(\w+)"$`, w.statusIs},
		{`^"(\w+)" is in the dead-letter queue$`, func(ctx context.Context, alias string) error { return w.inDead(ctx, alias, true) }},
		{`^"(\w+)" is not in the dead-letter queue$`, func(ctx context.Context, alias string) error { return w.inDead(ctx, alias, false) }},
		{`^the namespace holds (\d+) open intents?$`, w.namespaceHolds},

		// signing
		{`^I send a signed (GET|POST) "([^"]*)"$`, func(ctx context.Context, m, p string) error { return w.signed(ctx, m, p, nil, "", "") }},
		{`^I send a signed (GET|POST) "([^"]*)" with body:$`, func(ctx context.Context, m, p string, doc *godog.DocString) error {
			return w.signed(ctx, m, p, doc, "", "")
		}},
		{`^I send a signed (GET|POST) "([^"]*)" with nonce "([^"]*)"$`, func(ctx context.Context, m, p, nonce string) error { return w.signed(ctx, m, p, nil, "", nonce) }},
		{`^I send a signed (GET|POST) "([^"]*)" with (` + strings.Join(signFlaws, "|") + `)$`, func(ctx context.Context, m, p, flaw string) error { return w.signed(ctx, m, p, nil, flaw, "") }},
		{`^I send an unsigned (GET|POST) "([^"]*)"$`, w.unsigned},

		// responses
		{`^the response status is (\d+)$`, w.statusCode},
		{`^the response status is (\d+) or (\d+)$`, w.statusEither},
		{`^the response status is not (\d+)$`, w.statusNot},
		{`^the response is an error with status (\d+) and code "([^"]*)"$`, w.errorWith},
		{`^the response is an error whose code starts with "([^"]*)"$`, w.errorPrefix},
		{`^the response is a JSON error$`, w.jsonError},
		{`^the response carries the security and version headers$`, w.securityHeaders},
		{`^the response header "([^"]*)" is "([^"]*)"$`, w.headerIs},
		{`^the response header "([^"]*)" contains "([^"]*)"$`, w.headerContains},
		{`^the response body contains "([^"]*)"$`, w.bodyContains},
		{`^the response field "([^"]*)" is ((?:"|\{|\[|-?\d|true$|false$|null$).*)$`, w.fieldIs},
		{`^the response field "([^"]*)" is a number$`, w.fieldNumber},
		{`^the response field "([^"]*)" is absent$`, w.fieldAbsent},
		{`^the response field "([^"]*)" is present$`, w.fieldPresent},
		{`^the response field "([^"]*)" matches "([^"]*)"$`, w.fieldMatches},
		{`^the response field "([^"]*)" differs from "(\w+)"$`, w.fieldDiffers},
		{`^the response has the number fields "([^"]*)"$`, w.numberFields},
		{`^I remember the response as "(\w+)"$`, w.rememberResponse},
		{`^the response is the same as "(\w+)"$`, w.sameResponse},
	}
}

// ------------------------------------------------------------ target, keys

func (w *intentWorld) needAdmin() error {
	if w.env.Target.AdminToken == "" {
		return NotApplicable("the target declares no admin token")
	}
	return nil
}

func (w *intentWorld) needDashboard() error {
	if w.env.Target.DashboardPassword == "" {
		return NotApplicable("the target declares no dashboard password")
	}
	return nil
}

func (w *intentWorld) needSignatures() error {
	if !w.env.Target.RequireSignatures {
		return NotApplicable("the target does not run with BUS_REQUIRE_SIGNATURES=true")
	}
	return nil
}

// testerKey makes a tester key with POST /admin/generate_key.
func (w *intentWorld) testerKey(ctx context.Context, name string) error {
	if _, ok := w.keys[name]; ok {
		return nil
	}
	body, _ := json.Marshal(map[string]string{"owner": name + "-" + w.ns})
	r, err := w.send(ctx, actorAdmin, http.MethodPost, "/admin/generate_key", body, nil)
	if err != nil {
		return fmt.Errorf("tester key %s: %w", name, err)
	}
	m, err := jsonBody(r)
	if err != nil {
		return err
	}
	k, _ := m["api_key"].(string)
	if r.Status != http.StatusCreated || k == "" {
		return Mismatch(`201 {"api_key": "tk_…"}`, describe(r))
	}
	w.keys[name] = k
	return nil
}

func (w *intentWorld) takeGenerated(name string) error {
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	k, _ := m["api_key"].(string)
	if k == "" {
		return Mismatch("an api_key in the last response", describe(w.last))
	}
	w.keys[name] = k
	return nil
}

func (w *intentWorld) stageHeader(name, value string) error {
	v, err := w.expand(value)
	if err != nil {
		return err
	}
	if w.header == nil {
		w.header = http.Header{}
	}
	w.header.Set(name, v)
	return nil
}

// -------------------------------------------------------------- requests

func (w *intentWorld) sendPlain(ctx context.Context, actor, method, path string) error {
	p, err := w.expand(path)
	if err != nil {
		return err
	}
	r, err := w.send(ctx, actor, method, p, nil, nil)
	if err == nil && method == http.MethodPost && strings.HasPrefix(p, "/claim") {
		w.noteClaim(r)
	}
	return err
}

func (w *intentWorld) sendBody(ctx context.Context, actor, method, path string, doc *godog.DocString) error {
	p, err := w.expand(path)
	if err != nil {
		return err
	}
	b, err := w.expand(doc.Content)
	if err != nil {
		return err
	}
	_, err = w.send(ctx, actor, method, p, []byte(b), nil)
	return err
}

var credArgs = regexp.MustCompile(`"([^"]*)"`)

// sendAdminCredential sends a request carrying only the named credential (no
// X-API-KEY): the admin-auth and metrics-auth refusal cases.
func (w *intentWorld) sendAdminCredential(ctx context.Context, actor, method, path, cred string) error {
	p, err := w.expand(path)
	if err != nil {
		return err
	}
	args := credArgs.FindAllStringSubmatch(cred, -1)
	h := http.Header{}
	key := w.env.Target.APIKey
	switch {
	case cred == "the API key as X-Admin-Token":
		h.Set(spec.HeaderAdminToken, key)
	case cred == "the API key as Basic password":
		h.Set("Authorization", basicAuth("admin", key))
	case strings.HasPrefix(cred, spec.HeaderAdminToken):
		v, err := w.expand(args[0][1])
		if err != nil {
			return err
		}
		h.Set(spec.HeaderAdminToken, v)
	default:
		u, err1 := w.expand(args[0][1])
		pw, err2 := w.expand(args[1][1])
		if err1 != nil || err2 != nil {
			return fmt.Errorf("basic auth: %v %v", err1, err2)
		}
		h.Set("Authorization", basicAuth(u, pw))
	}
	c, err := w.clientFor(actorAnonymous, "", false)
	if err != nil {
		return err
	}
	_, err = w.sendWith(ctx, c, nil, method, p, nil, h)
	return err
}
