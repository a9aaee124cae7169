package features

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"testing/fstest"

	"github.com/cucumber/godog"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/spec"
	"github.com/idscheck/idscheck/verdict"
)

// replicasFeature sends logical requests the way the profiles' steps do:
// a fresh client of the Env for every request, the key in a header.
const replicasFeature = `Feature: replicas
  Scenario: a retry goes to another replica
    When a fresh client sends the request with key "k1"
    And a fresh client sends the request with key "k1"
    And a fresh client sends the request with key "k1"
    Then [R-1-retry] the 3 deliveries of "k1" went to 3 replicas

  Scenario: logical requests start round the replicas
    When a fresh client sends the request with key "a"
    And a fresh client sends the request with key "b"
    And a fresh client sends the request with key "c"
    Then [R-2-round] the first deliveries of "a", "b" and "c" went to 3 replicas
`

var replicaRules = []spec.Rule{{ID: "R-1-retry", Level: spec.Must}, {ID: "R-2-round", Level: spec.Must}}

// replicaSteps record which replica answered each delivery, by key.
func replicaSteps(sc *godog.ScenarioContext, env *Env) {
	answered := map[string][]string{}
	Register(sc, env, []StepDef{
		{Pattern: `^a fresh client sends the request with key "(\w+)"$`, Kind: Action, Fn: func(ctx context.Context, key string) error {
			c, err := env.Client("replicas")
			if err != nil {
				return err
			}
			r, err := c.Do(ctx, client.Request{Method: http.MethodPost, Path: "/pay", Header: http.Header{"Idempotency-Key": {key}}, Body: []byte(`{"amount":1}`)})
			if err != nil {
				return err
			}
			answered[key] = append(answered[key], string(r.Body))
			return nil
		}},
		{Pattern: `^the (\d+) deliveries of "(\w+)" went to (\d+) replicas$`, Kind: Check, Fn: func(n int, key string, want int) error {
			if got := distinct(answered[key]); len(answered[key]) != n || got != want {
				return Mismatch(fmt.Sprintf("%d deliveries on %d replicas", n, want), fmt.Sprintf("%v", answered[key]))
			}
			return nil
		}},
		{Pattern: `^the first deliveries of "(\w+)", "(\w+)" and "(\w+)" went to (\d+) replicas$`, Kind: Check, Fn: func(a, b, c string, want int) error {
			firsts := []string{answered[a][0], answered[b][0], answered[c][0]}
			if got := distinct(firsts); got != want {
				return Mismatch(fmt.Sprintf("%d replicas", want), fmt.Sprintf("%v", firsts))
			}
			return nil
		}},
	})
}

func distinct(xs []string) int {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return len(m)
}

// TestRunSpreadsDeliveriesOverReplicas: with Target.Replicas, every client
// of a run spreads as one: the deliveries of one logical request (the
// same request sent again, by a fresh client each time, as the profiles'
// steps do) go to one replica after the other, the logical requests'
// first deliveries go round the replicas, and each exchange names the
// replica that answered it. (Before: each fresh client started at the
// first replica, so every delivery went there.)
func TestRunSpreadsDeliveriesOverReplicas(t *testing.T) {
	var urls []string
	for i := range 3 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(strconv.Itoa(i)))
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	res, err := Run(t.Context(), RunConfig{
		Profile: "replicas",
		Target:  Target{BaseURL: urls[0], Replicas: urls[1:]},
		Seed:    1,
		Rules:   replicaRules,
		Suite: &Suite{FS: fstest.MapFS{"replicas.feature": {Data: []byte(replicasFeature)}},
			Paths: []string{"replicas.feature"}, Steps: replicaSteps},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Rules {
		if r.Verdict != verdict.Pass {
			t.Errorf("%s: %s: %s", r.RuleID, r.Verdict, r.Reason)
		}
	}
	seen := map[string]int{}
	for _, ex := range res.Exchanges {
		seen[ex.Replica]++
	}
	for _, u := range urls {
		if seen[u] != 2 {
			t.Errorf("the exchanges name replica %s %d times, want 2 (%v)", u, seen[u], seen)
		}
	}
}
