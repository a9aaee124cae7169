package faults

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
)

func TestFailpointInProcess(t *testing.T) {
	const path = "github.com/idscheck/idscheck/faults/test-in-process"
	f := &Failpoint{Path: path, Term: `return("boom")`}
	if f.Name() != "failpoint/test-in-process" || f.Kind() != KindFailpoint {
		t.Errorf("name %q kind %q", f.Name(), f.Kind())
	}
	if _, err := failpoint.Eval(path); err == nil {
		t.Fatal("failpoint active before the injection")
	}
	end, err := f.Begin(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := failpoint.Eval(path)
	if err != nil || v != "boom" {
		t.Errorf("during the injection: Eval = %v, %v; want boom", v, err)
	}
	in, err := end()
	if err != nil || in.Params["term"] != `return("boom")` {
		t.Fatalf("end: %+v, %v", in, err)
	}
	if v, err := failpoint.Eval(path); err == nil {
		t.Errorf("after the injection: Eval = %v, want disabled", v)
	}
	if err := (&Failpoint{Path: path}).Available(); !errors.Is(err, ErrNotAvailable) {
		t.Errorf("no term: Available() = %v, want ErrNotAvailable", err)
	}
}

// TestFailpointsEnvArmsTheChild: GO_FAILPOINTS in the child's environment
// arms the failpoint from its start; the request that reaches it ends the
// process, as a crash at the dangerous point would.
func TestFailpointsEnvArmsTheChild(t *testing.T) {
	ctx := testCtx(t)
	env, err := FailpointsEnv(map[string]string{testExitFailpoint: `return("exit")`})
	if err != nil {
		t.Fatal(err)
	}
	p, url := startHelper(t, env)
	if b, err := get(ctx, url+"/", 5*time.Second); err != nil {
		t.Fatalf("plain request: %q, %v", b, err)
	}
	if b, err := get(ctx, url+"/fp", 5*time.Second); err == nil {
		t.Errorf("request at the armed failpoint answered %q, want the process gone", b)
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("process still running after its failpoint fired")
	}
	if !strings.Contains(p.Output(), "failpoint fired") {
		t.Errorf("output = %q", p.Output())
	}
	if exits := p.Exits(); len(exits) != 1 || exits[0].Cause != "exited" || exits[0].Status != "exit status 7" {
		t.Errorf("Exits() = %+v, want one exit of its own with status 7", exits)
	}
}

func TestFailpointsEnvRejects(t *testing.T) {
	for _, terms := range []map[string]string{
		{"a=b": "return"},
		{"a": "return(1);x"},
		{"": "return"},
	} {
		if s, err := FailpointsEnv(terms); err == nil {
			t.Errorf("FailpointsEnv(%v) = %q, want an error", terms, s)
		}
	}
	s, err := FailpointsEnv(map[string]string{"b/y": "sleep(1)", "a/x": `return("exit")`})
	if err != nil || s != `GO_FAILPOINTS=a/x=return("exit");b/y=sleep(1)` {
		t.Errorf("FailpointsEnv = %q, %v", s, err)
	}
}

func TestRemoteFailpoint(t *testing.T) {
	for _, tc := range []struct {
		name      string
		traffic   bool // send a request through the failpoint while it is armed
		trigger   bool // the fault's Trigger sends one request through it
		wantFired string
	}{
		{"fires, crashes, restarts", true, false, "true"},
		{"armed then disarmed", false, false, "false"},
		{"its trigger fires it", false, true, "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			fpAddr, err := FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			p, url := startHelper(t, FailpointsHTTPEnv(fpAddr))
			f := &RemoteFailpoint{Addr: fpAddr, Path: testExitFailpoint, Term: `return("exit")`, Process: p}
			hold := 200 * time.Millisecond
			if tc.trigger {
				hold = 20 * time.Second // ended by the crash the trigger causes
				f.Trigger = func(ctx context.Context) error { _, err := get(ctx, url+"/fp", 5*time.Second); return err }
			}
			if tc.traffic {
				hold = 20 * time.Second // ended by the crash
				exited := p.Exited()
				go func() {
					// Bounded: tries until the failpoint is armed and the process exits.
					for range 200 {
						select {
						case <-exited:
							return
						default:
						}
						get(ctx, url+"/fp", time.Second)
						time.Sleep(10 * time.Millisecond)
					}
				}()
			}
			in, err := f.Inject(ctx, nil, hold)
			if err != nil {
				t.Fatal(err)
			}
			if in.Params["fired"] != tc.wantFired {
				t.Errorf("fired = %s, want %s (%+v)", in.Params["fired"], tc.wantFired, in)
			}
			// Either way the target serves afterwards, with the failpoint disarmed.
			if b, err := get(ctx, url+"/fp", 5*time.Second); err != nil || string(b) != "survived" {
				t.Errorf("after the injection: %q, %v", b, err)
			}
			wantStarts := 1
			if tc.traffic || tc.trigger {
				wantStarts = 2
			}
			if p.Starts() != wantStarts {
				t.Errorf("starts = %d, want %d", p.Starts(), wantStarts)
			}
		})
	}
	if err := (&RemoteFailpoint{Path: "x", Term: "return"}).Available(); !errors.Is(err, ErrNotAvailable) {
		t.Errorf("no addr: Available() = %v, want ErrNotAvailable", err)
	}
}

// TestRemoteFailpointWaitsForItsTrigger: a trigger whose drive outlasts
// the hold (a loaded machine) still reaches the armed point: the hold
// lasts until the trigger returned, and the failpoint fires.
func TestRemoteFailpointWaitsForItsTrigger(t *testing.T) {
	ctx := testCtx(t)
	fpAddr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, url := startHelper(t, FailpointsHTTPEnv(fpAddr))
	f := &RemoteFailpoint{Addr: fpAddr, Path: testExitFailpoint, Term: `return("exit")`, Process: p}
	const hold = 50 * time.Millisecond
	f.Trigger = func(ctx context.Context) error {
		// A slow drive: it reaches the failpoint well after the hold's end.
		select {
		case <-time.After(10 * hold):
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := get(ctx, url+"/fp", 5*time.Second)
		return err
	}
	in, err := f.Inject(ctx, nil, hold)
	if err != nil {
		t.Fatal(err)
	}
	if in.Params[ParamFired] != "true" || in.Params["triggered"] != "true" || p.Starts() != 2 {
		t.Errorf("fired %s, triggered %s, %d starts; want the slow trigger to fire it and the process restarted (%+v)",
			in.Params[ParamFired], in.Params["triggered"], p.Starts(), in)
	}
}

// TestRemoteFailpointFiredAsTheHoldEnds: a process that reached the
// failpoint as the hold ended is gone when the failpoint is disarmed (no
// one answers the disarm): it fired, the process is restarted, and the
// disarm's failure is not the injection's.
func TestRemoteFailpointFiredAsTheHoldEnds(t *testing.T) {
	ctx := testCtx(t)
	fpAddr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, url := startHelper(t, FailpointsHTTPEnv(fpAddr))
	// The failpoint endpoint the fault is given passes the arming on to
	// the child's; at the disarm, a request reaches the armed point first
	// (the child exits), and the disarm gets no answer.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			get(r.Context(), url+"/fp", 5*time.Second) // ends the child
			panic(http.ErrAbortHandler)
		}
		if err := failpointHTTP(r.Context(), r.Method, fpAddr, strings.TrimPrefix(r.URL.Path, "/"), readAll(r.Body)); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	}))
	defer front.Close()
	f := &RemoteFailpoint{Addr: strings.TrimPrefix(front.URL, "http://"), Path: testExitFailpoint, Term: `return("exit")`, Process: p}
	in, err := f.Inject(ctx, nil, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("inject: %v (%+v)", err, in)
	}
	if in.Params[ParamFired] != "true" || p.Starts() != 2 {
		t.Errorf("fired %s, %d starts; want fired and the process restarted (%+v)", in.Params[ParamFired], p.Starts(), in)
	}
	if b, err := get(ctx, url+"/fp", 5*time.Second); err != nil || string(b) != "survived" {
		t.Errorf("after the injection: %q, %v", b, err)
	}
}

// TestRemoteFailpointClearedByAKill: a process the harness ends while the
// failpoint is armed (another fault's kill) takes its failpoints with it:
// the injection took no effect and did not fail, and the failpoint leaves
// the restart to whoever killed the process.
func TestRemoteFailpointClearedByAKill(t *testing.T) {
	ctx := testCtx(t)
	fpAddr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, url := startHelper(t, FailpointsHTTPEnv(fpAddr))
	f := &RemoteFailpoint{Addr: fpAddr, Path: testExitFailpoint, Term: `return("exit")`, Process: p}
	f.Trigger = func(ctx context.Context) error { return p.Kill() } // another fault's crash
	in, err := f.Inject(ctx, nil, 200*time.Millisecond)
	if err != nil {
		t.Fatalf("inject: %v (%+v)", err, in)
	}
	if in.Params[ParamFired] != "false" || !strings.Contains(in.Params["cleared"], "sigkill") || p.Starts() != 1 {
		t.Errorf("fired %s, cleared %q, %d starts; want no effect, cleared by the kill, no restart (%+v)",
			in.Params[ParamFired], in.Params["cleared"], p.Starts(), in)
	}
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := get(ctx, url+"/fp", 5*time.Second); err != nil || string(b) != "survived" {
		t.Errorf("after the restart: %q, %v", b, err)
	}
}

func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}
