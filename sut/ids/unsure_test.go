package ids

import (
	"testing"
	"time"
)

// TestTimedOutPostIsNotMadeAgain: a sink call that times out may still
// reach the sink and count (its POST was not yet read). The resumer leaves
// such a record alone for twice the call's bound, then reconciles: the
// effect that landed meanwhile is found (GET) and not made again. Before,
// the resumer's next pass found nothing at the sink yet and POSTed a
// second effect.
func TestTimedOutPostIsNotMadeAgain(t *testing.T) {
	e := newEnv(t, "", func(c *Config) { c.SinkTimeout = 500 * time.Millisecond })
	e.sink.holdPosts()
	r := e.send(note("unsure"))
	if r.status != 202 {
		t.Fatalf("with the sink held past its bound: %s, want 202 (processing)", r)
	}
	if got := e.sink.waitArrivals(1, time.Second); got != 1 {
		t.Fatalf("%d POSTs arrived, want the first", got)
	}
	// The resumer ticks every 200 ms; within half a second a second POST
	// would have arrived had it not waited.
	second := e.sink.waitArrivals(1, 500*time.Millisecond)
	e.sink.release() // the held POST lands now, after its caller gave up
	eventually(t, 10*time.Second, "the command executed", func() bool { return e.sink.totalEffects() >= 1 && e.commandStatus("cmd-1") != "in_progress" })
	time.Sleep(300 * time.Millisecond)
	if n := e.sink.totalEffects(); n != 1 || second != 0 {
		t.Fatalf("%d effects at the sink, %d POSTs sent while the first was unsure; want 1 and 0", n, second)
	}
}
