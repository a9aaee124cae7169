package intent

// Checks that accept every answer the text allows (outcome sets), checks
// of one observation under each reading of a decision, and the
// preconditions that name the rule they rest on.

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

// statusOneOf checks the last status against a list such as "200, 201, 4xx":
// each entry a status or a class (4xx).
func (w *intentWorld) statusOneOf(list string) error {
	if w.last == nil {
		return features.Mismatch("status "+list, "no response")
	}
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimSpace(e)
		if len(e) == 3 && strings.HasSuffix(e, "xx") && e[0] >= '1' && e[0] <= '5' {
			if w.last.Status/100 == int(e[0]-'0') {
				return nil
			}
			continue
		}
		n, err := strconv.Atoi(e)
		if err != nil {
			return fmt.Errorf("status list %q: %q is neither a status nor a class like 4xx", list, e)
		}
		if w.last.Status == n {
			return nil
		}
	}
	return features.Mismatch("status "+list, features.Describe(w.last))
}

// codeIfStatus checks the error code only when the status is the one the
// code belongs to: where the text gives no status, another status is not
// this rule's concern.
func (w *intentWorld) codeIfStatus(status int, code string) error {
	if w.last == nil || w.last.Status != status {
		return nil
	}
	return w.errorWith(status, code)
}

// headerIfStatus checks a header of the last response when its status is
// the one the rule is about ("The 204 response MUST include Retry-After:
// 1"); another status leaves the rule nothing to judge (N/A), its status
// being another rule's concern.
func (w *intentWorld) headerIfStatus(status int, name, value string) error {
	if w.last == nil || w.last.Status != status {
		return features.NotApplicable(fmt.Sprintf("the answer is not a %d (%s): the rule is about the header of a %d", status, features.Describe(w.last), status))
	}
	return w.headerIs(name, value)
}

// claimNotReturned holds when the last claim did not hand out the intent.
func (w *intentWorld) claimNotReturned(alias string) error {
	want, ok := w.ids[alias]
	if !ok {
		return fmt.Errorf("no intent %q in this scenario", alias)
	}
	if w.last == nil {
		return features.Mismatch("a response", "none")
	}
	if w.last.Status == http.StatusOK {
		if m, err := jsonBody(w.last); err == nil {
			if id, _ := m["id"].(string); id == want {
				return features.Mismatch("any answer but intent "+alias+" ("+want+")", features.Describe(w.last))
			}
		}
	}
	return nil
}

// publishAccepted is the precondition "the publish was accepted": the last
// response is a 2xx (201 is judged by INTENT-7.2-created-201 alone).
func (w *intentWorld) publishAccepted() error {
	if w.last == nil || w.last.Status/100 != 2 {
		return features.Mismatch("a 2xx from the publish", features.Describe(w.last))
	}
	return nil
}

// signedAccepted is the precondition of a replay check: the first signed
// request was accepted.
func (w *intentWorld) signedAccepted() error {
	if w.last == nil || w.last.Status/100 != 2 {
		return features.Mismatch("a 2xx for the signed request", features.Describe(w.last))
	}
	return nil
}

// valueStored is the precondition "the value was stored": the last
// response (to POST /set, for which the text gives no reply) is a 2xx.
func (w *intentWorld) valueStored() error {
	if w.last == nil || w.last.Status/100 != 2 {
		return features.Mismatch("a 2xx for the set", features.Describe(w.last))
	}
	return nil
}

// isDead is the precondition "A is dead".
func (w *intentWorld) isDead(ctx context.Context, alias string) error {
	return w.statusIs(ctx, alias, "dead")
}

// jsonObject checks that the body is a JSON object.
func (w *intentWorld) jsonObject() error {
	if _, err := jsonBody(w.last); err != nil {
		return features.Mismatch("a JSON object", features.Describe(w.last))
	}
	return nil
}

// prometheusText checks the body looks like the Prometheus text format: a
// text/plain content type and at least one "name value" sample line.
func (w *intentWorld) prometheusText() error {
	if w.last == nil {
		return features.Mismatch("Prometheus text", "no response")
	}
	if ct := w.last.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		return features.Mismatch("Content-Type: text/plain (Prometheus text format)", "Content-Type: "+ct)
	}
	for _, line := range strings.Split(string(w.last.Body), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 2 {
			if _, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil || len(f) >= 3 {
				return nil
			}
		}
	}
	return features.Mismatch("a sample line such as `name 1`", features.Describe(w.last))
}

// extendRefusedOrClamped judges an extension by seconds outside 10–3600.
// "seconds MUST be between 10 and 3600" binds the worker: the bus may refuse
// (any 4xx), clamp into 10–3600, or honour the value sent. A 2xx must leave
// the lease's new end within what a clamp or the value itself allows under
// either reading of an extension (from now, or added to the current end,
// which is at most claim_timeout away).
func (w *intentWorld) extendRefusedOrClamped(ctx context.Context, alias string, seconds int) error {
	r := w.last
	if r == nil {
		return features.Mismatch("a response", "none")
	}
	if r.Status/100 == 4 {
		return nil
	}
	if r.Status/100 != 2 {
		return features.Mismatch("a 4xx, or a 2xx with the lease extended by the seconds sent or clamped into 10–3600", features.Describe(r))
	}
	sent, got := w.sentAt, time.Now()
	ts, ok, err := w.intentNumber(ctx, alias, "claim_expires_at")
	if err != nil {
		return err
	}
	if !ok {
		return features.NotApplicable("the target shows claim_expires_at in no reply (/result, admin detail)")
	}
	timeout := 60.0
	if v := w.leaseOf[alias]; v > 0 {
		timeout = v
	}
	slack := w.protocol(2) + 50*time.Millisecond
	lo := sent.Add(w.protocol(math.Min(float64(seconds), 10))).Add(-slack)
	hi := got.Add(w.protocol(timeout + math.Max(float64(seconds), 3600))).Add(slack)
	end := unixTime(ts)
	if end.Before(lo) || end.After(hi) {
		return features.Mismatch(fmt.Sprintf("a 4xx, or a 2xx with the lease ending %d s (as sent) or 10–3600 protocol s (clamped) after the extension (%.3f..%.3f at time scale %g)",
			seconds, float64(lo.UnixNano())/1e9, float64(hi.UnixNano())/1e9, w.env.Target.TimeScale),
			fmt.Sprintf("%d, and claim_expires_at %.3f (%+.1f protocol s after the call)", r.Status, ts,
				end.Sub(sent).Seconds()*w.scale()))
	}
	return nil
}

// scale is the target's time scale (protocol seconds per real second).
func (w *intentWorld) scale() float64 {
	if s := w.env.Target.TimeScale; s > 0 {
		return s
	}
	return 1
}

// signedBothWays sends the same request twice, signed under each reading of
// the canonical order of repeated query parameters, and keeps both answers
// for "the request signed … was accepted".
func (w *intentWorld) signedBothWays(ctx context.Context, method, path string) error {
	p, err := w.expand(path)
	if err != nil {
		return err
	}
	u, err := url.Parse(p)
	if err != nil {
		return fmt.Errorf("signed request: %w", err)
	}
	byValue, ok := CanonicalPath(u.EscapedPath(), u.RawQuery)
	asSent, ok2 := CanonicalPathAsSent(u.EscapedPath(), u.RawQuery)
	if !ok || !ok2 {
		return fmt.Errorf("signed request: no canonical path for %q", p)
	}
	w.bothWays = map[string]*client.Response{}
	for _, v := range []struct{ name, cp string }{{"by value", byValue}, {"as sent", asSent}} {
		r, err := w.sendSigned(ctx, method, p, v.cp, nil)
		if err != nil {
			return err
		}
		w.bothWays[v.name] = r
	}
	return nil
}

// signedWayAccepted checks one of the answers signedBothWays kept.
func (w *intentWorld) signedWayAccepted(way string) error {
	r := w.bothWays[way]
	if r == nil {
		return fmt.Errorf("no request signed %s in this scenario", way)
	}
	if r.Status/100 != 2 {
		return features.Mismatch("a 2xx for the request signed "+way, features.Describe(r))
	}
	return nil
}

// sendSigned sends a request signed with the main key over the given
// canonical path, with a fresh nonce and the current time.
func (w *intentWorld) sendSigned(ctx context.Context, method, p, canonical string, body []byte) (*client.Response, error) {
	key := w.env.Target.APIKey
	nonce := client.NewNonce()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	h := http.Header{}
	h.Set(HeaderAPIKey, key)
	h.Set(HeaderSignature, Sign(key, SigningString(method, canonical, ts, nonce, body)))
	h.Set(HeaderNonce, nonce)
	h.Set(HeaderTimestamp, ts)
	c, err := w.clientFor("I/hand-signed", key, false)
	if err != nil {
		return nil, err
	}
	return w.sendWith(ctx, c, nil, method, p, body, h)
}

// fieldAbsentOrOneOf checks a string field that may be absent (or null), or
// else one of a comma-separated list of values (placeholders expanded).
func (w *intentWorld) fieldAbsentOrOneOf(path, list string) error {
	list, err := w.expand(list)
	if err != nil {
		return err
	}
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	v, ok := field(m, path)
	if !ok || v == nil {
		return nil
	}
	for _, e := range strings.Split(list, ",") {
		if v == strings.TrimSpace(e) {
			return nil
		}
	}
	return features.Mismatch(fmt.Sprintf("%s absent, null or one of %s", path, list), features.Describe(w.last))
}

// fieldOneOfWherePresent checks a string field against a list of values,
// and is N/A when the reply does not carry it: the rule judged is observable
// only where a reply shows the field, and the text requires it of none.
func (w *intentWorld) fieldOneOfWherePresent(path, list string) error {
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	if v, ok := field(m, path); !ok || v == nil {
		return features.NotApplicable(fmt.Sprintf("the reply carries no %s, which the text requires of it nowhere", path))
	}
	return w.fieldAbsentOrOneOf(path, list)
}

// fieldAbsentOrNumber checks a field that may be absent (or null), or else
// a number.
func (w *intentWorld) fieldAbsentOrNumber(path string) error {
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	v, ok := field(m, path)
	if !ok || v == nil {
		return nil
	}
	if _, ok := v.(float64); !ok {
		return features.Mismatch(path+" absent, null or a number", features.Describe(w.last))
	}
	return nil
}
