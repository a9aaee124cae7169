package intent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

// ------------------------------------------------------------- publishing

// defaultBackoffBase is §3.3's default backoff_base.
const defaultBackoffBase = 5.0

// publishBody merges the fields of a docstring over the defaults of the
// scenario: its goal, its namespace and a payload naming the alias.
func (w *intentWorld) publishBody(alias, over string) ([]byte, map[string]any, error) {
	m := map[string]any{"goal": w.goal, "namespace": w.ns, "payload": map[string]any{"alias": alias}}
	if strings.TrimSpace(over) != "" {
		s, err := w.expand(over)
		if err != nil {
			return nil, nil, err
		}
		var o map[string]any
		if err := json.Unmarshal([]byte(s), &o); err != nil {
			return nil, nil, fmt.Errorf("intent %s: docstring is not a JSON object: %w", alias, err)
		}
		for k, v := range o {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	return b, m, err
}

// publish publishes intent alias as actor; with check, anything but a 2xx
// is a Mismatch. §7.2's "201 Created" is a table row without a keyword,
// judged by INTENT-7.2-created-201 alone: any 2xx stores the intent.
func (w *intentWorld) publish(ctx context.Context, actor, alias, over string, check bool) error {
	b, m, err := w.publishBody(alias, over)
	if err != nil {
		return err
	}
	r, err := w.send(ctx, actor, http.MethodPost, "/intent", b, nil)
	if err != nil {
		return fmt.Errorf("publish %s: %w", alias, err)
	}
	if r.Status/100 != 2 {
		if check {
			return features.Mismatch("a 2xx for the publish of intent "+alias, features.Describe(r))
		}
		return nil
	}
	body, err := jsonBody(r)
	if err != nil {
		return err
	}
	id, _ := body["id"].(string)
	if id == "" {
		return features.Mismatch(`2xx {"id": "<hex>", …}`, features.Describe(r))
	}
	w.register(alias, id, actor)
	w.publishedAt[alias] = time.Now()
	w.delayOf[alias], _ = m["delay"].(float64)
	// The namespace is the one sent (publishBody always sends one); the
	// reply's echo of it is only §7.2's example.
	if ns, ok := m["namespace"].(string); ok {
		w.nsOf[alias] = ns
	} else if ns, ok := body["namespace"].(string); ok {
		w.nsOf[alias] = ns
	}
	w.bases[alias] = defaultBackoffBase
	if f, ok := m["backoff_base"].(float64); ok {
		w.bases[alias] = f
	}
	return nil
}

func (w *intentWorld) register(alias, id, actor string) {
	w.ids[alias] = id
	w.aliases[id] = alias
	w.publisher[alias] = actor
}

func (w *intentWorld) publishDefault(ctx context.Context, actor, alias string) error {
	return w.publish(ctx, actor, alias, "", true)
}

func (w *intentWorld) publishWith(ctx context.Context, actor, alias string, doc *godog.DocString) error {
	return w.publish(ctx, actor, alias, doc.Content, true)
}

func (w *intentWorld) publishUnchecked(ctx context.Context, actor, alias string) error {
	return w.publish(ctx, actor, alias, "", false)
}

// idemKey makes a feature's Idempotency-Key unique to the scenario, so keys
// of earlier runs on the same target never collide with this one.
func (w *intentWorld) idemKey(k string) string { return w.ns + "-" + k }

func (w *intentWorld) publishIdem(ctx context.Context, actor, key string, doc *godog.DocString) error {
	b, err := w.expand(doc.Content)
	if err != nil {
		return err
	}
	h := http.Header{HeaderIdempotencyKey: {w.idemKey(key)}}
	_, err = w.send(ctx, actor, http.MethodPost, "/intent", []byte(b), h)
	return err
}

// publishIdemStorm releases n identical publishes at once.
func (w *intentWorld) publishIdemStorm(ctx context.Context, n int, key string, doc *godog.DocString) error {
	b, err := w.expand(doc.Content)
	if err != nil {
		return err
	}
	c, h, err := w.actor(actorMain)
	if err != nil {
		return err
	}
	h = h.Clone()
	h.Set(HeaderIdempotencyKey, w.idemKey(key))
	w.batch = make([]*client.Response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			r, err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: "/intent", Header: h, Body: []byte(b)})
			if err == nil {
				w.batch[i] = r
			}
		}(i)
	}
	close(start)
	wg.Wait()
	return nil
}

func (w *intentWorld) sameIDs() error {
	first := ""
	for i, r := range w.batch {
		if r == nil {
			return features.Mismatch("an answer to every request", fmt.Sprintf("request %d got no response", i))
		}
		// "The same response": the status of the first answer, whatever
		// 2xx it was (§7.2's 201 is a table row, judged on its own).
		if r.Status/100 != 2 || r.Status != w.batch[0].Status {
			return features.Mismatch(fmt.Sprintf("the same 2xx for every duplicate (the first: %d)", w.batch[0].Status), fmt.Sprintf("request %d: %s", i, features.Describe(r)))
		}
		m, err := jsonBody(r)
		if err != nil {
			return err
		}
		id, _ := m["id"].(string)
		if first == "" {
			first = id
		}
		if id != first || id == "" {
			return features.Mismatch("the same id "+first+" for every duplicate", fmt.Sprintf("request %d: %s", i, features.Describe(r)))
		}
	}
	return nil
}

func (w *intentWorld) rememberID(alias string) error {
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	id, _ := m["id"].(string)
	if id == "" {
		return features.Mismatch("an id in the last response", features.Describe(w.last))
	}
	w.register(alias, id, actorMain)
	w.bases[alias] = defaultBackoffBase
	return nil
}

// publishBatch publishes n intents b1..bn as the main key, 8 at a time.
func (w *intentWorld) publishBatch(ctx context.Context, n int, over func(i int) map[string]any) error {
	c, h, err := w.actor(actorMain)
	if err != nil {
		return err
	}
	w.batch = make([]*client.Response, n)
	var mu sync.Mutex
	parallel(n, 8, func(i int) {
		alias := fmt.Sprintf("b%d", i+1)
		// Identical bodies: the order in which concurrent requests are
		// recorded varies, their request lines must not.
		m := map[string]any{"goal": w.goal, "namespace": w.ns, "payload": map[string]any{"batch": true}}
		for k, v := range over(i) {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		r, err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: "/intent", Header: h, Body: b})
		if err != nil {
			return
		}
		w.batch[i] = r
		var body map[string]any
		if json.Unmarshal(r.Body, &body) == nil && r.Status/100 == 2 {
			if id, ok := body["id"].(string); ok {
				mu.Lock()
				w.register(alias, id, actorMain)
				w.bases[alias] = defaultBackoffBase
				mu.Unlock()
			}
		}
	})
	return w.allAccepted()
}

func (w *intentWorld) publishPublic(ctx context.Context, n int) error {
	return w.publishBatch(ctx, n, func(int) map[string]any { return map[string]any{"visibility": "public"} })
}

func (w *intentWorld) publishPriority(ctx context.Context, n, prio int) error {
	return w.publishBatch(ctx, n, func(int) map[string]any { return map[string]any{"priority": prio} })
}

func (w *intentWorld) publishMany(ctx context.Context, n int) error {
	c, h, err := w.actor(actorMain)
	if err != nil {
		return err
	}
	w.batch = make([]*client.Response, n)
	parallel(n, 16, func(i int) {
		b := fmt.Sprintf(`{"goal":%q,"namespace":%q,"payload":0}`, w.goal, w.ns)
		if r, err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: "/intent", Header: h, Body: []byte(b)}); err == nil {
			w.batch[i] = r
		}
	})
	return nil
}

func (w *intentWorld) allAccepted() error {
	for i, r := range w.batch {
		if r == nil || r.Status/100 != 2 {
			return features.Mismatch(fmt.Sprintf("a 2xx for all %d publishes", len(w.batch)), fmt.Sprintf("publish %d: %s", i+1, features.Describe(r)))
		}
	}
	return nil
}

// publishPaced publishes n intents as a tester key, waiting out the rate
// limit (60 requests per protocol minute) whenever it answers rate_limited.
func (w *intentWorld) publishPaced(ctx context.Context, actor string, n int) error {
	need := w.protocol(60 * math.Ceil(float64(n+1)/60))
	if w.waited+need > w.budget() {
		return features.NotApplicable(fmt.Sprintf("publishing %d intents at 60 a minute takes %s at the target's time scale; the scenario budget is %s", n, features.Rounded(need), w.budget()))
	}
	deadline := time.Now().Add(w.budget() - w.waited)
	for i := 0; i < n; {
		if time.Now().After(deadline) {
			return fmt.Errorf("paced publish: only %d of %d published within the budget", i, n)
		}
		b := fmt.Sprintf(`{"goal":%q,"namespace":%q,"payload":%d}`, w.goal, w.ns, i)
		r, err := w.send(ctx, actor, http.MethodPost, "/intent", []byte(b), nil)
		if err != nil {
			return err
		}
		switch {
		case r.Status/100 == 2:
			i++
		case r.Status == http.StatusTooManyRequests:
			if err := w.sleep(ctx, w.protocol(1), "the rate-limit window"); err != nil {
				return err
			}
		default:
			return features.Mismatch("a 2xx or 429 rate_limited while filling the cap", features.Describe(r))
		}
	}
	return nil
}

// ---------------------------------------------------------------- claiming

// claim sends POST /claim as actor in the scenario's namespace (unless the
// query names one) and keeps the claim token of what it got.
func (w *intentWorld) claim(ctx context.Context, actor, query string, extra http.Header) (*client.Response, error) {
	q, err := w.expand(query)
	if err != nil {
		return nil, err
	}
	vals, _ := url.ParseQuery(q)
	if _, ok := vals["namespace"]; !ok {
		if q != "" {
			q = "namespace=" + url.QueryEscape(w.ns) + "&" + q
		} else {
			q = "namespace=" + url.QueryEscape(w.ns)
		}
	}
	r, err := w.send(ctx, actor, http.MethodPost, "/claim?"+q, nil, extra)
	if err != nil {
		return nil, err
	}
	w.noteClaim(r)
	return r, nil
}

// noteClaim records the token of a successful claim under its intent's alias.
func (w *intentWorld) noteClaim(r *client.Response) (id string) {
	if r == nil || r.Status != http.StatusOK {
		return ""
	}
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return ""
	}
	id, _ = m["id"].(string)
	tok, _ := m["claim_token"].(string)
	alias, ok := w.aliases[id]
	if !ok {
		alias = id
	}
	if tok != "" {
		w.tokens[alias] = append(w.tokens[alias], tok)
	}
	w.claimedAt[alias] = time.Now()
	w.leaseOf[alias] = 60 // §3.3's default claim_timeout
	if v, ok := numberField(m, "claim_timeout"); ok && v > 0 {
		w.leaseOf[alias] = v
	}
	return id
}

func (w *intentWorld) claimPlain(ctx context.Context, actor string) error {
	_, err := w.claim(ctx, actor, "", nil)
	return err
}

func (w *intentWorld) claimQuery(ctx context.Context, actor, query string) error {
	_, err := w.claim(ctx, actor, query, nil)
	return err
}

func (w *intentWorld) claimHeader(ctx context.Context, actor, name, value string) error {
	v, err := w.expand(value)
	if err != nil {
		return err
	}
	_, err = w.claim(ctx, actor, "", http.Header{name: {v}})
	return err
}

func (w *intentWorld) claimIntent(ctx context.Context, actor, alias string) error {
	if _, err := w.claim(ctx, actor, "", nil); err != nil {
		return err
	}
	return w.claimReturned(alias)
}

func (w *intentWorld) claimIntentQuery(ctx context.Context, actor, alias, query string) error {
	if _, err := w.claim(ctx, actor, query, nil); err != nil {
		return err
	}
	return w.claimReturned(alias)
}

// claimUntil claims, polling within the scenario budget, until the intent
// comes back; any other intent is a Mismatch.
func (w *intentWorld) claimUntil(ctx context.Context, actor, alias string) error {
	want, ok := w.ids[alias]
	if !ok {
		return fmt.Errorf("claim until: no intent %q in this scenario", alias)
	}
	start := time.Now()
	limit := w.budget() - w.waited
	// Wait for the run_at the target reports first, so that one claim
	// usually suffices: polling only covers a target whose run_at is not the
	// moment the intent becomes claimable (and keeps runs reproducible). A
	// target that shows no run_at is polled from the start.
	if err := w.waitUntil(ctx, alias, "run_at", nil); err != nil {
		return err
	}
	query := ""
	if ns, ok := w.nsOf[alias]; ok {
		query = "namespace=" + url.QueryEscape(ns)
	}
	for n := 0; n < 10000; n++ {
		r, err := w.claim(ctx, actor, query, nil)
		if err != nil {
			return err
		}
		switch r.Status {
		case http.StatusOK:
			m, _ := jsonBody(r)
			if id, _ := m["id"].(string); id != want {
				return features.Mismatch("intent "+alias+" ("+want+") once claimable again", features.Describe(r))
			}
			w.waited += time.Since(start)
			return nil
		case http.StatusNoContent:
		default:
			return features.Mismatch("200 or 204 while waiting for "+alias, features.Describe(r))
		}
		if time.Since(start) > limit {
			return features.Mismatch(fmt.Sprintf("intent %s claimable again within %s", alias, limit.Round(time.Millisecond)), features.Describe(r))
		}
		t := time.NewTimer(w.pollEvery())
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("claim until %s: %w", alias, ctx.Err())
		case <-t.C:
		}
	}
	return fmt.Errorf("claim until %s: poll bound reached", alias)
}

func (w *intentWorld) claimReturned(alias string) error {
	want, ok := w.ids[alias]
	if !ok {
		return fmt.Errorf("no intent %q in this scenario", alias)
	}
	if w.last == nil || w.last.Status != http.StatusOK {
		return features.Mismatch("200 with intent "+alias+" ("+want+")", features.Describe(w.last))
	}
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	if id, _ := m["id"].(string); id != want {
		got := id
		if a, ok := w.aliases[id]; ok {
			got = "intent " + a + " (" + id + ")"
		}
		return features.Mismatch("intent "+alias+" ("+want+")", got+": "+features.Describe(w.last))
	}
	return nil
}

// tokenFormat checks the last claim's token: a non-empty string. §4.2 types
// it as a string; its 16 bytes of hex are only the example's placeholder
// ("<16-byte-hex-string>").
func (w *intentWorld) tokenFormat() error {
	m, err := jsonBody(w.last)
	if err != nil {
		return err
	}
	if tok, _ := m["claim_token"].(string); tok == "" {
		return features.Mismatch("a non-empty string claim_token", features.Describe(w.last))
	}
	return nil
}

// claimResult is one claim of a concurrent batch.
type claimResult struct {
	status    int
	id, token string
}

// claimStorm releases n claims, each from its own worker ID, at one barrier.
func (w *intentWorld) claimStorm(ctx context.Context, n int) error {
	c, h, err := w.actor(actorMain)
	if err != nil {
		return err
	}
	res := make([]claimResult, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			hh := h.Clone()
			hh.Set(HeaderWorkerID, fmt.Sprintf("w%d-%s", i, w.ns))
			<-start
			r, err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: "/claim?namespace=" + url.QueryEscape(w.ns), Header: hh})
			if err != nil {
				return
			}
			res[i].status = r.Status
			var m map[string]any
			if r.Status == http.StatusOK && json.Unmarshal(r.Body, &m) == nil {
				res[i].id, _ = m["id"].(string)
				res[i].token, _ = m["claim_token"].(string)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	w.storm = res
	return nil
}

func (w *intentWorld) claimsReturned(n int) error {
	got := 0
	other := 0
	for _, r := range w.storm {
		switch r.status {
		case http.StatusOK:
			got++
		case http.StatusNoContent:
		default:
			other++
		}
	}
	if got != n || other != 0 {
		return features.Mismatch(fmt.Sprintf("%d claims answered 200 and the rest 204", n), fmt.Sprintf("%d answered 200, %d answered neither 200 nor 204", got, other))
	}
	return nil
}

func (w *intentWorld) noDoubleLease() error {
	seen := map[string]int{}
	for i, r := range w.storm {
		if r.status != http.StatusOK {
			continue
		}
		if j, ok := seen[r.id]; ok || r.id == "" {
			return features.Mismatch("every intent handed to one worker only", fmt.Sprintf("intent %q handed to workers %d and %d", r.id, j, i))
		}
		seen[r.id] = i
	}
	return nil
}

func (w *intentWorld) distinctTokens() error {
	seen := map[string]bool{}
	for _, r := range w.storm {
		if r.status != http.StatusOK {
			continue
		}
		// §4.2 types the token as a string; its hex form is only the
		// example's placeholder ("<16-byte-hex-string>"), which neither rule
		// judged here speaks of.
		if r.token == "" || seen[r.token] {
			return features.Mismatch("distinct, non-empty claim tokens", fmt.Sprintf("token %q repeated or empty", r.token))
		}
		seen[r.token] = true
	}
	return nil
}

// claimAll claims until the namespace is empty, recording the order.
func (w *intentWorld) claimAll(ctx context.Context) error {
	w.claimSeq = nil
	for n := 0; n < 500; n++ {
		r, err := w.claim(ctx, actorMain, "", nil)
		if err != nil {
			return err
		}
		switch r.Status {
		case http.StatusNoContent:
			return nil
		case http.StatusOK:
			m, _ := jsonBody(r)
			id, _ := m["id"].(string)
			// A lease that ran out while the loop went on (one protocol
			// minute is a second at time scale 60) hands its intent out
			// again, after the others: the order is that of first claims.
			if !slices.Contains(w.claimSeq, id) {
				w.claimSeq = append(w.claimSeq, id)
			}
		default:
			return features.Mismatch("200 or 204", features.Describe(r))
		}
	}
	return fmt.Errorf("claim every intent: more than 500 intents")
}

func (w *intentWorld) nameOf(id string) string {
	if a, ok := w.aliases[id]; ok {
		return a
	}
	return id
}

func (w *intentWorld) claimOrder(order string) error {
	var want, got []string
	for _, a := range strings.Split(order, ",") {
		want = append(want, strings.TrimSpace(a))
	}
	for _, id := range w.claimSeq {
		got = append(got, w.nameOf(id))
	}
	if strings.Join(want, ", ") != strings.Join(got, ", ") {
		return features.Mismatch("claim order "+strings.Join(want, ", "), "claim order "+strings.Join(got, ", "))
	}
	return nil
}

// adminDetail reads GET /admin/intents/<id> and returns the intent object,
// whether flat or wrapped in one object.
func (w *intentWorld) adminDetail(ctx context.Context, id string) (map[string]any, error) {
	r, err := w.send(ctx, actorAdmin, http.MethodGet, "/admin/intents/"+id, nil, nil)
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, features.Mismatch("200 with the intent detail", features.Describe(r))
	}
	m, err := jsonBody(r)
	if err != nil {
		return nil, err
	}
	if _, ok := m["id"]; ok {
		return m, nil
	}
	for _, v := range m {
		if o, ok := v.(map[string]any); ok {
			if _, ok := o["id"]; ok {
				return o, nil
			}
		}
	}
	return nil, features.Mismatch("an intent object with an id", features.Describe(r))
}

func (w *intentWorld) noteSchedule(ctx context.Context) error {
	w.schedule = map[string]schedFields{}
	for _, id := range w.idsInRecordedOrder() {
		alias := w.nameOf(id)
		m, err := w.adminDetail(ctx, id)
		if err != nil {
			return fmt.Errorf("schedule of %s: %w", alias, err)
		}
		var s schedFields
		s.ID = id
		var ok [4]bool
		s.Priority, ok[0] = numberField(m, "priority")
		s.RunAt, ok[1] = numberField(m, "run_at")
		s.ClaimAttempts, ok[2] = numberField(m, "claim_attempts")
		s.CreatedAt, ok[3] = numberField(m, "created_at")
		if !ok[0] || !ok[1] || !ok[2] || !ok[3] {
			return features.Mismatch("priority, run_at, claim_attempts and created_at in the admin detail", features.Describe(w.last))
		}
		w.schedule[id] = s
	}
	return nil
}

func (w *intentWorld) checkSchedule() error {
	var want []schedFields
	for _, s := range w.schedule {
		want = append(want, s)
	}
	sort.Slice(want, func(i, j int) bool {
		a, b := want[i], want[j]
		switch {
		case a.Priority != b.Priority:
			return a.Priority > b.Priority
		case a.RunAt != b.RunAt:
			return a.RunAt < b.RunAt
		case a.ClaimAttempts != b.ClaimAttempts:
			return a.ClaimAttempts < b.ClaimAttempts
		case a.CreatedAt != b.CreatedAt:
			return a.CreatedAt < b.CreatedAt
		}
		return a.ID < b.ID
	})
	if len(want) != len(w.claimSeq) {
		return features.Mismatch(fmt.Sprintf("%d intents claimed", len(want)), fmt.Sprintf("%d claimed", len(w.claimSeq)))
	}
	for i := range want {
		if want[i].ID != w.claimSeq[i] {
			s, ok := w.schedule[w.claimSeq[i]]
			return features.Mismatch(fmt.Sprintf("claim %d: %s %+v", i+1, w.nameOf(want[i].ID), want[i]),
				fmt.Sprintf("claim %d: %s %+v (known: %v)", i+1, w.nameOf(w.claimSeq[i]), s, ok))
		}
	}
	return nil
}

// rateBurst sends n claims as fast as it can, 10 at a time; NotApplicable
// when they did not all fit in one scaled minute. A burst shorter than a
// window touches at most two windows of a fixed-window limiter, so n > 120
// puts more than 60 requests in one of them.
func (w *intentWorld) rateBurst(ctx context.Context, actor string, n int) error {
	c, h, err := w.actor(actor)
	if err != nil {
		return err
	}
	w.batch = make([]*client.Response, n)
	start := time.Now()
	parallel(n, 10, func(i int) {
		if r, err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: "/claim?namespace=" + url.QueryEscape(w.ns), Header: h}); err == nil {
			w.batch[i] = r
		}
	})
	if took := time.Since(start); took > w.protocol(60) {
		return features.NotApplicable(fmt.Sprintf("%d requests took %s, longer than one rate-limit window at the target's time scale (%s)", n, took.Round(time.Millisecond), w.protocol(60)))
	}
	return nil
}

// burstRefused checks that the burst met a 429 and, unless code is "", that
// it carried that error code.
func (w *intentWorld) burstRefused(code string) error {
	for _, r := range w.batch {
		if r != nil && r.Status == http.StatusTooManyRequests {
			if code == "" {
				w.last = r
				return nil
			}
			got, err := checkErrorShape(r)
			if err != nil {
				return err
			}
			if got != code {
				return features.Mismatch("429 with code "+code, features.Describe(r))
			}
			w.last = r
			return nil
		}
	}
	last := w.batch[len(w.batch)-1]
	return features.Mismatch(fmt.Sprintf("at least one 429 among %d requests in one window", len(w.batch)), "none; the last: "+features.Describe(last))
}

// ------------------------------------------------------------ leases, time

// failTimes claims alias (waiting out its backoff) and fails it, n times.
func (w *intentWorld) failTimes(ctx context.Context, alias string, n int) error {
	id, ok := w.ids[alias]
	if !ok {
		return fmt.Errorf("fail: no intent %q", alias)
	}
	actor := w.publisher[alias]
	for i := 1; i <= n; i++ {
		if err := w.claimUntil(ctx, actor, alias); err != nil {
			return fmt.Errorf("fail %s, attempt %d: %w", alias, i, err)
		}
		ts := w.tokens[alias]
		body, _ := json.Marshal(map[string]string{"claim_token": ts[len(ts)-1], "error": fmt.Sprintf("attempt %d", i)})
		call := time.Now()
		r, err := w.send(ctx, actor, http.MethodPost, "/fail/"+id, body, nil)
		if err != nil {
			return err
		}
		w.lastFail = [2]time.Time{call, time.Now()}
		// §7.6's "200 OK | Processed" is a table row without a keyword.
		if r.Status/100 != 2 {
			return features.Mismatch(fmt.Sprintf("a 2xx for fail %d of %s", i, alias), features.Describe(r))
		}
	}
	return nil
}

// intentView reads GET /result/<id> as the intent's publisher.
func (w *intentWorld) intentView(ctx context.Context, alias string) (map[string]any, error) {
	id, ok := w.ids[alias]
	if !ok {
		return nil, fmt.Errorf("no intent %q in this scenario", alias)
	}
	r, err := w.send(ctx, w.publisher[alias], http.MethodGet, "/result/"+id, nil, nil)
	if err != nil {
		return nil, err
	}
	if r.Status != http.StatusOK {
		return nil, features.Mismatch("200 from /result of "+alias, features.Describe(r))
	}
	return jsonBody(r)
}

// backoffWindow checks run_at after the last /fail against §3.3:
// now + backoff_base*2^attempts + jitter, jitter in [0, 2), at the target's
// time scale; "now" is bracketed by the call and return of the fail.
func (w *intentWorld) backoffWindow(ctx context.Context, alias string, attempts int, base string) error {
	b := w.bases[alias]
	if base != "" {
		fmt.Sscanf(base, "%g", &b)
	}
	runAt, ok, err := w.intentNumber(ctx, alias, "run_at")
	if err != nil {
		return err
	}
	if !ok {
		return features.NotApplicable("the target shows run_at in no reply (/result, admin detail)")
	}
	delay := b * math.Pow(2, float64(attempts))
	const slack = 5 * time.Millisecond
	lo := w.lastFail[0].Add(w.protocol(delay)).Add(-slack)
	hi := w.lastFail[1].Add(w.protocol(delay + 2)).Add(slack)
	got := unixTime(runAt)
	if got.Before(lo) || !got.Before(hi) {
		return features.Mismatch(fmt.Sprintf("run_at in [fail + %gs, fail + %gs) at time scale %g, i.e. %.3f..%.3f", delay, delay+2, w.env.Target.TimeScale,
			float64(lo.UnixNano())/1e9, float64(hi.UnixNano())/1e9),
			fmt.Sprintf("run_at %.3f (%+.3fs after the fail call)", runAt, got.Sub(w.lastFail[0]).Seconds()))
	}
	return nil
}

// waitUntil sleeps until the target's timestamp field of alias has passed.
// The text names no reply that must carry the field (§7.7 shows it in an
// example): when none does, it sleeps until what fallback computes from the
// protocol's own durations, and returns at once without a fallback.
func (w *intentWorld) waitUntil(ctx context.Context, alias, name string, fallback func() (time.Time, error)) error {
	ts, ok, err := w.intentNumber(ctx, alias, name)
	if err != nil {
		return err
	}
	at := unixTime(ts)
	if !ok {
		if fallback == nil {
			return nil
		}
		if at, err = fallback(); err != nil {
			return err
		}
	}
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	return w.sleep(ctx, d+10*time.Millisecond+w.protocol(0.05), name+" of "+alias)
}

// leaseExpired waits out alias's lease: until its claim_expires_at, or, when
// the target shows none, claim_timeout (the claim reply's, else §3.3's
// default 60) after the claim returned.
func (w *intentWorld) leaseExpired(ctx context.Context, alias string) error {
	return w.waitUntil(ctx, alias, "claim_expires_at", func() (time.Time, error) {
		at, ok := w.claimedAt[alias]
		if !ok {
			return time.Time{}, fmt.Errorf("lease of %s: no claim of it in this scenario", alias)
		}
		return at.Add(w.protocol(w.leaseOf[alias])), nil
	})
}

// due waits until alias is claimable: until its run_at, or, when the target
// shows none, the delay it was published with after the publish returned.
// A claimed intent's backoff is not known then: N/A.
func (w *intentWorld) due(ctx context.Context, alias string) error {
	return w.waitUntil(ctx, alias, "run_at", func() (time.Time, error) {
		at, ok := w.publishedAt[alias]
		if !ok || len(w.tokens[alias]) > 0 {
			return time.Time{}, features.NotApplicable("the target shows run_at in no reply, and when " + alias + " is due is not known")
		}
		return at.Add(w.protocol(w.delayOf[alias])), nil
	})
}

func (w *intentWorld) leaseEndsAfter(ctx context.Context, alias string, seconds int) error {
	want := time.Now().Add(w.protocol(float64(seconds)))
	ts, ok, err := w.intentNumber(ctx, alias, "claim_expires_at")
	if err != nil {
		return err
	}
	if !ok {
		return features.NotApplicable("the target shows claim_expires_at in no reply (/result, admin detail)")
	}
	if unixTime(ts).Before(want) {
		return features.Mismatch(fmt.Sprintf("claim_expires_at after %.3f", float64(want.UnixNano())/1e9), features.Describe(w.last))
	}
	return nil
}

func (w *intentWorld) protocolPass(ctx context.Context, seconds float64) error {
	return w.sleep(ctx, w.protocol(seconds), fmt.Sprintf("%g protocol seconds", seconds))
}

func (w *intentWorld) expiresAfter(ctx context.Context, alias string, seconds int) error {
	m, err := w.adminDetail(ctx, w.ids[alias])
	if err != nil {
		return err
	}
	exp, ok1 := numberField(m, "expires_at")
	created, ok2 := numberField(m, "created_at")
	want := w.protocol(float64(seconds)).Seconds()
	if !ok1 || !ok2 || math.Abs((exp-created)-want) > 0.01*want+0.01 {
		return features.Mismatch(fmt.Sprintf("expires_at - created_at = %.3fs", want), features.Describe(w.last))
	}
	return nil
}

// ------------------------------------------------------------ intent state

func (w *intentWorld) statusIs(ctx context.Context, alias, status string) error {
	id, ok := w.ids[alias]
	if !ok {
		return fmt.Errorf("no intent %q in this scenario", alias)
	}
	r, err := w.send(ctx, w.publisher[alias], http.MethodGet, "/status/"+id, nil, nil)
	if err != nil {
		return err
	}
	m, err := jsonBody(r)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK || m["status"] != status {
		return features.Mismatch(fmt.Sprintf(`200 {"status": %q} for %s`, status, alias), features.Describe(r))
	}
	return nil
}

func (w *intentWorld) inDead(ctx context.Context, alias string, want bool) error {
	id, ok := w.ids[alias]
	if !ok {
		return fmt.Errorf("no intent %q in this scenario", alias)
	}
	keep := w.last
	r, err := w.send(ctx, actorAdmin, http.MethodGet, "/admin/dead", nil, nil)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return features.Mismatch("200 from /admin/dead", features.Describe(r))
	}
	if got := strings.Contains(string(r.Body), id); got != want {
		if want {
			return features.Mismatch("dead-letter list with "+alias+" ("+id+")", features.Describe(r))
		}
		return features.Mismatch("dead-letter list without "+alias+" ("+id+")", features.Describe(r))
	}
	w.last = keep
	return nil
}

// namespaceHolds drains the namespace with claims and counts what it got.
func (w *intentWorld) namespaceHolds(ctx context.Context, n int) error {
	got := 0
	for i := 0; i < n+20; i++ {
		r, err := w.claim(ctx, actorMain, "", nil)
		if err != nil {
			return err
		}
		if r.Status == http.StatusNoContent {
			break
		}
		if r.Status != http.StatusOK {
			return features.Mismatch("200 or 204", features.Describe(r))
		}
		got++
	}
	if got != n {
		return features.Mismatch(fmt.Sprintf("%d open intents in the namespace", n), fmt.Sprintf("%d", got))
	}
	return nil
}

// intentNumber reads the numeric field name of alias from a reply that
// carries it: GET /result/<id> ("the stored result and full status"), else
// GET /admin/intents/<id> ("Full intent detail") when the target has an
// admin token. Neither reply's field list is spelled out by the text, so ok
// is false, not a failure, when neither carries the field (or answers). The
// last response is kept as it was.
func (w *intentWorld) intentNumber(ctx context.Context, alias, name string) (v float64, ok bool, err error) {
	id, known := w.ids[alias]
	if !known {
		return 0, false, fmt.Errorf("no intent %q in this scenario", alias)
	}
	keep := w.last
	defer func() { w.last = keep }()
	m, err := w.intentView(ctx, alias)
	switch {
	case err == nil:
		if v, ok := numberField(m, name); ok {
			return v, true, nil
		}
	case !errors.As(err, new(*features.MismatchError)):
		return 0, false, err
	}
	if w.env.Target.Credentials[CredentialAdminToken] == "" {
		return 0, false, nil
	}
	m, err = w.adminDetail(ctx, id)
	switch {
	case err == nil:
		v, ok := numberField(m, name)
		return v, ok, nil
	case !errors.As(err, new(*features.MismatchError)):
		return 0, false, err
	}
	return 0, false, nil
}

// claimAttemptsIs judges claim_attempts of alias. §4.2 lists the field, but
// no sentence names a reply that must carry it (the claim reply shows it in
// an example only, /status lists no fields): it is read from the last reply
// when that is alias's claim and carries it, else from /result or the admin
// detail, and the check is N/A when no reply shows it.
func (w *intentWorld) claimAttemptsIs(ctx context.Context, alias string, n int) error {
	want, ok := w.ids[alias]
	if !ok {
		return fmt.Errorf("no intent %q in this scenario", alias)
	}
	if r := w.last; r != nil && r.Status == http.StatusOK && r.Exchange.Method == http.MethodPost && strings.HasPrefix(r.Exchange.Path, "/claim") {
		if m, err := jsonBody(r); err == nil {
			if id, _ := m["id"].(string); id == want {
				if v, ok := numberField(m, "claim_attempts"); ok {
					if v != float64(n) {
						return features.Mismatch(fmt.Sprintf("claim_attempts %d for %s", n, alias), features.Describe(r))
					}
					return nil
				}
			}
		}
	}
	v, ok, err := w.intentNumber(ctx, alias, "claim_attempts")
	if err != nil {
		return err
	}
	if !ok {
		return features.NotApplicable("the target shows claim_attempts in no reply (claim, /result, admin detail)")
	}
	if v != float64(n) {
		return features.Mismatch(fmt.Sprintf("claim_attempts %d for %s", n, alias), fmt.Sprintf("claim_attempts %g", v))
	}
	return nil
}
