// Command bench is the load generator of the ATP reference server: it
// starts the server in-process on 127.0.0.1 (a fresh SQLite file, WAL,
// synchronous=FULL, group commit) with the fake rail in-process on loopback
// HTTP, and runs N transactions over W keep-alive workers: each one is
// authorized then executed, and 30 % of the authorizes and of the executes
// are retried under the same Idempotency-Key (half of the retries race the
// original, half follow it). Intents are signed before the clock starts.
// It prints executes/s (every POST /api/atp/execute, retries included),
// p50/p99, and checks that the rail charged each transaction exactly once
// (charges == distinct transactions) and that every row ended settled.
//
//	go run ./sut/atp/bench [-workers 32] [-transactions 5000] [-retry 0.3] [-max 60s] [-cpuprofile FILE]
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/idscheck/idscheck/sut/atp"
	"github.com/idscheck/idscheck/sut/atp/fakerail"
)

func main() {
	workers := flag.Int("workers", 32, "concurrent workers")
	n := flag.Int("transactions", 5000, "distinct transactions (each authorized then executed)")
	retry := flag.Float64("retry", 0.3, "share of authorizes and executes retried under the same key")
	maxDur := flag.Duration("max", 60*time.Second, "stop starting transactions after this long")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run")
	flag.Parse()
	if err := run(context.Background(), *workers, *n, *retry, *maxDur, *cpuprofile, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type answer struct {
	status int
	state  string
}

func run(ctx context.Context, workers, n int, retryShare float64, maxDur time.Duration, cpuprofile string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "idscheck-atp-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rail := fakerail.New()
	rln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	rhs := &http.Server{Handler: rail}
	go rhs.Serve(rln)
	defer rhs.Close()
	srv, err := atp.Open(ctx, atp.Config{DBPath: filepath.Join(dir, "bench.db"), RailURL: "http://" + rln.Addr().String(),
		Logger: slog.New(slog.DiscardHandler)})
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
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: workers * 4, MaxIdleConnsPerHost: workers * 4}, Timeout: 30 * time.Second}
	do := func(method, path, key string, body []byte) (answer, time.Duration, error) {
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		t0 := time.Now()
		res, err := hc.Do(req)
		if err != nil {
			return answer{}, 0, err
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		d := time.Since(t0)
		var doc struct {
			State string `json:"state"`
		}
		json.Unmarshal(b, &doc)
		if err == nil && res.StatusCode >= 300 {
			err = fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
		}
		return answer{res.StatusCode, doc.State}, d, err
	}

	// The agent and every signed intent, before the clock starts.
	agent := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	b64 := base64.RawURLEncoding
	reg, _ := json.Marshal(map[string]any{"public_key": map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64.EncodeToString(agent.Public().(ed25519.PublicKey))}})
	if _, _, err := do("PUT", "/api/atp/agents/agt_bench", "", reg); err != nil {
		return err
	}
	expires := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	type plan struct {
		id, key          string
		intent, execBody []byte
		retryAuth        int // 0 none, 1 after, 2 racing
		retryExec        int
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	retryKind := func() int {
		if rnd.Float64() >= retryShare {
			return 0
		}
		return 1 + rnd.IntN(2)
	}
	plans := make([]plan, n)
	for i := range plans {
		id := fmt.Sprintf("int_%07d", i)
		m := map[string]any{"intent_id": id, "agent_id": "agt_bench", "nonce": fmt.Sprint("n_", i), "expires_at": expires,
			"amount": 100 + i, "currency": "EUR", "payee": "merchant_42"}
		raw, _ := json.Marshal(m)
		canon, err := jcs.Transform(raw)
		if err != nil {
			return err
		}
		m["signature"] = b64.EncodeToString(ed25519.Sign(agent, canon))
		intent, _ := json.Marshal(m)
		eb, _ := json.Marshal(map[string]string{"intent_id": id})
		plans[i] = plan{id: id, key: fmt.Sprintf("bench-key-%07d-%08x", i, rnd.Uint32()), intent: intent, execBody: eb,
			retryAuth: retryKind(), retryExec: retryKind()}
	}

	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	var mu sync.Mutex
	var execLat, authLat []time.Duration
	byStatus := map[int]int{}
	var execs, auths, done atomic.Int64
	var next atomic.Int64
	errs := make(chan error, workers*2)
	start := time.Now()
	deadline := start.Add(maxDur)
	// send sends one step (and its retry): racing retries go in parallel.
	send := func(path, key string, body []byte, retry int, count *atomic.Int64, lat *[]time.Duration) (answer, error) {
		var wg sync.WaitGroup
		var other answer
		var otherErr error
		var otherD time.Duration
		if retry == 2 {
			wg.Add(1)
			go func() { defer wg.Done(); other, otherD, otherErr = do("POST", path, key, body) }()
		}
		a, d, err := do("POST", path, key, body)
		wg.Wait()
		ds := []time.Duration{d}
		as := []answer{a}
		if retry == 2 {
			ds, as = append(ds, otherD), append(as, other)
			if err == nil {
				err = otherErr
			}
		}
		if retry == 1 && err == nil {
			var b answer
			b, d, err = do("POST", path, key, body)
			ds, as = append(ds, d), append(as, b)
			a = b
		}
		count.Add(int64(len(ds)))
		mu.Lock()
		*lat = append(*lat, ds...)
		for _, x := range as {
			byStatus[x.status]++
		}
		mu.Unlock()
		return a, err
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n) && time.Now().Before(deadline); i = next.Add(1) - 1 {
				p := plans[i]
				if _, err := send("/api/atp/authorize", p.key, p.intent, p.retryAuth, &auths, &authLat); err != nil {
					errs <- fmt.Errorf("authorize %s: %w", p.id, err)
					return
				}
				if _, err := send("/api/atp/execute", p.key, p.execBody, p.retryExec, &execs, &execLat); err != nil {
					errs <- fmt.Errorf("execute %s: %w", p.id, err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		return err
	}
	// Every transaction ends settled (a racing duplicate may have seen it
	// executing: poll), and the rail charged each exactly once.
	settleWait := time.Now()
	unsettled := 0
	for i := range int(done.Load()) {
		p := plans[i]
		for {
			req, _ := http.NewRequest("GET", base+"/api/atp/intents/"+p.id, nil)
			req.Header.Set("Idempotency-Key", p.key)
			res, err := hc.Do(req)
			if err != nil {
				return err
			}
			var doc struct {
				State string `json:"state"`
			}
			json.NewDecoder(res.Body).Decode(&doc)
			res.Body.Close()
			if doc.State == "settled" {
				break
			}
			if time.Since(settleWait) > 10*time.Second {
				unsettled++
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	charges, charged := rail.Totals()
	txs := int(done.Load())
	fmt.Fprintf(out, "ATP reference server in-process, %d workers, GOMAXPROCS %d, SQLite WAL synchronous=FULL, fake rail on loopback\n",
		workers, runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "%d transactions in %v: %.0f transactions/s\n", txs, elapsed.Round(time.Millisecond), float64(txs)/elapsed.Seconds())
	fmt.Fprintf(out, "executes  n=%-6d %.0f/s  p50 %-10v p99 %v\n", execs.Load(), float64(execs.Load())/elapsed.Seconds(), pct(execLat, 0.5), pct(execLat, 0.99))
	fmt.Fprintf(out, "authorizes n=%-6d %.0f/s  p50 %-10v p99 %v\n", auths.Load(), float64(auths.Load())/elapsed.Seconds(), pct(authLat, 0.5), pct(authLat, 0.99))
	fmt.Fprintf(out, "answers: %d×200 %d×202; rail: %d charges for %d distinct transactions (%d intents charged)\n",
		byStatus[200], byStatus[202], charges, txs, charged)
	if charges != txs || charged != txs || unsettled != 0 {
		return fmt.Errorf("exactly-once check FAILED: %d charges, %d intents charged, %d transactions, %d not settled", charges, charged, txs, unsettled)
	}
	fmt.Fprintln(out, "exactly-once check: OK (charges == distinct transactions, every row settled)")
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
