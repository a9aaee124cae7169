package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// noKey, as a key, sends the request without one.
const noKey = "\x00"

// prober sends the probes and keeps what every variant needs of them.
type prober struct {
	ctx  context.Context
	base string
	sp   *spec
	hc   *http.Client
	run  string

	mu        sync.Mutex
	n         int
	wellSent  map[string]int      // well-formed requests sent, per variant
	serverErr map[string][]string // the 5xx answers to well-formed requests, per variant
}

func newProber(ctx context.Context, base string, sp *spec, hc *http.Client) *prober {
	return &prober{ctx: ctx, base: strings.TrimRight(base, "/"), sp: sp, hc: hc, run: randHex(6),
		wellSent: map[string]int{}, serverErr: map[string][]string{}}
}

// answer is one exchange: the answer (status 0: none, err says why) and
// its line of evidence.
type answer struct {
	status int
	err    error
	header http.Header
	body   []byte
	at     time.Time // when the answer arrived
	line   string
}

func (a answer) is2xx() bool { return a.status >= 200 && a.status < 300 }
func (a answer) is4xx() bool { return a.status >= 400 && a.status < 500 }
func (a answer) is5xx() bool { return a.status >= 500 }

// short is the answer for a table cell: "201 pay_3", "400", "no answer".
func (p *prober) short(a answer) string {
	switch {
	case a.status == 0:
		return "no answer"
	case a.is2xx() && p.idOf(a) != "":
		return fmt.Sprintf("%d %s", a.status, p.idOf(a))
	}
	return fmt.Sprint(a.status)
}

// fresh is a new logical request's unique values.
func (p *prober) fresh() unique {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	return unique{Text: fmt.Sprintf("probe-%s-%d", p.run, p.n), Int: time.Now().UnixMilli()*1000 + int64(p.n), UUID: newUUID()}
}

// key is a fresh key in the published format.
func (p *prober) key() string {
	k, ok := p.sp.goodKey()
	if !ok {
		return randHex(32)
	}
	return k
}

func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func showKey(k string) string {
	if len(k) <= 40 {
		return k
	}
	return fmt.Sprintf("%s…(%d characters)", k[:16], len(k))
}

// reachable checks that the base URL answers HTTP at all.
func (p *prober) reachable() error {
	req, err := http.NewRequestWithContext(p.ctx, http.MethodGet, p.base+"/health", nil)
	if err != nil {
		return fmt.Errorf("the target %q: %v", p.base, err)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return fmt.Errorf("the target %s does not answer: %v", p.base, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil
}

// send makes one request of caller under key (noKey: none) with body;
// wellFormed are the variants under whose text it is a well-formed
// request, whose 5xx is a server error of its own.
func (p *prober) send(caller int, key string, body map[string]any, wellFormed ...string) answer {
	sp := p.sp
	if sp.keyBody {
		body = maps(body)
		if key == noKey {
			delete(body, sp.Key.Body)
		} else {
			body[sp.Key.Body] = key
		}
	}
	raw, _ := json.Marshal(body)
	var line strings.Builder
	fmt.Fprintf(&line, "%s %s", sp.Method, sp.Path)
	if caller > 0 {
		fmt.Fprintf(&line, " (caller %d)", caller+1)
	}
	switch {
	case key == noKey:
		line.WriteString(" without a key")
	case !sp.keyBody:
		fmt.Fprintf(&line, " %s: %s", sp.Key.Header, showKey(sp.keyHeaderValue(key)))
	}
	fmt.Fprintf(&line, " %s", clip(string(raw), 120))
	a := answer{}
	req, err := http.NewRequestWithContext(p.ctx, sp.Method, p.base+sp.Path, bytes.NewReader(raw))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		for k, v := range sp.headers(caller) {
			req.Header.Set(k, v)
		}
		if key != noKey && !sp.keyBody {
			req.Header.Set(sp.Key.Header, sp.keyHeaderValue(key))
		}
		var resp *http.Response
		resp, err = p.hc.Do(req)
		if err == nil {
			a.body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			a.status, a.header = resp.StatusCode, resp.Header
		}
	}
	a.at = time.Now()
	a.err = err
	if a.status == 0 {
		fmt.Fprintf(&line, " → no answer: %v", err)
	} else {
		fmt.Fprintf(&line, " → %d %s", a.status, clip(string(a.body), 160))
	}
	a.line = line.String()
	p.mu.Lock()
	for _, v := range wellFormed {
		p.wellSent[v]++
		if a.is5xx() {
			p.serverErr[v] = append(p.serverErr[v], a.line)
		}
	}
	p.mu.Unlock()
	return a
}

func maps(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// readCount is the declared count read for u, as caller reads it; ok is
// false without one (or when it does not answer a count). With
// difference it counts everything the endpoint made.
func (p *prober) readCount(caller int, u unique) (int, bool, string) {
	c := p.sp.Count
	if c == nil {
		return 0, false, ""
	}
	path := c.pathFor(u)
	req, err := http.NewRequestWithContext(p.ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return 0, false, ""
	}
	for k, v := range p.sp.headers(caller) {
		req.Header.Set(k, v)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, false, fmt.Sprintf("GET %s → no answer: %v", path, err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	line := fmt.Sprintf("GET %s → %d %s", path, resp.StatusCode, clip(string(b), 80))
	if resp.StatusCode != 200 {
		return 0, false, line
	}
	n, err := c.extract(b)
	if err != nil {
		return 0, false, line + ": " + err.Error()
	}
	return n, true, line
}

// counter counts what one logical request created: start reads the
// count before it, created after.
type counter struct {
	p      *prober
	caller int
	u      unique
	before int
	ok     bool
}

func (p *prober) counter(caller int, u unique) *counter {
	c := &counter{p: p, caller: caller, u: u}
	if p.sp.Count != nil && p.sp.Count.Difference {
		c.before, c.ok, _ = p.readCount(caller, u)
	} else {
		c.ok = p.sp.Count != nil
	}
	return c
}

// created is how many payments the request made so far (ok false: not
// counted), with the read as evidence.
func (c *counter) created() (int, bool, string) {
	if !c.ok {
		return 0, false, ""
	}
	n, ok, line := c.p.readCount(c.caller, c.u)
	return n - c.before, ok, line
}

// idOf is the declared id member of a 2xx answer ("" without one).
func (p *prober) idOf(a answer) string {
	if p.sp.ID == "" || !a.is2xx() {
		return ""
	}
	var doc any
	if json.Unmarshal(a.body, &doc) != nil {
		return ""
	}
	ptr := p.sp.ID
	if !strings.HasPrefix(ptr, "/") {
		ptr = "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(ptr)
	}
	v, err := pointerAt(doc, ptr)
	if err != nil || v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// differ says how b differs from a as a result ("" when it is the same:
// the status, and the id of a 2xx where one is declared, else the body).
func (p *prober) differ(a, b answer) string {
	if a.status != b.status {
		return fmt.Sprintf("status %d, then %d", a.status, b.status)
	}
	if p.sp.ID != "" && a.is2xx() {
		x, y := p.idOf(a), p.idOf(b)
		if x == "" || x != y {
			return fmt.Sprintf("%s %q, then %q", p.sp.ID, x, y)
		}
		return ""
	}
	if !bytes.Equal(bytes.TrimSpace(a.body), bytes.TrimSpace(b.body)) {
		return "another body"
	}
	return ""
}

// ignoredHeaders change between any two answers.
var ignoredHeaders = []string{"Date", "Content-Length", "Connection", "Keep-Alive", "Transfer-Encoding", "Set-Cookie", "Age", "Expires", "Last-Modified", "X-Request-Id", "X-Response-Time", "Etag", "Server-Timing"}

// marks are the headers of b that a lacks or has with another value: a
// replay's marker.
func marks(a, b answer) []string {
	var out []string
	for name, vals := range b.header {
		if slices.ContainsFunc(ignoredHeaders, func(h string) bool { return strings.EqualFold(h, name) }) {
			continue
		}
		if strings.Join(a.header.Values(name), ", ") != strings.Join(vals, ", ") {
			out = append(out, name+": "+clip(strings.Join(vals, ", "), 60))
		}
	}
	slices.Sort(out)
	return out
}

// carries says whether a carries the documented replay header spec
// ("Name" or "Name: value").
func carries(a answer, spec string) bool {
	name, value, hasValue := strings.Cut(spec, ":")
	name, value = strings.TrimSpace(name), strings.TrimSpace(value)
	for _, v := range a.header.Values(name) {
		if !hasValue || strings.EqualFold(strings.TrimSpace(v), value) {
			return true
		}
	}
	return false
}

// withLink says whether an error answer points at documentation (a Link
// rel=describedby, a URL in its body, or a problem document's type).
func withLink(a answer) bool {
	if strings.Contains(strings.Join(a.header.Values("Link"), ", "), `rel="describedby"`) {
		return true
	}
	if bytes.Contains(a.body, []byte("http://")) || bytes.Contains(a.body, []byte("https://")) {
		return true
	}
	var doc map[string]any
	if json.Unmarshal(a.body, &doc) != nil {
		return false
	}
	for k, v := range doc {
		s, ok := v.(string)
		name := strings.ToLower(k)
		if ok && s != "" && s != "about:blank" && (name == "type" || name == "href" || name == "link" || strings.Contains(name, "doc") || strings.Contains(name, "help")) && strings.Contains(s, "/") {
			return true
		}
	}
	return false
}

// sleep waits d or until the measurement ends.
func (p *prober) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.ctx.Done():
	}
}
