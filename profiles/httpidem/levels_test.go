package httpidem

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/verdict"
)

// TestHTTPIdemReplayedMismatchGatesNoMust (issue 28, case 6): an endpoint
// that answers another payload under a used key as it answered the first
// (no 422: only a SHOULD asks for one) gets IETF-2.7-mismatch-422's
// NON-STRICT finding alone. §2.7's MUST is about retrying a request the
// server failed; none was, so its check there is N/A, never BLOCKED by
// the SHOULD (a run whose only finding is a SHOULD must not exit 4); the
// keyless retry, refused, still judges it.
func TestHTTPIdemReplayedMismatchGatesNoMust(t *testing.T) {
	if testing.Short() {
		t.Skip("runs part of the profile")
	}
	res := runHTTPIdemThrough(t, VariantIETF, func(r *http.Request, rec *httptest.ResponseRecorder) {
		if r.Method == http.MethodPost && rec.Code == http.StatusUnprocessableEntity {
			rec.Code = http.StatusCreated
			rec.Body.Reset()
			rec.Body.WriteString(`{"id":"pay_first","status":"succeeded"}`)
		}
	}, []string{"IETF-2.7-mismatch-422", "IETF-2.7-fail-uncorrected"})
	want := map[string]verdict.Verdict{"IETF-2.7-mismatch-422": verdict.NonStrict, "IETF-2.7-fail-uncorrected": verdict.Pass}
	for _, r := range res.Rules {
		if w, ok := want[r.RuleID]; ok && r.Verdict != w {
			t.Errorf("%s: %s (%s), want %s", r.RuleID, r.Verdict, r.Reason, w)
		}
		if r.RuleID == "IETF-2.7-fail-uncorrected" && !strings.Contains(r.Reason, "the request was not refused") {
			t.Errorf("%s: the reason does not say the mismatch was not refused: %s", r.RuleID, r.Reason)
		}
	}
}
