package ids

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/spec"
	sutids "github.com/idscheck/idscheck/sut/ids"
	"github.com/idscheck/idscheck/verdict"
)

// scenarioSuite is the profile's suite cut down to its Background and the
// scenarios whose title contains one of names.
func scenarioSuite(t *testing.T, names ...string) features.Suite {
	t.Helper()
	src, err := feature.ReadFile("ids.feature")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(src), "\n")
	var starts []int
	for i, l := range lines {
		if strings.HasPrefix(l, "  Scenario") {
			starts = append(starts, i)
		}
	}
	out := strings.Join(lines[:starts[0]], "")
	found := 0
	for i, s := range starts {
		end := len(lines)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		for _, n := range names {
			if strings.Contains(lines[s], n) {
				out += strings.Join(lines[s:end], "")
				found++
				break
			}
		}
	}
	if found != len(names) {
		t.Fatalf("found %d of the scenarios %q", found, names)
	}
	return features.Suite{FS: fstest.MapFS{"ids.feature": {Data: []byte(out)}}, Paths: []string{"ids.feature"}, Steps: idsSteps}
}

// front is a handler in front of the bundled server: it gets the server's
// handler and the request, and answers.
type front func(next http.Handler, w http.ResponseWriter, r *http.Request)

// runIDSBehind certifies the bundled IDS server (mutant "" for the correct
// one) through f, on the scenarios of suite, every rule selected.
func runIDSBehind(t *testing.T, mutant string, f front, suite features.Suite) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv, err := sutids.Open(ctx, sutids.Config{DBPath: filepath.Join(t.TempDir(), "ids.db"), SinkURL: s.URL(),
		TimeScale: 60, Mutant: mutant, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f(h, w, r) }))
	defer hs.Close()
	res, err := features.Run(ctx, features.RunConfig{Profile: Name, Rules: spec.RulesFor(Name), Suite: &suite, Seed: 1,
		Budget: 8 * time.Second, Sink: s, Target: features.Target{BaseURL: hs.URL, TimeScale: 60}})
	if err != nil {
		t.Fatal(err)
	}
	return verdicts(res)
}

// recorded is one answer of the server, taken before it is written.
type recorded struct {
	status int
	header http.Header
	body   []byte
	doc    map[string]any // the body as JSON, nil when it is not an object
}

// serve runs next on r (its body kept readable) and returns its answer.
func serve(next http.Handler, r *http.Request) (recorded, []byte) {
	reqBody, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	a := recorded{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
	json.Unmarshal(a.body, &a.doc)
	return a, reqBody
}

// decision is the answer's IDS-Decision header (the server sets it as
// the binding spells it, not in Go's canonical form).
func (a recorded) decision() string {
	if v := a.header[HeaderDecision]; len(v) > 0 {
		return v[0]
	}
	return a.header.Get(HeaderDecision)
}

func (a recorded) write(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header()[k] = v
	}
	body := a.body
	if a.doc != nil {
		body, _ = json.Marshal(a.doc)
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(a.status)
	w.Write(body)
}

func wantVerdict(t *testing.T, v map[string]string, id string, want verdict.Verdict, why string) {
	t.Helper()
	if !strings.HasPrefix(v[id], string(want)+":") {
		t.Errorf("%s: %s, want %s: %s", id, v[id], want, why)
	}
}

// TestIDSDuplicateRateLimitedIsFollowed: a duplicate refused 429 under
// the duplicate_rate_limit the registry declares is an answer the binding
// allows; the scenario waits as Retry-After says and judges the answer the
// duplicate then gets. Here the registry declares 1 duplicate per window
// and the second duplicate of every key is refused once: on main the I1
// rule failed on the 429; a target that replays a fresh outcome_ref still
// fails it.
func TestIDSDuplicateRateLimitedIsFollowed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	var refused atomic.Int64
	limitOne := func() front {
		var mu sync.Mutex
		dups := map[string]int{}
		return func(next http.Handler, w http.ResponseWriter, r *http.Request) {
			a, _ := serve(next, r)
			switch {
			case r.URL.Path == PathRegistry:
				a.doc["duplicate_rate_limit"] = map[string]any{"max": 1, "window_seconds": 60}
			case r.Method == http.MethodPost && r.URL.Path == PathCommands && a.decision() == DecisionReplayed:
				k, _ := a.doc["idempotency_key"].(string)
				mu.Lock()
				dups[k]++
				refuse := dups[k] == 2
				mu.Unlock()
				if refuse {
					refused.Add(1)
					a = recorded{status: http.StatusTooManyRequests, header: http.Header{"Retry-After": {"1"}, "Content-Type": {"application/problem+json"}},
						doc: map[string]any{"type": "https://idscheck.dev/ids/duplicate_rate_limited", "title": "rate limited", "status": 429, "code": "duplicate_rate_limited"}}
				}
			}
			a.write(w)
		}
	}
	suite := scenarioSuite(t, "an I1 command produces the same effects and outcome when resent")
	t.Run("correct", func(t *testing.T) {
		v := runIDSBehind(t, "", limitOne(), suite)
		wantVerdict(t, v, "IDS-VI-i1-same-outcome", verdict.Pass, "the 429 is followed, then the replay judged")
		if refused.Load() == 0 {
			t.Fatal("no duplicate was refused: the case was not exercised")
		}
	})
	t.Run("replay with a fresh outcome_ref", func(t *testing.T) {
		v := runIDSBehind(t, sutids.MutantReplayFreshID, limitOne(), suite)
		wantVerdict(t, v, "IDS-VI-i1-same-outcome", verdict.Fail, "the replay that follows the 429 is another outcome")
	})
}

// TestIDSWindowCountedFromTheFirstDelivery: the duplicate "just inside
// the window" is sent three quarters of the window after the first
// delivery was sent, not after its outcome was known. A first delivery
// answered 202 processing whose status URL says in_progress for 0.8 of the
// window leaves no duplicate to send inside it: N/A. On main the
// duplicate went out 0.75 of a window after that, past the window, and the
// target's re-execution (which the text allows once the window has
// passed: §VIII.C) failed IX.A-no-reexecute. The window-halved mutant
// still fails it.
func TestIDSWindowCountedFromTheFirstDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	const window = 2 * time.Second // note.add: 120 s at time scale 60
	var slowed atomic.Int64
	slowFirst := func() front {
		var mu sync.Mutex
		sent := map[string]time.Time{} // by command_id
		return func(next http.Handler, w http.ResponseWriter, r *http.Request) {
			a, reqBody := serve(next, r)
			switch {
			case r.Method == http.MethodPost && r.URL.Path == PathCommands && a.decision() == DecisionFirstSeen:
				var env Envelope
				json.Unmarshal(reqBody, &env)
				mu.Lock()
				sent[env.CommandID] = time.Now()
				mu.Unlock()
				a.status = http.StatusAccepted
				a.doc = map[string]any{"command_id": a.doc["command_id"], "idempotency_key": a.doc["idempotency_key"], "status": StatusProcessing,
					"status_url": a.doc["status_url"]}
			case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, PathCommands+"/"):
				mu.Lock()
				at, ok := sent[strings.TrimPrefix(r.URL.Path, PathCommands+"/")]
				mu.Unlock()
				if ok && time.Since(at) < window*8/10 {
					slowed.Add(1)
					a.doc["status"], a.doc["outcome_ref"] = StatusInProgress, nil
				}
			}
			a.write(w)
		}
	}
	suite := scenarioSuite(t, "a duplicate just inside its window is replayed, not executed again")
	v := runIDSBehind(t, "", slowFirst(), suite)
	wantVerdict(t, v, "IDS-IX.A-no-reexecute", verdict.NA, "no duplicate can be sent inside the window")
	if slowed.Load() == 0 {
		t.Fatal("the status URL never said in_progress: the case was not exercised")
	}
	if !strings.Contains(v["IDS-IX.A-no-reexecute"], "three quarters of its window") {
		t.Errorf("IDS-IX.A-no-reexecute: %s: the reason should say why", v["IDS-IX.A-no-reexecute"])
	}
	v = runIDSBehind(t, sutids.MutantWindowHalved, func(next http.Handler, w http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, r) }, suite)
	wantVerdict(t, v, "IDS-IX.A-no-reexecute", verdict.Fail, "the record expires at half its declared window")
}

// TestIDSServerErrorNeverPasses: a 5xx to a delivery whose check asks
// whether it executed (or which key it carries) decides nothing: the
// check is BLOCKED, never PASS nor FAIL. On main a 503 to the duplicate
// sent inside the window passed IX.A-no-reexecute, and a 503 to the resend
// on behalf of the user failed VII.E-effective-actor for a key it did not
// carry. The replay-reexecutes and effective-actor-ignored mutants still
// fail those rules.
func TestIDSServerErrorNeverPasses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the IDS profile")
	}
	var erred atomic.Int64
	unavailable := func(when func(a recorded, env Envelope) bool) front {
		return func(next http.Handler, w http.ResponseWriter, r *http.Request) {
			a, reqBody := serve(next, r)
			var env Envelope
			if r.Method == http.MethodPost && r.URL.Path == PathCommands && json.Unmarshal(reqBody, &env) == nil && when(a, env) {
				erred.Add(1)
				a = recorded{status: http.StatusServiceUnavailable, header: http.Header{"Content-Type": {"text/plain"}}, body: []byte("overloaded")}
			}
			a.write(w)
		}
	}
	straight := func(next http.Handler, w http.ResponseWriter, r *http.Request) { next.ServeHTTP(w, r) }
	t.Run("duplicate inside the window", func(t *testing.T) {
		erred.Store(0)
		suite := scenarioSuite(t, "a duplicate just inside its window is replayed, not executed again")
		v := runIDSBehind(t, "", unavailable(func(a recorded, _ Envelope) bool { return a.decision() == DecisionReplayed }), suite)
		wantVerdict(t, v, "IDS-IX.A-no-reexecute", verdict.Blocked, "a 503 says nothing of whether the duplicate executed")
		if erred.Load() == 0 {
			t.Fatal("no duplicate was answered 503: the case was not exercised")
		}
		v = runIDSBehind(t, sutids.MutantReplayReexecutes, straight, suite)
		wantVerdict(t, v, "IDS-IX.A-no-reexecute", verdict.Fail, "the duplicate called the sink again")
	})
	t.Run("resend on behalf", func(t *testing.T) {
		erred.Store(0)
		suite := scenarioSuite(t, "a resend by another actor on behalf of the same principal does not execute again")
		v := runIDSBehind(t, "", unavailable(func(_ recorded, env Envelope) bool { return env.EffectiveActorID != "" }), suite)
		wantVerdict(t, v, "IDS-IX.A-no-reexecute", verdict.Blocked, "a 503 says nothing of whether the resend executed")
		wantVerdict(t, v, "IDS-VII.E-effective-actor", verdict.Blocked, "a 503 carries no key to judge")
		if erred.Load() == 0 {
			t.Fatal("no resend was answered 503: the case was not exercised")
		}
		v = runIDSBehind(t, sutids.MutantEffectiveActorIgnored, straight, suite)
		wantVerdict(t, v, "IDS-VII.E-effective-actor", verdict.Fail, "the resend on behalf of the user got another key")
	})
}
