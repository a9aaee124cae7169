package faults

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestStormReleasesAllTogether(t *testing.T) {
	sizes := []int{1, 50, 1000}
	if testing.Short() {
		sizes = []int{1, 50}
	}
	for _, n := range sizes {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			var lim syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*n+256) {
				t.Skipf("open-file limit %d is too low for %d client and %d server connections", lim.Cur, n, n)
			}
			ctx := testCtx(t)
			var mu sync.Mutex
			var arrivals []time.Time
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				arrivals = append(arrivals, time.Now())
				mu.Unlock()
			}))
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: 0}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
			var failed sync.Map
			in, err := Storm(ctx, n, func(ctx context.Context, i int) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/same", nil)
				resp, err := client.Do(req)
				if err != nil {
					failed.Store(i, err)
					return
				}
				resp.Body.Close()
			})
			if err != nil {
				t.Fatal(err)
			}
			failed.Range(func(k, v any) bool { t.Errorf("request %v: %v", k, v); return true })
			mu.Lock()
			defer mu.Unlock()
			if len(arrivals) != n {
				t.Fatalf("%d requests arrived, want %d", len(arrivals), n)
			}
			if in.Params["n"] != strconv.Itoa(n) || in.Kind != KindStorm || in.End.Before(in.Start) || in.Params["spread_us"] == "" {
				t.Errorf("injection = %+v", in)
			}
			slices.SortFunc(arrivals, func(a, b time.Time) int { return a.Compare(b) })
			// Reported, not asserted: spreads depend on the machine's load.
			t.Logf("n=%d: goroutines ready in %sµs, released within %sµs, arrivals at the server spread over %s",
				n, in.Params["ready_us"], in.Params["spread_us"], arrivals[n-1].Sub(arrivals[0]))
		})
	}
}

func TestStormRejectsAndStops(t *testing.T) {
	done := func(ctx context.Context, i int) {}
	for _, tc := range []struct {
		name string
		n    int
		ctx  func() context.Context
	}{
		{"zero", 0, context.Background},
		{"over the maximum", MaxStorm + 1, context.Background},
		{"cancelled", 10, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := Storm(tc.ctx(), tc.n, done)
			if err == nil || in.Err == "" {
				t.Errorf("Storm(%d) = %+v, %v; want an error, recorded", tc.n, in, err)
			}
		})
	}
}

func TestDuplicateStormDrawsSizeFromSeed(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	f := &DuplicateStorm{Min: 2, Max: 40, Do: func(ctx context.Context, i int) {
		mu.Lock()
		calls++
		mu.Unlock()
	}}
	sizes := func(seed uint64) []string {
		rnd := rand.New(rand.NewPCG(seed, 0))
		var out []string
		for range 4 {
			in, err := f.Inject(testCtx(t), rnd, 0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, in.Params["n"])
		}
		return out
	}
	a, b := sizes(3), sizes(3)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different storm sizes: %v vs %v", a, b)
	}
	total := 0
	for _, s := range append(a, b...) {
		n, _ := strconv.Atoi(s)
		if n < 2 || n > 40 {
			t.Errorf("storm size %d outside 2..40", n)
		}
		total += n
	}
	if calls != total {
		t.Errorf("Do called %d times, want %d", calls, total)
	}
	for _, bad := range []*DuplicateStorm{{Min: 2, Max: 3}, {Min: 1, Max: 3, Do: f.Do}, {Min: 5, Max: MaxStorm + 1, Do: f.Do}} {
		if err := bad.Available(); !errors.Is(err, ErrNotAvailable) {
			t.Errorf("Available(%d..%d, do=%v) = %v, want ErrNotAvailable", bad.Min, bad.Max, bad.Do != nil, err)
		}
	}
}

func TestStormPrepared(t *testing.T) {
	const n = 100
	ctx := testCtx(t)
	var mu sync.Mutex
	var arrivals []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/warm" {
			return
		}
		mu.Lock()
		arrivals = append(arrivals, time.Now())
		mu.Unlock()
	}))
	defer srv.Close()
	var failedFires sync.Map
	in, err := StormPrepared(ctx, n, func(ctx context.Context, i int) (func(context.Context), error) {
		if i%10 == 9 {
			return nil, errors.New("no connection") // 10 of 100 fail to prepare
		}
		// Each request warms its own connection before the barrier.
		tr := &http.Transport{}
		client := &http.Client{Transport: tr, Timeout: 20 * time.Second}
		resp, err := client.Get(srv.URL + "/warm")
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		return func(ctx context.Context) {
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/same", nil)
			resp, err := client.Do(req)
			if err != nil {
				failedFires.Store(i, err)
				return
			}
			resp.Body.Close()
		}, nil
	})
	if err == nil || !strings.Contains(err.Error(), "10 of 100 requests not prepared") || in.Params["prepare_failed"] != "10" {
		t.Errorf("StormPrepared = %+v, %v; want 10 preparations failed, reported", in, err)
	}
	failedFires.Range(func(k, v any) bool { t.Errorf("request %v: %v", k, v); return true })
	mu.Lock()
	defer mu.Unlock()
	if len(arrivals) != 90 {
		t.Fatalf("%d requests arrived, want the 90 prepared", len(arrivals))
	}
	slices.SortFunc(arrivals, func(a, b time.Time) int { return a.Compare(b) })
	t.Logf("n=90 on warm connections: released within %sµs, arrivals spread over %s",
		in.Params["spread_us"], arrivals[len(arrivals)-1].Sub(arrivals[0]))
}
