package atp

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// fakeClock is the policy's clock in these tests: Sleep advances it, no
// real time passes.
type fakeClock struct {
	t     time.Time
	slept []time.Duration
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
	return nil
}

func newFake() (*fakeClock, Policy) {
	c := &fakeClock{t: time.Date(2026, 5, 25, 12, 0, 0, 0, time.UTC)}
	return c, Policy{Now: c.now, Sleep: c.sleep, Rand: func() float64 { return 0.5 }}
}

func constRand(u float64) func() float64 { return func() float64 { return u } }

// TestPolicyDelayBounds: retry n waits base·2^n within ±50 %, never more
// than the cap; the extremes of the jitter are reached; Scale divides.
func TestPolicyDelayBounds(t *testing.T) {
	for n := 0; n < 40; n++ {
		nominal := float64(DefaultBase) * float64(uint64(1)<<min(n, 62))
		for _, u := range []float64{0, 0.25, 0.5, 0.75, 0.999999} {
			p := Policy{Rand: constRand(u)}
			d := p.Delay(n)
			lo, hi := 0.5*nominal, 1.5*nominal
			if d > DefaultCap {
				t.Fatalf("Delay(%d) with u=%v = %v: over the cap %v", n, u, d, DefaultCap)
			}
			if float64(d) < min(lo, float64(DefaultCap)) || (hi < float64(DefaultCap) && float64(d) > hi) {
				t.Fatalf("Delay(%d) with u=%v = %v: want within [%v, %v] ns capped at %v", n, u, d, lo, hi, DefaultCap)
			}
		}
	}
	exact := []struct {
		n    int
		u    float64
		want time.Duration
	}{
		{0, 0.5, 250 * time.Millisecond}, {0, 0, 125 * time.Millisecond}, {1, 0.5, 500 * time.Millisecond},
		{3, 0, time.Second}, {3, 1, 3 * time.Second}, {6, 0.5, 16 * time.Second}, {7, 0.5, 30 * time.Second},
		{7, 0, 16 * time.Second}, {200, 0.5, 30 * time.Second}, {-3, 0.5, 250 * time.Millisecond},
	}
	for _, c := range exact {
		if got := (Policy{Rand: constRand(c.u)}).Delay(c.n); got != c.want {
			t.Errorf("Delay(%d) with u=%v = %v, want %v", c.n, c.u, got, c.want)
		}
	}
	if got := (Policy{Rand: constRand(0.5), Scale: 60}).Delay(7); got != 500*time.Millisecond {
		t.Errorf("Scale 60: the cap of 30 s is %v, want 500ms", got)
	}
	if got := (Policy{Rand: constRand(0.999), Jitter: -1}).Delay(2); got != time.Second {
		t.Errorf("no jitter: Delay(2) = %v, want 1s", got)
	}
	// The default random source stays within the bounds too.
	for range 1000 {
		if d := (Policy{}).Delay(2); d < 500*time.Millisecond || d > 1500*time.Millisecond {
			t.Fatalf("Delay(2) = %v out of [0.5 s, 1.5 s]", d)
		}
	}
}

// TestPolicyRetrySet: every status in and out of the retry set.
func TestPolicyRetrySet(t *testing.T) {
	p := Policy{}
	for s := 100; s < 600; s++ {
		want := s == 408 || s == 425 || s == 429 || s >= 500
		if Retryable(s) != want {
			t.Errorf("Retryable(%d) = %t, want %t", s, !want, want)
		}
		a := Answer{Status: s}
		got := p.Decide(a, nil)
		switch {
		case s == 202:
			if got != Poll {
				t.Errorf("Decide(202) = %v, want poll", got)
			}
		case want && got != Retry:
			t.Errorf("Decide(%d) = %v, want retry", s, got)
		case !want && got != Done:
			t.Errorf("Decide(%d) = %v, want done (final)", s, got)
		}
	}
	for _, c := range []struct {
		a    Answer
		want Action
	}{
		{answer(409, `{"error":"nonce_consumed","first_consumed_at":"2026-05-25T12:00:00Z"}`), Done},
		{answer(410, `{"error":"intent_expired"}`), Done},
		{answer(200, `{"intent_id":"i","idempotency_key":"k","state":"executing","body":{},"receipt":null}`), Poll},
		{answer(200, `{"intent_id":"i","idempotency_key":"k","state":"executed","body":{},"receipt":null}`), Poll},
		{answer(200, `{"intent_id":"i","idempotency_key":"k","state":"settled","body":{},"receipt":{}}`), Done},
		{answer(200, `{"intent_id":"i","idempotency_key":"k","state":"authorized","body":{},"receipt":null}`), Done},
		{answer(503, `{"error":"unavailable"}`), Retry},
	} {
		if got := p.Decide(c.a, nil); got != c.want {
			t.Errorf("Decide(%d %s) = %v, want %v", c.a.Status, c.a.Body, got, c.want)
		}
	}
	if got := p.Decide(Answer{}, errors.New("connection reset by peer")); got != Retry {
		t.Errorf("a connection error: %v, want retry", got)
	}
	if got := p.Decide(Answer{Status: 200}, ErrCutShort); got != Retry {
		t.Errorf("a body cut short: %v, want retry", got)
	}
}

func answer(status int, body string) Answer {
	a := Answer{Status: status, Body: []byte(body)}
	parseInto(&a)
	return a
}

// TestPolicyRetryAfter: seconds and HTTP-dates, capped, scaled.
func TestPolicyRetryAfter(t *testing.T) {
	c, p := newFake()
	h := func(v string) http.Header { return http.Header{"Retry-After": {v}} }
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"3", 3 * time.Second, true},
		{"0", 0, true},
		{"120", 30 * time.Second, true},
		{"99999999999999999", 30 * time.Second, true},
		{c.t.Add(5 * time.Second).Format(http.TimeFormat), 5 * time.Second, true},
		{c.t.Add(-5 * time.Second).Format(http.TimeFormat), 0, true},
		{c.t.Add(time.Hour).Format(http.TimeFormat), 30 * time.Second, true},
		{"", 0, false},
		{"soon", 0, false},
		{"-1", 0, false},
	} {
		got, ok := p.RetryAfter(h(tc.v))
		if got != tc.want || ok != tc.ok {
			t.Errorf("Retry-After %q: %v %t, want %v %t", tc.v, got, ok, tc.want, tc.ok)
		}
	}
	p.Scale = 10
	if got, _ := p.RetryAfter(h("3")); got != 300*time.Millisecond {
		t.Errorf("Scale 10: Retry-After 3 = %v, want 300ms", got)
	}
}

type script struct {
	answers []Answer
	errs    []error
	n       int
}

func (s *script) step(context.Context) (Answer, error) {
	i := min(s.n, len(s.answers)-1)
	s.n++
	var err error
	if i < len(s.errs) {
		err = s.errs[i]
	}
	return s.answers[i], err
}

func rowAnswer(status int, state string) Answer {
	receipt := "null"
	if state == "settled" || state == "compensated" {
		receipt = `{"body":{},"alg":"Ed25519","kid":"k","signature":"s"}`
	}
	return answer(status, `{"intent_id":"int_1","idempotency_key":"0123456789abcdef","state":"`+state+`","body":{},"receipt":`+receipt+`}`)
}

// TestPolicyDoReissuesAfterConnectionLoss: connection errors and 5xx are
// re-issued (the same request), with growing waits, until the row.
func TestPolicyDoReissuesAfterConnectionLoss(t *testing.T) {
	c, p := newFake()
	s := &script{answers: []Answer{{}, answer(503, `{}`), {}, rowAnswer(200, "settled")},
		errs: []error{errors.New("connection reset"), nil, errors.New("timeout")}}
	r := p.Do(context.Background(), c.t.Add(time.Hour), s.step, nil)
	if r.Stop != StopFinal || r.Sends != 4 || r.Polls != 0 || r.Answer.State() != "settled" {
		t.Fatalf("result %+v", r)
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second}
	if len(c.slept) != 3 || c.slept[0] != want[0] || c.slept[1] != want[1] || c.slept[2] != want[2] {
		t.Fatalf("slept %v, want %v", c.slept, want)
	}
}

// TestPolicyDoPollsExecuting: once a row is executing, Do reads it with GET
// (backing off) and never sends the execute again.
func TestPolicyDoPollsExecuting(t *testing.T) {
	c, p := newFake()
	send := &script{answers: []Answer{rowAnswer(202, "executing")}}
	poll := &script{answers: []Answer{{}, rowAnswer(200, "executing"), rowAnswer(200, "executed"), rowAnswer(200, "settled")},
		errs: []error{errors.New("reset")}}
	r := p.Do(context.Background(), c.t.Add(time.Hour), send.step, poll.step)
	if r.Stop != StopFinal || send.n != 1 || poll.n != 4 || r.Sends != 1 || r.Polls != 4 || r.Answer.State() != "settled" {
		t.Fatalf("result %+v, sends %d polls %d", r, send.n, poll.n)
	}
	if len(c.slept) != 4 || c.slept[0] != 250*time.Millisecond || c.slept[3] != 2*time.Second {
		t.Fatalf("slept %v: want the polls to back off from 250 ms", c.slept)
	}
	// Without a poll, executing is final.
	send.n = 0
	if r := p.Do(context.Background(), time.Time{}, send.step, nil); r.Stop != StopFinal || send.n != 1 {
		t.Fatalf("without poll: %+v", r)
	}
}

// TestPolicyDoTerminalCodes: 409 nonce_consumed and 410 intent_expired (and
// every other final 4xx) are sent once.
func TestPolicyDoTerminalCodes(t *testing.T) {
	for _, a := range []Answer{answer(409, `{"error":"nonce_consumed","first_consumed_at":"x"}`), answer(410, `{"error":"intent_expired"}`),
		answer(400, `{"error":"invalid_signature"}`), answer(404, `{"error":"not_found"}`), answer(422, `{}`)} {
		c, p := newFake()
		s := &script{answers: []Answer{a}}
		r := p.Do(context.Background(), c.t.Add(time.Hour), s.step, s.step)
		if r.Stop != StopFinal || s.n != 1 || len(c.slept) != 0 || r.Answer.Status != a.Status {
			t.Fatalf("%d: %+v, %d sends, slept %v", a.Status, r, s.n, c.slept)
		}
	}
}

// TestPolicyDoHonoursRetryAfter: a 429 waits Retry-After (capped), not the
// backoff.
func TestPolicyDoHonoursRetryAfter(t *testing.T) {
	c, p := newFake()
	busy := answer(429, `{"error":"slow_down"}`)
	busy.Header = http.Header{"Retry-After": {"7"}}
	longer := answer(503, `{}`)
	longer.Header = http.Header{"Retry-After": {"3600"}}
	s := &script{answers: []Answer{busy, longer, rowAnswer(200, "authorized")}}
	r := p.Do(context.Background(), c.t.Add(2*time.Hour), s.step, nil)
	if r.Stop != StopFinal || s.n != 3 || len(c.slept) != 2 || c.slept[0] != 7*time.Second || c.slept[1] != 30*time.Second {
		t.Fatalf("result %+v, slept %v: want 7 s then the 30 s cap", r, c.slept)
	}
}

// TestPolicyDoStopsAtExpiry: a site that keeps failing is retried until
// the next send would be past expires_at, never after.
func TestPolicyDoStopsAtExpiry(t *testing.T) {
	c, p := newFake()
	start := c.t
	expires := start.Add(10 * time.Second)
	var sentAt []time.Time
	send := func(context.Context) (Answer, error) {
		sentAt = append(sentAt, c.t)
		return answer(500, `{}`), nil
	}
	r := p.Do(context.Background(), expires, send, nil)
	if r.Stop != StopExpired {
		t.Fatalf("stop %s, want expires_at", r.Stop)
	}
	for _, at := range sentAt {
		if !at.Before(expires) {
			t.Fatalf("sent at %v, past expires_at %v", at.Sub(start), expires.Sub(start))
		}
	}
	// 0.25+0.5+1+2+4 = 7.75 s; the next wait (8 s) would end past 10 s.
	if len(sentAt) != 6 || c.t.Sub(start) != 7750*time.Millisecond {
		t.Fatalf("%d sends, %v elapsed: want 6 sends in 7.75 s", len(sentAt), c.t.Sub(start))
	}
	// A row being polled is not bounded by expires_at (reading is not
	// retrying), only by MaxTries.
	c2, p2 := newFake()
	p2.MaxTries = 12
	poll := &script{answers: []Answer{rowAnswer(200, "executing")}}
	r = p2.Do(context.Background(), c2.t.Add(time.Second), (&script{answers: []Answer{rowAnswer(202, "executing")}}).step, poll.step)
	if r.Stop != StopTries || r.Sends != 1 || r.Polls != 11 {
		t.Fatalf("polling: %+v", r)
	}
}

// TestPolicyDoIsBounded: MaxTries and ctx bound Do.
func TestPolicyDoIsBounded(t *testing.T) {
	c, p := newFake()
	p.MaxTries = 5
	fail := func(context.Context) (Answer, error) { return Answer{}, errors.New("refused") }
	r := p.Do(context.Background(), time.Time{}, fail, nil)
	if r.Stop != StopTries || r.Sends != 5 || len(c.slept) != 4 {
		t.Fatalf("%+v, slept %v", r, c.slept)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	r = p.Do(ctx, time.Time{}, func(context.Context) (Answer, error) {
		n++
		cancel()
		return Answer{}, errors.New("refused")
	}, nil)
	if r.Stop != StopCanceled || n != 1 {
		t.Fatalf("canceled: %+v after %d sends", r, n)
	}
	// The real sleep is cut short by ctx.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	began := time.Now()
	r = (Policy{Base: time.Hour, Cap: time.Hour}).Do(ctx2, time.Time{}, fail, nil)
	if r.Stop != StopCanceled || time.Since(began) > 5*time.Second {
		t.Fatalf("real sleep: %+v after %v", r, time.Since(began))
	}
}
