package faults

import (
	"context"
	"errors"
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
