package sink

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// A profile whose targets call an external provider of another shape than
// /effects (a payment processor's API, …) mounts it on the sink: the
// provider serves its own routes beside the sink's, and shares its
// machinery — calls held per key (Hold), the sink's delay (SetDelay),
// arrivals counted for WaitCalls and Arrived, replies lost (LostReplies) —
// through Relay and NoteLostReply.

// mounted is one handler served under a path prefix.
type mounted struct {
	prefix string
	h      http.Handler
}

// Mount serves the handler newHandler makes for every path under prefix
// (e.g. "/payments/"), beside the sink's own routes, and returns it; a
// prefix mounted before returns the handler mounted then (newHandler is not
// called), so every caller of one sink shares one provider. A handler that
// is an io.Closer is closed when the sink closes.
func (s *Sink) Mount(prefix string, newHandler func() http.Handler) http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.mounts {
		if m.prefix == prefix {
			return m.h
		}
	}
	h := newHandler()
	s.mounts = append(s.mounts, mounted{prefix: prefix, h: h})
	return h
}

// mountFor returns the handler mounted for path; nil when none is.
func (s *Sink) mountFor(path string) http.Handler {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.mounts {
		if strings.HasPrefix(path, m.prefix) {
			return m.h
		}
	}
	return nil
}

// closeMounts closes the mounted handlers that are io.Closers.
func (s *Sink) closeMounts() {
	s.mu.Lock()
	ms := append([]mounted(nil), s.mounts...)
	s.mu.Unlock()
	for _, m := range ms {
		if c, ok := m.h.(io.Closer); ok {
			c.Close()
		}
	}
}

// Relay passes a call a mounted handler received through the sink's
// machinery before it acts: the call counts at once as arrived under key
// (WaitCalls, Arrived), waits while key is held (Hold; HoldAll holds only
// /effects) and for the sink's delay (SetDelay), or until ctx ends; then it
// is recorded under key as a call that is no effect (command and ref, e.g.
// the provider's document ID, name it in AllCalls). The sink's effect
// counts (TotalArrivals, TotalEffects) never include it.
func (s *Sink) Relay(ctx context.Context, key, command, ref string) {
	s.mu.Lock()
	s.inflight[key]++
	s.notifyLocked()
	hold, delay := s.holds[key], s.delay
	s.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
		case <-time.After(maxHold):
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
	}
	s.mu.Lock()
	s.inflight[key]--
	s.calls = append(s.calls, Call{Seq: len(s.calls) + 1, Key: key, Command: command, EffectID: ref, At: time.Now(),
		Refused: "not an effect: " + command, relayed: true})
	s.notifyLocked()
	s.mu.Unlock()
}

// NoteLostReply counts one reply a mounted handler dropped after acting,
// in LostReplies.
func (s *Sink) NoteLostReply() {
	s.mu.Lock()
	s.lost++
	s.mu.Unlock()
}

// DropConnection closes the connection of w without an answer (a reset):
// the caller cannot tell whether the handler acted.
func DropConnection(w http.ResponseWriter) { dropConnection(w) }
