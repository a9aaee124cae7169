package chaos

import (
	"context"
	"testing"
	"time"
)

// TestDrainAfterCountsFromTheLoadsEnd: the drain lives while the load
// does, however long, and ends its own time after the load ended.
func TestDrainAfterCountsFromTheLoadsEnd(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	load, endLoad := context.WithCancel(parent)
	drain, stop := DrainAfter(parent, load, 50*time.Millisecond)
	defer stop()
	select {
	case <-drain.Done():
		t.Fatal("the drain ended while the load ran")
	case <-time.After(200 * time.Millisecond): // longer than the drain's own time
	}
	ended := time.Now()
	endLoad()
	select {
	case <-drain.Done():
	case <-parent.Done():
		t.Fatal("the drain did not end after the load")
	}
	if d := time.Since(ended); d < 50*time.Millisecond {
		t.Errorf("the drain ended %v after the load, want its 50ms", d)
	}
	// stop ends it at once.
	load2, endLoad2 := context.WithCancel(parent)
	defer endLoad2()
	drain2, stop2 := DrainAfter(parent, load2, time.Hour)
	stop2()
	if drain2.Err() == nil {
		t.Error("stop did not end the drain")
	}
}
