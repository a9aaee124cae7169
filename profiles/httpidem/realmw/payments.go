// Package realmw puts third-party idempotency middlewares behind a tiny
// payments endpoint, for certifying them with the http-idempotency profile
// (docs/http-idempotency.md, "Worked example: certifying a third-party
// middleware"): Fiber v2's and Fiber v3's middleware/idempotency, each
// configured with KeyHeader "Idempotency-Key" and every other setting at
// its default.
//
// The endpoint, the same on every version:
//
//	POST /v1/payments             {"reference": "r", "amount": 1000, "delay_ms": 0}
//	                              201 {"id": "pay_1", "reference": "r", "amount": 1000}
//	                              400 {"error": "..."} for an amount <= 0 or a bad body (nothing created)
//	GET  /v1/payments?reference=R {"count": N}: the payments made with reference R
//	GET  /v1/payments/count       {"count": N}: every payment made
//	GET  /health                  {"status": "ok"} (idscheck run waits for it)
//
// delay_ms (at most 5000) makes the handler sleep before it creates the
// payment: a request that is in flight long enough to send its duplicate.
// The handler writes its 400 itself (c.Status(400).JSON), the usual Fiber
// idiom: the middleware stores it as the key's result, as it stores any
// answer the handler wrote.
package realmw

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	redisstore "github.com/gofiber/storage/redis/v3"
)

// Header is the idempotency key's header the endpoints are configured with.
const Header = "Idempotency-Key"

// MaxDelay bounds a request's delay_ms.
const MaxDelay = 5 * time.Second

// Versions are the middlewares, as Start names them.
func Versions() []string { return []string{"v2", "v3"} }

// Options configure an endpoint.
type Options struct {
	// Lifetime is the middleware's key lifetime (0: its default, 30 minutes).
	Lifetime time.Duration
	// RedisURL, when set, keeps the middleware's stored responses in Redis
	// through github.com/gofiber/storage/redis/v3 (the Storage setting of
	// middleware/idempotency, as Fiber's docs show it); "": the
	// middleware's default in-memory storage. The key locks stay in the
	// process, as the middleware's default Lock keeps them.
	RedisURL string

	// store is the Redis storage Start made of RedisURL (nil: default).
	store *redisstore.Storage
}

// storage is the Storage setting opt asks for: nil (the middleware's
// default) or a Redis storage, whose connection is checked now so that a
// wrong URL is an error at start, not a 500 at the first request.
func (opt Options) storage() (*redisstore.Storage, error) {
	if opt.RedisURL == "" {
		return nil, nil
	}
	if _, err := url.Parse(opt.RedisURL); err != nil || !strings.HasPrefix(opt.RedisURL, "redis://") {
		return nil, fmt.Errorf("the Redis URL %q is not redis://host:port", opt.RedisURL)
	}
	var st *redisstore.Storage
	var perr any
	func() {
		defer func() { perr = recover() }() // New panics when it cannot reach Redis
		st = redisstore.New(redisstore.Config{URL: opt.RedisURL})
	}()
	if perr != nil {
		return nil, fmt.Errorf("cannot reach Redis at %s: %v", opt.RedisURL, perr)
	}
	return st, nil
}

// Server is one endpoint serving on a listener.
type Server struct {
	// URL is http://<the listener's address>.
	URL      string
	shutdown func(time.Duration) error
	done     chan error
}

// Close shuts the endpoint down, waiting at most 5 seconds for the
// requests in flight.
func (s *Server) Close() error {
	err := s.shutdown(5 * time.Second)
	select {
	case serr := <-s.done:
		if err == nil && serr != nil && !errors.Is(serr, net.ErrClosed) {
			err = serr
		}
	case <-time.After(5 * time.Second):
		if err == nil {
			err = errors.New("the server did not stop within 5s")
		}
	}
	return err
}

// Start serves the payments endpoint behind the idempotency middleware of
// Fiber version ("v2" or "v3") on ln, until Close.
func Start(version string, ln net.Listener, opt Options) (*Server, error) {
	switch version {
	case "v2", "v3":
	default:
		return nil, fmt.Errorf("fiber version %q: want v2 or v3", version)
	}
	st, err := opt.storage()
	if err != nil {
		return nil, err
	}
	opt.store = st
	switch version {
	case "v2":
		return StartFiberV2(ln, opt), nil
	case "v3":
		return StartFiberV3(ln, opt), nil
	}
	return nil, fmt.Errorf("fiber version %q: want v2 or v3", version)
}

// payments is the endpoint's memory: every payment made.
type payments struct {
	mu    sync.Mutex
	n     int
	byRef map[string]int
}

func newPayments() *payments { return &payments{byRef: map[string]int{}} }

// payment is a request's body and a created payment's answer.
type payment struct {
	ID        string  `json:"id,omitempty"`
	Reference string  `json:"reference"`
	Amount    float64 `json:"amount"`
	DelayMS   float64 `json:"delay_ms,omitempty"`
}

// create handles one POST body: the status and the answer's document.
func (p *payments) create(body []byte) (int, any) {
	var req payment
	if err := json.Unmarshal(body, &req); err != nil {
		return 400, map[string]string{"error": "the body is not a payment: " + err.Error()}
	}
	if req.Amount <= 0 {
		return 400, map[string]string{"error": "amount must be > 0"}
	}
	if req.Reference == "" {
		return 400, map[string]string{"error": "reference is required"}
	}
	if req.DelayMS > 0 {
		time.Sleep(min(time.Duration(req.DelayMS*float64(time.Millisecond)), MaxDelay))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	p.byRef[req.Reference]++
	return 201, payment{ID: fmt.Sprintf("pay_%d", p.n), Reference: req.Reference, Amount: req.Amount}
}

// count is the answer of a count read: the payments with reference ref,
// or every payment when all.
func (p *payments) count(ref string, all bool) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if all {
		return map[string]int{"count": p.n}
	}
	return map[string]int{"count": p.byRef[ref]}
}
