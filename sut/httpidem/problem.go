package httpidem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/idscheck/idscheck/sut/internal/groupcommit"
)

// DocsURL documents the endpoint's idempotency (the draft's "link pointing
// to relevant documentation"): every problem's type is DocsURL#code, and
// every idempotency error carries Link: <DocsURL>; rel="describedby".
const DocsURL = "https://idscheck.dev/docs/http-idempotency"

const (
	contentJSON    = "application/json"
	contentProblem = "application/problem+json"
)

// Problem codes (the code member of each problem document).
const (
	codeUnauthorized     = "unauthorized"
	codeNotFound         = "not_found"
	codeMethodNotAllowed = "method_not_allowed"
	codeTooLarge         = "body_too_large"
	codeInvalidRequest   = "invalid_request"
	codeKeyMissing       = "idempotency_key_missing"
	codeKeyInvalid       = "idempotency_key_invalid"
	codeKeyMultiple      = "idempotency_key_multiple"
	codeKeyMismatch      = "idempotency_key_mismatch"
	codeKeyInUse         = "idempotency_key_in_use"
	codeInFlightTimeout  = "in_flight_timeout"
	codeProcessorFailed  = "payment_processor_failed"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal_error"
)

var titles = map[string]string{
	codeUnauthorized:     "Missing or unknown bearer token",
	codeNotFound:         "No such route",
	codeMethodNotAllowed: "Method not allowed",
	codeTooLarge:         "Request body too large",
	codeInvalidRequest:   "Invalid payment request",
	codeKeyMissing:       "Idempotency-Key is missing",
	codeKeyInvalid:       "Idempotency key is invalid",
	codeKeyMultiple:      "More than one Idempotency-Key",
	codeKeyMismatch:      "Idempotency key reused with another payload",
	codeKeyInUse:         "A request with this idempotency key is in progress",
	codeInFlightTimeout:  "The original request is still in progress",
	codeProcessorFailed:  "The payment processor did not confirm the payment",
	codeUnavailable:      "Service unavailable",
	codeInternal:         "Internal error",
}

// idempotencyCodes are the errors about the key: they carry the Link
// header to the documentation.
var idempotencyCodes = map[string]bool{codeKeyMissing: true, codeKeyInvalid: true, codeKeyMultiple: true,
	codeKeyMismatch: true, codeKeyInUse: true, codeInFlightTimeout: true}

// invalidParam is one member of a refused body (RFC 9457's example
// extension).
type invalidParam struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// problem is an RFC 9457 problem document; it is also the error type of
// the handlers.
type problem struct {
	Type          string         `json:"type"`
	Title         string         `json:"title"`
	Status        int            `json:"status"`
	Detail        string         `json:"detail,omitempty"`
	Code          string         `json:"code"`
	InvalidParams []invalidParam `json:"invalid_params,omitempty"`
	retryAfter    string
}

func (p *problem) Error() string { return p.Code + ": " + p.Detail }

func problemf(status int, code, format string, args ...any) *problem {
	return &problem{Type: DocsURL + "#" + code, Title: titles[code], Status: status, Code: code,
		Detail: fmt.Sprintf(format, args...)}
}

// encode is the document's bytes (compact, no HTML escaping).
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"type":"` + DocsURL + `#internal_error","title":"Internal error","status":500,"code":"internal_error"}`)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

func (p *problem) body() []byte { return encode(p) }

func writeRaw(w http.ResponseWriter, status int, contentType string, b []byte) {
	h := w.Header()
	h["Content-Type"] = []string{contentType}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	w.Write(b)
}

func writeJSON(w http.ResponseWriter, status int, v any) { writeRaw(w, status, contentJSON, encode(v)) }

func writeProblem(w http.ResponseWriter, p *problem) {
	if p.retryAfter != "" {
		w.Header().Set("Retry-After", p.retryAfter)
	}
	if idempotencyCodes[p.Code] {
		w.Header().Set("Link", "<"+DocsURL+`>; rel="describedby"`)
	}
	writeRaw(w, p.Status, contentProblem, p.body())
}

// contentOf is the content type of a stored result: a problem document for
// an error status.
func contentOf(status int) string {
	if status >= 400 {
		return contentProblem
	}
	return contentJSON
}

// writeStored answers a stored (or shared) result, byte for byte.
func writeStored(w http.ResponseWriter, status int, body []byte, replayed bool) {
	if replayed {
		w.Header().Set(headerReplayed, "true")
	}
	writeRaw(w, status, contentOf(status), body)
}

func (s *Server) writeError(w http.ResponseWriter, err error) {
	var p *problem
	if !errors.As(err, &p) {
		switch {
		case errors.Is(err, groupcommit.ErrClosed):
			p = problemf(503, codeUnavailable, "the server is shutting down")
		case errors.Is(err, groupcommit.ErrCommit):
			p = problemf(503, codeUnavailable, "the database could not commit; retry")
			p.retryAfter = "1"
		default:
			s.log.Error("internal error", "err", err)
			p = problemf(500, codeInternal, "internal error")
		}
	}
	writeProblem(w, p)
}
