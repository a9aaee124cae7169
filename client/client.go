// Package client is the recording HTTP client every scenario, chaos worker and
// benchmark talks to a target through. Every request and its response (or the
// lack of one) is recorded as a verdict.Exchange with call and return times
// and an outcome: ok (a response came back), fail (the request certainly never
// reached the target) or unknown (it may have been applied).
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/fnv"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/idscheck/idscheck/verdict"
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
	// Spreader, when set, is the spreading state this client shares with
	// every other client given it (NewSpreader): the clients of one run
	// then spread as one, however many a scenario makes. Without it each
	// client spreads on its own.
	Spreader *Spreader
}

// Client sends requests to one target and records them.
type Client struct {
	base  *url.URL
	opt   Options
	bases []*url.URL // base and the replicas; more than one: requests are spread
	turn  *Spreader
}

// Spreader is where the next delivery goes over the replicas: a counter
// per logical request, one for every other request. A client's own is
// shared by the copies With makes; NewSpreader makes one several clients
// share (Options.Spreader).
type Spreader struct {
	next atomic.Uint64
	mu   sync.Mutex
	// roundRobin (NewSpreader): a logical request's first delivery goes
	// to the replica after the previous logical request's first, and a
	// non-GET request without Spread is a delivery of the logical request
	// its method, path, headers, body and key name (a re-send of the
	// same bytes is a retry); else (a client's own) its Spread hashes to
	// its first replica.
	roundRobin bool
	starts     uint64
	after      map[string]*delivery // logical request → where its deliveries went
}

// delivery is where one logical request's deliveries go: its first
// replica, and how many went so far.
type delivery struct{ start, n uint64 }

// NewSpreader returns a spreading state for the clients of one run
// (Options.Spreader): the deliveries of each logical request go to one
// replica after the other, whichever client sends them, and the logical
// requests start round the replicas in the order they are first sent.
func NewSpreader() *Spreader {
	return &Spreader{roundRobin: true, after: map[string]*delivery{}}
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
	c := &Client{base: u, opt: opt, bases: []*url.URL{u}, turn: opt.Spreader}
	if c.turn == nil {
		c.turn = &Spreader{after: map[string]*delivery{}}
	}
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
// logical request's first delivery goes to its first replica (the one
// after the previous logical request's with a shared Spreader; the one
// its Spread hashes to otherwise) and each further one to the next
// replica; any other request goes to the next replica in turn.
func (c *Client) pick(req Request) *url.URL {
	n := uint64(len(c.bases))
	if n == 1 {
		return c.base
	}
	key := req.Spread
	if key == "" && c.turn.roundRobin && req.Method != http.MethodGet && req.Method != http.MethodHead {
		key = c.logical(req)
	}
	if key == "" {
		return c.bases[(c.turn.next.Add(1)-1)%n]
	}
	c.turn.mu.Lock()
	d := c.turn.after[key]
	if d == nil {
		d = &delivery{start: c.turn.starts}
		c.turn.starts++
		if !c.turn.roundRobin {
			h := fnv.New64a()
			h.Write([]byte(key))
			d.start = h.Sum64()
		}
		c.turn.after[key] = d
	}
	k := d.n
	d.n++
	c.turn.mu.Unlock()
	return c.bases[(d.start+k)%n]
}

// logical names the logical request req is a delivery of when it names
// none (Request.Spread): its method, path, headers, body and the key it
// is sent with, as a digest: a re-send of the same request is another
// delivery of it.
func (c *Client) logical(req Request) string {
	h := fnv.New128a()
	write := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	write(req.Method)
	write(req.Path)
	if !req.NoAPIKey {
		write(c.opt.APIKey)
	}
	for _, k := range slices.Sorted(maps.Keys(req.Header)) {
		write(k)
		for _, v := range req.Header[k] {
			write(v)
		}
	}
	h.Write(req.Body)
	return "\x00auto\x00" + hex.EncodeToString(h.Sum(nil))
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
		Replica:    c.replicaOf(base),
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

// replicaOf is what the exchange records of the replica base is: its
// base URL when the client spreads over several, else "".
func (c *Client) replicaOf(base *url.URL) string {
	if len(c.bases) < 2 {
		return ""
	}
	return base.String()
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
