package intent

// Tests of issue 28, case 6: a SHOULD never gates a MUST. A bus that
// answers otherwise than a SHOULD asks (an answer the text allows) gets
// that SHOULD's NON-STRICT finding alone: the MUSTs judged on the same
// exchanges are judged, not BLOCKED by it.

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/idscheck/idscheck/verdict"
)

// TestConflictCodeDoesNotGateTheConflictState: a reused key with another
// body answered 422 with another error code breaks the code's SHOULD; the
// MUST that no second intent was created is read back and passes.
func TestConflictCodeDoesNotGateTheConflictState(t *testing.T) {
	got := certifyTampered(t, []string{"INTENT-7.2-idem-conflict", "INTENT-11-code-idempotency-conflict"},
		func(r *http.Request, status int, doc map[string]any) int {
			if r.URL.Path == "/intent" && status == http.StatusUnprocessableEntity {
				if e, ok := doc["error"].(map[string]any); ok {
					e["code"] = "key_reused"
				}
			}
			return status
		})
	wantVerdicts(t, got, map[string]verdict.Verdict{
		"INTENT-11-code-idempotency-conflict": verdict.NonStrict,
		"INTENT-7.2-idem-conflict":            verdict.Pass,
	})
}

// TestBadRequestStatusDoesNotGateTheErrorShape: malformed JSON answered
// 422 (a JSON error) instead of the 400 a SHOULD names: the error's shape,
// a MUST, is judged on it and passes.
func TestBadRequestStatusDoesNotGateTheErrorShape(t *testing.T) {
	got := certifyTampered(t, []string{"INTENT-7.2-bad-request-400", "INTENT-11-error-shape"},
		func(r *http.Request, status int, doc map[string]any) int {
			if r.Method == http.MethodPost && r.URL.Path == "/intent" && status == http.StatusBadRequest {
				body, _ := io.ReadAll(r.Body)
				if !json.Valid(body) {
					return http.StatusUnprocessableEntity
				}
			}
			return status
		})
	wantVerdicts(t, got, map[string]verdict.Verdict{
		"INTENT-7.2-bad-request-400": verdict.NonStrict,
		"INTENT-11-error-shape":      verdict.Pass,
	})
}

// TestNo204LeavesItsHeaderNothingToJudge: an empty namespace answered 200
// (not the 204 a SHOULD names) leaves "The 204 response MUST include
// Retry-After: 1" nothing to judge: N/A, not BLOCKED, not FAIL.
func TestNo204LeavesItsHeaderNothingToJudge(t *testing.T) {
	got := certifyTampered(t, []string{"INTENT-7.3-no-content-204", "INTENT-7.3-retry-after"},
		func(r *http.Request, status int, doc map[string]any) int {
			if r.URL.Path == "/claim" && status == http.StatusNoContent {
				return http.StatusOK
			}
			return status
		})
	if got["INTENT-7.3-no-content-204"] != verdict.NonStrict || got["INTENT-7.3-retry-after"].Undecided() || failed(got["INTENT-7.3-retry-after"]) {
		t.Errorf("no-content-204 %s, retry-after %s: want NON-STRICT, and a retry-after neither failed nor undecided",
			got["INTENT-7.3-no-content-204"], got["INTENT-7.3-retry-after"])
	}
}
