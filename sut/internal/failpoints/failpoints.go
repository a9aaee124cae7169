// Package failpoints is what every bundled server does at its named
// failpoints (github.com/pingcap/failpoint, evaluated at run time, no source
// rewriting; GO_FAILPOINTS enables them in a process): Eval crashes the
// process for the term `return("exit")` (os.Exit: a panic inside a net/http
// handler would be recovered), and a Barrier widens a mutant's race window
// so that the race shows at every run instead of when the scheduler happens
// to interleave two requests.
package failpoints

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
)

// ExitCode is the status a failpoint enabled with return("exit") ends the
// process with (a SIGKILL's, 128+9).
const ExitCode = 137

// Eval returns the value the failpoint name is enabled with ("" when it is
// not); "exit" ends the process at once with ExitCode.
func Eval(name string) string {
	v, err := failpoint.Eval(name)
	if err != nil {
		return ""
	}
	s, _ := v.(string)
	if s == "exit" {
		os.Exit(ExitCode)
	}
	return s
}

// Barrier pairs requests at a racy window: when its failpoint is enabled
// with return("barrier"), the first request of a key waits (at most Wait,
// and never past its context) until a second request of that key arrives;
// the second releases it and both go on together.
type Barrier struct {
	Wait    time.Duration
	mu      sync.Mutex
	waiting map[string]chan struct{}
}

// NewBarrier returns a Barrier whose first request waits at most wait.
func NewBarrier(wait time.Duration) *Barrier {
	return &Barrier{Wait: wait, waiting: map[string]chan struct{}{}}
}

// Window is the racy window of failpoint name for key k: it returns at
// once unless name is enabled with return("barrier").
func (b *Barrier) Window(ctx context.Context, name, k string) {
	if Eval(name) != "barrier" {
		return
	}
	b.mu.Lock()
	if first, ok := b.waiting[k]; ok {
		delete(b.waiting, k)
		b.mu.Unlock()
		close(first)
		return
	}
	me := make(chan struct{})
	b.waiting[k] = me
	b.mu.Unlock()
	t := time.NewTimer(b.Wait)
	defer t.Stop()
	select {
	case <-me:
	case <-t.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	if b.waiting[k] == me {
		delete(b.waiting, k)
	}
	b.mu.Unlock()
}
