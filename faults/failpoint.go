package faults

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
)

// Failpoint arms a named failpoint (github.com/pingcap/failpoint) in this
// process for the injection's duration: failpoint.Enable(Path, Term), then
// Disable. Use it when the reference server runs in-process, with terms that
// do not end the process (`return("error")`, `sleep(500)`, `1*return(true)`);
// a term the server answers with os.Exit would end the harness too: for those
// run the server as a child (StartProcess) and use RemoteFailpoint. The
// failpoint names belong to sut, e.g.
// "github.com/idscheck/idscheck/sut/intent/after-commit-before-reply".
type Failpoint struct {
	Path string
	Term string
}

var _ Holdable = (*Failpoint)(nil)

// Name is "failpoint/" and the last element of Path.
func (f *Failpoint) Name() string { return failpointName(f.Path) }

// Kind is KindFailpoint.
func (f *Failpoint) Kind() Kind { return KindFailpoint }

// Available needs a path and a term.
func (f *Failpoint) Available() error {
	if f.Path == "" || f.Term == "" {
		return notAvailable(f.Name(), "no failpoint path or term")
	}
	return nil
}

// Begin enables the failpoint in this process.
func (f *Failpoint) Begin(ctx context.Context, rnd *rand.Rand) (func() (Injection, error), error) {
	if err := f.Available(); err != nil {
		return nil, err
	}
	if err := failpoint.Enable(f.Path, f.Term); err != nil {
		return nil, fmt.Errorf("%s: enable: %w", f.Name(), err)
	}
	in := Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{"path": f.Path, "term": f.Term}, Start: time.Now()}
	var once sync.Once
	var rerr error
	return func() (Injection, error) {
		once.Do(func() {
			if err := failpoint.Disable(f.Path); err != nil {
				rerr = fmt.Errorf("%s: disable: %w", f.Name(), err)
				in.Err = rerr.Error()
			}
			in.End = time.Now()
		})
		return in, rerr
	}, nil
}

// Inject enables the failpoint for d.
func (f *Failpoint) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	return injectHeld(ctx, f, rnd, d)
}

// RemoteFailpoint arms a named failpoint in a child process through
// failpoint's HTTP endpoint (the child was started with
// FailpointsHTTPEnv(Addr) in its environment): PUT http://Addr/<Path> with
// Term as the body, and DELETE when the injection ends. With Process set, the
// injection also ends as soon as the process exits (the failpoint fired and
// the server os.Exit()ed: a crash at the dangerous point), and the process is
// then restarted on the same data before Inject returns; Params "fired" says
// whether it exited. A failpoint armed for the whole hold that never fired
// (Params "fired" = "false") took no effect: it is not an injection of the
// fault (see Coverage).
//
// Trigger, when set, is called once half-way through the hold if the
// failpoint has not fired by then, to drive the target to the armed point
// (e.g. POST /admin/cleanup for a failpoint inside the cleanup pass, which
// traffic alone reaches only every few minutes; a write for one after a
// commit, when the workload happens to be idle). The hold lasts until the
// trigger returned, however long its drive takes on a loaded machine
// (bounded by FailpointTriggerTimeout): whether the failpoint is reached
// rests on the drive, not on how fast it went. Its context ends as soon as
// the failpoint fired (the process exited), so a trigger may drive until
// then. Params "triggered" says whether it was called. Its error is
// expected when the failpoint ends the process mid-request and is not the
// injection's: whether it fired is.
//
// A process that exits while the failpoint is armed, on its own, fired it,
// even when its exit is seen only as the failpoint is disarmed (the disarm
// then finds no one listening): the process is restarted, and the disarm's
// failure is not the injection's. A process the harness itself ended
// meanwhile took its failpoints with it: the injection took no effect
// ("fired" false, Params "cleared" says why), and is no failure either.
type RemoteFailpoint struct {
	Addr    string // 127.0.0.1:port of the child's GO_FAILPOINTS_HTTP
	Path    string
	Term    string
	Process *Process // optional: the child, restarted if the failpoint ends it
	Trigger func(ctx context.Context) error
}

// ParamFired is the Params key of an injection that arms a trap (a failpoint
// that ends the process when reached): "true" if it sprang, "false" if the
// hold ended first. An injection with ParamFired "false" took no effect.
const ParamFired = "fired"

var _ Fault = (*RemoteFailpoint)(nil)

// Name is "failpoint/" and the last element of Path.
func (f *RemoteFailpoint) Name() string { return failpointName(f.Path) }

// Kind is KindFailpoint.
func (f *RemoteFailpoint) Kind() Kind { return KindFailpoint }

// Available needs the child's failpoint address, a path and a term.
func (f *RemoteFailpoint) Available() error {
	if f.Addr == "" {
		return notAvailable(f.Name(), "the target exposes no failpoint endpoint (GO_FAILPOINTS_HTTP)")
	}
	if f.Path == "" || f.Term == "" {
		return notAvailable(f.Name(), "no failpoint path or term")
	}
	return nil
}

// FailpointTriggerTimeout bounds a RemoteFailpoint's Trigger, from the
// moment it is called.
const FailpointTriggerTimeout = 15 * time.Second

// Inject arms the failpoint, holds it for d (and past it until its
// Trigger returned) or until the process exits, disarms it if the process
// still runs, and restarts the process if the failpoint ended it. The
// restart happens even when ctx is done, bounded by ProcessStartTimeout.
func (f *RemoteFailpoint) Inject(ctx context.Context, rnd *rand.Rand, d time.Duration) (Injection, error) {
	in := Injection{Fault: f.Name(), Kind: f.Kind(), Params: map[string]string{"path": f.Path, "term": f.Term, "addr": f.Addr}}
	fail := func(err error) (Injection, error) {
		if in.Start.IsZero() {
			in.Start = time.Now()
		}
		in.End = time.Now()
		in.Err = err.Error()
		return in, err
	}
	if err := f.Available(); err != nil {
		return fail(err)
	}
	var exited <-chan struct{} // nil without a Process: never ready
	if f.Process != nil {
		exited = f.Process.Exited()
	}
	if err := failpointHTTP(ctx, http.MethodPut, f.Addr, f.Path, f.Term); err != nil {
		return fail(fmt.Errorf("%s: enable: %w", f.Name(), err))
	}
	in.Start = time.Now()
	trigDone := make(chan struct{})
	triggered := false // written before trigDone closes
	if f.Trigger != nil {
		go func() {
			defer close(trigDone)
			half := time.NewTimer(d / 2)
			defer half.Stop()
			select {
			case <-half.C:
			case <-exited: // fired on its own
				return
			case <-ctx.Done():
				return
			}
			triggered = true
			tctx, stop := context.WithTimeout(ctx, FailpointTriggerTimeout)
			defer stop()
			go func() { // the drive ends once the failpoint fired
				select {
				case <-exited:
					stop()
				case <-tctx.Done():
				}
			}()
			f.Trigger(tctx)
		}()
	} else {
		close(trigDone)
	}
	t := time.NewTimer(max(d, 0))
	var herr error
	select {
	case <-t.C:
		// The hold is over; a trigger under way is waited for: it is
		// the drive to the armed point.
		select {
		case <-trigDone:
		case <-exited:
		case <-ctx.Done():
			herr = ctx.Err()
		}
	case <-exited:
	case <-ctx.Done():
		herr = ctx.Err()
	}
	t.Stop()
	<-trigDone // bounded: the trigger's context ends with ctx, or FailpointTriggerTimeout after it started
	if f.Trigger != nil {
		in.Params["triggered"] = fmt.Sprint(triggered)
	}
	isDone := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	var errs []error
	gone := isDone(exited)
	if !gone {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		err := failpointHTTP(dctx, http.MethodDelete, f.Addr, f.Path, "")
		cancel()
		if err != nil && exited != nil {
			// No one listening may be a process on its way out: one that
			// reached the failpoint as the hold ended is gone from the
			// network a moment before it is reaped.
			w := time.NewTimer(processExitTimeout)
			select {
			case <-exited:
			case <-w.C:
			}
			w.Stop()
		}
		gone = isDone(exited)
		if err != nil && !gone {
			errs = append(errs, fmt.Errorf("%s: disable: %w", f.Name(), err))
		}
	}
	fired := false
	if gone {
		// Its own exit (the failpoint's), or one the harness caused: a
		// process ended by another fault took its failpoints with it.
		if cause := f.Process.lastExitCause(); cause == "exited" {
			fired = true
		} else {
			in.Params["cleared"] = "the process was ended by the harness (" + cause + ") while the failpoint was armed"
		}
	}
	in.Params[ParamFired] = fmt.Sprint(fired)
	if fired {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restartTimeout)
		if err := f.Process.Restart(rctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name(), err))
		}
		cancel()
	}
	in.End = time.Now()
	if herr != nil {
		errs = append(errs, fmt.Errorf("%s: hold cut short: %w", f.Name(), herr))
	}
	if err := errors.Join(errs...); err != nil {
		in.Err = err.Error()
		return in, err
	}
	return in, nil
}

// failpointHTTP sends one request to failpoint's HTTP endpoint and wants 2xx.
func failpointHTTP(ctx context.Context, method, addr, fpPath, body string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+"/"+fpPath, strings.NewReader(body))
	if err != nil {
		return err
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: status %d: %s", method, fpPath, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}

// FailpointsEnv returns the environment entry
// "GO_FAILPOINTS=<path>=<term>;…" that arms the failpoints of a child
// process from its start (failpoint reads it in its init), paths sorted. A
// path or term holding '=' or ';' cannot be expressed and is an error.
func FailpointsEnv(terms map[string]string) (string, error) {
	paths := make([]string, 0, len(terms))
	for p, t := range terms {
		if p == "" || strings.ContainsAny(p, "=;") || strings.ContainsAny(t, "=;") {
			return "", fmt.Errorf("failpoints env: %q=%q: path and term must be non-empty and hold no '=' or ';'", p, t)
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	parts := make([]string, len(paths))
	for i, p := range paths {
		parts[i] = p + "=" + terms[p]
	}
	return "GO_FAILPOINTS=" + strings.Join(parts, ";"), nil
}

// FailpointsHTTPEnv returns the environment entry that makes a child serve
// failpoint's HTTP endpoint on addr (use 127.0.0.1 and FreeAddr).
func FailpointsHTTPEnv(addr string) string { return "GO_FAILPOINTS_HTTP=" + addr }

// FreeAddr returns a 127.0.0.1:port that was free a moment ago, for a child
// process to listen on. Another process may take it in between: callers
// start the child promptly and treat a bind failure as a start failure.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free addr: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("free addr: %w", err)
	}
	return addr, nil
}

func failpointName(p string) string {
	if p == "" {
		return "failpoint"
	}
	return FailpointPrefix + path.Base(p)
}
