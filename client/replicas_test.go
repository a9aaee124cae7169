package client

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
)

// replicaServers starts n servers that answer their index.
func replicaServers(t *testing.T, n int) []string {
	t.Helper()
	var urls []string
	for i := range n {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(strconv.Itoa(i))) }))
		t.Cleanup(ts.Close)
		urls = append(urls, ts.URL)
	}
	return urls
}

// TestSpreaderIsSharedByClients: clients given one Spreader spread as one
// (a fresh client per request, as the scenarios make them): the logical
// requests start round the replicas in the order they are first sent,
// each further delivery goes to the next replica, a re-send of the same
// request without Spread is a delivery of the same logical request, and
// every exchange names the replica it went to.
func TestSpreaderIsSharedByClients(t *testing.T) {
	urls := replicaServers(t, 3)
	s := NewSpreader()
	rec := &Recorder{}
	send := func(req Request) string {
		t.Helper()
		c, err := New(urls[0], Options{Replicas: urls[1:], Spreader: s, Recorder: rec})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Body)
	}
	var got []string
	for _, key := range []string{"a", "b", "a", "c", "a", "b"} {
		got = append(got, send(Request{Method: "POST", Path: "/x", Spread: key}))
	}
	// a starts on 0, b on 1, c on 2; a's deliveries 0,1,2; b's 1,2.
	if want := []string{"0", "1", "1", "2", "2", "2"}; !slices.Equal(got, want) {
		t.Errorf("replicas %v, want %v", got, want)
	}
	// No Spread: the same method, path, headers and body are one logical
	// request (the fourth to start: replica 0); another body another.
	dup := Request{Method: "POST", Path: "/y", Header: http.Header{"Idempotency-Key": {"k"}}, Body: []byte(`{"n":1}`)}
	got = []string{send(dup), send(dup), send(Request{Method: "POST", Path: "/y", Header: dup.Header, Body: []byte(`{"n":2}`)}), send(dup)}
	if want := []string{"0", "1", "1", "2"}; !slices.Equal(got, want) {
		t.Errorf("re-sends: replicas %v, want %v", got, want)
	}
	for _, ex := range rec.Since(0) {
		if want := urls[map[string]int{"0": 0, "1": 1, "2": 2}[ex.RespBody]]; ex.Replica != want {
			t.Errorf("exchange answered by replica %s names %q, want %q", ex.RespBody, ex.Replica, want)
		}
	}
	// One target of one process: no replica named.
	c, err := New(urls[0], Options{Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	mark := rec.Len()
	if _, err := c.Do(t.Context(), Request{Method: "GET", Path: "/"}); err != nil {
		t.Fatal(err)
	}
	if ex := rec.Since(mark)[0]; ex.Replica != "" {
		t.Errorf("one process: the exchange names replica %q", ex.Replica)
	}
}
