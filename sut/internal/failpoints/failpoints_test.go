package failpoints

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
)

// TestBarrierPairsTwoRequests: with the failpoint on, two requests of one
// key leave the window together long before Wait; a lone request waits
// Wait; with the failpoint off nobody waits.
func TestBarrierPairsTwoRequests(t *testing.T) {
	const name = "github.com/idscheck/idscheck/sut/internal/failpoints/test-window"
	b := NewBarrier(5 * time.Second)
	start := time.Now()
	b.Window(context.Background(), name, "k") // off
	if time.Since(start) > time.Second {
		t.Fatal("a disabled window waited")
	}
	if err := failpoint.Enable(name, `return("barrier")`); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Disable(name)
	var wg sync.WaitGroup
	start = time.Now()
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); b.Window(context.Background(), name, "k") }()
	}
	wg.Wait()
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("two requests of one key waited %v: the barrier did not pair them", d)
	}
	b.Wait = 50 * time.Millisecond
	start = time.Now()
	b.Window(context.Background(), name, "alone")
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("a lone request left after %v, before Wait", d)
	}
	if Eval(name) != "barrier" {
		t.Fatal("Eval does not return the enabled value")
	}
}
