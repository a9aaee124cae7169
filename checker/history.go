package checker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"io"
)

// OpKind names what one operation of a history did. The names are the
// Intent Protocol's (seed 004 §7); other profiles' requests that create a
// unit of work under an idempotency key are recorded as OpPublish.
type OpKind string

const (
	// OpPublish creates a unit of work under an idempotency key: POST /intent
	// with Idempotency-Key (Key = the idempotency key, Input.Body = digest of
	// the canonical body, Output.ID = the intent id returned). For a profile
	// whose effects land at the harness's sink it is the keyed request whose
	// effect lands there; for ATP the Key
	// is "intent_id/idempotency_key".
	OpPublish OpKind = "publish"
	// OpClaim is POST /claim. Key = the intent id claimed (empty when the
	// answer was 204 or unknown); Output carries token, attempts and lease.
	OpClaim OpKind = "claim"
	// OpExtend is POST /extend_claim/<id> (Key = intent id, Input.Token,
	// Input.ExtendNs = requested seconds as a duration).
	OpExtend OpKind = "extend"
	// OpFulfill is POST /fulfill/<id> (Key = intent id, Input.Token).
	OpFulfill OpKind = "fulfill"
	// OpFail is POST /fail/<id> (Key = intent id, Input.Token).
	OpFail OpKind = "fail"
	// OpStatus is GET /status/<id> or /result/<id> (Key = intent id,
	// Output.State = the status read, or StateGone on 404).
	OpStatus OpKind = "status"
)

// Intent states as the Intent Protocol names them (seed 004 §3.1), plus
// StateGone for a 404 on a status read (purged, expired or never existed).
const (
	StateOpen      = "open"
	StateClaimed   = "claimed"
	StateFulfilled = "fulfilled"
	StateDead      = "dead"
	StateGone      = "gone"
)

// Input is what a client sent, reduced to what the models need. Bodies are
// digests: two semantically identical JSON bodies must have equal digests
// (the recorder canonicalises before hashing).
type Input struct {
	Body     string `json:"body,omitempty"`      // publish: digest of the canonical request body
	Token    string `json:"token,omitempty"`     // extend, fulfill, fail: the claim token presented
	ExtendNs int64  `json:"extend_ns,omitempty"` // extend: the lease length asked for, in ns
	Worker   string `json:"worker,omitempty"`    // claim and lease ops: the worker that sent it
	// MaxAttempts is the publish's max_attempts (seed 004 §4.1: 3 when the
	// body leaves it out); 0 when the recorder does not say.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// Output is what came back, reduced to what the models need. It is
// meaningless when the operation's Outcome is OutcomeUnknown.
type Output struct {
	Status   int    `json:"status,omitempty"`   // HTTP status; 0 when none came back
	ID       string `json:"id,omitempty"`       // publish: intent id created or replayed; claim: intent id claimed
	Body     string `json:"body,omitempty"`     // publish: digest of the response body that a replay must repeat
	Token    string `json:"token,omitempty"`    // claim: the claim token granted
	Attempts int    `json:"attempts,omitempty"` // claim: claim_attempts after this claim
	LeaseNs  int64  `json:"lease_ns,omitempty"` // claim: claim_timeout as a duration; extend: new lease length
	State    string `json:"state,omitempty"`    // status: one of the State* constants
}

// Operation is one call of one client, with the interval in which it took
// effect, if it did: it happened at some instant in [Call, Return] when
// Outcome is OutcomeOK, never when OutcomeFailed, and at some instant after
// Call, or never, when OutcomeUnknown (Return is then when the client gave up,
// not a bound). Times are nanoseconds on the harness's monotonic clock since
// the run started.
type Operation struct {
	ClientID int    `json:"client"`
	Kind     OpKind `json:"kind"`
	Key      string `json:"key,omitempty"` // idempotency key (publish) or intent id (lease ops, status)
	// KeyID names the API key (X-API-KEY) the request was sent with: a
	// label or a digest, never the key itself. Idempotency records are
	// scoped per API key (seed 004 §7.2: "the same response for the same
	// API key and semantically identical JSON request body"), so publishes
	// meet on (KeyID, Key). Empty: the run's one key (histories recorded
	// before the field existed).
	KeyID   string          `json:"key_id,omitempty"`
	Input   Input           `json:"in,omitzero"`
	Output  Output          `json:"out,omitzero"`
	Call    int64           `json:"call"`
	Return  int64           `json:"ret"`
	Outcome verdict.Outcome `json:"outcome"`
}

// Effective is the outcome the checks use. Recorders may mark every
// operation that got an answer OutcomeOK; the status then decides: a 5xx is
// unknown (the server may have applied it before failing), a 4xx is a
// refusal (failed), except a 404 on a status read, which is an answer
// (StateGone). An operation without a status keeps its recorded outcome.
func (op *Operation) Effective() verdict.Outcome {
	switch s := op.Output.Status; {
	case op.Outcome != verdict.OutcomeOK:
		return op.Outcome
	case s >= 500:
		return verdict.OutcomeUnknown
	case s >= 400 && !(op.Kind == OpStatus && s == 404):
		return verdict.OutcomeFailed
	}
	return verdict.OutcomeOK
}

// History is every operation of a run, in any order. It is written to the
// run directory as JSON Lines (one operation per line) and re-checked offline.
type History struct {
	Ops []Operation `json:"ops"`
}

// WriteJSONL writes h as JSON Lines: one operation per line, parseable by
// ReadHistory.
func (h History) WriteJSONL(w io.Writer) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range h.Ops {
		if err := enc.Encode(&h.Ops[i]); err != nil {
			return fmt.Errorf("write history: op %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// ReadHistory parses JSON Lines written by History.WriteJSONL. Blank lines
// and lines starting with '#' are skipped (comments in saved test histories).
func ReadHistory(r io.Reader) (History, error) {
	var h History
	err := ReadJSONL(r, func(line []byte, n int) error {
		var op Operation
		if err := json.Unmarshal(line, &op); err != nil {
			return fmt.Errorf("read history: line %d: %w", n, err)
		}
		if err := op.validate(); err != nil {
			return fmt.Errorf("read history: line %d: %w", n, err)
		}
		h.Ops = append(h.Ops, op)
		return nil
	})
	return h, err
}

func (op *Operation) validate() error {
	switch op.Kind {
	case OpPublish, OpClaim, OpExtend, OpFulfill, OpFail, OpStatus:
	default:
		return fmt.Errorf("unknown kind %q", op.Kind)
	}
	switch op.Outcome {
	case verdict.OutcomeOK, verdict.OutcomeFailed, verdict.OutcomeUnknown:
	default:
		return fmt.Errorf("unknown outcome %q", op.Outcome)
	}
	if op.Return < op.Call {
		return fmt.Errorf("return %d before call %d", op.Return, op.Call)
	}
	return nil
}

// ReadJSONL calls f with each non-blank, non-comment line and its number.
func ReadJSONL(r io.Reader, f func(line []byte, n int) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if err := f(line, n); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read jsonl: line %d: %w", n+1, err)
	}
	return nil
}
