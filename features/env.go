// Package features holds the Gherkin scenarios of every profile, their step
// definitions and the runner that cmd/idscheck and go test both call.
package features

import (
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/rundir"
	"github.com/idscheck/idscheck/sink"
)

// Target is what the harness knows of the implementation under test.
type Target struct {
	BaseURL   string  // e.g. http://127.0.0.1:8080
	APIKey    string  // the main key
	TimeScale float64 // the target divides every protocol duration by it (1: real time)
	// Readings are the readings the target declares it follows where the
	// text contradicts itself (decision ID -> reading name, see
	// spec.Decision). A check of a declared decision is held to that reading
	// alone; an undeclared one is judged under every reading.
	Readings map[string]string
	// Credentials are the named secrets the target was given besides the
	// API key (harness.Credential), by name: "admin-token" → its value.
	// Every one is redacted from every output.
	Credentials map[string]string
	// Described is what the target file's section of the profile declares
	// (harness.TargetSection), the profile's own type; nil when nothing was.
	Described any
	// Replicas are the base URLs of the target's other replicas, when it
	// is one service behind several processes over one store: the clients
	// of Env.Client spread their requests over BaseURL and these.
	Replicas []string
}

// Env is what step definitions get from the runner: the target, the run's one
// seeded random source, and recording clients. One Env serves one run.
type Env struct {
	Target Target
	Rand   *rand.Rand // drawn from --seed; the only randomness steps may use
	// RunID is the run's own nonce (RunConfig.RunID): Fresh mixes it into
	// every key and id a step draws, so that a rerun of one seed never
	// meets an earlier run's state at a live target.
	RunID    string
	Recorder *client.Recorder // every exchange of the run
	// Budget is the longest protocol time (lease expiry, backoff) one scenario
	// may wait for. A rule that would need longer is N/A, with the reason.
	Budget time.Duration
	// RequestTimeout bounds every exchange of a client from Env.Client
	// (0: the client's default).
	RequestTimeout time.Duration
	Logger         *slog.Logger // never nil when the runner built the Env
	// Sink is the harness's effect sink the target sends its external
	// effects to; nil when the run has none, and the rules that
	// count effects are N/A.
	Sink *sink.Sink

	judge *judge // the runner's judgment of the running scenario (nil outside Run)
	// spread is where the run's deliveries go over the target's replicas,
	// shared by every client Client makes (nil: each client its own).
	spread *client.Spreader
}

// Client returns a recording client of the target with the main API key;
// opts may change the key, set a signer, etc. With replicas
// (Target.Replicas), every client of the run spreads as one: each logical
// request's deliveries go to one replica after the other (a duplicate or
// a retry never where its original went), however many clients a
// scenario makes, and the exchanges record the replica that answered.
func (e *Env) Client(name string, opts ...func(*client.Options)) (*client.Client, error) {
	o := client.Options{Name: name, APIKey: e.Target.APIKey, Recorder: e.Recorder, Timeout: e.RequestTimeout, Replicas: e.Target.Replicas,
		Spreader: e.spread}
	for _, f := range opts {
		f(&o)
	}
	return client.New(e.Target.BaseURL, o)
}

// Answered notes r as the answer the scenario's checks read next (what a
// profile's steps call "the last answer"): a check that sends nothing
// shows the answers noted last as the proof of its PASS. A profile that
// never calls it gets the scenario's latest exchanges as that proof.
func (e *Env) Answered(r *client.Response) {
	if e.judge != nil && r != nil {
		e.judge.answered(r.Exchange)
	}
}

// Fresh is the random source of one fresh key, id or unique name: one
// draw from Rand (the seed fixes every choice and its order) with the
// run's own nonce mixed in (rundir.Fresh). Every key and id a step sends
// is drawn through it.
func (e *Env) Fresh() *rand.Rand { return rundir.Fresh(e.RunID, e.Rand) }

// Scaled returns a protocol duration as the target experiences it.
func (e *Env) Scaled(d time.Duration) time.Duration {
	if e.Target.TimeScale <= 0 {
		return d
	}
	return time.Duration(float64(d) / e.Target.TimeScale)
}

// ErrNotApplicable marks a step that cannot run against this target (no admin
// token, a lease longer than the budget, …). The rules of its scenario end N/A
// with the wrapped reason; wrap it with NotApplicable.
var ErrNotApplicable = errors.New("not applicable")

// NotApplicable returns an error that makes the scenario's rules N/A.
func NotApplicable(reason string) error {
	return &naError{reason: reason}
}

// NotThisVariant returns an error that makes the scenario's rules N/A
// because they judge variant, a variant of the text other than the one the
// target declares: the reports set such rules apart from the rules of the
// declared variant.
func NotThisVariant(variant, reason string) error {
	return &naError{reason: reason, variant: variant}
}

type naError struct{ reason, variant string }

func (e *naError) Error() string { return "not applicable: " + e.reason }
func (e *naError) Unwrap() error { return ErrNotApplicable }

// BlockedError is what a check returns when the answer it reads is
// judged by another rule: it is neither a pass nor a failure of its own
// rule, which the runner makes BLOCKED by Blocker (a 5xx to a well-formed
// request blocks the rule the request was testing; the 5xx is a finding
// of the rule that judges it).
type BlockedError struct {
	Blocker string // the rule whose finding blocks the check
	Reason  string
	// Finding: what blocks the check is itself evidence against Blocker,
	// which the runner judges FAIL on it (once per scenario).
	Finding bool
}

func (e *BlockedError) Error() string { return "blocked by " + e.Blocker + ": " + e.Reason }

// BlockedByFinding returns a *BlockedError whose reason is a finding
// against blocker: the check is BLOCKED, and blocker FAILs on the reason.
func BlockedByFinding(blocker, reason string) error {
	return &BlockedError{Blocker: blocker, Reason: reason, Finding: true}
}

// PassNote is what a check returns when it holds and has a remark the
// report shows beside the rule's PASS (what the target documents of its
// own, say): the runner judges the check PASS with the note as reason.
type PassNote struct{ Note string }

func (e *PassNote) Error() string { return "passed: " + e.Note }

// Passed returns a *PassNote.
func Passed(note string) error { return &PassNote{Note: note} }

// Observation is what a check returns when it holds and can say what it
// observed (a count at the effect sink, say): the runner judges the check
// PASS and shows Expected and Observed as its proof, beside the answers it
// read.
type Observation struct{ Expected, Observed string }

func (e *Observation) Error() string {
	return "held: expected " + e.Expected + ", observed " + e.Observed
}

// Observed returns an *Observation: the check held, and this is what it saw.
func Observed(expected, observed string) error {
	return &Observation{Expected: expected, Observed: observed}
}

// MismatchError is a step failure that says what the rule expected and what
// the target did; the runner puts both into the rule's evidence.
type MismatchError struct {
	Expected string
	Observed string
	// Finding, when set, is what the same answer shows against another
	// rule (a 5xx where the rule names the error class it wants): the
	// runner judges that rule FAIL beside this one, once per scenario, as
	// it does a BlockedError's finding.
	Finding *BlockedError
}

func (e *MismatchError) Error() string {
	return "expected " + e.Expected + ", observed " + e.Observed
}

// Mismatch returns a *MismatchError.
func Mismatch(expected, observed string) error {
	return &MismatchError{Expected: expected, Observed: observed}
}
