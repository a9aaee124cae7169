package chaos_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/idscheck/idscheck/chaos"
	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/sink"
)

// TestSinkProxyListensWhereToldAndPartitions: the proxy in front of the sink
// listens on the declared address, refuses calls while partitioned, and
// heals on the same address.
func TestSinkProxyListensWhereToldAndPartitions(t *testing.T) {
	s, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr, err := faults.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := chaos.NewSinkProxy(addr, s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Addr() != addr {
		t.Fatalf("listens on %s, want %s", p.Addr(), addr)
	}
	healthy := func() bool {
		resp, err := http.Get(p.URL() + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	if !healthy() {
		t.Fatal("the sink does not answer through the proxy")
	}
	f := chaos.SinkFaults(p, s)[0]
	done := make(chan faults.Injection, 1)
	go func() {
		in, _ := f.Inject(context.Background(), nil, 300*time.Millisecond)
		done <- in
	}()
	time.Sleep(100 * time.Millisecond)
	if healthy() {
		t.Fatal("the sink answers through a partitioned proxy")
	}
	in := <-done
	if in.Err != "" || in.Fault != chaos.FaultSinkPartition || !healthy() {
		t.Fatalf("injection %+v; healthy after: %t", in, healthy())
	}
}
