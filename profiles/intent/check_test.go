package intent

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// ms0 converts milliseconds to the history's nanoseconds.
func ms0(x int64) int64 { return x * 1e6 }

// Builders of operations, times in milliseconds.

func pub(client int, key, body string, call, ret int64, out verdict.Outcome, status int, id string) checker.Operation {
	return checker.Operation{ClientID: client, Kind: checker.OpPublish, Key: key, Input: checker.Input{Body: body},
		Output: checker.Output{Status: status, ID: id, Body: "resp-" + id}, Call: ms0(call), Return: ms0(ret), Outcome: out}
}

// pubMax is an acknowledged publish with max_attempts m.
func pubMax(client int, key, body string, call, ret int64, m int, id string) checker.Operation {
	op := pub(client, key, body, call, ret, verdict.OutcomeOK, 201, id)
	op.Input.MaxAttempts = m
	return op
}

func claim(client int, id, token string, attempts int, leaseMs, call, ret int64) checker.Operation {
	return checker.Operation{ClientID: client, Kind: OpClaim, Key: id,
		Output: checker.Output{Status: 200, ID: id, Token: token, Attempts: attempts, LeaseNs: ms0(leaseMs)},
		Call:   ms0(call), Return: ms0(ret), Outcome: verdict.OutcomeOK}
}

func mut(client int, kind checker.OpKind, id, token string, call, ret int64, out verdict.Outcome, status int) checker.Operation {
	return checker.Operation{ClientID: client, Kind: kind, Key: id, Input: checker.Input{Token: token},
		Output: checker.Output{Status: status}, Call: ms0(call), Return: ms0(ret), Outcome: out}
}

func extend(client int, id, token string, extMs, call, ret int64, out verdict.Outcome, status int) checker.Operation {
	op := mut(client, OpExtend, id, token, call, ret, out, status)
	op.Input.ExtendNs = ms0(extMs)
	return op
}

func status(client int, id, state string, call, ret int64) checker.Operation {
	return checker.Operation{ClientID: client, Kind: checker.OpStatus, Key: id, Output: checker.Output{Status: 200, State: state},
		Call: ms0(call), Return: ms0(ret), Outcome: verdict.OutcomeOK}
}

func eff(key, intent, token string, at int64) checker.Effect {
	return checker.Effect{Key: key, Intent: intent, Worker: "w1", Token: token, At: ms0(at)}
}

// checkCase is one history with what Check must find in it.
type checkCase struct {
	name    string
	ops     []checker.Operation
	effects []checker.Effect
	opts    Options
	want    map[checker.AnomalyKind]int // counts of every kind found; nil: none
	verdict verdict.Verdict
	illegal []string // models porcupine must find illegal
}

// happy is a unit of work done right: published twice (a retry that
// replays), claimed, executed once, fulfilled, read back.
func happy(key, id string) []checker.Operation {
	return []checker.Operation{
		pub(0, key, "b1", 0, 10, verdict.OutcomeOK, 201, id),
		pub(1, key, "b1", 5, 15, verdict.OutcomeOK, 201, id),
		claim(2, id, "t1", 1, 1000, 20, 30),
		mut(2, OpFulfill, id, "t1", 40, 50, verdict.OutcomeOK, 200),
		status(0, id, StateFulfilled, 60, 70),
	}
}

// manyHidden is h claims whose answer (and intent) was lost, and n intents
// published and then read claimed, which only those claims explain.
func manyHidden(h, n int) []checker.Operation {
	var ops []checker.Operation
	for i := range h {
		ops = append(ops, checker.Operation{ClientID: 100 + i, Kind: OpClaim, Call: ms0(int64(20 + i)), Return: ms0(5000), Outcome: verdict.OutcomeUnknown})
	}
	for i := range n {
		k, id := "k"+itoa(i), "i"+itoa(i)
		ops = append(ops, pub(i, k, "b", 0, 10, verdict.OutcomeOK, 201, id), status(i, id, StateClaimed, 100, 110))
	}
	return ops
}

// storm is n identical concurrent publishes of key released at once; every
// fourth answer is lost, the others replay intent id.
func storm(key, id string, n int) []checker.Operation {
	var ops []checker.Operation
	for i := range n {
		if i%4 == 3 {
			ops = append(ops, pub(i, key, "b1", int64(i), 5000, verdict.OutcomeUnknown, 0, ""))
		} else {
			ops = append(ops, pub(i, key, "b1", int64(i), int64(100+i), verdict.OutcomeOK, 201, id))
		}
	}
	return append(ops, claim(99, id, "t1", 1, 1000, 200, 210), mut(99, OpFulfill, id, "t1", 600, 610, verdict.OutcomeOK, 200))
}

var checkCases = []checkCase{
	// --- must pass
	{name: "pass/happy", ops: happy("k1", "i1"), effects: []checker.Effect{eff("k1", "i1", "t1", 35)}, verdict: verdict.Pass},
	{name: "pass/conflict with a different body", verdict: verdict.Pass, ops: append(happy("k1", "i1"),
		pub(3, "k1", "b2", 80, 90, verdict.OutcomeFailed, 422, "")), effects: []checker.Effect{eff("k1", "i1", "t1", 35)}},
	{name: "pass/conflict explained by an unknown publish", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "k1", "b2", 0, 100, verdict.OutcomeUnknown, 0, ""),
		pub(1, "k1", "b1", 5, 15, verdict.OutcomeFailed, 422, ""),
	}, opts: Options{SkipQueue: true}},
	{name: "pass/refusal does not consume the key", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "k1", "bad", 0, 5, verdict.OutcomeFailed, 400, ""),
		pub(0, "k1", "b1", 10, 15, verdict.OutcomeOK, 201, "i1"),
	}, opts: Options{SkipQueue: true}},
	{name: "pass/reclaim after expiry, stale token refused", verdict: verdict.Pass, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 100, 0, 10),
		claim(1, "i1", "t2", 2, 100, 500, 510),
		mut(0, OpFulfill, "i1", "t1", 600, 610, verdict.OutcomeFailed, 404),
		mut(1, OpFulfill, "i1", "t2", 520, 530, verdict.OutcomeOK, 200),
	}, opts: Options{SkipQueue: true}},
	{name: "pass/extend keeps the lease", verdict: verdict.Pass, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 100, 0, 10),
		extend(0, "i1", "t1", 1000, 50, 60, verdict.OutcomeOK, 200),
		mut(0, OpFulfill, "i1", "t1", 800, 810, verdict.OutcomeOK, 200),
	}, opts: Options{SkipQueue: true}},
	{name: "pass/unknown fulfill then reclaim", verdict: verdict.Pass, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 100, 0, 10),
		mut(0, OpFulfill, "i1", "t1", 20, 5000, verdict.OutcomeUnknown, 0),
		claim(1, "i1", "t2", 2, 100, 500, 510),
		mut(1, OpFulfill, "i1", "t2", 520, 530, verdict.OutcomeOK, 200),
	}, opts: Options{SkipQueue: true}},
	{name: "pass/fail requeues then another worker fulfills", verdict: verdict.Pass, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 10000, 0, 10),
		mut(0, OpFail, "i1", "t1", 20, 30, verdict.OutcomeOK, 200),
		claim(1, "i1", "t2", 2, 10000, 40, 50),
		status(2, "i1", StateClaimed, 60, 70),
		mut(1, OpFulfill, "i1", "t2", 80, 90, verdict.OutcomeOK, 200),
	}, opts: Options{SkipQueue: true}},
	{name: "pass/recovered publish", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 100, verdict.OutcomeUnknown, 0, ""),
	}, effects: []checker.Effect{eff("k1", "i9", "t1", 50)}, want: map[checker.AnomalyKind]int{checker.Recovered: 1}},
	{name: "pass/at-least-once execution allowed", verdict: verdict.Pass, ops: happy("k1", "i1"),
		effects: []checker.Effect{eff("k1", "i1", "t1", 35), eff("k1", "i1", "t1", 36)}, opts: Options{MaxEffects: -1}},
	{name: "pass/undrained is pending", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		status(0, "i1", StateOpen, 20, 30),
	}, opts: Options{Undrained: true}},
	{name: "fail/must finish: ran but stuck claimed", verdict: verdict.Fail, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		claim(1, "i1", "t1", 1, 100, 20, 30),
		status(0, "i1", StateClaimed, 5000, 5010),
	}, effects: []checker.Effect{eff("k1", "i1", "t1", 35)}, opts: Options{MustFinish: true}, want: map[checker.AnomalyKind]int{checker.Lost: 1}},
	{name: "pass/must finish: ran and died is an end", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		claim(1, "i1", "t1", 1, 100, 20, 30),
		status(0, "i1", StateDead, 5000, 5010),
	}, effects: []checker.Effect{eff("k1", "i1", "t1", 35)}, opts: Options{MustFinish: true}},
	{name: "pass/must finish undrained is pending", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		claim(1, "i1", "t1", 1, 100, 20, 30),
		status(0, "i1", StateClaimed, 5000, 5010),
	}, effects: []checker.Effect{eff("k1", "i1", "t1", 35)}, opts: Options{MustFinish: true, Undrained: true}},
	{name: "pass/ran but stuck is not lost without must finish", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		claim(1, "i1", "t1", 1, 100, 20, 30),
		status(0, "i1", StateClaimed, 5000, 5010),
	}, effects: []checker.Effect{eff("k1", "i1", "t1", 35)}},
	{name: "pass/dead is not lost by default", verdict: verdict.Pass, ops: []checker.Operation{
		pubMax(0, "k1", "b1", 0, 10, 1, "i1"),
		claim(1, "i1", "t1", 1, 100, 12, 15), // the worker died before running it
		status(0, "i1", StateDead, 500, 510),
	}},

	// --- realistic chaos patterns that must pass (no false alarms)
	{name: "pass/storm with lost answers", verdict: verdict.Pass, ops: storm("k1", "i1", 20), effects: []checker.Effect{eff("k1", "i1", "t1", 500)}},
	{name: "pass/stalled worker refused after reclaim", verdict: verdict.Pass, opts: Options{SkipQueue: true}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 1000, 0, 10),
		claim(1, "i1", "t2", 2, 1000, 1100, 1110),
		mut(0, OpFulfill, "i1", "t1", 1300, 1310, verdict.OutcomeFailed, 404),
		mut(1, OpFulfill, "i1", "t2", 1200, 1210, verdict.OutcomeOK, 200),
	}},
	{name: "pass/stalled worker refused, nobody reclaimed", verdict: verdict.Pass, opts: Options{SkipQueue: true}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 1000, 0, 10),
		mut(0, OpFulfill, "i1", "t1", 1300, 1310, verdict.OutcomeFailed, 404),
		status(1, "i1", StateOpen, 1400, 1410),
	}},
	{name: "pass/claim whose answer was lost holds the intent", verdict: verdict.Pass, opts: Options{SkipQueue: true}, ops: []checker.Operation{
		{ClientID: 5, Kind: OpClaim, Call: ms0(0), Return: ms0(3000), Outcome: verdict.OutcomeUnknown},
		status(1, "i1", StateClaimed, 100, 110),
		claim(0, "i1", "t2", 2, 1000, 1500, 1510),
		mut(0, OpFulfill, "i1", "t2", 1600, 1610, verdict.OutcomeOK, 200),
	}},
	{name: "pass/many claims whose answer was lost", verdict: verdict.Pass, opts: Options{Undrained: true}, ops: manyHidden(25, 21)},
	{name: "fail/more intents claimed than claims made", verdict: verdict.Fail, opts: Options{Undrained: true}, illegal: []string{ModelLease},
		ops: manyHidden(2, 3), want: map[checker.AnomalyKind]int{checker.NotLinearizable: 1}},
	{name: "pass/attempts exhausted ends dead", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		claim(1, "i1", "t1", 1, 1000, 20, 30),
		mut(1, OpFail, "i1", "t1", 40, 50, verdict.OutcomeOK, 200),
		claim(2, "i1", "t2", 2, 1000, 60, 70),
		mut(2, OpFail, "i1", "t2", 80, 90, verdict.OutcomeOK, 200),
		claim(1, "i1", "t3", 3, 1000, 100, 110),
		mut(1, OpFail, "i1", "t3", 120, 130, verdict.OutcomeOK, 200),
		status(0, "i1", StateDead, 140, 150),
	}, opts: Options{MaxEffects: -1}, effects: []checker.Effect{eff("k1", "i1", "t1", 35), eff("k1", "i1", "t2", 75), eff("k1", "i1", "t3", 115)}},
	{name: "pass/unknown fulfill read back fulfilled", verdict: verdict.Pass, opts: Options{SkipQueue: true}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 1000, 0, 10),
		mut(0, OpFulfill, "i1", "t1", 20, 2000, verdict.OutcomeUnknown, 0),
		status(1, "i1", StateFulfilled, 2100, 2110),
	}},
	{name: "pass/unknown extend explains a late fulfill", verdict: verdict.Pass, opts: Options{SkipQueue: true}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 100, 0, 10),
		extend(0, "i1", "t1", 1000, 50, 90, verdict.OutcomeUnknown, 0),
		mut(0, OpFulfill, "i1", "t1", 500, 510, verdict.OutcomeOK, 200),
	}},
	{name: "pass/server error is unknown, retry replays", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeUnknown, 503, ""),
		pub(0, "k1", "b1", 20, 30, verdict.OutcomeOK, 201, "i1"),
		claim(1, "i1", "t1", 1, 1000, 40, 50),
		mut(1, OpFulfill, "i1", "t1", 60, 70, verdict.OutcomeOK, 200),
	}, effects: []checker.Effect{eff("k1", "i1", "t1", 55)}},

	// --- IDS / ATP style: keyed requests, effects at the sink, no leases
	{name: "pass/sink effect once per key", verdict: verdict.Pass, ops: []checker.Operation{
		pub(0, "ids-1", "b1", 0, 10, verdict.OutcomeOK, 200, ""),
		pub(1, "ids-1", "b1", 5, 20, verdict.OutcomeOK, 200, ""),
		pub(0, "ids-2", "b2", 30, 40, verdict.OutcomeUnknown, 0, ""),
		pub(0, "ids-2", "b2", 50, 60, verdict.OutcomeOK, 200, ""),
	}, effects: []checker.Effect{{Key: "ids-1", At: ms0(8)}, {Key: "ids-2", At: ms0(35)}}},
	{name: "fail/sink effect twice for one key", verdict: verdict.Fail, ops: []checker.Operation{
		pub(0, "ids-1", "b1", 0, 10, verdict.OutcomeOK, 200, ""),
		pub(1, "ids-1", "b1", 5, 20, verdict.OutcomeOK, 200, ""),
	}, effects: []checker.Effect{{Key: "ids-1", At: ms0(8)}, {Key: "ids-1", At: ms0(18)}}, want: map[checker.AnomalyKind]int{checker.Duplicated: 1}},
	{name: "fail/sink never called for an acknowledged key", verdict: verdict.Fail, ops: []checker.Operation{
		pub(0, "ids-1", "b1", 0, 10, verdict.OutcomeOK, 200, ""),
	}, want: map[checker.AnomalyKind]int{checker.Lost: 1}},

	// --- idempotency record: must fail
	{name: "fail/replay differs", verdict: verdict.Fail, illegal: []string{checker.ModelIdempotency}, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		pub(1, "k1", "b1", 20, 30, verdict.OutcomeOK, 201, "i2"),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{checker.IdempotencyViolation: 1}},
	{name: "fail/different body accepted", verdict: verdict.Fail, illegal: []string{checker.ModelIdempotency}, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		pub(1, "k1", "b2", 20, 30, verdict.OutcomeOK, 201, "i1"),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{checker.IdempotencyViolation: 1}},
	{name: "fail/false conflict", verdict: verdict.Fail, illegal: []string{checker.ModelIdempotency}, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		pub(1, "k1", "b1", 20, 30, verdict.OutcomeFailed, 422, ""),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{checker.IdempotencyViolation: 1}},
	{name: "fail/conflict before the other body existed", verdict: verdict.Fail, illegal: []string{checker.ModelIdempotency}, ops: []checker.Operation{
		pub(0, "k1", "b2", 0, 10, verdict.OutcomeFailed, 422, ""),
		pub(1, "k1", "b1", 20, 30, verdict.OutcomeOK, 201, "i1"),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{checker.NotLinearizable: 1}},

	// --- intent lease: must fail
	{name: "fail/double lease", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 1000, 0, 10),
		claim(1, "i1", "t2", 2, 1000, 100, 110),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{DoubleLease: 1}},
	{name: "fail/superseded token accepted", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 100, 0, 10),
		claim(1, "i1", "t2", 2, 100, 500, 510),
		mut(0, OpFulfill, "i1", "t1", 520, 530, verdict.OutcomeOK, 200),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{StaleTokenAccepted: 1}},
	{name: "fail/expired token accepted", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 100, 0, 10),
		extend(0, "i1", "t1", 100, 50, 60, verdict.OutcomeOK, 200),
		mut(0, OpFulfill, "i1", "t1", 1000, 1010, verdict.OutcomeOK, 200),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{StaleTokenAccepted: 1}},
	{name: "fail/token never granted", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 1000, 0, 10),
		mut(1, OpFail, "i1", "forged", 20, 30, verdict.OutcomeOK, 200),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{StaleTokenAccepted: 1}},
	{name: "fail/fulfilled twice", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 1000, 0, 10),
		mut(0, OpFulfill, "i1", "t1", 20, 30, verdict.OutcomeOK, 200),
		mut(0, OpFulfill, "i1", "t1", 40, 50, verdict.OutcomeOK, 200),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{FulfilledTwice: 1}},
	{name: "fail/claimed after fulfilled", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 1000, 0, 10),
		mut(0, OpFulfill, "i1", "t1", 20, 30, verdict.OutcomeOK, 200),
		claim(1, "i1", "t2", 2, 1000, 40, 50),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{FulfilledTwice: 1}},
	{name: "fail/valid live token refused", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 10000, 0, 10),
		mut(0, OpFulfill, "i1", "t1", 20, 30, verdict.OutcomeFailed, 404),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{checker.NotLinearizable: 1}},
	{name: "fail/claim attempts do not grow", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 100, 0, 10),
		claim(1, "i1", "t2", 1, 100, 500, 510),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{checker.NotLinearizable: 1}},
	{name: "fail/status fulfilled before any fulfill", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		claim(0, "i1", "t1", 1, 10000, 0, 10),
		status(1, "i1", StateFulfilled, 20, 30),
		mut(0, OpFulfill, "i1", "t1", 40, 50, verdict.OutcomeOK, 200),
	}, opts: Options{SkipQueue: true}, want: map[checker.AnomalyKind]int{checker.NotLinearizable: 1}},

	{name: "fail/claimed beyond max attempts", verdict: verdict.Fail, illegal: []string{ModelLease}, ops: []checker.Operation{
		{ClientID: 0, Kind: checker.OpPublish, Key: "k1", Input: checker.Input{Body: "b1", MaxAttempts: 1}, Output: checker.Output{Status: 201, ID: "i1"}, Call: ms0(0), Return: ms0(10), Outcome: verdict.OutcomeOK},
		claim(1, "i1", "t1", 1, 100, 20, 30),
		claim(2, "i1", "t2", 2, 100, 500, 510),
		mut(2, OpFulfill, "i1", "t2", 520, 530, verdict.OutcomeOK, 200),
	}, effects: []checker.Effect{eff("k1", "i1", "t1", 35), eff("k1", "i1", "t2", 515)}, opts: Options{MaxEffects: -1}, want: map[checker.AnomalyKind]int{AttemptsExceeded: 1}},
	{name: "pass/claimed up to max attempts", verdict: verdict.Pass, ops: []checker.Operation{
		{ClientID: 0, Kind: checker.OpPublish, Key: "k1", Input: checker.Input{Body: "b1", MaxAttempts: 2}, Output: checker.Output{Status: 201, ID: "i1"}, Call: ms0(0), Return: ms0(10), Outcome: verdict.OutcomeOK},
		claim(1, "i1", "t1", 1, 100, 20, 30),
		claim(2, "i1", "t2", 2, 100, 500, 510),
		mut(2, OpFulfill, "i1", "t2", 520, 530, verdict.OutcomeOK, 200),
	}, effects: []checker.Effect{eff("k1", "i1", "t1", 35), eff("k1", "i1", "t2", 515)}, opts: Options{MaxEffects: -1}},

	// --- queue: must fail
	{name: "fail/lost", verdict: verdict.Fail, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		status(0, "i1", StateOpen, 20, 30),
	}, want: map[checker.AnomalyKind]int{checker.Lost: 1}},
	{name: "fail/dead counts as lost when promised", verdict: verdict.Fail, ops: []checker.Operation{
		pubMax(0, "k1", "b1", 0, 10, 1, "i1"),
		claim(1, "i1", "t1", 1, 100, 12, 15),
		status(0, "i1", StateDead, 500, 510),
	}, opts: Options{DeadIsLost: true}, want: map[checker.AnomalyKind]int{checker.Lost: 1}},
	{name: "fail/expired counts as lost when promised", verdict: verdict.Fail, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeOK, 201, "i1"),
		status(0, "i1", checker.StateGone, 20, 30),
	}, opts: Options{ExpiredIsLost: true}, want: map[checker.AnomalyKind]int{checker.Lost: 1}},
	{name: "fail/duplicated effect", verdict: verdict.Fail, ops: happy("k1", "i1"),
		effects: []checker.Effect{eff("k1", "i1", "t1", 35), eff("k1", "i1", "t1", 36)}, want: map[checker.AnomalyKind]int{checker.Duplicated: 1}},
	{name: "fail/duplicated by two intents", verdict: verdict.Fail, ops: happy("k1", "i1"), opts: Options{MaxEffects: -1},
		effects: []checker.Effect{eff("k1", "i1", "t1", 35), eff("k1", "i2", "t9", 36)}, want: map[checker.AnomalyKind]int{checker.Duplicated: 1}},
	{name: "fail/unexpected effect", verdict: verdict.Fail, ops: happy("k1", "i1"),
		effects: []checker.Effect{eff("k1", "i1", "t1", 35), eff("k2", "i2", "t2", 36)}, want: map[checker.AnomalyKind]int{checker.Unexpected: 1}},
	{name: "fail/refused publish took effect", verdict: verdict.Fail, ops: []checker.Operation{
		pub(0, "k1", "b1", 0, 10, verdict.OutcomeFailed, 400, ""),
	}, effects: []checker.Effect{eff("k1", "i1", "t1", 35)}, want: map[checker.AnomalyKind]int{checker.Unexpected: 1}},
}

func TestCheck(t *testing.T) {
	for _, tc := range checkCases {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(checker.History{Ops: tc.ops}, checker.Ledger{Effects: tc.effects}, tc.opts)
			assertReport(t, r, tc)
		})
	}
}

// TestCheckStatusDecides records every case the other way a recorder may:
// every operation that got an answer is OutcomeOK, and its status says what
// happened. The findings must not change.
func TestCheckStatusDecides(t *testing.T) {
	for _, tc := range checkCases {
		t.Run(tc.name, func(t *testing.T) {
			ops := slices.Clone(tc.ops)
			for i := range ops {
				if ops[i].Output.Status >= 400 {
					ops[i].Outcome = verdict.OutcomeOK
				}
			}
			r := Check(checker.History{Ops: ops}, checker.Ledger{Effects: tc.effects}, tc.opts)
			assertReport(t, r, tc)
		})
	}
}

func assertReport(t *testing.T, r checker.Report, tc checkCase) {
	t.Helper()
	got := map[checker.AnomalyKind]int{}
	for k, n := range r.Counts {
		if n > 0 {
			got[k] = n
		}
	}
	want := tc.want
	if want == nil {
		want = map[checker.AnomalyKind]int{}
	}
	if !maps.Equal(got, want) {
		t.Errorf("counts = %v, want %v; anomalies: %s", got, want, explain(r))
	}
	if v := r.Verdict(); v != tc.verdict {
		t.Errorf("verdict = %s, want %s; anomalies: %s", v, tc.verdict, explain(r))
	}
	var illegal []string
	for _, m := range r.Models {
		if m.Result == checker.LinIllegal {
			illegal = append(illegal, m.Model)
		}
		if m.Result == checker.LinUnknown {
			t.Errorf("model %s: verdict.Unknown with no timeout", m.Model)
		}
	}
	if !slices.Equal(illegal, tc.illegal) {
		t.Errorf("illegal models = %v, want %v; anomalies: %s", illegal, tc.illegal, explain(r))
	}
	for _, a := range r.Anomalies {
		if a.Kind == checker.NotLinearizable && !strings.Contains(a.Explanation, "cannot place") && !strings.Contains(a.Explanation, "claims whose answer was lost") {
			t.Errorf("not-linearizable without the operation it cannot place: %s", a.Explanation)
		}
		if a.Explanation == "" || a.Key == "" || (len(a.Ops) == 0 && len(a.Effects) == 0) {
			t.Errorf("anomaly without key, explanation or evidence: %+v", a)
		}
	}
	assertNamedAgreeWithModels(t, r)
	if len(tc.illegal) > 0 && len(r.FailingPartitions) == 0 {
		t.Errorf("illegal model but no failing partition kept")
	}
}

func explain(r checker.Report) string {
	var b strings.Builder
	for _, a := range r.Anomalies {
		b.WriteString("\n  " + string(a.Kind) + " " + a.Key + ": " + a.Explanation)
	}
	return b.String()
}

func TestVerdictUnknownNeverReadsAsOk(t *testing.T) {
	for _, tc := range []struct {
		name   string
		r      checker.Report
		want   verdict.Verdict
		reason string
	}{
		{"unknown model", checker.Report{Models: []checker.ModelCheck{{Model: ModelLease, Result: checker.LinUnknown}}}, verdict.Unknown, "a timed-out model"},
		{"unknown and illegal", checker.Report{Models: []checker.ModelCheck{{Result: checker.LinUnknown}, {Result: checker.LinIllegal}}}, verdict.Fail, "an illegal model"},
		{"unknown and a violation", checker.Report{Models: []checker.ModelCheck{{Result: checker.LinUnknown}}, Counts: map[checker.AnomalyKind]int{checker.Lost: 1}}, verdict.Fail, "a lost unit"},
		{"recovered only", checker.Report{Models: []checker.ModelCheck{{Result: checker.LinOk}}, Counts: map[checker.AnomalyKind]int{checker.Recovered: 3}}, verdict.Pass, "recovered is no violation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.r.Verdict(); got != tc.want {
				t.Errorf("Verdict() = %s, want %s (%s)", got, tc.want, tc.reason)
			}
		})
	}
}

// TestCheckTimeoutIsUnknown gives porcupine a history it cannot decide in
// its time: the model must come out Unknown and the verdict UNKNOWN, never Ok.
func TestCheckTimeoutIsUnknown(t *testing.T) {
	// 26 concurrent claims of one intent whose answers were all lost, then a
	// read that no order explains: porcupine must try every subset (2^26).
	var ops []checker.Operation
	for i := range 26 {
		ops = append(ops, checker.Operation{ClientID: i, Kind: OpClaim, Key: "x", Call: ms0(int64(i)), Return: ms0(1000), Outcome: verdict.OutcomeUnknown})
	}
	ops = append(ops, status(99, "x", StateFulfilled, 100, 110))
	r := Check(checker.History{Ops: ops}, checker.Ledger{}, Options{Timeout: 100 * time.Millisecond, SkipQueue: true})
	for _, m := range r.Models {
		if m.Model == ModelLease && m.Result != checker.LinUnknown {
			t.Errorf("lease model %s, want verdict.Unknown after the timeout", m.Result)
		}
	}
	if v := r.Verdict(); v != verdict.Unknown {
		t.Errorf("verdict %s, want UNKNOWN: %s", v, explain(r))
	}
}

func TestHistoryJSONLRoundTrip(t *testing.T) {
	var ops []checker.Operation
	for _, tc := range checkCases {
		ops = append(ops, tc.ops...)
	}
	h := checker.History{Ops: ops}
	var buf bytes.Buffer
	if err := h.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != len(ops) {
		t.Fatalf("%d lines for %d ops", n, len(ops))
	}
	got, err := checker.ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Errorf("round trip changed the history")
	}
	l := checker.Ledger{Effects: []checker.Effect{eff("k1", "i1", "t1", 1), eff("k2", "", "", 2)}}
	buf.Reset()
	if err := l.WriteJSONL(&buf); err != nil {
		t.Fatal(err)
	}
	gl, err := checker.ReadLedger(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gl, l) {
		t.Errorf("ledger round trip: got %+v want %+v", gl, l)
	}
}

func TestReadHistoryRejects(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"not json", "{oops\n"},
		{"no kind", `{"client":0,"call":1,"ret":2,"outcome":"ok"}` + "\n"},
		{"unknown outcome", `{"client":0,"kind":"publish","call":1,"ret":2,"outcome":"maybe"}` + "\n"},
		{"return before call", `{"client":0,"kind":"publish","call":5,"ret":2,"outcome":"ok"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := checker.ReadHistory(strings.NewReader("# comment\n\n" + tc.text)); err == nil {
				t.Errorf("no error for %q", tc.text)
			} else if !strings.Contains(err.Error(), "line 3") {
				t.Errorf("error %q does not name line 3", err)
			}
		})
	}
}

func TestVisualizeFailingPartitionsOnly(t *testing.T) {
	// one failing intent among many passing units
	var ops []checker.Operation
	var effects []checker.Effect
	for i := range 200 {
		k, id := "k"+itoa(i), "i"+itoa(i)
		ops = append(ops, happy(k, id)...)
		effects = append(effects, eff(k, id, "t1", 35))
	}
	ops = append(ops, claim(0, "bad", "t1", 1, 1000, 0, 10), claim(1, "bad", "t2", 2, 1000, 100, 110))
	r := Check(checker.History{Ops: ops}, checker.Ledger{Effects: effects}, Options{})
	if len(r.FailingPartitions) != 1 || r.FailingPartitions[0].Key != "bad" {
		t.Fatalf("failing partitions = %+v, want only intent bad", r.FailingPartitions)
	}
	var buf bytes.Buffer
	if err := r.Visualize(&buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if !strings.Contains(html, "<html") || !strings.Contains(html, "double-lease") {
		t.Errorf("visualization lacks html or the anomaly (%d bytes)", len(html))
	}
	if strings.Contains(html, "publish(k17") {
		t.Errorf("visualization contains a passing partition")
	}
	var empty bytes.Buffer
	if err := (checker.Report{}).Visualize(&empty); err != nil || empty.Len() != 0 {
		t.Errorf("passing report: wrote %d bytes, err %v", empty.Len(), err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
