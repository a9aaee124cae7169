package checker

import (
	"bufio"
	"encoding/json"
	"fmt"
	"github.com/idscheck/idscheck/verdict"
	"io"
)

// OpKind names what one operation of a history did. Each profile defines
// its own kinds (the names its protocol gives its requests); the two below
// are shared: most profiles have a keyed request that creates a unit of
// work, and a read of a unit's state.
type OpKind string

const (
	// OpPublish is a keyed request that creates a unit of work: Key = the
	// idempotency key (a profile may compose it of several parts),
	// Input.Body = digest of the canonical body, Output.ID = the unit
	// created or replayed. Its effect, if any, lands in the Ledger under
	// its Key.
	OpPublish OpKind = "publish"
	// OpStatus is a read of a unit's state (Key = the unit, Output.State =
	// the state read, or StateGone on 404).
	OpStatus OpKind = "status"
)

// StateGone is the state a status read reports on a 404: the unit is gone
// (purged, expired or never existed).
const StateGone = "gone"

// Input is what a client sent, reduced to what the models need. Bodies are
// digests: two semantically identical JSON bodies must have equal digests
// (the recorder canonicalises before hashing). Besides Body, the fields
// serve the profiles whose units are leased to workers; each profile's
// kinds say which they fill.
type Input struct {
	Body     string `json:"body,omitempty"`      // publish: digest of the canonical request body
	Token    string `json:"token,omitempty"`     // a lease operation: the lease token presented
	ExtendNs int64  `json:"extend_ns,omitempty"` // a lease extension: the length asked for, in ns
	Worker   string `json:"worker,omitempty"`    // a lease operation: the worker that sent it
	// MaxAttempts is how many leases the publish allows its unit; 0 when
	// the recorder does not say.
	MaxAttempts int `json:"max_attempts,omitempty"`
}

// Output is what came back, reduced to what the models need. It is
// meaningless when the operation's Outcome is OutcomeUnknown.
type Output struct {
	Status   int    `json:"status,omitempty"`   // HTTP status; 0 when none came back
	ID       string `json:"id,omitempty"`       // publish: the unit created or replayed; a lease: the unit leased
	Body     string `json:"body,omitempty"`     // publish: digest of the response body that a replay must repeat
	Ref      string `json:"ref,omitempty"`      // publish: the reference to the outcome a replay by reference must repeat
	Token    string `json:"token,omitempty"`    // a lease: the lease token granted
	Attempts int    `json:"attempts,omitempty"` // a lease: how many leases of the unit so far
	LeaseNs  int64  `json:"lease_ns,omitempty"` // a lease or an extension: its length as a duration
	State    string `json:"state,omitempty"`    // status: the state read (StateGone on 404)
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
	Key      string `json:"key,omitempty"` // idempotency key (publish) or the unit acted on
	// KeyID names the API key the request was sent with: a label or a
	// digest, never the key itself. Where idempotency records are scoped
	// per API key, publishes meet on (KeyID, Key). Empty: the run's one key
	// (histories recorded before the field existed).
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
	if op.Kind == "" {
		return fmt.Errorf("operation without a kind")
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
