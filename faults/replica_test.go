package faults

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// TestReplicaCrash: one replica of three is SIGKILLed and restarted (a new
// pid), the others are untouched, and the injection names which.
func TestReplicaCrash(t *testing.T) {
	ctx := testCtx(t)
	var procs []*Process
	var pids []int
	for range 3 {
		p, _ := startHelper(t)
		procs = append(procs, p)
		pids = append(pids, p.PID())
	}
	f := &ReplicaCrash{Replicas: procs}
	if err := f.Available(); err != nil {
		t.Fatal(err)
	}
	in, err := f.Inject(ctx, rand.New(rand.NewPCG(1, 2)), 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	i, _ := strconv.Atoi(in.Params["replica"])
	for j, p := range procs {
		switch {
		case j == i && (p.PID() == pids[j] || p.Starts() != 2 || !p.Running()):
			t.Errorf("replica %d (killed): pid %d (was %d), starts %d", j, p.PID(), pids[j], p.Starts())
		case j != i && (p.PID() != pids[j] || p.Starts() != 1):
			t.Errorf("replica %d (spared): pid %d (was %d), starts %d", j, p.PID(), pids[j], p.Starts())
		}
	}
	if in.Params["pid_killed"] != strconv.Itoa(pids[i]) || in.End.Sub(in.Start) < 100*time.Millisecond {
		t.Errorf("injection %+v", in)
	}
	if err := (&ReplicaCrash{Replicas: procs[:1]}).Available(); !errors.Is(err, ErrNotAvailable) {
		t.Errorf("one replica: %v, want not available", err)
	}
}
