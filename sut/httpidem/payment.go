package httpidem

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Limits of a payment request.
const (
	maxBody      = 64 << 10
	maxAmount    = 1_000_000_000
	maxReference = 128
)

var currencies = map[string]bool{"EUR": true, "USD": true, "GBP": true}

// paymentRequest is a valid body of POST /v1/payments.
type paymentRequest struct {
	Amount      int64   `json:"amount"`
	Currency    string  `json:"currency"`
	Reference   string  `json:"reference"`
	Description *string `json:"description,omitempty"`
}

// payment is the document of a created payment (the 201 body, and each
// element of GET /v1/payments).
type payment struct {
	ID          string  `json:"id"`
	Amount      int64   `json:"amount"`
	Currency    string  `json:"currency"`
	Reference   string  `json:"reference"`
	Description *string `json:"description,omitempty"`
	Status      string  `json:"status"`
	CreatedAt   string  `json:"created_at"`
}

// timeFormat is RFC 3339 in UTC with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// paymentDoc renders the payment id of req created at: the same inputs,
// the same bytes.
func paymentDoc(id string, req paymentRequest, at time.Time) []byte {
	return encode(payment{ID: id, Amount: req.Amount, Currency: req.Currency, Reference: req.Reference,
		Description: req.Description, Status: "succeeded", CreatedAt: at.UTC().Format(timeFormat)})
}

// newPaymentID draws a payment id: pay_ and 24 random hex digits.
func newPaymentID() string {
	var b [12]byte
	rand.Read(b[:])
	return "pay_" + hex.EncodeToString(b[:])
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > maxBody {
		return nil, problemf(413, codeTooLarge, "the body exceeds %d bytes", maxBody)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, problemf(413, codeTooLarge, "the body exceeds %d bytes", maxBody)
		}
		return nil, problemf(400, codeInvalidRequest, "cannot read the body: %v", err)
	}
	return b, nil
}

// fingerprint is the hex SHA-256 of the body's JCS form (RFC 8785); a body
// that is not JSON is fingerprinted as its bytes.
func fingerprint(body []byte) string {
	var h [32]byte
	if c, err := canonical(body); err == nil {
		h = sha256.Sum256(c)
	} else {
		h = sha256.Sum256(append([]byte("raw:"), body...))
	}
	return hex.EncodeToString(h[:])
}

// canonical is the JCS form of a valid JSON body; JCS also refuses a
// duplicate member name.
func canonical(body []byte) ([]byte, error) {
	if !json.Valid(body) {
		return nil, errors.New("the body is not valid JSON")
	}
	return jcs.Transform(body)
}

// parsePayment validates a body of POST /v1/payments. withRef (variant
// t0) takes paymentRef, the key, too. ref is the body's paymentRef when it
// is valid, even when another member is not.
func parsePayment(body []byte, withRef bool) (req paymentRequest, ref string, p *problem) {
	if _, err := canonical(body); err != nil {
		return req, "", problemf(400, codeInvalidRequest, "the body is not a JSON object: %v", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return req, "", problemf(400, codeInvalidRequest, "the body is not a JSON object")
	}
	var bad []invalidParam
	fail := func(name, reason string) { bad = append(bad, invalidParam{name, reason}) }
	str := func(name string) (string, bool) {
		raw, ok := m[name]
		if !ok {
			return "", false
		}
		var s string
		if json.Unmarshal(raw, &s) != nil {
			fail(name, "must be a string")
			return "", false
		}
		return s, true
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		switch k {
		case "amount", "currency", "reference", "description":
		case "paymentRef":
			if !withRef {
				fail(k, "unknown member")
			}
		default:
			fail(k, "unknown member")
		}
	}
	if raw, ok := m["amount"]; !ok {
		fail("amount", "required")
	} else if n, ok := integer(raw); !ok || n < 1 || n > maxAmount {
		fail("amount", "must be an integer from 1 to 1000000000 (minor units)")
	} else {
		req.Amount = n
	}
	if c, ok := str("currency"); ok && currencies[c] {
		req.Currency = c
	} else if _, present := m["currency"]; !present {
		fail("currency", "required")
	} else if ok {
		fail("currency", "must be EUR, USD or GBP")
	}
	if s, ok := str("reference"); ok && validText(s, maxReference) {
		req.Reference = s
	} else if _, present := m["reference"]; !present {
		fail("reference", "required")
	} else if ok {
		fail("reference", "must have 1 to 128 characters")
	}
	if s, ok := str("description"); ok {
		if !utf8.ValidString(s) {
			fail("description", "must be UTF-8")
		} else {
			req.Description = &s
		}
	}
	if withRef {
		if s, ok := str("paymentRef"); ok && validText(s, maxPaymentRef) {
			ref = s
		} else if _, present := m["paymentRef"]; !present {
			fail("paymentRef", "required (the idempotency key)")
		} else if ok {
			fail("paymentRef", "must have 1 to 128 characters")
		}
	}
	if len(bad) > 0 {
		p = problemf(400, codeInvalidRequest, "%s: %s", bad[0].Name, bad[0].Reason)
		p.InvalidParams = bad
		return req, ref, p
	}
	return req, ref, nil
}

// integer reads a JSON number that is an integer (1000, 1e3 and 1000.0
// alike: they are one number).
func integer(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// validText: valid UTF-8 of 1 to n characters.
func validText(s string, n int) bool {
	c := utf8.RuneCountInString(s)
	return utf8.ValidString(s) && c >= 1 && c <= n
}
