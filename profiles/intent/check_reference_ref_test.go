package intent

import (
	"path/filepath"
	"testing"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/verdict"
)

// issue12Case is one saved run of testdata/histories/issue12.
type issue12Case struct {
	dir  string
	want savedExpect
	h    checker.History
	l    checker.Ledger
}

func loadIssue12(t *testing.T) []issue12Case {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(savedDir, "issue12", "*", expectFile))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no saved runs under testdata/issue12: %v", err)
	}
	var out []issue12Case
	for _, ef := range dirs {
		want, h, l := loadSaved(t, ef)
		out = append(out, issue12Case{filepath.Dir(ef), want, h, l})
	}
	return out
}

// TestReferenceOnIssue12 holds the reference to the verdicts issue 12 gives
// its eight cases: every one of them is a matter of what the protocol
// allows, so the reference alone must get them right.
func TestReferenceOnIssue12(t *testing.T) {
	for _, c := range loadIssue12(t) {
		t.Run(filepath.Base(c.dir), func(t *testing.T) {
			h, l := refScale(c.h, c.l)
			legal, rd := refLegal(h, l, refAllReadings(0), 0, 2_000_000)
			if want := c.want.Verdict == verdict.Pass; legal != want {
				t.Errorf("reference: legal = %v (%v), want %v", legal, rd, want)
			}
		})
	}
}

// TestReferenceReadings: each reading of the text decides something on its
// own, and unknown outcomes may land late or never.
func TestReferenceReadings(t *testing.T) {
	ok := verdict.OutcomeOK
	unk := verdict.OutcomeUnknown
	cl := func(tok string, att int, lease, call, ret int64) checker.Operation {
		return checker.Operation{Kind: OpClaim, Key: "i1", Output: checker.Output{Status: 200, ID: "i1", Token: tok, Attempts: att, LeaseNs: lease}, Call: call, Return: ret, Outcome: ok}
	}
	mu := func(kind checker.OpKind, tok string, call, ret int64, out verdict.Outcome, st int) checker.Operation {
		return checker.Operation{Kind: kind, Key: "i1", Input: checker.Input{Token: tok}, Output: checker.Output{Status: st}, Call: call, Return: ret, Outcome: out}
	}
	ext := func(x, call, ret int64) checker.Operation {
		op := mu(OpExtend, "t1", call, ret, ok, 200)
		op.Input.ExtendNs = x
		return op
	}
	st := func(state string, call, ret int64) checker.Operation {
		return checker.Operation{Kind: checker.OpStatus, Key: "i1", Output: checker.Output{Status: 200, State: state}, Call: call, Return: ret, Outcome: ok}
	}
	pub := func(call, ret int64, max int) checker.Operation {
		return checker.Operation{Kind: checker.OpPublish, Key: "k1", Input: checker.Input{Body: "b", MaxAttempts: max}, Output: checker.Output{Status: 201, ID: "i1", Body: "r"}, Call: call, Return: ret, Outcome: ok}
	}
	fromNow := refReadings{false, false, 0}
	added := refReadings{true, false, 0}
	for _, tc := range []struct {
		name     string
		ops      []checker.Operation
		effects  []checker.Effect
		readings []refReadings
		legal    bool
	}{
		{"from-now: the lease ends 10 after the extend", []checker.Operation{cl("t1", 1, 10, 0, 0), ext(10, 8, 8), mu(OpFulfill, "t1", 19, 19, ok, 200)}, nil, []refReadings{fromNow}, false},
		{"added: the lease ends 20 after the claim", []checker.Operation{cl("t1", 1, 10, 0, 0), ext(10, 8, 8), mu(OpFulfill, "t1", 19, 19, ok, 200)}, nil, []refReadings{added}, true},
		{"from-now may shorten", []checker.Operation{cl("t1", 1, 10, 0, 0), ext(2, 1, 1), cl("t2", 2, 10, 4, 4)}, nil, []refReadings{fromNow}, true},
		{"added never shortens", []checker.Operation{cl("t1", 1, 10, 0, 0), ext(2, 1, 1), cl("t2", 2, 10, 4, 4)}, nil, []refReadings{added}, false},
		{"immediate: claimable at expiry", []checker.Operation{cl("t1", 1, 10, 0, 0), cl("t2", 2, 10, 11, 11)}, nil, []refReadings{{false, false, 5}}, true},
		{"backoff: not before expiry + 5·2^1", []checker.Operation{cl("t1", 1, 10, 0, 0), cl("t2", 2, 10, 11, 11)}, nil, []refReadings{{false, true, 5}}, false},
		{"backoff: from expiry + 5·2^1", []checker.Operation{cl("t1", 1, 10, 0, 0), cl("t2", 2, 10, 20, 20)}, nil, []refReadings{{false, true, 5}}, true},
		{"fail backs off under every reading", []checker.Operation{cl("t1", 1, 10, 0, 0), mu(OpFail, "t1", 5, 5, ok, 200), cl("t2", 2, 10, 6, 6)}, nil, refAllReadings(5), false},
		{"no backoff: claim right after the fail", []checker.Operation{cl("t1", 1, 10, 0, 0), mu(OpFail, "t1", 5, 5, ok, 200), cl("t2", 2, 10, 6, 6)}, nil, refAllReadings(0), true},
		{"expired token refused", []checker.Operation{cl("t1", 1, 10, 0, 0), mu(OpFulfill, "t1", 10, 10, ok, 200)}, nil, refAllReadings(0), false},
		{"live token accepted up to expiry", []checker.Operation{cl("t1", 1, 10, 0, 0), mu(OpFulfill, "t1", 9, 9, ok, 200)}, nil, refAllReadings(0), true},
		{"404 on a live token", []checker.Operation{cl("t1", 1, 10, 0, 0), mu(OpFulfill, "t1", 9, 9, verdict.OutcomeFailed, 404)}, nil, refAllReadings(0), false},
		{"an unknown fulfil lands late", []checker.Operation{cl("t1", 1, 10, 0, 0), mu(OpFulfill, "t1", 2, 3, unk, 0), st(StateClaimed, 4, 4), st(StateFulfilled, 6, 6)}, nil, refAllReadings(0), true},
		{"lazy expiry: claimed, then open", []checker.Operation{cl("t1", 1, 10, 0, 0), st(StateClaimed, 15, 15), st(StateOpen, 16, 16)}, nil, refAllReadings(0), true},
		{"expiry applied stays applied", []checker.Operation{cl("t1", 1, 10, 0, 0), st(StateOpen, 15, 15), st(StateClaimed, 16, 16)}, nil, refAllReadings(0), false},
		{"dead at max attempts after expiry", []checker.Operation{pub(0, 0, 1), cl("t1", 1, 10, 1, 1), st(StateDead, 12, 12)}, nil, refAllReadings(0), true},
		{"not dead before max attempts", []checker.Operation{pub(0, 0, 2), cl("t1", 1, 10, 1, 1), st(StateDead, 12, 12)}, nil, refAllReadings(0), false},
		{"a claim whose answer was lost makes it claimed", []checker.Operation{pub(0, 0, 3), {Kind: OpClaim, Call: 1, Return: 30, Outcome: unk}, st(StateClaimed, 5, 5)}, nil, refAllReadings(0), true},
		{"claim before the publish", []checker.Operation{pub(5, 6, 3), cl("t1", 1, 10, 1, 2)}, nil, refAllReadings(0), false},
		{"gone, then created", []checker.Operation{st(checker.StateGone, 0, 0), pub(1, 2, 3), st(StateOpen, 3, 3)}, nil, refAllReadings(0), true},
		{"created, gone, then back", []checker.Operation{pub(0, 0, 3), st(checker.StateGone, 1, 1), st(StateOpen, 3, 3)}, nil, refAllReadings(0), false},
		{"an effect before its key was published", []checker.Operation{{Kind: checker.OpPublish, Key: "k1", Input: checker.Input{Body: "b", MaxAttempts: 3}, Call: 5, Return: 50, Outcome: unk}}, []checker.Effect{{Key: "k1", Intent: "i9", At: 4}}, refAllReadings(0), false},
		{"an effect after an unknown publish", []checker.Operation{{Kind: checker.OpPublish, Key: "k1", Input: checker.Input{Body: "b", MaxAttempts: 3}, Call: 5, Return: 50, Outcome: unk}}, []checker.Effect{{Key: "k1", Intent: "i9", At: 5}}, refAllReadings(0), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			legal, _ := refLegal(checker.History{Ops: tc.ops}, checker.Ledger{Effects: tc.effects}, tc.readings, 0, 1_000_000)
			if legal != tc.legal {
				t.Errorf("legal = %v, want %v", legal, tc.legal)
			}
		})
	}
}
