package reports

import (
	"github.com/idscheck/idscheck/verdict"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/spec"
)

var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// fixtureRule is a rule of a fixed, made-up catalog: the golden files must
// not change when the real catalog does.
func fixtureRule(id, section string, level spec.Level) spec.Rule {
	return spec.Rule{ID: id, Profile: spec.Profile("intent"), Source: "004_b5f0a9c556f3c9c3.txt", Section: section, Level: level,
		Quote: "The server " + string(level) + " do what " + id + " says.", Explanation: "what breaks without " + id}
}

// fixtureDecision is a decision of the text with two readings, written
// here so that the report tests do not change when a profile's catalog does.
var fixtureDecision = spec.Decision{
	ID: "lease-expiry", Profile: "intent", Section: "3.3, 7.3",
	Question: "When a lease expires with attempts left, is the intent requeued with a backoff delay, or claimable at once?",
	Readings: []spec.Reading{
		{Name: "backoff", Section: "3.3",
			Quote: "On lease expiry or explicit /fail, the bus MUST requeue the intent with a backoff delay: next_run = now + (backoff_base * (2 ^ claim_attempts)) + jitter",
			Means: "an expired intent becomes claimable again backoff_base*2^claim_attempts + [0,2) s after its lease ended"},
		{Name: "immediate", Section: "7.3",
			Quote: "Lease expiry does not require a background cleanup pass before an intent can be reclaimed; expired intents are eligible for immediate atomic selection.",
			Means: "an expired intent is claimable the moment its lease ends"},
	},
	Why: "Both can be read as binding.",
}

// readingRule is a fixture rule whose check rests on a decision of the text.
func readingRule(id, section string) spec.Rule {
	r := fixtureRule(id, section, spec.Must)
	r.Readings = []string{fixtureDecision.ID}
	return r
}

// sampleResult has one rule of every verdict, an expected failure, one that
// now passes, a not-covered rule and evidence with a full transcript.
func sampleResult() *Result {
	ex := verdict.Exchange{
		Client: "publisher", Method: "POST", Path: "/intent?namespace=a",
		ReqHeaders:  map[string][]string{"Idempotency-Key": {"k-1"}, "X-Api-Key": {"sekret-key-1"}, "Content-Type": {"application/json"}},
		ReqBody:     `{"payload":{"n":1}}`,
		Status:      201,
		RespHeaders: map[string][]string{"Content-Type": {"application/json"}},
		RespBody:    `{"id":"in-1","status":"open"}`,
		Call:        t0.Add(1500 * time.Millisecond), Return: t0.Add(1512 * time.Millisecond), Outcome: verdict.OutcomeOK,
	}
	replay := ex
	replay.Status, replay.RespBody = 200, `{"id":"in-2","status":"open"}`
	replay.Call, replay.Return = t0.Add(1600*time.Millisecond), t0.Add(1605*time.Millisecond)
	lost := ex
	lost.Status, lost.RespHeaders, lost.RespBody, lost.Outcome, lost.Err = 0, nil, "", verdict.OutcomeUnknown, "read tcp: i/o timeout"
	return &Result{
		Decisions: []spec.Decision{fixtureDecision},
		Tool:      Tool{Name: "idscheck", Version: "v0.1.0-test", GoVersion: "go1.26"},
		Profile:   spec.Profile("intent"),
		Target:    Target{URL: "http://127.0.0.1:8080", Bundled: true, Mutant: "no-replay"},
		Seed:      42,
		Command:   "idscheck run --profile intent --seed 42 --mutant no-replay --api-key $API_KEY",
		Started:   t0,
		Finished:  t0.Add(12 * time.Second),
		Rules: []RuleEntry{
			{Rule: fixtureRule("INTENT-7.2-idem-replay", "7.2", spec.Must), Result: verdict.RuleResult{
				RuleID: "INTENT-7.2-idem-replay", Verdict: verdict.Fail, Reason: `scenario "replay": second answer differs`,
				Scenarios: []string{"replay"}, Duration: 120 * time.Millisecond,
				Evidence: []verdict.Evidence{{Expected: `the first response again: 201 {"id":"in-1"}`, Observed: `200 {"id":"in-2"}`, Exchanges: []verdict.Exchange{ex, replay}}},
			}},
			{Rule: fixtureRule("INTENT-7.3-idem-conflict", "7.3", spec.Must), Result: verdict.RuleResult{
				RuleID: "INTENT-7.3-idem-conflict", Verdict: verdict.Fail, Reason: "known bug", Duration: 80 * time.Millisecond,
			}, Expected: true},
			{Rule: fixtureRule("INTENT-6.1-claim", "6.1", spec.Must), Result: verdict.RuleResult{
				RuleID: "INTENT-6.1-claim", Verdict: verdict.Pass, Scenarios: []string{"claim"}, Duration: 40 * time.Millisecond,
			}},
			{Rule: fixtureRule("INTENT-6.2-fixed", "6.2", spec.Must), Result: verdict.RuleResult{
				RuleID: "INTENT-6.2-fixed", Verdict: verdict.Pass, Duration: 10 * time.Millisecond,
			}, Expected: true},
			{Rule: fixtureRule("INTENT-6.4-lease-timeout", "6.4", spec.Must), Result: verdict.RuleResult{
				RuleID: "INTENT-6.4-lease-timeout", Verdict: verdict.Unknown, Reason: "target stopped answering",
				Evidence: []verdict.Evidence{{Expected: "a response", Observed: "none within 2s", Exchanges: []verdict.Exchange{lost}}},
			}},
			{Rule: readingRule("INTENT-6.5-lease-expiry", "6.5"), Result: verdict.RuleResult{
				RuleID: "INTENT-6.5-lease-expiry", Verdict: verdict.Reading, Reason: "claimable again 0.1s after its lease ended, with no backoff",
				Scenarios: []string{"lease expiry"}, Duration: 2100 * time.Millisecond,
				Reading:  &verdict.ReadingChoice{Decision: fixtureDecision.ID, Follows: "immediate"},
				Evidence: []verdict.Evidence{{Expected: "backoff: claimable 2s-4s after the lease ended; immediate: claimable at once", Observed: "claimed again 0.1s after the lease ended"}},
			}},
			{Rule: fixtureRule("INTENT-6.6-claim-order", "6.6", spec.Must), Result: verdict.RuleResult{
				RuleID: "INTENT-6.6-claim-order", Verdict: verdict.Blocked, BlockedBy: "INTENT-7.2-idem-replay",
				Reason: "its setup replays a publish, and the replay answered 200 instead of 201",
			}},
			{Rule: fixtureRule("INTENT-8.1-retry-after", "8.1", spec.Should), Result: verdict.RuleResult{
				RuleID: "INTENT-8.1-retry-after", Verdict: verdict.NonStrict, Reason: "no Retry-After on 429",
			}},
			{Rule: fixtureRule("INTENT-8.2-may-hint", "8.2", spec.May), Result: verdict.RuleResult{
				RuleID: "INTENT-8.2-may-hint", Verdict: verdict.NonStrict, Reason: "MAY (informational): no hint",
			}},
			{Rule: fixtureRule("INTENT-9.1-admin", "9.1", spec.Must), Result: verdict.RuleResult{
				RuleID: "INTENT-9.1-admin", Verdict: verdict.NA, Reason: "no admin token given (--admin-token)",
			}},
		},
		NotCovered:       []string{"INTENT-NOT-A-REAL-RULE"},
		ExpectedFailures: "expected-failures.txt",
		ExitCode:         1,
		Notes:            []string{"the bundled server ran with time scale 10"},
		Redact:           []string{"sekret-key-1"},
	}
}

// sampleChaos is a chaos section with an anomaly, two faults and a series.
func sampleChaos() *Chaos {
	c := &Chaos{
		Start: t0, End: t0.Add(10 * time.Second), Duration: 8 * time.Second, Workers: 4, Faults: "partition,storm",
		Namespace: "chaos-42", Verdict: verdict.Fail, Ops: 1200, Effects: 300,
		Queue:       checker.QueueStats{Attempted: 300, Acknowledged: 298, Effected: 299, Duplicated: 1},
		Models:      []checker.ModelCheck{{Model: checker.ModelIdempotency, Result: checker.LinIllegal, Ops: 600, Partitions: 300, Failing: []string{"k-7"}}},
		Counts:      map[checker.AnomalyKind]int{checker.Duplicated: 1, checker.Recovered: 2, checker.Lost: 0},
		Unavailable: map[string]string{"crash": "no --target-cmd"},
		Anomalies: []checker.Anomaly{{Kind: checker.Recovered, Key: "k-9", Explanation: "k-9 took effect though its answer was lost"}, {Kind: checker.Duplicated, Key: "k-7", Explanation: "unit k-7 took effect 2 times",
			Ops:     []checker.Operation{{ClientID: 1, Kind: checker.OpPublish, Key: "k-7", Input: checker.Input{Body: "d1"}, Output: checker.Output{Status: 201, ID: "in-7"}, Call: 1e9, Return: 1.01e9, Outcome: verdict.OutcomeOK}},
			Effects: []checker.Effect{{Key: "k-7", Intent: "in-7", Worker: "w1", At: 2e9}, {Key: "k-7", Intent: "in-7", Worker: "w2", At: 3e9}}}},
		Timeline: []FaultSpan{
			{Name: "partition", Kind: "network", Start: t0.Add(2 * time.Second), End: t0.Add(4 * time.Second)},
			{Name: "storm", Kind: "storm", Params: map[string]string{"n": "50"}, Start: t0.Add(5 * time.Second), End: t0.Add(5500 * time.Millisecond)},
		},
		Visualizations: []string{"linearization.html"},
	}
	for i := range 10 {
		b := Bucket{At: time.Duration(i) * time.Second, Ops: 120, P50: 3 * time.Millisecond, P99: 20 * time.Millisecond}
		if i == 2 || i == 3 {
			b.Ops, b.Unknown, b.Failed, b.P99 = 20, 10, 5, 2*time.Second
		}
		c.Series = append(c.Series, b)
	}
	return c
}
