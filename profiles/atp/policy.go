package atp

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Policy is the text's recommended retry policy (§5), with the partition
// behaviour of §6:
//
//   - exponential backoff, base 250 ms, jitter ±50 %, cap 30 s: the n-th
//     retry waits Base·2^n·(1+Jitter·u), u uniform in [-1, 1), at most Cap;
//   - retry on 5xx, 408, 425, 429 (after Retry-After when given, in
//     seconds or as an HTTP-date, at most Cap), 503, and on connection
//     errors (no answer, a reset, a timeout, a body cut short): the same
//     request under the same idempotency key (§6: "The agent re-issues
//     POST /execute with the same idempotency key when connectivity
//     returns");
//   - every other 4xx is final, in particular 409 nonce_consumed and 410
//     intent_expired;
//   - never send again past the intent's expires_at (the retry budget is
//     bounded by it);
//   - a row that is executing (or executed, not yet settled) is polled with
//     GET, with backoff, never executed again (§6: "Agents observe
//     executing on polling and back off; they do not retry the intent
//     itself").
//
// Its clock, sleep and random source are injectable (tests run it on a
// fake clock); Scale divides every duration, for a site whose declared
// durations run Scale times faster. The zero Policy is the text's.
type Policy struct {
	Base   time.Duration // default 250 ms
	Cap    time.Duration // default 30 s
	Jitter float64       // the ± fraction (default 0.5; negative: none)
	Scale  float64       // every wait is divided by it (default 1)
	// MaxTries bounds the requests (sends and polls) of one Do (default 64).
	MaxTries int
	Now      func() time.Time                                 // default time.Now
	Sleep    func(ctx context.Context, d time.Duration) error // default a timer, cut short by ctx (its error)
	Rand     func() float64                                   // uniform in [0, 1); default math/rand/v2
}

// The text's numbers (§5).
const (
	DefaultBase     = 250 * time.Millisecond
	DefaultCap      = 30 * time.Second
	DefaultJitter   = 0.5
	DefaultMaxTries = 64
)

func (p Policy) withDefaults() Policy {
	if p.Base <= 0 {
		p.Base = DefaultBase
	}
	if p.Cap <= 0 {
		p.Cap = DefaultCap
	}
	switch {
	case p.Jitter == 0:
		p.Jitter = DefaultJitter
	case p.Jitter < 0:
		p.Jitter = 0
	}
	if p.Scale <= 0 {
		p.Scale = 1
	}
	if p.MaxTries <= 0 {
		p.MaxTries = DefaultMaxTries
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	if p.Rand == nil {
		p.Rand = rand.Float64
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Delay is the wait before retry n (0: the first retry): Base·2^n with
// ±Jitter, at most Cap, divided by Scale.
func (p Policy) Delay(n int) time.Duration {
	p = p.withDefaults()
	n = min(max(n, 0), 62)
	d := float64(p.Base) * math.Exp2(float64(n))
	d *= 1 + p.Jitter*(2*p.Rand()-1)
	d = min(d, float64(p.Cap))
	return time.Duration(d / p.Scale)
}

// Retryable reports whether a status is retried (§5): 5xx, 408, 425, 429.
func Retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return status >= 500 && status <= 599
}

// RetryAfter reads a Retry-After header (seconds, or an HTTP-date from Now),
// at most Cap, divided by Scale; false when there is none or it does not
// parse.
func (p Policy) RetryAfter(h http.Header) (time.Duration, bool) {
	p = p.withDefaults()
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		d = time.Duration(min(secs, int64(p.Cap/time.Second)+1)) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(t.Sub(p.Now()), 0)
	} else {
		return 0, false
	}
	d = min(d, p.Cap)
	return time.Duration(float64(d) / p.Scale), true
}

// Action is what the policy does after an answer.
type Action int

const (
	// Done: the answer is final (a terminal row, a final 4xx, a 2xx row
	// that is neither executing nor executed).
	Done Action = iota
	// Retry: send the same request again, after a backoff.
	Retry
	// Poll: the row is executing (or executed, not yet settled): read it
	// with GET after a backoff; never send the step again.
	Poll
)

func (a Action) String() string {
	switch a {
	case Done:
		return "done"
	case Retry:
		return "retry"
	case Poll:
		return "poll"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Decide classifies one answer: err is its transport error.
func (p Policy) Decide(a Answer, err error) Action {
	switch {
	case err != nil:
		return Retry // a connection error: re-issue the same request
	case a.Status == http.StatusAccepted:
		return Poll // executing: the rail has not answered
	case a.Status >= 200 && a.Status < 300:
		if s := a.State(); s == "executing" || s == "executed" {
			return Poll
		}
		return Done
	case Retryable(a.Status):
		return Retry
	}
	return Done // every other 4xx is final (409 nonce_consumed, 410 intent_expired, …)
}

// Stop says why Do returned.
type Stop string

const (
	StopFinal    Stop = "final"      // an answer the policy does not retry
	StopExpired  Stop = "expires_at" // the next send would be past the intent's expires_at
	StopTries    Stop = "max-tries"  // MaxTries requests were sent
	StopCanceled Stop = "canceled"   // ctx ended
)

// Result is what Do did: the last answer and its transport error, how many
// sends and polls it made, and why it stopped.
type Result struct {
	Answer Answer
	Err    error
	Sends  int
	Polls  int
	Stop   Stop
}

// Do drives one step: send (authorize or execute, the same request every
// time) until an answer is final; once an answer shows the row executing
// it calls poll (GET) instead, with backoff, until the row leaves
// executing. Sends stop before expiresAt (zero: no bound); polls are
// bounded by MaxTries and ctx only (reading a row is not retrying the
// intent). poll nil: an executing row is final. Bounded: at most MaxTries
// requests, each wait at most Cap/Scale.
func (p Policy) Do(ctx context.Context, expiresAt time.Time, send, poll func(context.Context) (Answer, error)) Result {
	p = p.withDefaults()
	var r Result
	step, polling := send, false
	retries, polls := 0, 0
	for {
		if ctx.Err() != nil {
			r.Stop = StopCanceled
			return r
		}
		if polling {
			r.Polls++
		} else {
			r.Sends++
		}
		r.Answer, r.Err = step(ctx)
		act := p.Decide(r.Answer, r.Err)
		if act == Done {
			r.Stop = StopFinal
			return r
		}
		if act == Poll && !polling {
			if poll == nil {
				r.Stop = StopFinal
				return r
			}
			step, polling = poll, true
		}
		if r.Sends+r.Polls >= p.MaxTries {
			r.Stop = StopTries
			return r
		}
		var d time.Duration
		if polling {
			d = p.Delay(polls)
			polls++
		} else {
			d = p.Delay(retries)
			retries++
		}
		if r.Err == nil && Retryable(r.Answer.Status) {
			if ra, ok := p.RetryAfter(r.Answer.Header); ok {
				d = ra
			}
		}
		if !polling && !expiresAt.IsZero() && !p.Now().Add(d).Before(expiresAt) {
			r.Stop = StopExpired
			return r
		}
		if err := p.Sleep(ctx, d); err != nil {
			r.Stop = StopCanceled
			return r
		}
	}
}
