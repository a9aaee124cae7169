package intent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

// intentWorld is the state of one scenario of intent.feature. A new
// one is made for every scenario, so nothing leaks from one to the next; the
// namespaces and goal are fresh for every scenario (and every run), so no
// leftover of another scenario or run is ever claimed.
type intentWorld struct {
	env *features.Env

	ns, ns2, goal string
	unknown       string // a well-formed id that names no intent

	clients map[string]*client.Client // by actor: "I", tester names, …
	keys    map[string]string         // tester name -> API key

	ids         map[string]string    // alias -> intent id
	aliases     map[string]string    // intent id -> alias
	publisher   map[string]string    // alias -> actor that published it
	nsOf        map[string]string    // alias -> namespace it was published in
	bases       map[string]float64   // alias -> backoff_base it was published with
	tokens      map[string][]string  // alias -> claim tokens, oldest first
	claimedAt   map[string]time.Time // alias -> when its latest claim returned
	leaseOf     map[string]float64   // alias -> claim_timeout of its latest claim (protocol s)
	publishedAt map[string]time.Time // alias -> when its publish returned
	delayOf     map[string]float64   // alias -> the delay it was published with
	header      http.Header          // staged for the next request
	last        *client.Response     // the last response of a step
	remember    map[string]*client.Response
	lastFail    [2]time.Time // call and return of the last /fail
	waited      time.Duration
	batch       []*client.Response // results of the last concurrent batch
	storm       []claimResult      // results of the last concurrent claims
	claimSeq    []string           // ids, in the order "claim every intent in turn" got them
	schedule    map[string]schedFields
	generated   string                      // api_key of the last generate_key response
	mark        int                         // Recorder.Len() when the scenario began
	sentAt      time.Time                   // when the last request was sent
	bothWays    map[string]*client.Response // answers of a request signed under each reading
}

// schedFields are the fields of one intent the selection order depends on.
type schedFields struct {
	ID            string
	Priority      float64
	RunAt         float64
	ClaimAttempts float64
	CreatedAt     float64
}

func newIntentWorld(env *features.Env) *intentWorld {
	w := &intentWorld{env: env}
	w.reset()
	return w
}

// reset gives the world fresh names, drawn through env.Fresh: a run with the
// same seed and run ID sends the same requests, and a rerun of the seed
// (another run ID) names its own namespaces, so it never meets the first
// run's leftovers.
func (w *intentWorld) reset() {
	r := w.env.Fresh()
	tag := fmt.Sprintf("%016x", r.Uint64())
	w.ns, w.ns2, w.goal = "s-"+tag, "t-"+tag, "g-"+tag
	w.unknown = fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
	w.clients = map[string]*client.Client{}
	w.keys = map[string]string{}
	w.ids = map[string]string{}
	w.aliases = map[string]string{}
	w.publisher = map[string]string{}
	w.nsOf = map[string]string{}
	w.bases = map[string]float64{}
	w.tokens = map[string][]string{}
	w.claimedAt = map[string]time.Time{}
	w.leaseOf = map[string]float64{}
	w.publishedAt = map[string]time.Time{}
	w.delayOf = map[string]float64{}
	w.header = nil
	w.last = nil
	w.remember = map[string]*client.Response{}
	w.waited = 0
	w.batch = nil
	w.storm = nil
	w.claimSeq = nil
	w.schedule = nil
	w.generated = ""
	w.mark = 0
	if w.env.Recorder != nil {
		w.mark = w.env.Recorder.Len()
	}
}

// idsInRecordedOrder returns the scenario's intent ids in the order the
// target first returned them, as recorded: concurrent batches finish in any
// order, and requests that walk their ids must not depend on it.
func (w *intentWorld) idsInRecordedOrder() []string {
	var out []string
	seen := map[string]bool{}
	if w.env.Recorder != nil {
		for _, ex := range w.env.Recorder.Since(w.mark) {
			var found []string
			for id := range w.aliases {
				if !seen[id] && strings.Contains(ex.RespBody, id) {
					seen[id] = true
					found = append(found, id)
				}
			}
			sort.Slice(found, func(i, j int) bool {
				return strings.Index(ex.RespBody, found[i]) < strings.Index(ex.RespBody, found[j])
			})
			out = append(out, found...)
		}
	}
	var rest []string
	for id := range w.aliases {
		if !seen[id] {
			rest = append(rest, id)
		}
	}
	sort.Strings(rest)
	return append(out, rest...)
}

// Actors of the steps.
const (
	actorMain      = "I"
	actorAnonymous = "an anonymous client"
	actorAdmin     = "the admin"
	actorDashboard = "the dashboard user"
	actorScraper   = "the metrics scraper"
)

// actorPattern matches every actor a step may name.
const actorPattern = `(I|an anonymous client|the admin|the dashboard user|the metrics scraper|[a-z]+)`

// actor returns the client of an actor and the headers that authenticate it
// (admin token, Basic or Bearer credentials); NotApplicable when the target
// lacks the credential.
func (w *intentWorld) actor(name string) (*client.Client, http.Header, error) {
	h := http.Header{}
	switch name {
	case actorMain:
		c, err := w.clientFor(actorMain, w.env.Target.APIKey, declared(w.env.Target).RequireSignatures)
		return c, h, err
	case actorAnonymous:
		c, err := w.clientFor(actorAnonymous, "", false)
		return c, h, err
	case actorAdmin:
		if w.env.Target.Credentials[CredentialAdminToken] == "" {
			return nil, nil, features.NotApplicable("the target declares no admin token")
		}
		h.Set(HeaderAdminToken, w.env.Target.Credentials[CredentialAdminToken])
		c, err := w.clientFor(actorAdmin, "", false)
		return c, h, err
	case actorDashboard:
		if w.env.Target.Credentials[CredentialDashboardPassword] == "" {
			return nil, nil, features.NotApplicable("the target declares no dashboard password")
		}
		h.Set("Authorization", basicAuth("admin", w.env.Target.Credentials[CredentialDashboardPassword]))
		c, err := w.clientFor(actorDashboard, "", false)
		return c, h, err
	case actorScraper:
		switch {
		case w.env.Target.Credentials[CredentialMetricsToken] != "":
			h.Set("Authorization", "Bearer "+w.env.Target.Credentials[CredentialMetricsToken])
		case w.env.Target.Credentials[CredentialAdminToken] != "":
			h.Set(HeaderAdminToken, w.env.Target.Credentials[CredentialAdminToken])
		default:
			return nil, nil, features.NotApplicable("the target declares neither a metrics token nor an admin token")
		}
		c, err := w.clientFor(actorScraper, "", false)
		return c, h, err
	}
	key, ok := w.keys[name]
	if !ok {
		return nil, nil, fmt.Errorf("actor %q: no tester key of that name (add: Given a tester key %q)", name, name)
	}
	c, err := w.clientFor(name, key, declared(w.env.Target).RequireSignatures)
	return c, h, err
}

func (w *intentWorld) clientFor(name, key string, sign bool) (*client.Client, error) {
	if c, ok := w.clients[name]; ok {
		return c, nil
	}
	c, err := w.env.Client("intent/"+name, func(o *client.Options) {
		o.APIKey = key
		if sign {
			o.Sign = SignRequests(nil)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", name, err)
	}
	w.clients[name] = c
	return c, nil
}

func basicAuth(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// placeholder matches {name} and {name:arg} in paths, bodies and values.
var placeholder = regexp.MustCompile(`\{([a-z0-9]+)(?::([^{}"]+))?\}`)

// expand replaces the placeholders of the feature file: {ns}, {ns2}, {goal},
// {unknown}, {x:N} (N letters x), {id:A}, {token:A}, {token1:A}, {key:NAME}.
func (w *intentWorld) expand(s string) (string, error) {
	var bad error
	out := placeholder.ReplaceAllStringFunc(s, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		name, arg := sub[1], sub[2]
		switch name {
		case "ns":
			return w.ns
		case "ns2":
			return w.ns2
		case "goal":
			return w.goal
		case "unknown":
			return w.unknown
		case "x", "sp":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 0 || n > 1<<20 {
				bad = fmt.Errorf("placeholder %s: bad length", m)
				return m
			}
			return strings.Repeat(map[string]string{"x": "x", "sp": " "}[name], n)
		case "id":
			if id, ok := w.ids[arg]; ok {
				return id
			}
		case "token", "token1":
			ts := w.tokens[arg]
			if len(ts) > 0 {
				if name == "token1" {
					return ts[0]
				}
				return ts[len(ts)-1]
			}
		case "key":
			if k, ok := w.keys[arg]; ok {
				return k
			}
			if arg == "main" {
				return w.env.Target.APIKey
			}
		}
		if bad == nil {
			bad = fmt.Errorf("placeholder %s names nothing known in this scenario", m)
		}
		return m
	})
	return out, bad
}

// send sends one request as an actor, with the staged headers, and keeps the
// response as the last one.
func (w *intentWorld) send(ctx context.Context, actor, method, path string, body []byte, extra http.Header) (*client.Response, error) {
	c, h, err := w.actor(actor)
	if err != nil {
		return nil, err
	}
	return w.sendWith(ctx, c, h, method, path, body, extra)
}

func (w *intentWorld) sendWith(ctx context.Context, c *client.Client, h http.Header, method, path string, body []byte, extra http.Header) (*client.Response, error) {
	hdr := http.Header{}
	for k, vs := range h {
		hdr[k] = vs
	}
	for k, vs := range w.header {
		hdr[k] = vs
	}
	w.header = nil
	for k, vs := range extra {
		hdr[k] = vs
	}
	w.sentAt = time.Now()
	resp, err := c.Do(ctx, client.Request{Method: method, Path: path, Header: hdr, Body: body})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	w.last = resp
	return resp, nil
}

// jsonBody decodes a response body.
func jsonBody(r *client.Response) (map[string]any, error) {
	if r == nil {
		return nil, errors.New("no response yet")
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		return nil, features.Mismatch("a JSON object body", features.Describe(r))
	}
	return m, nil
}

// field returns the value at a dotted path of a JSON object.
func field(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, p := range strings.Split(path, ".") {
		o, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = o[p]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func numberField(m map[string]any, path string) (float64, bool) {
	v, ok := field(m, path)
	f, isNum := v.(float64)
	return f, ok && isNum
}

// sameJSON reports whether two JSON texts decode to equal values.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	return reflect.DeepEqual(x, y)
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkErrorShape checks the §11 error body: {"error": {"code": snake_case,
// "message": non-empty}}. It returns the code.
func checkErrorShape(r *client.Response) (string, error) {
	want := `{"error": {"code": "<snake_case>", "message": "<text>"}}`
	if r == nil {
		return "", features.Mismatch(want, "no response")
	}
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		return "", features.Mismatch(want, features.Describe(r))
	}
	code, _ := field(m, "error.code")
	msg, _ := field(m, "error.message")
	cs, ok1 := code.(string)
	ms, ok2 := msg.(string)
	if !ok1 || !ok2 || !snakeCase.MatchString(cs) || strings.TrimSpace(ms) == "" {
		return "", features.Mismatch(want, features.Describe(r))
	}
	return cs, nil
}

// budget returns the longest protocol wait one scenario may do.
func (w *intentWorld) budget() time.Duration {
	if w.env.Budget > 0 {
		return w.env.Budget
	}
	return features.DefaultBudget
}

// sleep waits d of real time, counted against the scenario's budget;
// NotApplicable when the budget cannot cover it.
func (w *intentWorld) sleep(ctx context.Context, d time.Duration, what string) error {
	if d <= 0 {
		return nil
	}
	if w.waited+d > w.budget() {
		return features.NotApplicable(fmt.Sprintf("%s needs %s of waiting at the target's time scale; the scenario budget is %s", what, features.Rounded(w.waited+d), w.budget()))
	}
	w.waited += d
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	case <-t.C:
		return nil
	}
}

// protocol converts protocol seconds to the real time the target takes.
func (w *intentWorld) protocol(seconds float64) time.Duration {
	return w.env.Scaled(time.Duration(seconds * float64(time.Second)))
}

// pollEvery is the interval of bounded polls: a quarter of a protocol second,
// at least 5 ms.
func (w *intentWorld) pollEvery() time.Duration {
	d := w.protocol(0.25)
	if d < 5*time.Millisecond {
		d = 5 * time.Millisecond
	}
	if d > 250*time.Millisecond {
		d = 250 * time.Millisecond
	}
	return d
}

// unixTime converts a float Unix timestamp of the target.
func unixTime(f float64) time.Time {
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9))
}

// parallel runs f(i) for i in [0,n) on at most p goroutines and waits.
func parallel(n, p int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, p)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}(i)
	}
	wg.Wait()
}
