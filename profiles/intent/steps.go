package intent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/features"
)

// intentSteps registers the step definitions of intent.feature.
// Per-scenario state lives in an intentWorld made fresh for every scenario.
func intentSteps(sc *godog.ScenarioContext, env *features.Env) {
	w := newIntentWorld(env)
	sc.Before(func(ctx context.Context, _ *godog.Scenario) (context.Context, error) {
		w.reset()
		return ctx, nil
	})
	features.Register(sc, env, w.steps())
}

// Rules that cover the preconditions of the steps below: when such a step
// fails, what rests on it is BLOCKED by this rule.
const (
	coversGenerateKey = "INTENT-8.2-generate-key"
	coversPublish     = "INTENT-7.2-created-201"
	coversPublishBody = "INTENT-7.2-publish-response"
	coversClaim       = "INTENT-3.2-claim-transition"
	coversFail        = "INTENT-7.6-fail"
	coversResult      = "INTENT-7.7-result-fields"
	coversAdminDetail = "INTENT-8.5-admin-detail"
)

// steps returns the step table of one world. The table form lets
// features/catalog_test.go check that every step of the file has exactly
// one definition and that only checks are written as assertions.
func (w *intentWorld) steps() []features.StepDef {
	a := actorPattern
	return []features.StepDef{
		// target capabilities and keys
		{Pattern: `^the target has an admin token$`, Fn: w.needAdmin, Kind: features.Action},
		{Pattern: `^the target has a dashboard password$`, Fn: w.needDashboard, Kind: features.Action},
		{Pattern: `^the target requires signatures$`, Fn: w.needSignatures, Kind: features.Action},
		{Pattern: `^a tester key "([a-z]+)"$`, Fn: w.testerKey, Kind: features.Action, Covers: coversGenerateKey},
		{Pattern: `^I take the generated key as "([a-z]+)"$`, Fn: w.takeGenerated, Kind: features.Action},
		{Pattern: `^the next request has header "([^"]*)" set to "([^"]*)"$`, Fn: w.stageHeader, Kind: features.Action},

		// plain requests
		{Pattern: `^` + a + ` sends? (GET|POST) "([^"]*)"$`, Fn: w.sendPlain, Kind: features.Action},
		{Pattern: `^` + a + ` sends? (GET|POST) "([^"]*)" with body:$`, Fn: w.sendBody, Kind: features.Action},
		{Pattern: `^` + a + ` sends? (GET|POST) "([^"]*)" with (the API key as X-Admin-Token|X-Admin-Token "[^"]*"|Basic auth "[^"]*" "[^"]*"|the API key as Basic password)$`, Fn: w.sendAdminCredential, Kind: features.Action},

		// publishing
		{Pattern: `^` + a + ` publish(?:es)? intent "(\w+)"$`, Fn: w.publishDefault, Kind: features.Action, Covers: coversPublish},
		{Pattern: `^` + a + ` publish(?:es)? intent "(\w+)" with:$`, Fn: w.publishWith, Kind: features.Action, Covers: coversPublish},
		{Pattern: `^` + a + ` publish(?:es)? intent "(\w+)" without checking the status$`, Fn: w.publishUnchecked, Kind: features.Action},
		{Pattern: `^` + a + ` publish(?:es)? with Idempotency-Key "([^"]*)" the body:$`, Fn: w.publishIdem, Kind: features.Action},
		{Pattern: `^(\d+) clients publish concurrently with Idempotency-Key "([^"]*)" the body:$`, Fn: w.publishIdemStorm, Kind: features.Action},
		{Pattern: `^the publish was accepted$`, Fn: w.publishAccepted, Kind: features.Action, Covers: coversPublish},
		{Pattern: `^every one of them got the same id$`, Fn: w.sameIDs, Kind: features.Check},
		{Pattern: `^I remember the published id as "(\w+)"$`, Fn: w.rememberID, Kind: features.Action, Covers: coversPublishBody},
		{Pattern: `^I publish (\d+) public intents$`, Fn: w.publishPublic, Kind: features.Action, Covers: coversPublish},
		{Pattern: `^I publish (\d+) intents of priority (\d+) concurrently$`, Fn: w.publishPriority, Kind: features.Action, Covers: coversPublish},
		{Pattern: `^I publish (\d+) intents$`, Fn: w.publishMany, Kind: features.Action},
		{Pattern: `^every one of them was accepted$`, Fn: w.allAccepted, Kind: features.Check},
		{Pattern: `^` + a + ` publish(?:es)? (\d+) intents, paced by the rate limit$`, Fn: w.publishPaced, Kind: features.Action, Covers: coversPublish},

		// claiming
		{Pattern: `^` + a + ` claims?$`, Fn: w.claimPlain, Kind: features.Action},
		{Pattern: `^` + a + ` claims? with query "([^"]*)"$`, Fn: w.claimQuery, Kind: features.Action},
		{Pattern: `^` + a + ` claims? with header "([^"]*)" set to "([^"]*)"$`, Fn: w.claimHeader, Kind: features.Action},
		{Pattern: `^` + a + ` claims? intent "(\w+)"$`, Fn: w.claimIntent, Kind: features.Action, Covers: coversClaim},
		{Pattern: `^` + a + ` claims? intent "(\w+)" with query "([^"]*)"$`, Fn: w.claimIntentQuery, Kind: features.Action, Covers: coversClaim},
		{Pattern: `^` + a + ` claims? until intent "(\w+)" is returned$`, Fn: w.claimUntil, Kind: features.Action, Covers: coversClaim},
		{Pattern: `^I can claim intent "(\w+)" again$`, Fn: func(ctx context.Context, alias string) error { return w.claimUntil(ctx, actorMain, alias) }, Kind: features.Probe},
		{Pattern: `^the claim returns intent "(\w+)"$`, Fn: w.claimReturned, Kind: features.Gate},
		{Pattern: `^the claim token is a non-empty string$`, Fn: w.tokenFormat, Kind: features.Check},
		{Pattern: `^the claim does not return intent "(\w+)"$`, Fn: w.claimNotReturned, Kind: features.Check},
		{Pattern: `^(\d+) workers claim concurrently$`, Fn: w.claimStorm, Kind: features.Action},
		{Pattern: `^(\d+) claims returned an intent$`, Fn: w.claimsReturned, Kind: features.Check},
		{Pattern: `^no intent is held by two live leases$`, Fn: w.noDoubleLease, Kind: features.Check},
		{Pattern: `^every claim token is distinct$`, Fn: w.distinctTokens, Kind: features.Check},
		{Pattern: `^I claim every intent in turn$`, Fn: w.claimAll, Kind: features.Action},
		{Pattern: `^the intents were claimed in the order "([^"]*)"$`, Fn: w.claimOrder, Kind: features.Check},
		{Pattern: `^I note the scheduling fields of every intent$`, Fn: w.noteSchedule, Kind: features.Action, Covers: coversAdminDetail},
		{Pattern: `^the claim order is by priority desc, run_at, claim_attempts, created_at and id$`, Fn: w.checkSchedule, Kind: features.Check},
		{Pattern: `^` + a + ` sends (\d+) claims within one rate-limit window$`, Fn: w.rateBurst, Kind: features.Action},
		{Pattern: `^at least one was refused with 429 and code "([^"]*)"$`, Fn: w.burstRefused, Kind: features.Check},
		{Pattern: `^at least one was refused with 429$`, Fn: func() error { return w.burstRefused("") }, Kind: features.Check},

		// leases, failures, time
		{Pattern: `^I fail "(\w+)" (\d+) times$`, Fn: w.failTimes, Kind: features.Action, Covers: coversFail},
		{Pattern: `^the run_at of "(\w+)" is within the backoff window of attempt (\d+)(?: with base (\d+(?:\.\d+)?))? after the last fail$`, Fn: w.backoffWindow, Kind: features.Probe},
		{Pattern: `^the lease of "(\w+)" has expired$`, Fn: w.leaseExpired, Kind: features.Action, Covers: coversResult},
		{Pattern: `^"(\w+)" is due$`, Fn: w.due, Kind: features.Action, Covers: coversResult},
		{Pattern: `^the lease of "(\w+)" ends at least (\d+) protocol seconds from now$`, Fn: w.leaseEndsAfter, Kind: features.Probe},
		{Pattern: `^(\d+(?:\.\d+)?) protocol seconds pass$`, Fn: w.protocolPass, Kind: features.Action},
		{Pattern: `^the extension of "(\w+)" by (\d+) seconds was refused, clamped into 10 to 3600 seconds or honoured$`, Fn: w.extendRefusedOrClamped, Kind: features.Probe},
		{Pattern: `^the intent "(\w+)" expires (\d+) protocol seconds after it was created$`, Fn: w.expiresAfter, Kind: features.Probe},

		// intent state
		{Pattern: `^the status of "(\w+)" is "(\w+)"$`, Fn: w.statusIs, Kind: features.Probe},
		{Pattern: `^the claim_attempts of "(\w+)" is (\d+)$`, Fn: w.claimAttemptsIs, Kind: features.Probe},
		{Pattern: `^"(\w+)" is in the dead-letter queue$`, Fn: func(ctx context.Context, alias string) error { return w.inDead(ctx, alias, true) }, Kind: features.Probe},
		{Pattern: `^"(\w+)" is not in the dead-letter queue$`, Fn: func(ctx context.Context, alias string) error { return w.inDead(ctx, alias, false) }, Kind: features.Probe},
		{Pattern: `^the value was stored$`, Fn: w.valueStored, Kind: features.Action, Covers: "INTENT-7.9-kv-get"},
		{Pattern: `^"(\w+)" is dead$`, Fn: w.isDead, Kind: features.Action, Covers: "INTENT-3.2-fail-dead"},
		{Pattern: `^the namespace holds (\d+) open intents?$`, Fn: w.namespaceHolds, Kind: features.Probe},

		// signing
		{Pattern: `^I send a signed (GET|POST) "([^"]*)"$`, Fn: func(ctx context.Context, m, p string) error { return w.signed(ctx, m, p, nil, "", "") }},
		{Pattern: `^I send a signed (GET|POST) "([^"]*)" with body:$`, Fn: func(ctx context.Context, m, p string, doc *godog.DocString) error {
			return w.signed(ctx, m, p, doc, "", "")
		}},
		{Pattern: `^I send a signed (GET|POST) "([^"]*)" with nonce "([^"]*)"$`, Fn: func(ctx context.Context, m, p, nonce string) error { return w.signed(ctx, m, p, nil, "", nonce) }},
		{Pattern: `^I send a signed (GET|POST) "([^"]*)" with (` + strings.Join(signFlaws, "|") + `)$`, Fn: func(ctx context.Context, m, p, flaw string) error { return w.signed(ctx, m, p, nil, flaw, "") }},
		{Pattern: `^I send a signed (GET|POST) "([^"]*)" both ways$`, Fn: w.signedBothWays, Kind: features.Action},
		{Pattern: `^the request signed (by value|as sent) was accepted$`, Fn: w.signedWayAccepted, Kind: features.Check},
		{Pattern: `^the signed request was accepted$`, Fn: w.signedAccepted, Kind: features.Action, Covers: "INTENT-5.2-signature-valid"},
		{Pattern: `^I send an unsigned (GET|POST) "([^"]*)"$`, Fn: w.unsigned, Kind: features.Action},

		// responses
		{Pattern: `^the response status is (\d+)$`, Fn: w.statusCode, Kind: features.Gate},
		{Pattern: `^the response status is one of "([^"]*)"$`, Fn: w.statusOneOf, Kind: features.Gate},
		{Pattern: `^the response is an error with status (\d+) and code "([^"]*)"$`, Fn: w.errorWith, Kind: features.Check},
		{Pattern: `^if the response status is (\d+), it is an error with code "([^"]*)"$`, Fn: w.codeIfStatus, Kind: features.Check},
		{Pattern: `^the response is a JSON object$`, Fn: w.jsonObject, Kind: features.Check},
		{Pattern: `^the response body is Prometheus text$`, Fn: w.prometheusText, Kind: features.Check},
		{Pattern: `^the response is an error whose code starts with "([^"]*)"$`, Fn: w.errorPrefix, Kind: features.Check},
		{Pattern: `^the response is a JSON error$`, Fn: w.jsonError, Kind: features.Check},
		{Pattern: `^the response header "([^"]*)" is "([^"]*)"$`, Fn: w.headerIs, Kind: features.Check},
		{Pattern: `^if the response status is (\d+), the response header "([^"]*)" is "([^"]*)"$`, Fn: w.headerIfStatus, Kind: features.Check},
		{Pattern: `^the response header "([^"]*)" contains "([^"]*)"$`, Fn: w.headerContains, Kind: features.Check},
		{Pattern: `^the response body contains "([^"]*)"$`, Fn: w.bodyContains, Kind: features.Check},
		{Pattern: `^the response field "([^"]*)" is ((?:"|\{|\[|-?\d|true$|false$|null$).*)$`, Fn: w.fieldIs, Kind: features.Check},
		{Pattern: `^the response field "([^"]*)" is a number$`, Fn: w.fieldNumber, Kind: features.Check},
		{Pattern: `^the response field "([^"]*)" is absent or one of "([^"]*)"$`, Fn: w.fieldAbsentOrOneOf, Kind: features.Check},
		{Pattern: `^the response field "([^"]*)" is one of "([^"]*)" where present$`, Fn: w.fieldOneOfWherePresent, Kind: features.Check},
		{Pattern: `^the response field "([^"]*)" is absent or a number$`, Fn: w.fieldAbsentOrNumber, Kind: features.Check},
		{Pattern: `^the response field "([^"]*)" is absent$`, Fn: w.fieldAbsent, Kind: features.Check},
		{Pattern: `^the response field "([^"]*)" is present$`, Fn: w.fieldPresent, Kind: features.Check},
		{Pattern: `^the response field "([^"]*)" matches "([^"]*)"$`, Fn: w.fieldMatches, Kind: features.Check},
		{Pattern: `^the response field "([^"]*)" differs from "(\w+)"$`, Fn: w.fieldDiffers, Kind: features.Check},
		{Pattern: `^I remember the response as "(\w+)"$`, Fn: w.rememberResponse, Kind: features.Action},
		{Pattern: `^the response is the same as "(\w+)"$`, Fn: w.sameResponse, Kind: features.Check},
	}
}

// ------------------------------------------------------------ target, keys

func (w *intentWorld) needAdmin() error {
	if w.env.Target.Credentials[CredentialAdminToken] == "" {
		return features.NotApplicable("the target declares no admin token")
	}
	return nil
}

func (w *intentWorld) needDashboard() error {
	if w.env.Target.Credentials[CredentialDashboardPassword] == "" {
		return features.NotApplicable("the target declares no dashboard password")
	}
	return nil
}

func (w *intentWorld) needSignatures() error {
	if !declared(w.env.Target).RequireSignatures {
		return features.NotApplicable("the target does not run with BUS_REQUIRE_SIGNATURES=true")
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
		return features.Mismatch(`201 {"api_key": "tk_…"}`, features.Describe(r))
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
		return features.Mismatch("an api_key in the last response", features.Describe(w.last))
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
		h.Set(HeaderAdminToken, key)
	case cred == "the API key as Basic password":
		h.Set("Authorization", basicAuth("admin", key))
	case strings.HasPrefix(cred, HeaderAdminToken):
		v, err := w.expand(args[0][1])
		if err != nil {
			return err
		}
		h.Set(HeaderAdminToken, v)
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
