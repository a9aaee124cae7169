// Command bench is the load generator of the reference server: it starts the
// server in-process on 127.0.0.1 (a fresh SQLite file, WAL, synchronous=FULL,
// group commit) and runs N jobs over W keep-alive workers, each job three
// HTTP requests: publish → claim → fulfill. It prints jobs/s, p50/p99 per
// request type and p99 publish-to-fulfilled.
//
//	go run ./sut/bench [-workers 40] [-jobs 2000] [-cpuprofile FILE]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	sut "github.com/idscheck/idscheck/sut/intent"
)

// The little of the wire (seed 004 §5.1, §7.2, §7.3, §7.5) the load needs,
// written here: the bench is a client of the server, not of the harness.
const (
	hdrAPIKey   = "X-API-KEY"
	pathIntent  = "/intent"
	pathClaim   = "/claim"
	pathFulfill = "/fulfill/" // + id
)

type createIntentResponse struct {
	ID string `json:"id"`
}

type claimResponse struct {
	ID         string `json:"id"`
	ClaimToken string `json:"claim_token"`
}

type fulfillRequest struct {
	ClaimToken string          `json:"claim_token"`
	Result     json.RawMessage `json:"result,omitempty"`
}

func main() {
	workers := flag.Int("workers", 40, "concurrent workers")
	jobs := flag.Int("jobs", 2000, "jobs (publish → claim → fulfill)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run")
	flag.Parse()
	if err := run(context.Background(), *workers, *jobs, *cpuprofile, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type sample struct {
	kind string
	d    time.Duration
}

func run(ctx context.Context, workers, jobs int, cpuprofile string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "idscheck-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	const key = "bench-secret"
	srv, err := sut.Open(ctx, sut.Config{DBPath: filepath.Join(dir, "bench.db"), Secret: key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer func() { hs.Close(); srv.Close() }()
	base := "http://" + ln.Addr().String()
	tr := &http.Transport{MaxIdleConns: workers * 2, MaxIdleConnsPerHost: workers * 2, IdleConnTimeout: time.Minute}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	do := func(method, path string, body []byte) (int, []byte, time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, 0, err
		}
		req.Header.Set(hdrAPIKey, key)
		req.Header.Set("Content-Type", "application/json")
		t0 := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, 0, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, b, time.Since(t0), err
	}
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	var published sync.Map // id → time.Time
	var next atomic.Int64
	samples := make([][]sample, workers)
	e2e := make([][]time.Duration, workers)
	errs := make(chan error, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := []byte(`{"goal":"bench","payload":{"n":0,"text":"hello"}}`)
			for n := next.Add(1); n <= int64(jobs); n = next.Add(1) {
				t0 := time.Now()
				st, b, d, err := do("POST", pathIntent, payload)
				if err != nil || st != 201 {
					errs <- fmt.Errorf("publish: %d %s %v", st, b, err)
					return
				}
				var cr createIntentResponse
				json.Unmarshal(b, &cr)
				published.Store(cr.ID, t0)
				samples[w] = append(samples[w], sample{"publish", d})
				var c claimResponse
				for try := 0; ; try++ {
					st, b, d, err = do("POST", pathClaim, nil)
					if err != nil || (st != 200 && st != 204) || try > 1000 {
						errs <- fmt.Errorf("claim: %d %s %v", st, b, err)
						return
					}
					samples[w] = append(samples[w], sample{"claim", d})
					if st == 200 {
						json.Unmarshal(b, &c)
						break
					}
					time.Sleep(time.Millisecond)
				}
				body, _ := json.Marshal(fulfillRequest{ClaimToken: c.ClaimToken, Result: json.RawMessage(`{"ok":true}`)})
				st, b, d, err = do("POST", pathFulfill+c.ID, body)
				if err != nil || st != 200 {
					errs <- fmt.Errorf("fulfill: %d %s %v", st, b, err)
					return
				}
				samples[w] = append(samples[w], sample{"fulfill", d})
				if v, ok := published.Load(c.ID); ok {
					e2e[w] = append(e2e[w], time.Since(v.(time.Time)))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		return err
	}
	by := map[string][]time.Duration{}
	var all []time.Duration
	for _, ss := range samples {
		for _, s := range ss {
			by[s.kind] = append(by[s.kind], s.d)
		}
	}
	for _, e := range e2e {
		all = append(all, e...)
	}
	fmt.Fprintf(out, "reference server in-process, %d workers, %d jobs (publish → claim → fulfill), SQLite WAL synchronous=FULL\n", workers, jobs)
	fmt.Fprintf(out, "elapsed %v: %.0f jobs/s, %.0f requests/s\n", elapsed.Round(time.Millisecond), float64(jobs)/elapsed.Seconds(),
		float64(len(by["publish"])+len(by["claim"])+len(by["fulfill"]))/elapsed.Seconds())
	for _, k := range []string{"publish", "claim", "fulfill"} {
		p50, p99 := pct(by[k], 0.50), pct(by[k], 0.99)
		fmt.Fprintf(out, "%-8s n=%-6d p50 %-10v p99 %v\n", k, len(by[k]), p50, p99)
	}
	fmt.Fprintf(out, "publish-to-fulfilled   p50 %-10v p99 %v\n", pct(all, 0.5), pct(all, 0.99))
	return nil
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))].Round(10 * time.Microsecond)
}
