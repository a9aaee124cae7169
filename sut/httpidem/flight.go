package httpidem

import "sync"

// flight is a request of this process that holds a key in_progress: the
// t0 duplicates of it wait on done and answer its response.
type flight struct {
	done chan struct{}
	once sync.Once

	mu     sync.Mutex
	fp     string // the fingerprint the key is executing
	status int
	body   []byte
}

type flightResult struct {
	fp     string
	status int
	body   []byte
}

func newFlight(fp string) *flight { return &flight{done: make(chan struct{}), fp: fp} }

func (f *flight) setFP(fp string) {
	f.mu.Lock()
	f.fp = fp
	f.mu.Unlock()
}

func (f *flight) result() flightResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return flightResult{f.fp, f.status, f.body}
}

// register makes f the flight of k. Called inside the writer operation
// that puts the key in_progress, so that an operation that later reads the
// key in_progress finds it.
func (s *Server) register(k string, f *flight) {
	s.flightMu.Lock()
	s.flights[k] = f
	s.flightMu.Unlock()
}

// lookup is the flight of k, nil if none.
func (s *Server) lookup(k string) *flight {
	s.flightMu.Lock()
	defer s.flightMu.Unlock()
	return s.flights[k]
}

// finish ends f with its response (after the commit that ended the key's
// in_progress) and wakes its waiters. Idempotent: the first response wins.
func (s *Server) finish(k string, f *flight, status int, body []byte) {
	f.once.Do(func() {
		s.flightMu.Lock()
		if s.flights[k] == f {
			delete(s.flights, k)
		}
		s.flightMu.Unlock()
		f.mu.Lock()
		f.status, f.body = status, body
		f.mu.Unlock()
		close(f.done)
	})
}

// unregister undoes register(k, f): an operation that registered f and
// then lost its transaction to another replica's runs again, and must not
// find its own flight as the original's.
func (s *Server) unregister(k string, f *flight) {
	s.flightMu.Lock()
	if s.flights[k] == f {
		delete(s.flights, k)
	}
	s.flightMu.Unlock()
}
