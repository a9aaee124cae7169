// Package client is the recording HTTP client every scenario, chaos worker and
// benchmark talks to a target through. Every request and its response (or the
// lack of one) is recorded as a verdict.Exchange with call and return times
// and an outcome: ok (a response came back), fail (the request certainly never
// reached the target) or unknown (it may have been applied).
package client

import (
	"hash/fnv"
	"sync"
	"sync/atomic"

	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// HeaderAPIKey is the header a client's API key is sent in.
const HeaderAPIKey = "X-API-KEY"

// MaxBody is the most of a response body the client reads; a hostile target
// cannot make the harness buffer more.
const MaxBody = 1 << 20

// Recorder collects the exchanges of every Client that shares it. It is safe
// for concurrent use.
type Recorder struct {
	mu  sync.Mutex
	exs []verdict.Exchange
}

// Len returns how many exchanges have been recorded; pass it to Since later.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.exs)
}

// Since returns a copy of the exchanges recorded after mark (a value of Len).
func (r *Recorder) Since(mark int) []verdict.Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	if mark > len(r.exs) {
		mark = len(r.exs)
	}
	return append([]verdict.Exchange(nil), r.exs[mark:]...)
}

func (r *Recorder) add(e verdict.Exchange) {
	r.mu.Lock()
	r.exs = append(r.exs, e)
	r.mu.Unlock()
}

// Options configure a Client.
type Options struct {
	Name     string       // logical client name, recorded on every exchange
	APIKey   string       // sent as HeaderAPIKey unless the request sets it
	HTTP     *http.Client // defaults to a keep-alive client with Timeout that never follows redirects
	Timeout  time.Duration
	Recorder *Recorder // nil: record nothing
	// Sign, when set, is called on every request just before it is sent,
	// with its headers final (the API key included) and its body: it adds
	// what a target that authenticates requests by signature wants (a
	// profile's own scheme). The exchange recorded carries what it added.
	Sign func(r *http.Request, body []byte)
	// Replicas are the base URLs of the target's other replicas (one
	// service behind several processes): the client spreads its requests
	// over the base URL and these. The deliveries of one logical request
	// (Request.Spread) go to one replica after the other, so a retry never
	// lands where its original did; other requests go round the replicas.
	Replicas []string
}

// Client sends requests to one target and records them.
type Client struct {
	base  *url.URL
	opt   Options
	bases []*url.URL // base and the replicas; more than one: requests are spread
	turn  *spread
}

// spread is where the next delivery goes: a counter per logical request,
// one for every other request. Shared by the copies With makes.
type spread struct {
	next  atomic.Uint64
	mu    sync.Mutex
	after map[string]uint64 // Request.Spread → its deliveries so far
}

// New returns a Client for baseURL (scheme, host and optional path prefix).
func New(baseURL string, opt Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("client: target must be an http:// or https:// URL with a host, got " + strconv.Quote(baseURL))
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Second
	}
	if opt.HTTP == nil {
		opt.HTTP = &http.Client{Timeout: opt.Timeout, Transport: NewTransport(), CheckRedirect: noRedirects}
	}
	c := &Client{base: u, opt: opt, bases: []*url.URL{u}, turn: &spread{after: map[string]uint64{}}}
	for _, r := range opt.Replicas {
		ru, err := url.Parse(r)
		if err != nil || (ru.Scheme != "http" && ru.Scheme != "https") || ru.Host == "" {
			return nil, errors.New("client: replica must be an http:// or https:// URL with a host, got " + strconv.Quote(r))
		}
		c.bases = append(c.bases, ru)
	}
	return c, nil
}

// pick is the base URL of the next delivery of req: with replicas, the
// logical request's first delivery goes to the replica its Spread hashes
// to and each further one to the next replica; a request without Spread
// goes to the next replica in turn.
func (c *Client) pick(req Request) *url.URL {
	n := uint64(len(c.bases))
	if n == 1 {
		return c.base
	}
	if req.Spread == "" {
		return c.bases[(c.turn.next.Add(1)-1)%n]
	}
	h := fnv.New64a()
	h.Write([]byte(req.Spread))
	c.turn.mu.Lock()
	k := c.turn.after[req.Spread]
	c.turn.after[req.Spread] = k + 1
	c.turn.mu.Unlock()
	return c.bases[(h.Sum64()+k)%n]
}

// noRedirects makes a redirect the response: the harness records what the
// target answered, and never follows a target elsewhere (off loopback).
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// NewTransport returns a keep-alive transport with bounded dial and header waits.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
	}
}

// With returns a copy of c with other options (another API key, a signer, …)
// sharing the same transport and recorder.
func (c *Client) With(f func(*Options)) *Client {
	n := *c
	f(&n.opt)
	return &n
}

// Request is one HTTP request. Path may carry a query ("/claim?namespace=a").
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
	// NoAPIKey sends no X-API-KEY even when the client has one.
	NoAPIKey bool
	// Spread names the logical request this is a delivery of (its key):
	// with Options.Replicas, each delivery goes to another replica.
	Spread string
}

// Response is what came back. Body is at most MaxBody bytes.
type Response struct {
	Status   int
	Header   http.Header
	Body     []byte
	Exchange verdict.Exchange
}

// Do sends req and records it. A transport error returns a nil Response and
// the error; the exchange is recorded all the same, with outcome fail when
// the request certainly never reached the target and unknown otherwise.
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	ref, err := url.Parse(req.Path)
	if err != nil || ref.Host != "" || ref.Scheme != "" {
		return nil, errors.New("client: request path must be a path with an optional query, got " + strconv.Quote(req.Path))
	}
	base := c.pick(req)
	u := *base
	u.Path = singleSlashJoin(base.Path, ref.Path)
	u.RawPath = singleSlashJoin(base.EscapedPath(), ref.EscapedPath())
	u.RawQuery = ref.RawQuery
	hreq, err := http.NewRequestWithContext(ctx, req.Method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, err
	}
	// Without GetBody net/http never re-sends the request on a fresh
	// connection by itself (it would for any request carrying an
	// Idempotency-Key header). A silent re-send would hide that the first
	// copy may have been applied, and report only the second copy's error.
	hreq.GetBody = nil
	for k, vs := range req.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	if len(req.Body) > 0 && hreq.Header.Get("Content-Type") == "" {
		hreq.Header.Set("Content-Type", "application/json")
	}
	if c.opt.APIKey != "" && !req.NoAPIKey && hreq.Header.Get(HeaderAPIKey) == "" {
		hreq.Header.Set(HeaderAPIKey, c.opt.APIKey)
	}
	if c.opt.Sign != nil {
		c.opt.Sign(hreq, req.Body)
	}
	ex := verdict.Exchange{
		Client:     c.opt.Name,
		Method:     req.Method,
		Path:       hreq.URL.RequestURI(),
		ReqHeaders: cloneHeader(hreq.Header),
		ReqBody:    string(req.Body),
		Call:       time.Now(),
	}
	resp, err := c.opt.HTTP.Do(hreq)
	if err != nil {
		ex.Return = time.Now()
		ex.Err = err.Error()
		ex.Outcome = verdict.OutcomeUnknown
		if neverSent(err) {
			ex.Outcome = verdict.OutcomeFailed
		}
		c.record(ex)
		return nil, err
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	resp.Body.Close()
	ex.Return = time.Now()
	ex.Status = resp.StatusCode
	ex.RespHeaders = cloneHeader(resp.Header)
	ex.RespBody = string(body)
	ex.Outcome = verdict.OutcomeOK
	if rerr != nil {
		ex.Err = "reading body: " + rerr.Error()
	}
	c.record(ex)
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body, Exchange: ex}, nil
}

func (c *Client) record(ex verdict.Exchange) {
	if c.opt.Recorder != nil {
		c.opt.Recorder.add(ex)
	}
}

// NewNonce returns 16 random bytes in hex.
func NewNonce() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// neverSent reports whether err proves the request never reached the target:
// the connection was refused or could not be dialled.
func neverSent(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func singleSlashJoin(a, b string) string {
	switch {
	case a == "" || a == "/":
		return b
	case len(a) > 0 && a[len(a)-1] == '/' && len(b) > 0 && b[0] == '/':
		return a + b[1:]
	}
	return a + b
}

func cloneHeader(h http.Header) map[string][]string {
	if len(h) == 0 {
		return nil
	}
	m := make(map[string][]string, len(h))
	for k, v := range h {
		m[k] = append([]string(nil), v...)
	}
	return m
}
