package ids

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/sink"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

// processingTarget is an IDS target (docs/ids-binding.md) whose first
// delivery of a command is answered, as the binding allows, 202 processing
// with a status URL, and whose execution starts only once the whole storm
// of deliveries has been answered (a barrier, not a delay): every
// duplicate sees processing, or past the declared duplicate_rate_limit a
// 429. The outcome is only ever at the status URL. Variants break it:
// executions 2 makes two effects per command; never leaves the command
// in_progress for good.
type processingTarget struct {
	sinkURL    string
	storm      int // answers after which the execution starts
	executions int
	never      bool
	ctx        context.Context

	mu     sync.Mutex
	byKey  map[string]*procRecord
	byID   map[string]*procRecord
	counts map[int]int // answers given, by status
}

type procRecord struct {
	env      Envelope
	key      string
	status   string
	ref      string
	dups     int
	answered int
	all      chan struct{} // closed once storm answers were given
}

const procRateMax = 100

func newProcessingTarget(ctx context.Context, sinkURL string, storm, executions int, never bool) *processingTarget {
	return &processingTarget{sinkURL: sinkURL, storm: storm, executions: executions, never: never, ctx: ctx,
		byKey: map[string]*procRecord{}, byID: map[string]*procRecord{}, counts: map[int]int{}}
}

func (p *processingTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == PathHealth:
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodGet && r.URL.Path == PathRegistry:
		writeTestJSON(w, http.StatusOK, map[string]any{
			"binding":                  Binding,
			"duplicate_rate_limit":     map[string]any{"max": procRateMax, "window_seconds": 60},
			"confirmation_ttl_seconds": 300,
			"commands": []any{map[string]any{
				"command": "payment.capture", "class": "I3", "ttl_seconds": 86400, "shielding": "S3", "financial": true,
				"requires_confirmation": false, "effects": true,
				"args_examples": []any{map[string]any{"amount_minor": 1250, "currency": "EUR"}, map[string]any{"amount_minor": 990, "currency": "USD"}},
			}},
		})
	case r.Method == http.MethodPost && r.URL.Path == PathCommands:
		p.post(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, PathCommands+"/"):
		p.mu.Lock()
		rec := p.byID[strings.TrimPrefix(r.URL.Path, PathCommands+"/")]
		var doc map[string]any
		if rec != nil {
			var ref any
			if rec.ref != "" {
				ref = rec.ref
			}
			doc = map[string]any{"command_id": rec.env.CommandID, "tenant_id": rec.env.TenantID, "idempotency_key": rec.key,
				"status": rec.status, "outcome_ref": ref, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
				"ttl_expires_at": "2026-01-02T00:00:00Z"}
		}
		p.mu.Unlock()
		if doc == nil {
			writeTestJSON(w, http.StatusNotFound, map[string]any{"code": "not_found", "status": 404})
			return
		}
		writeTestJSON(w, http.StatusOK, doc)
	default:
		http.NotFound(w, r)
	}
}

func (p *processingTarget) post(w http.ResponseWriter, r *http.Request) {
	var env Envelope
	if err := json.NewDecoder(r.Body).Decode(&env); err != nil {
		writeTestJSON(w, http.StatusBadRequest, map[string]any{"code": "invalid_envelope", "status": 400})
		return
	}
	key := env.MustKey()
	p.mu.Lock()
	rec := p.byKey[key]
	status, doc := 0, map[string]any(nil)
	switch {
	case rec == nil:
		rec = &procRecord{env: env, key: key, status: StatusInProgress, all: make(chan struct{})}
		p.byKey[key], p.byID[env.CommandID] = rec, rec
		go p.execute(rec)
		status, doc = http.StatusAccepted, p.processing(rec)
	default:
		rec.dups++
		switch {
		case rec.dups > procRateMax:
			w.Header().Set("Retry-After", "60")
			status, doc = http.StatusTooManyRequests, map[string]any{"code": "duplicate_rate_limited", "status": 429}
		case rec.status == StatusExecuted:
			status, doc = http.StatusCreated, map[string]any{"command_id": rec.env.CommandID, "idempotency_key": key,
				"status": StatusExecuted, "outcome_ref": rec.ref, "result": map[string]any{}, "status_url": PathCommands + "/" + rec.env.CommandID}
		default:
			status, doc = http.StatusAccepted, p.processing(rec)
		}
	}
	p.mu.Unlock()
	writeTestJSON(w, status, doc)
	p.mu.Lock()
	p.counts[status]++
	rec.answered++
	if rec.answered == p.storm {
		close(rec.all)
	}
	p.mu.Unlock()
}

func (p *processingTarget) processing(rec *procRecord) map[string]any {
	return map[string]any{"command_id": rec.env.CommandID, "idempotency_key": rec.key, "status": StatusProcessing,
		"status_url": PathCommands + "/" + rec.env.CommandID}
}

// execute makes the command's effect(s) once every delivery of the storm
// was answered, then (unless never) records it executed.
func (p *processingTarget) execute(rec *procRecord) {
	select {
	case <-rec.all:
	case <-p.ctx.Done():
		return
	}
	for i := range p.executions {
		b, _ := json.Marshal(map[string]any{"tenant_id": rec.env.TenantID, "idempotency_key": rec.key,
			"command_id": fmt.Sprintf("%s-%d", rec.env.CommandID, i), "command": rec.env.Command(), "args": rec.env.Args})
		if resp, err := http.Post(p.sinkURL+"/effects", "application/json", bytes.NewReader(b)); err == nil {
			resp.Body.Close()
		}
	}
	if p.never {
		return
	}
	p.mu.Lock()
	rec.status, rec.ref = StatusExecuted, "out_"+rec.key[:12]
	p.mu.Unlock()
}

func writeTestJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// runProcessingTarget certifies a processingTarget on the rules of the
// storm scenario; it returns the verdicts and the answers' statuses.
func runProcessingTarget(t *testing.T, executions int, never bool) (map[string]string, map[int]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := newProcessingTarget(ctx, s.URL(), 200, executions, never)
	hs := httptest.NewServer(p)
	defer hs.Close()
	suite := Suite()
	res, err := features.Run(ctx, features.RunConfig{Profile: Name, Rules: spec.RulesFor(Name), Suite: &suite, Seed: 1,
		Select: []string{"IDS-VIII.A-atomic", "IDS-XIII-2-concurrent"}, Budget: 3 * time.Second, Sink: s,
		Target: features.Target{BaseURL: hs.URL, TimeScale: 1}})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	counts := map[int]int{}
	for k, v := range p.counts {
		counts[k] = v
	}
	return verdicts(res), counts
}

// TestIDSStormAnsweredProcessingFollowsTheStatusURL (issue 28, case 7):
// 200 concurrent duplicates of a command whose first delivery is answered
// 202 processing with a status URL, the rest 202 or 429 under the declared
// rate limit, as docs/ids-binding.md allows: no answer of the storm is an
// outcome, and the outcome is at the status URL. The storm's rules follow
// it and pass; a target that executes twice, or whose status URL never
// reports an outcome, still fails them.
func TestIDSStormAnsweredProcessingFollowsTheStatusURL(t *testing.T) {
	rules := []string{"IDS-VIII.A-atomic", "IDS-XIII-2-concurrent"}
	t.Run("processing then 429, outcome at the status URL", func(t *testing.T) {
		v, counts := runProcessingTarget(t, 1, false)
		t.Logf("answers %v; %v", counts, v)
		if counts[http.StatusAccepted] == 0 || counts[http.StatusTooManyRequests] == 0 || counts[http.StatusCreated]+counts[http.StatusOK] != 0 {
			t.Fatalf("the target answered %v: the case was not exercised (every answer 202 or 429)", counts)
		}
		for _, id := range rules {
			if !strings.HasPrefix(v[id], string(verdict.Pass)) {
				t.Errorf("%s: %s, want PASS: the outcome is at the status URL the 202 names", id, v[id])
			}
		}
	})
	t.Run("two executions", func(t *testing.T) {
		v, _ := runProcessingTarget(t, 2, false)
		t.Logf("%v", v)
		for _, id := range rules {
			if !strings.HasPrefix(v[id], string(verdict.Fail)) {
				t.Errorf("%s: %s, want FAIL: the command made two effects", id, v[id])
			}
		}
	})
	t.Run("no outcome ever at the status URL", func(t *testing.T) {
		v, _ := runProcessingTarget(t, 1, true)
		t.Logf("%v", v)
		for _, id := range rules {
			if !strings.HasPrefix(v[id], string(verdict.Fail)) || !strings.Contains(v[id], "status URL") {
				t.Errorf("%s: %s, want FAIL naming the status URL it followed", id, v[id])
			}
		}
	})
}

// expiringTarget is an IDS target whose one command has a window of one
// second (ttl_seconds 1 at time scale 1) and which, as the text allows
// once a window has passed (§VIII.C: "the command MAY execute again"),
// executes a delivery that comes after it. It answers every delivery
// but the first only once the first record's window has passed: a storm
// of concurrent duplicates lasts longer than the window, by construction.
type expiringTarget struct {
	sinkURL string

	mu      sync.Mutex
	created time.Time // of the live record (zero: none)
	ref     string
	n       int
}

const expiringWindow = time.Second

func (x *expiringTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == PathRegistry:
		writeTestJSON(w, http.StatusOK, map[string]any{
			"binding": Binding, "confirmation_ttl_seconds": 300,
			"commands": []any{map[string]any{
				"command": "note.add", "class": "I2", "ttl_seconds": expiringWindow.Seconds(), "shielding": nil, "financial": false,
				"requires_confirmation": false, "effects": true,
				"args_examples": []any{map[string]any{"text": "a"}, map[string]any{"text": "b"}},
			}},
		})
	case r.Method == http.MethodPost && r.URL.Path == PathCommands:
		var env Envelope
		json.NewDecoder(r.Body).Decode(&env)
		x.mu.Lock()
		if x.created.IsZero() {
			x.execute(env)
		} else {
			at := x.created.Add(expiringWindow + 200*time.Millisecond)
			x.mu.Unlock()
			time.Sleep(time.Until(at)) // past the window, by construction
			x.mu.Lock()
			if time.Since(x.created) > expiringWindow {
				x.execute(env) // a new window: the text allows it
			}
		}
		doc := map[string]any{"command_id": env.CommandID, "idempotency_key": env.MustKey(), "status": StatusExecuted,
			"outcome_ref": x.ref, "result": map[string]any{}, "status_url": PathCommands + "/" + env.CommandID}
		x.mu.Unlock()
		writeTestJSON(w, http.StatusCreated, doc)
	default:
		http.NotFound(w, r)
	}
}

// execute makes one effect and a new record (x.mu held).
func (x *expiringTarget) execute(env Envelope) {
	x.n++
	x.created, x.ref = time.Now(), fmt.Sprintf("out_%d", x.n)
	b, _ := json.Marshal(map[string]any{"tenant_id": env.TenantID, "idempotency_key": env.MustKey(),
		"command_id": env.CommandID, "command": env.Command(), "args": env.Args})
	if resp, err := http.Post(x.sinkURL+"/effects", "application/json", bytes.NewReader(b)); err == nil {
		resp.Body.Close()
	}
}

// TestIDSStormLongerThanTheWindowIsNotJudged: a storm whose deliveries
// take longer than the only command's window meets a record the text lets
// expire, and a delivery after it may execute again (§VIII.C). On main the
// second execution failed IDS-XIII-2-concurrent and IDS-VIII.A-atomic
// (seen under load on the bundled server too: note.add's window is 2 s at
// time scale 60); now the storm says it outlasted the window and the
// rules are N/A. A target that executes twice inside a long window still
// fails them (TestIDSStormAnsweredProcessingFollowsTheStatusURL, "two
// executions").
func TestIDSStormLongerThanTheWindowIsNotJudged(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := &expiringTarget{sinkURL: s.URL()}
	hs := httptest.NewServer(x)
	defer hs.Close()
	suite := Suite()
	res, err := features.Run(ctx, features.RunConfig{Profile: Name, Rules: spec.RulesFor(Name), Suite: &suite, Seed: 1,
		Select: []string{"IDS-VIII.A-atomic", "IDS-XIII-2-concurrent"}, Budget: 3 * time.Second, Sink: s,
		Target: features.Target{BaseURL: hs.URL, TimeScale: 1}})
	if err != nil {
		t.Fatal(err)
	}
	v := verdicts(res)
	for _, id := range []string{"IDS-VIII.A-atomic", "IDS-XIII-2-concurrent"} {
		if !strings.HasPrefix(v[id], string(verdict.NA)) || !strings.Contains(v[id], "window") {
			t.Errorf("%s: %s, want N/A: the storm outlasted the window", id, v[id])
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.n < 2 {
		t.Fatalf("the target executed %d time(s): the case (a delivery past the window) was not exercised", x.n)
	}
}
