package intent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

// ----------------------------------------------------------------- signing

// signFlaws are the ways a signed request of the feature file can be wrong.
var signFlaws = []string{
	"a wrong signature",
	"the signature of another key",
	"a timestamp 301 seconds old",
	"a timestamp 301 seconds ahead",
	"no nonce",
	"no timestamp",
	"the method signed in lower case",
	"an upper-case digest",
	"a signature over another path",
}

// signed sends a request signed by hand (§5.2) with the main key, with one
// flaw or a given nonce. The canonical path is CanonicalPath's binding.
func (w *intentWorld) signed(ctx context.Context, method, path string, doc *godog.DocString, flaw, nonce string) error {
	p, err := w.expand(path)
	if err != nil {
		return err
	}
	var body []byte
	if doc != nil {
		s, err := w.expand(doc.Content)
		if err != nil {
			return err
		}
		body = []byte(s)
	}
	if nonce != "" {
		if nonce, err = w.expand(nonce); err != nil {
			return err
		}
	} else {
		nonce = client.NewNonce() // never from the seed: a rerun must not replay nonces
	}
	u, err := url.Parse(p)
	if err != nil {
		return fmt.Errorf("signed request: %w", err)
	}
	signPath := u.EscapedPath()
	if flaw == "a signature over another path" {
		signPath += "x"
	}
	cp, ok := CanonicalPath(signPath, u.RawQuery)
	if !ok {
		return fmt.Errorf("signed request: no canonical path for %q", p)
	}
	key := w.env.Target.APIKey
	now := time.Now()
	switch flaw {
	case "a timestamp 301 seconds old":
		now = now.Add(-301 * time.Second)
	case "a timestamp 301 seconds ahead":
		now = now.Add(301 * time.Second)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	msg := SigningString(method, cp, ts, nonce, body)
	if flaw == "the method signed in lower case" {
		msg = []byte(strings.ToLower(method) + string(msg[len(method):]))
	}
	signKey := key
	if flaw == "the signature of another key" {
		signKey = key + "-other"
	}
	sig := Sign(signKey, msg)
	switch flaw {
	case "a wrong signature":
		sig = Sign(signKey, append(msg, '!'))
	case "an upper-case digest":
		sig = strings.ToUpper(sig)
	}
	h := http.Header{}
	h.Set(HeaderAPIKey, key)
	h.Set(HeaderSignature, sig)
	if flaw != "no nonce" {
		h.Set(HeaderNonce, nonce)
	}
	if flaw != "no timestamp" {
		h.Set(HeaderTimestamp, ts)
	}
	c, err := w.clientFor("I/hand-signed", key, false)
	if err != nil {
		return err
	}
	r, err := w.sendWith(ctx, c, nil, method, p, body, h)
	if err != nil {
		return err
	}
	if strings.HasPrefix(u.Path, "/claim") {
		w.noteClaim(r)
	}
	return nil
}

func (w *intentWorld) unsigned(ctx context.Context, method, path string) error {
	p, err := w.expand(path)
	if err != nil {
		return err
	}
	c, err := w.clientFor("I/unsigned", w.env.Target.APIKey, false)
	if err != nil {
		return err
	}
	_, err = w.sendWith(ctx, c, nil, method, p, nil, nil)
	return err
}

// --------------------------------------------------------------- responses

func (w *intentWorld) statusCode(want int) error {
	if w.last == nil || w.last.Status != want {
		return features.Mismatch(fmt.Sprintf("status %d", want), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) errorWith(status int, code string) error {
	if err := w.statusCode(status); err != nil {
		return err
	}
	got, err := checkErrorShape(w.last)
	if err != nil {
		return err
	}
	if got != code {
		return features.Mismatch(fmt.Sprintf(`%d {"error": {"code": %q, …}}`, status, code), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) errorPrefix(prefix string) error {
	got, err := checkErrorShape(w.last)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(got, prefix) {
		return features.Mismatch(fmt.Sprintf("an error code starting with %q", prefix), features.Describe(w.last))
	}
	return nil
}

// jsonError judges INTENT-11 ("All error responses MUST use the following
// shape"): an answer that is no error (a SHOULD's status not kept, say,
// judged under its own rule) has no error shape to judge.
func (w *intentWorld) jsonError() error {
	if w.last == nil {
		return features.Mismatch("an error response", "no response")
	}
	if w.last.Status < 400 {
		return features.NotApplicable(fmt.Sprintf("the answer is no error (%s): the shape of errors is judged on errors", features.Describe(w.last)))
	}
	_, err := checkErrorShape(w.last)
	return err
}

func (w *intentWorld) headerIs(name, value string) error {
	if w.last == nil || w.last.Header.Get(name) != value {
		got := ""
		if w.last != nil {
			got = w.last.Header.Get(name)
		}
		return features.Mismatch(fmt.Sprintf("%s: %s", name, value), fmt.Sprintf("%s: %q on %s", name, got, features.Describe(w.last)))
	}
	return nil
}

func (w *intentWorld) headerContains(name, value string) error {
	if w.last == nil || !strings.Contains(w.last.Header.Get(name), value) {
		got := ""
		if w.last != nil {
			got = w.last.Header.Get(name)
		}
		return features.Mismatch(fmt.Sprintf("%s containing %q", name, value), fmt.Sprintf("%s: %q on %s", name, got, features.Describe(w.last)))
	}
	return nil
}

func (w *intentWorld) bodyContains(s string) error {
	v, err := w.expand(s)
	if err != nil {
		return err
	}
	if w.last == nil || !strings.Contains(string(w.last.Body), v) {
		return features.Mismatch(fmt.Sprintf("a body containing %q", v), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) fieldIs(path, literal string) error {
	lit, err := w.expand(literal)
	if err != nil {
		return err
	}
	var want any
	if err := json.Unmarshal([]byte(lit), &want); err != nil {
		return fmt.Errorf("field %s: %q is not a JSON value: %w", path, lit, err)
	}
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	got, ok := field(m, path)
	if want == nil && (!ok || got == nil) {
		return nil
	}
	gb, _ := json.Marshal(got)
	if !ok || !sameJSON(gb, []byte(lit)) {
		return features.Mismatch(fmt.Sprintf("%q: %s", path, lit), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) fieldNumber(path string) error {
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	if _, ok := numberField(m, path); !ok {
		return features.Mismatch(fmt.Sprintf("a number in %q", path), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) fieldAbsent(path string) error {
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	if v, ok := field(m, path); ok && v != nil {
		return features.Mismatch(fmt.Sprintf("no %q", path), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) fieldPresent(path string) error {
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	if v, ok := field(m, path); !ok || v == nil {
		return features.Mismatch(fmt.Sprintf("a %q field", path), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) fieldMatches(path, pattern string) error {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("field %s: %w", path, err)
	}
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	v, _ := field(m, path)
	s, ok := v.(string)
	if !ok || !re.MatchString(s) {
		return features.Mismatch(fmt.Sprintf("%q matching %s", path, pattern), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) fieldDiffers(path, name string) error {
	old, ok := w.remember[name]
	if !ok {
		return fmt.Errorf("no response remembered as %q", name)
	}
	a, err := jsonBody(old)
	if err != nil {
		return err
	}
	b, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	va, _ := field(a, path)
	vb, okb := field(b, path)
	if !okb || fmt.Sprint(va) == fmt.Sprint(vb) {
		return features.Mismatch(fmt.Sprintf("%q other than %v", path, va), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) rememberResponse(name string) error {
	if w.last == nil {
		return fmt.Errorf("no response to remember")
	}
	w.remember[name] = w.last
	return nil
}

// sameResponse: §7.2 "the same response": the same status and the same JSON body.
func (w *intentWorld) sameResponse(name string) error {
	old, ok := w.remember[name]
	if !ok {
		return fmt.Errorf("no response remembered as %q", name)
	}
	if w.last == nil || w.last.Status != old.Status || !sameJSON(w.last.Body, old.Body) {
		return features.Mismatch("the same response as "+name+": "+features.Describe(old), features.Describe(w.last))
	}
	return nil
}
