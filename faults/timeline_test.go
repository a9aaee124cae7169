package faults

import (
	"bytes"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestTimelineConcurrentAndRoundTrip(t *testing.T) {
	var tl Timeline
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Recorded out of order on purpose.
			start := base.Add(time.Duration(49-i) * time.Second)
			tl.Record(Injection{Fault: "latency", Kind: KindNet, Params: map[string]string{"i": strconv.Itoa(i)},
				Start: start, End: start.Add(500 * time.Millisecond)})
		}()
	}
	wg.Wait()
	got := tl.Injections()
	if len(got) != 50 {
		t.Fatalf("%d injections, want 50", len(got))
	}
	for i := 1; i < len(got); i++ {
		if got[i].Start.Before(got[i-1].Start) {
			t.Fatalf("not ordered by start at %d", i)
		}
	}
	var buf bytes.Buffer
	if err := tl.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ReadTimeline(&buf)
	if err != nil {
		t.Fatal(err)
	}
	again := back.Injections()
	for i := range got {
		if !got[i].Start.Equal(again[i].Start) || !got[i].End.Equal(again[i].End) || got[i].Params["i"] != again[i].Params["i"] {
			t.Fatalf("round trip changed injection %d: %v vs %v", i, got[i], again[i])
		}
	}
	if _, err := ReadTimeline(bytes.NewReader([]byte(`{"not": "a list"}`))); err == nil {
		t.Error("ReadTimeline accepted an object")
	}
	var empty Timeline
	if b, _ := json.Marshal(&empty); string(b) != "[]" {
		t.Errorf("empty timeline marshals to %s, want []", b)
	}

	// During: the injections an operation from 10.2s to 10.4s may have met.
	during := tl.During(base.Add(10200*time.Millisecond), base.Add(10400*time.Millisecond))
	if len(during) != 1 || !during[0].Start.Equal(base.Add(10*time.Second)) {
		t.Errorf("During = %v, want the one starting at +10s", during)
	}
	if d := tl.During(base.Add(10600*time.Millisecond), base.Add(10700*time.Millisecond)); len(d) != 0 {
		t.Errorf("During a quiet moment = %v, want none", d)
	}
}
