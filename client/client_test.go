package client

import (
	"context"
	"errors"
	"github.com/idscheck/idscheck/verdict"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newClient(t *testing.T, url string, rec *Recorder, f ...func(*Options)) *Client {
	t.Helper()
	o := Options{Name: "t", APIKey: "key-1", Recorder: rec, Timeout: 500 * time.Millisecond}
	for _, g := range f {
		g(&o)
	}
	c, err := New(url, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestDoRecordsAnAnsweredExchange(t *testing.T) {
	var gotKey, gotCT, gotBody, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey, gotCT, gotPath = r.Header.Get(HeaderAPIKey), r.Header.Get("Content-Type"), r.URL.RequestURI()
		b, _ := io.ReadAll(r.Body)
		gotBody = string(b)
		w.Header().Set("X-Intent-Version", "2.1")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"abc"}`)
	}))
	defer srv.Close()
	rec := &Recorder{}
	c := newClient(t, srv.URL+"/base/", rec)
	resp, err := c.Do(t.Context(), Request{Method: "POST", Path: "/intent?x=1", Body: []byte(`{"goal":"g"}`), Header: http.Header{"Idempotency-Key": {"k1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 201 || string(resp.Body) != `{"id":"abc"}` {
		t.Errorf("response %d %q", resp.Status, resp.Body)
	}
	if gotKey != "key-1" || gotCT != "application/json" || gotBody != `{"goal":"g"}` || gotPath != "/base/intent?x=1" {
		t.Errorf("server saw key %q, content type %q, body %q, path %q", gotKey, gotCT, gotBody, gotPath)
	}
	exs := rec.Since(0)
	if len(exs) != 1 {
		t.Fatalf("%d exchanges recorded, want 1", len(exs))
	}
	ex := exs[0]
	if ex.Client != "t" || ex.Method != "POST" || ex.Path != "/base/intent?x=1" || ex.ReqBody != `{"goal":"g"}` ||
		ex.Status != 201 || ex.RespBody != `{"id":"abc"}` || ex.Outcome != verdict.OutcomeOK || ex.Err != "" {
		t.Errorf("exchange %+v", ex)
	}
	if ex.ReqHeaders["Idempotency-Key"][0] != "k1" || ex.RespHeaders["X-Intent-Version"][0] != "2.1" {
		t.Errorf("headers not recorded: %v / %v", ex.ReqHeaders, ex.RespHeaders)
	}
	if ex.Call.IsZero() || ex.Return.Before(ex.Call) {
		t.Errorf("call %v, return %v", ex.Call, ex.Return)
	}
}

func TestDoOutcomeWhenTheTargetMisbehaves(t *testing.T) {
	done := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(done) // runs before hang.Close
	reset := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	defer reset.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String()
	l.Close()

	cases := []struct {
		name string
		url  string
		want verdict.Outcome
	}{
		{"refused: certainly not applied", refused, verdict.OutcomeFailed},
		{"reset after send: maybe applied", reset.URL, verdict.OutcomeUnknown},
		{"hang until timeout: maybe applied", hang.URL, verdict.OutcomeUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &Recorder{}
			c := newClient(t, tc.url, rec)
			resp, err := c.Do(t.Context(), Request{Method: "POST", Path: "/intent", Body: []byte(`{}`)})
			if err == nil || resp != nil {
				t.Fatalf("no error (response %+v)", resp)
			}
			exs := rec.Since(0)
			if len(exs) != 1 {
				t.Fatalf("%d exchanges recorded, want 1", len(exs))
			}
			if exs[0].Outcome != tc.want || exs[0].Err == "" || exs[0].Status != 0 {
				t.Errorf("outcome %s, err %q, status %d; want %s with an error", exs[0].Outcome, exs[0].Err, exs[0].Status, tc.want)
			}
		})
	}
}

func TestDoHonoursTheContext(t *testing.T) {
	done := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(done)
	rec := &Recorder{}
	c := newClient(t, hang.URL, rec, func(o *Options) { o.Timeout = time.Hour })
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Do(ctx, Request{Method: "GET", Path: "/health"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's deadline", err)
	}
	if ex := rec.Since(0)[0]; ex.Outcome != verdict.OutcomeUnknown {
		t.Errorf("outcome %s, want unknown", ex.Outcome)
	}
}

func TestDoBoundsTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", MaxBody+4096))
	}))
	defer srv.Close()
	// A timeout no loaded machine reaches: the test is about the bound,
	// and a body cut by the timeout would read short.
	c := newClient(t, srv.URL, nil, func(o *Options) { o.Timeout = time.Minute })
	resp, err := c.Do(t.Context(), Request{Method: "GET", Path: "/get/k"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Exchange.Err != "" {
		t.Fatalf("reading the body: %s", resp.Exchange.Err)
	}
	if len(resp.Body) != MaxBody {
		t.Errorf("read %d bytes, want at most MaxBody=%d", len(resp.Body), MaxBody)
	}
}

func TestDoSignsAndOmitsTheKey(t *testing.T) {
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
	}))
	defer srv.Close()
	// The signer sees the request as it is sent: the API key set, the body
	// whole; what it adds is sent and recorded.
	var signedKey, signedBody string
	rec := &Recorder{}
	c := newClient(t, srv.URL, rec, func(o *Options) {
		o.Sign = func(r *http.Request, body []byte) {
			signedKey, signedBody = r.Header.Get(HeaderAPIKey), string(body)
			r.Header.Set("X-Signature", "sig:"+r.Method+" "+r.URL.RequestURI())
		}
	})
	if _, err := c.Do(t.Context(), Request{Method: "POST", Path: "/claim?namespace=a&goal=b", Body: []byte(`{"a": 1}`)}); err != nil {
		t.Fatal(err)
	}
	if signedKey != "key-1" || signedBody != `{"a": 1}` {
		t.Errorf("signer saw key %q body %q", signedKey, signedBody)
	}
	const want = "sig:POST /claim?namespace=a&goal=b"
	if got := seen.Get("X-Signature"); got != want {
		t.Errorf("sent signature %q, want %q", got, want)
	}
	if exs := rec.Since(0); len(exs) != 1 || http.Header(exs[0].ReqHeaders).Get("X-Signature") != want {
		t.Errorf("recorded headers %v lack the signature", exs)
	}

	if _, err := c.Do(t.Context(), Request{Method: "GET", Path: "/health", NoAPIKey: true}); err != nil {
		t.Fatal(err)
	}
	if seen.Get(HeaderAPIKey) != "" {
		t.Errorf("NoAPIKey request sent key %q", seen.Get(HeaderAPIKey))
	}
}

func TestNewAndDoRejectBadAddresses(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:80", "ftp://127.0.0.1/", "http://"} {
		if _, err := New(u, Options{}); err == nil {
			t.Errorf("New(%q): no error", u)
		}
	}
	rec := &Recorder{}
	c := newClient(t, "http://127.0.0.1:1", rec)
	for _, p := range []string{"http://evil.example/x", "//evil.example/x"} {
		if _, err := c.Do(t.Context(), Request{Method: "GET", Path: p}); err == nil {
			t.Errorf("Do with path %q: no error", p)
		}
	}
	if rec.Len() != 0 {
		t.Errorf("%d exchanges recorded for requests never sent", rec.Len())
	}
}

func TestRecorderSinceAndWith(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get(HeaderAPIKey))
	}))
	defer srv.Close()
	rec := &Recorder{}
	c := newClient(t, srv.URL, rec)
	other := c.With(func(o *Options) { o.Name = "other"; o.APIKey = "key-2" })
	c.Do(t.Context(), Request{Method: "GET", Path: "/a"})
	mark := rec.Len()
	resp, _ := other.Do(t.Context(), Request{Method: "GET", Path: "/b"})
	if string(resp.Body) != "key-2" {
		t.Errorf("With did not change the key: %q", resp.Body)
	}
	since := rec.Since(mark)
	if len(since) != 1 || since[0].Path != "/b" || since[0].Client != "other" {
		t.Errorf("Since(%d) = %+v", mark, since)
	}
	if got := rec.Since(99); len(got) != 0 {
		t.Errorf("Since past the end = %d exchanges", len(got))
	}
	since[0].Path = "changed"
	if rec.Since(mark)[0].Path != "/b" {
		t.Error("Since returned the recorder's own storage")
	}
}

func TestDoNeverFollowsARedirect(t *testing.T) {
	followed := false
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed = true }))
	defer elsewhere.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/stolen", http.StatusFound)
	}))
	defer srv.Close()
	rec := &Recorder{}
	resp, err := newClient(t, srv.URL, rec).Do(t.Context(), Request{Method: "GET", Path: "/status/x"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusFound || followed || rec.Len() != 1 {
		t.Errorf("status %d, followed %v, %d exchanges: want the 302 itself, recorded once", resp.Status, followed, rec.Len())
	}
}

// TestReplicasSpreadDeliveries: the deliveries of one logical request go
// to one replica after the other (a retry never where its original went);
// requests without Spread go round every replica.
func TestReplicasSpreadDeliveries(t *testing.T) {
	var hits [3]atomic.Int64
	var urls []string
	for i := range 3 {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits[i].Add(1); w.Write([]byte(strconv.Itoa(i))) }))
		defer ts.Close()
		urls = append(urls, ts.URL)
	}
	c, err := New(urls[0], Options{Replicas: urls[1:]})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b", "c", "d"} {
		last := ""
		for range 4 {
			resp, err := c.Do(t.Context(), Request{Method: "POST", Path: "/x", Spread: key})
			if err != nil {
				t.Fatal(err)
			}
			if string(resp.Body) == last {
				t.Fatalf("key %s: two deliveries in a row on replica %s", key, last)
			}
			last = string(resp.Body)
		}
	}
	for range 3 {
		if _, err := c.Do(t.Context(), Request{Method: "GET", Path: "/"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range hits {
		if hits[i].Load() == 0 {
			t.Errorf("replica %d got nothing", i)
		}
	}
}
