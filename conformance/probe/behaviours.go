package probe

import (
	"fmt"
	"strings"
	"time"
)

// ServerError is the rule a 5xx to a well-formed request breaks, under
// every variant; it blocks the rule its request was testing.
const ServerError = "RFC9110-15.6-server-error"

// mustRules are the rules whose level is MUST (an RFC 2119 MUST, or a
// guarantee stated in the indicative): a deviation is a FAIL. Every other
// rule the probe names is a SHOULD: a deviation is NON-STRICT.
var mustRules = map[string]bool{
	"IETF-2.6-concurrent-conflict": true, "IETF-2.7-fail-uncorrected": true,
	"T0-0-no-further-effect": true, "T0-KEYS-caller-scope": true, "T0-CAT-same-outcome": true,
	"T0-R1-original-response": true, "T0-R2-wait-in-flight": true, "T0-R3-no-duplicate-error": true,
	"T0-R3-key-tells-new": true, "T0-REPLAY-rejection-keeps-key": true, "T0-REPLAY-accepted-only": true,
	"STRIPE-IDEM-same-result": true, "STRIPE-IDEM-params-compared": true, "STRIPE-IDEM-not-saved": true,
	"STRIPE-IDEM-post-accepts-keys": true,
}

// deviation is the verdict a deviation from rule implies.
func deviation(rule string) string {
	if mustRules[rule] {
		return "FAIL"
	}
	return "NON-STRICT"
}

func pass(variant, rule, why string) Expectation {
	return Expectation{Variant: variant, Rule: rule, Verdicts: []string{"PASS"}, Why: why}
}

func fail(variant, rule, why string) Expectation {
	return Expectation{Variant: variant, Rule: rule, Verdicts: []string{deviation(rule)}, Why: why}
}

// judge is pass or fail by ok.
func judge(ok bool, variant, rule, why string) Expectation {
	if ok {
		return pass(variant, rule, why)
	}
	return fail(variant, rule, why)
}

// erred: the request rule was testing got a 5xx: never a pass; the
// server-error finding may block it.
func erred(variant, rule, why string) Expectation {
	return Expectation{Variant: variant, Rule: rule, Verdicts: []string{deviation(rule), "BLOCKED"}, BlockedBy: ServerError,
		Why: why + " (a 5xx never passes the rule its request was testing)"}
}

// choice: no rule of variant's text says it.
func choice(variant, why string) Expectation {
	return Expectation{Variant: variant, Rule: "", Verdicts: []string{}, Why: fmt.Sprintf("a documented choice: no rule of the %s text says it (%s)", variant, why)}
}

func all() []string { return Variants() }

// payments says how many payments were counted ("" when not counted).
func payments(n int, ok bool) string {
	switch {
	case !ok:
		return "not counted"
	case n == 1:
		return "1 payment"
	}
	return fmt.Sprintf("%d payments", n)
}

func notMeasured(id, situation, why string, evidence ...string) Behaviour {
	return Behaviour{ID: id, Situation: situation, Observed: "not measured: " + why, Evidence: nonEmpty(evidence), Expect: []Expectation{}}
}

func nonEmpty(lines []string) []string {
	out := []string{}
	for _, l := range lines {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// asDocumented says, for a table cell, whether a's status is the one the
// endpoint documents for the situation (documented.<name>); "" when it
// documents none. The variant's rule is judged by its text all the same.
func (p *prober) asDocumented(name string, a answer) string {
	d := p.sp.documented(name)
	switch {
	case d == "" || a.status == 0:
		return ""
	case d == fmt.Sprint(a.status):
		return fmt.Sprintf(" (as documented: %s %s)", name, d)
	}
	return fmt.Sprintf(" (documented %s %s, not what it answered)", name, d)
}

func (p *prober) firstRequest() []Behaviour {
	const id, sit = "first-request", "a first request under a fresh key in the published format"
	u, k := p.fresh(), p.key()
	c := p.counter(0, u)
	a := p.send(0, k, p.sp.bodyOf(u), all()...)
	n, counted, cl := c.created()
	b := Behaviour{ID: id, Situation: sit, Observed: fmt.Sprintf("%s, %s", p.short(a), payments(n, counted)), Evidence: nonEmpty([]string{a.line, cl})}
	processed := a.is2xx() && (!counted || n == 1)
	switch {
	case a.status == 0:
		return []Behaviour{notMeasured(id, sit, "no answer", a.line)}
	case a.is5xx():
		b.Expect = []Expectation{erred("ietf", "IETF-2.6-first-request", "“process the request normally”"),
			erred("stripe", "STRIPE-IDEM-post-accepts-keys", "“All POST requests accept idempotency keys”")}
	default:
		b.Expect = []Expectation{
			judge(processed, "ietf", "IETF-2.6-first-request", "“The resource server SHOULD process the request normally and respond with an appropriate response”"),
			judge(processed || !a.is4xx(), "stripe", "STRIPE-IDEM-post-accepts-keys", "“All POST requests accept idempotency keys”"),
		}
	}
	b.Expect = append(b.Expect, choice("t0", "its rules speak of repeats, not of a first call"))
	return []Behaviour{b}
}

func (p *prober) newKeySameBody() []Behaviour {
	const id, sit = "new-key-same-body", "the same body sent again under a new key (a genuinely new request)"
	u := p.fresh()
	c := p.counter(0, u)
	a1 := p.send(0, p.key(), p.sp.bodyOf(u), all()...)
	if !a1.is2xx() {
		return []Behaviour{notMeasured(id, sit, "the first request answered "+p.short(a1), a1.line)}
	}
	a2 := p.send(0, p.key(), p.sp.bodyOf(u), all()...)
	n, counted, cl := c.created()
	b := Behaviour{ID: id, Situation: sit, Evidence: nonEmpty([]string{a1.line, a2.line, cl})}
	replay := p.differ(a1, a2) == "" && p.sp.ID != ""
	isNew := a2.is2xx() && !replay && (!counted || n == 2)
	// The draft leaves open whether a new key with a seen payload is a
	// first-time request (decision new-key-seen-payload of the
	// http-idempotency profile): processed under "pair", refusable under
	// "fingerprint". Either is correct, and idscheck names the one
	// followed (READING; PASS where the target declares it); answering it
	// with the earlier result breaks both.
	refused := a2.is4xx() && (!counted || n == 1)
	b.Observed = fmt.Sprintf("%s then %s, %s", p.short(a1), p.short(a2), payments(n, counted))
	const identify = "“Identify idempotency key from the HTTP Idempotency-Key request header field”"
	ietf := fail("ietf", "IETF-2.5-identify-key", identify+": answered as the earlier request (deduplicated on the payload), which no reading of the draft allows")
	switch {
	case isNew:
		ietf = Expectation{Variant: "ietf", Rule: "IETF-2.5-identify-key", Verdicts: []string{"PASS", "READING"},
			Why: identify + ": a new request, as the reading new-key-seen-payload=pair has it (“Duplicate request (idempotency key and fingerprint has been seen)”)"}
	case refused:
		ietf = Expectation{Variant: "ietf", Rule: "IETF-2.5-identify-key", Verdicts: []string{"PASS", "READING"},
			Why: identify + ": refused, nothing created, as the reading new-key-seen-payload=fingerprint has it (“First time request (idempotency key and fingerprint has not been seen)”)"}
	}
	if a2.is5xx() {
		b.Expect = []Expectation{erred("ietf", "IETF-2.5-identify-key", identify),
			erred("t0", "T0-R3-key-tells-new", "“Use the request’s key … to tell a repeat apart from a genuinely new request”")}
	} else {
		b.Expect = []Expectation{
			ietf,
			judge(isNew, "t0", "T0-R3-key-tells-new", "“Use the request’s key … to tell a repeat apart from a genuinely new request”"),
		}
	}
	b.Expect = append(b.Expect, choice("stripe", "the page speaks of retries under one key"))
	return []Behaviour{b}
}

// retryAfterComplete measures the retry and, from the same exchanges, the
// replay marker.
// retryPairs is how many first requests and immediate retries
// retryAfterComplete sends, to tell an intermittent deviation (a race in
// the middleware) from a constant one.
const retryPairs = 10

func (p *prober) retryAfterComplete() []Behaviour {
	const id, sit = "retry-after-complete", "the same request retried under its key after the first answered"
	const mid, msit = "replay-marker", "the headers of a replay against the first answer's (a replay marker; the key echoed)"
	u, k := p.fresh(), p.key()
	c := p.counter(0, u)
	a1 := p.send(0, k, p.sp.bodyOf(u), all()...)
	if !a1.is2xx() {
		return []Behaviour{notMeasured(id, sit, "the first request answered "+p.short(a1), a1.line), notMeasured(mid, msit, "no replay")}
	}
	a2 := p.send(0, k, p.sp.bodyOf(u), all()...)
	n, counted, cl := c.created()
	d := p.differ(a1, a2)
	b := Behaviour{ID: id, Situation: sit, Evidence: nonEmpty([]string{a1.line, a2.line, cl})}
	same := "same result"
	if d != "" {
		same = d
	}
	b.Observed = fmt.Sprintf("%s then %s (%s), %s", p.short(a1), p.short(a2), same, payments(n, counted))
	ok := d == "" && (!counted || n == 1)
	// The same pair again under fresh keys: a middleware that stores its
	// answer only after sending it answers an immediate retry with
	// something else some of the time. Such a deviation is intermittent:
	// a run may meet it or not, so either verdict agrees with it.
	bad := 0
	if !ok {
		bad++
	}
	for i := 1; i < retryPairs; i++ {
		u, k := p.fresh(), p.key()
		x1 := p.send(0, k, p.sp.bodyOf(u), all()...)
		if !x1.is2xx() {
			continue
		}
		x2 := p.send(0, k, p.sp.bodyOf(u), all()...)
		if p.differ(x1, x2) != "" {
			bad++
			if ok && bad == 1 {
				b.Evidence = append(b.Evidence, "an immediate retry that got another answer: "+x1.line, x2.line)
			}
		}
	}
	intermittent := bad > 0 && bad < retryPairs
	if bad > 0 {
		b.Observed += fmt.Sprintf("; %d of %d immediate retries got another answer", bad, retryPairs)
	}
	rules := []struct{ v, rule, why string }{
		{"ietf", "IETF-2.6-retry-result", "“respond with the result of the previously completed operation, success or an error”"},
		{"t0", "T0-R1-original-response", "“return the stored response”"},
		{"t0", "T0-0-no-further-effect", "“a repeat with the same key returns the original result and causes no further side effect”"},
		{"t0", "T0-CAT-same-outcome", "“retrying produces the same outcome as the first call”"},
		{"stripe", "STRIPE-IDEM-same-result", "“Subsequent requests with the same key return the same result”"},
	}
	for _, r := range rules {
		if r.rule == "T0-0-no-further-effect" && !counted && !a2.is5xx() && ok {
			// No count read: the same answer is no proof that nothing else happened.
			continue
		}
		switch {
		case intermittent:
			e := fail(r.v, r.rule, r.why)
			e.Verdicts = append(e.Verdicts, "PASS", "BLOCKED")
			e.Intermittent = true
			e.Why += fmt.Sprintf(" — intermittent: %d of %d immediate retries got another answer, so a run meets the deviation or not", bad, retryPairs)
			b.Expect = append(b.Expect, e)
		case a2.is5xx():
			b.Expect = append(b.Expect, erred(r.v, r.rule, r.why))
		default:
			b.Expect = append(b.Expect, judge(ok, r.v, r.rule, r.why))
		}
	}
	m := Behaviour{ID: mid, Situation: msit, Evidence: []string{a1.line, a2.line}, Expect: []Expectation{}}
	var obs []string
	if mk := marks(a1, a2); len(mk) > 0 && d == "" {
		obs = append(obs, "replay marked by "+strings.Join(mk, "; "))
		m.Evidence = append(m.Evidence, "the replay carries, the first answer does not: "+strings.Join(mk, "; "))
	} else if d == "" {
		obs = append(obs, "no replay marker")
	} else {
		obs = append(obs, "no replay to mark")
	}
	if h := p.sp.Key.Header; h != "" && !p.sp.keyBody {
		switch e1, e2 := a1.header.Get(h) != "", a2.header.Get(h) != ""; {
		case e1 && e2:
			obs = append(obs, h+" echoed on the first answer and the replay")
			m.Evidence = append(m.Evidence, fmt.Sprintf("%s on the first answer: %q; on the replay: %q", h, a1.header.Get(h), a2.header.Get(h)))
		case e2:
			obs = append(obs, h+" echoed on the replay only")
		default:
			obs = append(obs, h+" not echoed")
		}
	}
	if rh := p.sp.documented("replay_header"); rh != "" {
		switch {
		case carries(a2, rh) && !carries(a1, rh):
			obs = append(obs, fmt.Sprintf("documented %q: carried by the replay only", rh))
		case carries(a2, rh):
			obs = append(obs, fmt.Sprintf("documented %q: carried by the first answer too", rh))
		default:
			obs = append(obs, fmt.Sprintf("documented %q: not carried by the replay", rh))
		}
	}
	m.Observed = strings.Join(obs, "; ")
	for _, v := range Variants() {
		m.Expect = append(m.Expect, choice(v, "no text asks for a replay marker or an echoed key"))
	}
	return []Behaviour{b, m}
}

// slowBody is the body made slow, or nil when slow is not declared.
func (p *prober) slowBody(u unique) map[string]any {
	if p.sp.slow == nil {
		return nil
	}
	return p.sp.bodyOf(u, p.sp.slow)
}

func (p *prober) inFlight() []Behaviour {
	const id, sit = "in-flight-duplicate", "a duplicate sent while the original is in flight (a quarter of the slow time after it)"
	if p.sp.slow == nil {
		return []Behaviour{notMeasured(id, sit, "the target declares no slow request (slow)")}
	}
	// The slow time, measured on a request of its own.
	u0 := p.fresh()
	start := time.Now()
	t0 := p.send(0, p.key(), p.slowBody(u0), all()...)
	slow := t0.at.Sub(start)
	if !t0.is2xx() {
		return []Behaviour{notMeasured(id, sit, "the slow request answered "+p.short(t0), t0.line)}
	}
	timing := fmt.Sprintf("a slow request took %v", slow.Round(time.Millisecond))
	if slow < 300*time.Millisecond {
		return []Behaviour{notMeasured(id, sit, timing+", under 300 ms: no duplicate can be sent in flight", t0.line)}
	}
	u, k := p.fresh(), p.key()
	c := p.counter(0, u)
	done := make(chan answer, 1)
	go func() { done <- p.send(0, k, p.slowBody(u), all()...) }()
	p.sleep(slow / 4)
	sentDup := time.Now()
	dup := p.send(0, k, p.slowBody(u), all()...)
	// A second duplicate, sent as soon as the first was answered if the
	// original is still in flight: a middleware whose refusal of the first
	// duplicate releases the original's claim executes this one.
	var orig answer
	var dup2 *answer
	gotOrig := false
	select {
	case orig = <-done:
		gotOrig = true
	default:
	}
	if !gotOrig && time.Since(sentDup) < slow/2 {
		a := p.send(0, k, p.slowBody(u), all()...)
		dup2 = &a
	}
	if !gotOrig {
		select {
		case orig = <-done:
		case <-time.After(2 * RequestTimeout):
			return []Behaviour{notMeasured(id, sit, "the original did not answer", dup.line)}
		}
	}
	after := orig.at.Sub(sentDup)
	ev := []string{timing, "original: " + orig.line, fmt.Sprintf("duplicate, sent %v later: %s", (slow / 4).Round(time.Millisecond), dup.line),
		fmt.Sprintf("the original answered %v after the duplicate was sent", after.Round(time.Millisecond))}
	if dup2 != nil {
		ev = append(ev, "a second duplicate, sent when the first was answered: "+dup2.line)
	}
	if after < slow/2 {
		return []Behaviour{notMeasured(id, sit, fmt.Sprintf("the original answered %v after the duplicate was sent, under half the slow time: not in flight", after.Round(time.Millisecond)), ev...)}
	}
	if !orig.is2xx() {
		return []Behaviour{notMeasured(id, sit, "the original answered "+p.short(orig), ev...)}
	}
	retry := p.send(0, k, p.slowBody(u), all()...)
	n, counted, cl := c.created()
	ev = append(ev, "a retry after both answered: "+retry.line, cl)
	b := Behaviour{ID: id, Situation: sit, Evidence: nonEmpty(ev)}
	dd := p.differ(orig, dup)
	rd := p.differ(orig, retry)
	same := func(d string) string {
		if d == "" {
			return " (the original's result)"
		}
		return ""
	}
	second := ""
	if dup2 != nil {
		second = ", second duplicate " + p.short(*dup2)
	}
	b.Observed = fmt.Sprintf("duplicate %s%s%s, original %s, later retry %s%s, %s", p.short(dup), same(dd), second, p.short(orig), p.short(retry), same(rd), payments(n, counted))
	b.Observed += p.asDocumented("in_flight_status", dup)
	once := !counted || n == 1
	if dup.is5xx() {
		b.Expect = []Expectation{
			erred("ietf", "IETF-2.6-concurrent-conflict", "“MUST respond with a resource conflict error”"),
			erred("t0", "T0-R2-wait-in-flight", "“wait for it to complete and return the same response to both”"),
			erred("t0", "T0-R3-no-duplicate-error", "“Returning an error for it breaks the contract”"),
			erred("stripe", "STRIPE-IDEM-not-saved", "“the request conflicts with another request that’s executing concurrently, we don’t save the idempotent result”: the duplicate's answer"),
		}
	} else {
		conflict := dup.status == 409 && once
		b.Expect = []Expectation{judge(conflict, "ietf", "IETF-2.6-concurrent-conflict", "“The resource server MUST respond with a resource conflict error”")}
		switch {
		case conflict && len(strings.TrimSpace(string(dup.body))) > 0:
			b.Expect = append(b.Expect, pass("ietf", "IETF-2.7-concurrent-409", "“SHOULD reply with an HTTP 409 status code with body containing problem description”"))
		case conflict:
			b.Expect = append(b.Expect, fail("ietf", "IETF-2.7-concurrent-409", "“409 status code with body containing problem description”: the body is empty"))
		default:
			b.Expect = append(b.Expect, Expectation{Variant: "ietf", Rule: "IETF-2.7-concurrent-409", Verdicts: []string{"NON-STRICT", "BLOCKED"}, BlockedBy: "IETF-2.6-concurrent-conflict",
				Why: "“SHOULD reply with an HTTP 409”: no 409 came (the conflict rule's failure may block it)"})
		}
		b.Expect = append(b.Expect,
			judge(dd == "" && once, "t0", "T0-R2-wait-in-flight", "“wait for it to complete and return the same response to both. Do not reject the duplicate, and do not return an error”"),
			judge(dup.status < 400, "t0", "T0-R3-no-duplicate-error", "“A duplicate is a normal retry, not a fault. Returning an error for it breaks the contract”"),
		)
	}
	// Stripe: a concurrent duplicate gets an error, or (a middleware that
	// waits) the original's result; never a result or an effect of its own.
	b.Expect = append(b.Expect, judge(once && (!dup.is2xx() || dd == ""), "stripe", "STRIPE-IDEM-same-result", "“Subsequent requests with the same key return the same result”: the duplicate makes nothing of its own"))
	if !once {
		b.Expect = append(b.Expect, fail("t0", "T0-0-no-further-effect", "“causes no further side effect”"))
	}
	if retry.is5xx() {
		b.Expect = append(b.Expect, erred("stripe", "STRIPE-IDEM-not-saved", "“the request conflicts with another request that’s executing concurrently, we don’t save the idempotent result … You can retry these requests”"))
	} else {
		b.Expect = append(b.Expect, judge(rd == "", "stripe", "STRIPE-IDEM-not-saved", "“the request conflicts with another request that’s executing concurrently, we don’t save the idempotent result … You can retry these requests”: the later retry gets the original's result"))
	}
	return []Behaviour{b}
}

func (p *prober) vary() []Behaviour {
	const id, sit = "same-key-other-payload", "the key of a completed request reused with another payload (vary)"
	if len(p.sp.Vary) == 0 {
		return []Behaviour{notMeasured(id, sit, "the target declares no other payload (vary)")}
	}
	u, k := p.fresh(), p.key()
	c := p.counter(0, u)
	a1 := p.send(0, k, p.sp.bodyOf(u), all()...)
	if !a1.is2xx() {
		return []Behaviour{notMeasured(id, sit, "the first request answered "+p.short(a1), a1.line)}
	}
	a2 := p.send(0, k, p.sp.bodyOf(u, p.sp.Vary), all()...)
	n, counted, cl := c.created()
	ev := []string{a1.line, a2.line, cl}
	replay := p.differ(a1, a2) == ""
	executed := (counted && n > 1) || (a2.is2xx() && !replay)
	what := "an error"
	switch {
	case replay:
		what = "the first answer replayed"
	case executed:
		what = "executed"
	}
	b := Behaviour{ID: id, Situation: sit}
	b.Observed = fmt.Sprintf("%s (%s), %s", p.short(a2), what, payments(n, counted))
	if a2.status == 422 && !withLink(a2) {
		b.Observed += ", no link to documentation"
	}
	b.Observed += p.asDocumented("mismatch_status", a2)
	if a2.is5xx() {
		b.Expect = []Expectation{erred("ietf", "IETF-2.7-mismatch-422", "“SHOULD reply with a HTTP 422”"),
			erred("stripe", "STRIPE-IDEM-params-compared", "“compares incoming parameters … and errors if they’re not the same”")}
	} else {
		b.Expect = []Expectation{
			judge(a2.status == 422 && withLink(a2) && !executed, "ietf", "IETF-2.7-mismatch-422", "“the resource server SHOULD reply with a HTTP 422 status code with body containing a link pointing to relevant documentation”"),
			judge(a2.is4xx() && !executed, "stripe", "STRIPE-IDEM-params-compared", "“The idempotency layer compares incoming parameters to those of the original request and errors if they’re not the same”"),
		}
		if a2.is4xx() && !executed {
			// The server failed the mismatch: its uncorrected retry must fail again.
			a3 := p.send(0, k, p.sp.bodyOf(u, p.sp.Vary), all()...)
			n3, _, cl3 := c.created()
			ev = append(ev, "again, uncorrected: "+a3.line, cl3)
			b.Observed += fmt.Sprintf("; uncorrected again: %s", p.short(a3))
			if a3.is5xx() {
				b.Expect = append(b.Expect, erred("ietf", "IETF-2.7-fail-uncorrected", "“or the the resource server MUST fail the request and return one of the above errors”"))
			} else {
				b.Expect = append(b.Expect, judge(a3.is4xx() && (!counted || n3 == n), "ietf", "IETF-2.7-fail-uncorrected", "“or the the resource server MUST fail the request and return one of the above errors”"))
			}
		}
	}
	b.Expect = append(b.Expect, choice("t0", "a sender retries “with the original key and identical content”; nothing is said of other content under a used key"))
	b.Evidence = nonEmpty(ev)
	return []Behaviour{b}
}

// rejection sends the declared invalid request under k; ok is false with
// the behaviour to report when it is not a rejection.
func (p *prober) rejection(id, sit string, u unique, k string) (answer, *Behaviour) {
	if len(p.sp.Invalid) == 0 {
		b := notMeasured(id, sit, "the target declares no rejected request (invalid)")
		return answer{}, &b
	}
	r := p.send(0, k, p.sp.bodyOf(u, p.sp.Invalid))
	if !r.is4xx() {
		b := notMeasured(id, sit, "the invalid request answered "+p.short(r)+", not a 4xx rejection", r.line)
		return r, &b
	}
	return r, nil
}

func (p *prober) rejectedThenCorrected() []Behaviour {
	const id, sit = "rejection-then-corrected", "a rejected request (invalid), then the corrected one under the same key"
	u, k := p.fresh(), p.key()
	c := p.counter(0, u)
	r, nb := p.rejection(id, sit, u, k)
	if nb != nil {
		return []Behaviour{*nb}
	}
	n0, counted, cl0 := c.created()
	fixed := p.send(0, k, p.sp.bodyOf(u), all()...)
	n, _, cl := c.created()
	b := Behaviour{ID: id, Situation: sit, Evidence: nonEmpty([]string{r.line, cl0, "corrected: " + fixed.line, cl})}
	executed := fixed.is2xx() && (!counted || n == 1)
	stored := p.differ(r, fixed) == ""
	what := "refused"
	switch {
	case executed:
		what = "executed"
	case stored:
		what = "the stored rejection replayed"
	}
	b.Observed = fmt.Sprintf("%d, then %s (%s), %s", r.status, p.short(fixed), what, payments(n, counted))
	keeps := "“it never consumes the key: to fix the problem the sender resubmits the same key with corrected fields, which t-0 re-evaluates from scratch”"
	only := "“a rejected or declined call commits nothing to replay”"
	notSaved := "“If incoming parameters fail validation … we don’t save the idempotent result … You can retry these requests”"
	if fixed.is5xx() {
		b.Expect = []Expectation{erred("t0", "T0-REPLAY-rejection-keeps-key", keeps), erred("stripe", "STRIPE-IDEM-not-saved", notSaved)}
	} else {
		b.Expect = []Expectation{judge(executed, "t0", "T0-REPLAY-rejection-keeps-key", keeps), judge(executed, "stripe", "STRIPE-IDEM-not-saved", notSaved)}
		switch {
		case counted && n0 > 0:
			b.Expect = append(b.Expect, fail("t0", "T0-REPLAY-accepted-only", only+": the rejection created something"))
		case stored:
			b.Expect = append(b.Expect, fail("t0", "T0-REPLAY-accepted-only", only+": the rejection was replayed to the corrected call"))
		case executed:
			b.Expect = append(b.Expect, pass("t0", "T0-REPLAY-accepted-only", only))
		}
	}
	b.Expect = append(b.Expect, choice("ietf", "the draft lets the corrected request be executed (“Clients MUST correct the requests … before performing a retry”) or answered with the stored error (“the result of the previously completed operation, success or an error”)"))
	return []Behaviour{b}
}

func (p *prober) rejectedUncorrected() []Behaviour {
	const id, sit = "rejection-retried", "a rejected request (invalid) retried uncorrected under its key"
	u, k := p.fresh(), p.key()
	c := p.counter(0, u)
	r1, nb := p.rejection(id, sit, u, k)
	if nb != nil {
		return []Behaviour{*nb}
	}
	r2 := p.send(0, k, p.sp.bodyOf(u, p.sp.Invalid))
	n, counted, cl := c.created()
	b := Behaviour{ID: id, Situation: sit, Evidence: nonEmpty([]string{r1.line, r2.line, cl})}
	mk := marks(r1, r2)
	if rh := p.sp.documented("replay_header"); rh != "" && carries(r2, rh) && !carries(r1, rh) && len(mk) == 0 {
		mk = append(mk, rh)
	}
	marked := len(mk) > 0 && r2.is4xx()
	b.Observed = fmt.Sprintf("%d, then %s", r1.status, p.short(r2))
	if marked {
		b.Observed += " marked as a replay (" + strings.Join(mk, "; ") + ")"
		b.Evidence = append(b.Evidence, "the second answer carries, the first does not: "+strings.Join(mk, "; "))
	}
	b.Observed += ", " + payments(n, counted)
	made := counted && n > 0
	b.Expect = []Expectation{
		judge(r2.status == r1.status && !made, "ietf", "IETF-2.6-retry-result", "“respond with the result of the previously completed operation, success or an error”"),
		judge(!marked && !made, "t0", "T0-REPLAY-accepted-only", "“a rejected or declined call commits nothing to replay”"),
		judge(!marked && !made, "stripe", "STRIPE-IDEM-not-saved", "“If incoming parameters fail validation … we don’t save the idempotent result”"),
	}
	return []Behaviour{b}
}

func (p *prober) noKey() []Behaviour {
	const id, sit = "no-key", "a request without a key"
	u := p.fresh()
	c := p.counter(0, u)
	var wf []string
	if !p.sp.RequiresKey {
		wf = all()
	}
	a := p.send(0, noKey, p.sp.bodyOf(u), wf...)
	n, counted, cl := c.created()
	ev := []string{a.line, cl}
	b := Behaviour{ID: id, Situation: sit}
	executed := a.is2xx() || (counted && n > 0)
	what := "refused"
	if executed {
		what = "executed"
	}
	b.Observed = fmt.Sprintf("%s (%s), %s", p.short(a), what, payments(n, counted))
	if !p.sp.RequiresKey {
		b.Observed += "; requires_key not declared"
		for _, v := range Variants() {
			b.Expect = append(b.Expect, choice(v, "the endpoint does not declare that it requires a key (requires_key)"))
		}
		b.Evidence = nonEmpty(ev)
		return []Behaviour{b}
	}
	b.Observed += p.asDocumented("missing_key_status", a)
	b.Expect = []Expectation{judge(a.status == 400 && withLink(a) && !executed, "ietf", "IETF-2.7-missing-400",
		"“the resource server SHOULD reply with an HTTP 400 status code with body containing a link pointing to relevant documentation”")}
	if a.is4xx() && !executed {
		a2 := p.send(0, noKey, p.sp.bodyOf(u))
		n2, _, cl2 := c.created()
		ev = append(ev, "again, uncorrected: "+a2.line, cl2)
		b.Observed += "; again: " + p.short(a2)
		b.Expect = append(b.Expect, judge(a2.is4xx() && (!counted || n2 == 0), "ietf", "IETF-2.7-fail-uncorrected", "“or the the resource server MUST fail the request and return one of the above errors”"))
	}
	b.Expect = append(b.Expect, choice("t0", "a call without its key"), choice("stripe", "keys are accepted, not required"))
	b.Evidence = nonEmpty(ev)
	return []Behaviour{b}
}

// refusedKey is the behaviour of one key outside the published format:
// IETF-5-validate-key wants a 4xx refusal that processes nothing.
func (p *prober) refusedKey(id, sit, key string, stripeWell bool) Behaviour {
	u := p.fresh()
	c := p.counter(0, u)
	var wf []string
	if stripeWell {
		wf = []string{"stripe"}
	}
	a := p.send(0, key, p.sp.bodyOf(u), wf...)
	n, counted, cl := c.created()
	processed := a.is2xx() || (counted && n > 0)
	b := Behaviour{ID: id, Situation: sit, Evidence: nonEmpty([]string{a.line, cl})}
	what := "refused"
	switch {
	case processed:
		what = "processed"
	case a.is5xx():
		what = "erred, nothing processed"
	}
	b.Observed = fmt.Sprintf("%s (%s), %s", p.short(a), what, payments(n, counted))
	b.Expect = []Expectation{judge(a.is4xx() && !processed, "ietf", "IETF-5-validate-key", "“Always validate the key as per its published specification before processing any request”: a 4xx refusal")}
	if stripeWell {
		b.Expect = append(b.Expect, p.stripe255(a, processed, counted, n))
	}
	b.Expect = append(b.Expect, choice("t0", "the t0 text publishes no key format"))
	if !stripeWell {
		b.Expect = append(b.Expect, choice("stripe", "the page says only that keys are up to 255 characters"))
	}
	return b
}

// stripe255: a 255-character key is one the page accepts.
func (p *prober) stripe255(a answer, processed, counted bool, n int) Expectation {
	const why = "“Idempotency keys are up to 255 characters long”"
	if a.is5xx() {
		return erred("stripe", "STRIPE-IDEM-key-255", why)
	}
	return judge(a.is2xx() && (!counted || n == 1), "stripe", "STRIPE-IDEM-key-255", why)
}

func (p *prober) keyLengths() []Behaviour {
	var out []Behaviour
	ks := p.sp.KeySpec
	max := 0
	if ks != nil {
		max = ks.MaxLength
		if ks.UUID && (max == 0 || max > 36) {
			max = 36
		}
	}
	if max > 0 {
		k := p.sp.keyOfLength(max + 1)
		out = append(out, p.refusedKey("key-too-long", fmt.Sprintf("a key one longer than the published maximum (%d characters)", max+1), k, false))
	}
	// 255 characters: the longest key Stripe's page accepts.
	const id255, sit255 = "key-255", "a key of 255 characters"
	k := p.sp.keyOfLength(255)
	if !p.sp.inFormat(k) {
		out = append(out, p.refusedKey(id255, sit255+" (outside the published format)", k, true))
	} else {
		u := p.fresh()
		c := p.counter(0, u)
		a := p.send(0, k, p.sp.bodyOf(u), all()...)
		n, counted, cl := c.created()
		processed := a.is2xx() || (counted && n > 0)
		b := Behaviour{ID: id255, Situation: sit255 + " (in the published format)", Evidence: nonEmpty([]string{a.line, cl}),
			Observed: fmt.Sprintf("%s, %s", p.short(a), payments(n, counted))}
		b.Expect = []Expectation{p.stripe255(a, processed, counted, n), choice("t0", "the t0 text publishes no key format")}
		if a.is5xx() {
			b.Expect = append(b.Expect, erred("ietf", "IETF-2.6-first-request", "“process the request normally”"))
		} else {
			b.Expect = append(b.Expect, judge(a.is2xx() && (!counted || n == 1), "ietf", "IETF-2.6-first-request", "“process the request normally”: a key in the published format"))
		}
		out = append(out, b)
	}
	const id256, sit256 = "key-256", "a key of 256 characters"
	k = p.sp.keyOfLength(256)
	if !p.sp.inFormat(k) {
		b := p.refusedKey(id256, sit256+" (outside the published format)", k, false)
		for i, e := range b.Expect {
			if e.Variant == "stripe" {
				b.Expect[i] = choice("stripe", "keys are up to 255 characters: the page says nothing of a longer one")
			}
		}
		out = append(out, b)
	} else {
		u := p.fresh()
		c := p.counter(0, u)
		a := p.send(0, k, p.sp.bodyOf(u), "ietf", "t0")
		n, counted, cl := c.created()
		b := Behaviour{ID: id256, Situation: sit256 + " (no published format excludes it)", Evidence: nonEmpty([]string{a.line, cl}),
			Observed: fmt.Sprintf("%s, %s", p.short(a), payments(n, counted))}
		b.Expect = []Expectation{choice("ietf", "the endpoint publishes no key format that excludes it"), choice("t0", "the t0 text publishes no key format"),
			choice("stripe", "keys are up to 255 characters: the page says nothing of a longer one")}
		out = append(out, b)
	}
	return out
}

func (p *prober) keyOutsideFormat() []Behaviour {
	const id, sit = "key-outside-format", "a key of an allowed length outside the published format (its pattern or UUID form)"
	k, ok := p.sp.outsideKey()
	if !ok {
		return []Behaviour{notMeasured(id, sit, "the target publishes no pattern or UUID form (key_spec)")}
	}
	return []Behaviour{p.refusedKey(id, sit, k, false)}
}

func (p *prober) twoCallers() []Behaviour {
	const id, sit = "two-callers-one-key", "two callers, each with its own request, under one key"
	if len(p.sp.Callers) < 2 {
		return []Behaviour{notMeasured(id, sit, "the target declares fewer than two callers")}
	}
	u1, u2, k := p.fresh(), p.fresh(), p.key()
	a1 := p.send(0, k, p.sp.bodyOf(u1), all()...)
	if !a1.is2xx() {
		return []Behaviour{notMeasured(id, sit, "the first caller's request answered "+p.short(a1), a1.line)}
	}
	c2 := p.counter(1, u2)
	a2 := p.send(1, k, p.sp.bodyOf(u2), all()...)
	n, counted, cl := c2.created()
	own := a2.is2xx() && p.differ(a1, a2) != "" && (!counted || n == 1)
	what := "its own result"
	if !own {
		what = "not its own result"
		if p.differ(a1, a2) == "" {
			what = "the first caller's result"
		}
	}
	b := Behaviour{ID: id, Situation: sit, Evidence: nonEmpty([]string{a1.line, a2.line, cl}),
		Observed: fmt.Sprintf("caller 2: %s (%s), %s for it", p.short(a2), what, payments(n, counted))}
	if a2.is5xx() {
		b.Expect = []Expectation{erred("ietf", "IETF-5-composite-key", "“implement a unique composite key”")}
	} else {
		b.Expect = []Expectation{judge(own, "ietf", "IETF-5-composite-key", "“implement a unique composite key as the idempotent cache lookup key … combining the idempotency key sent by the client with other client specific attributes”")}
	}
	switch {
	case p.sp.KeyScope == "global":
		b.Expect = append(b.Expect, choice("t0", "key_scope global: keys unique across callers by construction"))
	case a2.is5xx():
		b.Expect = append(b.Expect, erred("t0", "T0-KEYS-caller-scope", "“scoped to the authenticated caller”"))
	default:
		b.Expect = append(b.Expect, judge(own, "t0", "T0-KEYS-caller-scope", "“Each state-changing call carries a designated key, scoped to the authenticated caller”"))
	}
	b.Expect = append(b.Expect, choice("stripe", "the page says nothing of callers"))
	return []Behaviour{b}
}

// serverErrors is every 5xx a well-formed request got, per variant.
func (p *prober) serverErrors() Behaviour {
	b := Behaviour{ID: "server-errors", Situation: "every well-formed request the probes sent (its body as declared; a key in the published format, Stripe's 255-character one, or none where none is required)", Evidence: []string{}}
	const why = "“The 5xx (Server Error) class of status code indicates that the server is aware that it has erred”"
	var obs []string
	for _, v := range Variants() {
		errs := p.serverErr[v]
		if len(errs) == 0 {
			b.Expect = append(b.Expect, pass(v, ServerError, why+": none"))
			continue
		}
		obs = append(obs, fmt.Sprintf("%s: %d of %d answered 5xx", v, len(errs), p.wellSent[v]))
		for _, l := range errs {
			if !containsStr(b.Evidence, l) {
				b.Evidence = append(b.Evidence, l)
			}
		}
		b.Expect = append(b.Expect, fail(v, ServerError, why))
	}
	if len(obs) == 0 {
		b.Observed = fmt.Sprintf("no 5xx (%d requests)", p.wellSent["ietf"])
	} else {
		b.Observed = strings.Join(obs, "; ")
	}
	return b
}

func containsStr(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
