package sink_test

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idscheck/idscheck/sink"
)

// provider is a mounted handler that relays each call under the key of
// its path's last element, and loses its reply when asked.
type provider struct {
	s      *sink.Sink
	lose   atomic.Bool
	closed atomic.Bool
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Path[len("/provider/"):]
	p.s.Relay(r.Context(), key, "provider.act", "ref-"+key)
	if p.lose.Load() {
		p.s.NoteLostReply()
		sink.DropConnection(w)
		return
	}
	io.WriteString(w, "acted")
}

func (p *provider) Close() error { p.closed.Store(true); return nil }

// TestMountServesBesideEffects: a mounted handler answers under its prefix;
// mounting the prefix again returns the first handler; its calls count as
// arrivals of their key, are held and released like /effects calls, are
// never effects, and its lost replies count; Close closes it.
func TestMountServesBesideEffects(t *testing.T) {
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &provider{s: s}
	if got := s.Mount("/provider/", func() http.Handler { return p }); got != p {
		t.Fatal("Mount did not return the handler it mounted")
	}
	if got := s.Mount("/provider/", func() http.Handler { t.Fatal("a second Mount made a handler"); return nil }); got != p {
		t.Fatal("a second Mount of the prefix did not return the first handler")
	}
	// POST: a GET whose connection is reset is retried by net/http.
	call := func(key string) (string, error) {
		resp, err := http.Post(s.URL()+"/provider/"+key, "text/plain", nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if body, err := call("k1"); err != nil || body != "acted" {
		t.Fatalf("mounted handler: %q %v", body, err)
	}
	if s.Arrived("k1") != 1 || s.Calls("k1") != 1 || s.Effects("k1") != 0 || s.TotalArrivals() != 0 || s.TotalEffects() != 0 {
		t.Fatalf("relayed call: arrived %d calls %d effects %d, total arrivals %d effects %d",
			s.Arrived("k1"), s.Calls("k1"), s.Effects("k1"), s.TotalArrivals(), s.TotalEffects())
	}
	if c := s.AllCalls(); len(c) != 1 || c[0].Command != "provider.act" || c[0].EffectID != "ref-k1" || c[0].New || c[0].Refused == "" {
		t.Fatalf("recorded calls: %+v", c)
	}

	// A held key holds the relayed call until its release.
	release := s.Hold("k2")
	done := make(chan struct{})
	go func() { call("k2"); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitCalls(ctx, "k2", 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("a held call was answered before its release")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	<-done

	// A reply the handler drops counts as lost.
	p.lose.Store(true)
	if _, err := call("k3"); err == nil {
		t.Fatal("a dropped reply was answered")
	}
	if n := s.LostReplies(); n != 1 {
		t.Fatalf("lost replies %d, want 1", n)
	}
	s.Close()
	if !p.closed.Load() {
		t.Fatal("Close did not close the mounted handler")
	}
}
