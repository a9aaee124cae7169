package intent

// Tests of issue 18, item 7: a check that the text does not back accepts
// every answer the text allows, and still fails on a real violation.

import (
	"testing"
)

// TestDistinctTokensAcceptsAnyStringToken: the two MUSTs judged by "every
// claim token is distinct" say nothing of the token's format: uppercase hex
// and base64url tokens pass; a repeated or missing token still fails.
func TestDistinctTokensAcceptsAnyStringToken(t *testing.T) {
	w := testWorld()
	ok := [][]claimResult{
		{{status: 200, id: "a", token: "0123456789ABCDEF0123456789ABCDEF"}, {status: 200, id: "b", token: "0123456789abcdef0123456789abcdef"}},
		{{status: 200, id: "a", token: "q7Z0-xY_3kLmN9pQrStUvWxYz0123456789abcdEFGH"}, {status: 204}},
	}
	for i, s := range ok {
		w.storm = s
		if err := w.distinctTokens(); err != nil {
			t.Errorf("case %d: tokens the text allows refused: %v", i, err)
		}
	}
	bad := [][]claimResult{
		{{status: 200, id: "a", token: "tok"}, {status: 200, id: "b", token: "tok"}},
		{{status: 200, id: "a", token: ""}},
	}
	for i, s := range bad {
		w.storm = s
		if err := w.distinctTokens(); err == nil {
			t.Errorf("case %d: a repeated or missing token passed", i)
		}
	}
}
