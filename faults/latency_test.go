package faults

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestLatencyDelaysResponses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
	}{
		{"downstream", ""},
		{"upstream", "upstream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			c := newCounter(t, []byte("hello"))
			n := newNet(t, c)
			f := &Latency{Network: n, Delay: 200 * time.Millisecond, Stream: tc.stream}
			end, err := f.Begin(ctx, rand.New(rand.NewPCG(1, 2)))
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			b, err := get(ctx, n.URL(), 10*time.Second)
			took := time.Since(t0)
			in, eerr := end()
			if err != nil || string(b) != "hello" {
				t.Fatalf("request through latency: %q, %v", b, err)
			}
			if eerr != nil {
				t.Fatal(eerr)
			}
			// A lower bound only: latency can only add time.
			if took < 200*time.Millisecond {
				t.Errorf("request took %s, want ≥ 200ms under a 200ms latency", took)
			}
			if in.Fault != "latency" || in.Kind != KindNet || in.Params["latency_ms"] != "200" || in.End.Before(in.Start) {
				t.Errorf("injection = %+v", in)
			}
			if got := len(n.proxy.Toxics.GetToxicArray()); got != 0 {
				t.Errorf("%d toxics left after the fault ended", got)
			}
		})
	}
}

func TestLatencyJitterIsSeeded(t *testing.T) {
	c := newCounter(t, nil)
	n := newNet(t, c)
	f := &Latency{Network: n, Delay: 100 * time.Millisecond, Jitter: 50 * time.Millisecond}
	delays := func(seed uint64) []string {
		rnd := rand.New(rand.NewPCG(seed, seed))
		var out []string
		for range 5 {
			end, err := f.Begin(t.Context(), rnd)
			if err != nil {
				t.Fatal(err)
			}
			in, err := end()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, in.Params["latency_ms"])
		}
		return out
	}
	a, b, c2 := delays(7), delays(7), delays(8)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different delays: %v vs %v", a, b)
	}
	if slices.Equal(a, c2) {
		t.Errorf("different seeds, same delays: %v", a)
	}
}

func TestBandwidthSlowsLargeResponses(t *testing.T) {
	ctx := testCtx(t)
	body := bytes.Repeat([]byte("x"), 100*1024)
	c := newCounter(t, body)
	n := newNet(t, c)
	f := &Bandwidth{Network: n, KBps: 100}
	end, err := f.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	t0 := time.Now()
	b, err := get(ctx, n.URL(), 20*time.Second)
	took := time.Since(t0)
	if err != nil || !bytes.Equal(b, body) {
		t.Fatalf("request through bandwidth limit: %d bytes, %v", len(b), err)
	}
	// 100 KiB at 100 KB/s is about a second; assert a safe lower bound.
	if took < 500*time.Millisecond {
		t.Errorf("100 KiB at 100 KB/s took %s, want ≥ 500ms", took)
	}
	if in, err := end(); err != nil || in.Params["rate_kbps"] != "100" {
		t.Errorf("end: %+v, %v", in, err)
	}
}

func TestInjectHoldsForTheDuration(t *testing.T) {
	c := newCounter(t, nil)
	n := newNet(t, c)
	var tl Timeline
	in, err := tl.Inject(testCtx(t), rand.New(rand.NewPCG(1, 1)), &Latency{Network: n, Delay: time.Millisecond}, 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if in.Duration() < 150*time.Millisecond {
		t.Errorf("injection lasted %s, want ≥ 150ms", in.Duration())
	}
	if got := tl.Injections(); len(got) != 1 || got[0].Fault != "latency" {
		t.Errorf("timeline = %v", got)
	}
	if got := len(n.proxy.Toxics.GetToxicArray()); got != 0 {
		t.Errorf("%d toxics left after Inject", got)
	}
}
