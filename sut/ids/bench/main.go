// Command bench is the load generator of the IDS reference server: it
// starts the server in-process on 127.0.0.1 (a fresh SQLite file, WAL,
// synchronous=FULL, group commit) with an in-process effect sink on
// loopback HTTP (honouring Idempotency-Key, as the binding's sink does for
// S1 commands), and sends N commands over W keep-alive workers: 30 %
// duplicates of earlier commands (another command_id and message_id), a mix
// of payment.capture (S1), refund.issue (S2: outbox), note.add,
// order.cancel (confirmed: 428, POST /confirmations, then the command) and
// balance.get (I0). It waits for the outbox and the resumer to finish, then
// prints commands/s, p50/p99, and checks that the sink made exactly one
// effect per distinct key.
//
//	go run ./sut/ids/bench [-workers 32] [-commands 4000] [-dup 0.3] [-cpuprofile FILE]
package main

import (
	"bytes"
	"context"
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
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idscheck/idscheck/sut/ids"
)

func main() {
	workers := flag.Int("workers", 32, "concurrent workers")
	commands := flag.Int("commands", 4000, "commands (POST /commands deliveries, duplicates included)")
	dup := flag.Float64("dup", 0.3, "share of deliveries that duplicate an earlier command")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run")
	flag.Parse()
	if err := run(context.Background(), *workers, *commands, *dup, *cpuprofile, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// sink is the effect sink of the binding, in-process.
type sink struct {
	mu       sync.Mutex
	n        int
	effects  map[string]int    // idempotency_key → effects
	last     map[string]string // idempotency_key → effect id
	byHeader map[string]string // Idempotency-Key → effect id
}

func (k *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if key, ok := strings.CutPrefix(r.URL.Path, "/effects/"); ok && r.Method == "GET" {
		k.mu.Lock()
		n, id := k.effects[key], k.last[key]
		k.mu.Unlock()
		if n == 0 {
			w.WriteHeader(404)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"effect_id":%q,"count":%d}`, id, n)
		return
	}
	var e struct {
		IdempotencyKey string `json:"idempotency_key"`
	}
	if r.Method != "POST" || r.URL.Path != "/effects" || json.NewDecoder(r.Body).Decode(&e) != nil || e.IdempotencyKey == "" {
		w.WriteHeader(400)
		return
	}
	hk := r.Header.Get("Idempotency-Key")
	k.mu.Lock()
	status := 201
	id, seen := k.byHeader[hk]
	if hk != "" && seen {
		status = 200
	} else {
		k.n++
		id = fmt.Sprintf("eff_%d", k.n)
		k.effects[e.IdempotencyKey]++
		k.last[e.IdempotencyKey] = id
		if hk != "" {
			k.byHeader[hk] = id
		}
	}
	k.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"effect_id":%q}`, id)
}

func (k *sink) counts() (total int, keys map[string]int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys = map[string]int{}
	for key, n := range k.effects {
		keys[key] = n
		total += n
	}
	return total, keys
}

// delivery is one planned POST /commands: the envelope of logical command
// cmd, sent as delivery number n.
type delivery struct {
	cmd int
	dup bool
}

type logical struct {
	kind string
	env  map[string]any
}

var kinds = []struct {
	name   string
	weight int
}{{"payment.capture", 35}, {"note.add", 25}, {"refund.issue", 25}, {"order.cancel", 5}, {"balance.get", 10}}

func newLogical(i int, rnd *rand.Rand) logical {
	w := rnd.IntN(100)
	kind := kinds[len(kinds)-1].name
	for _, k := range kinds {
		if w < k.weight {
			kind = k.name
			break
		}
		w -= k.weight
	}
	entity, action, _ := strings.Cut(kind, ".")
	var args map[string]any
	switch kind {
	case "payment.capture":
		args = map[string]any{"amount_minor": 100 + i, "currency": "EUR"}
	case "refund.issue":
		args = map[string]any{"amount_minor": 50 + i, "payment_ref": fmt.Sprint("pay-", i)}
	case "note.add":
		args = map[string]any{"text": fmt.Sprint("note number ", i)}
	case "order.cancel":
		args = map[string]any{"reason": "customer asked"}
	default:
		args = map[string]any{}
	}
	return logical{kind, map[string]any{
		"tenant_id": fmt.Sprint("tenant-", i%8), "actor_id": fmt.Sprint("user-", i), "command_kind": classOf(kind),
		"intent": map[string]any{"entity": entity, "action": action, "target": fmt.Sprint("target-", i)}, "args": args,
	}}
}

func classOf(kind string) string {
	switch kind {
	case "payment.capture", "refund.issue":
		return "I3"
	case "order.cancel":
		return "I1"
	case "balance.get":
		return "I0"
	}
	return "I2"
}

func run(ctx context.Context, workers, n int, dupShare float64, cpuprofile string, out io.Writer) error {
	dir, err := os.MkdirTemp("", "idscheck-ids-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sk := &sink{effects: map[string]int{}, last: map[string]string{}, byHeader: map[string]string{}}
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	shs := &http.Server{Handler: sk}
	go shs.Serve(sln)
	defer shs.Close()
	srv, err := ids.Open(ctx, ids.Config{DBPath: filepath.Join(dir, "bench.db"), SinkURL: "http://" + sln.Addr().String(),
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
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: workers * 2, MaxIdleConnsPerHost: workers * 2}, Timeout: 30 * time.Second}
	post := func(path string, v any) (int, map[string]any, time.Duration, error) {
		b, _ := json.Marshal(v)
		t0 := time.Now()
		res, err := hc.Post(base+path, "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, nil, 0, err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		d := time.Since(t0)
		var m map[string]any
		json.Unmarshal(body, &m)
		return res.StatusCode, m, d, err
	}

	// The plan: deliveries in order; a duplicate repeats an earlier command.
	rnd := rand.New(rand.NewPCG(1, 2))
	var cmds []logical
	plan := make([]delivery, n)
	for i := range plan {
		if len(cmds) > 0 && rnd.Float64() < dupShare {
			plan[i] = delivery{cmd: rnd.IntN(len(cmds)), dup: true}
			continue
		}
		cmds = append(cmds, newLogical(len(cmds), rnd))
		plan[i] = delivery{cmd: len(cmds) - 1}
	}
	keys := make([]atomic.Value, len(cmds)) // the key each command got
	tokens := make([]sync.Mutex, len(cmds)) // one confirmation dance per order.cancel

	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	type sample struct {
		dup bool
		d   time.Duration
	}
	samples := make([][]sample, workers)
	statuses := make([]map[int]int, workers)
	var next atomic.Int64
	errs := make(chan error, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		statuses[w] = map[int]int{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				p := plan[i]
				c := cmds[p.cmd]
				env := map[string]any{}
				for k, v := range c.env {
					env[k] = v
				}
				env["command_id"] = fmt.Sprintf("cmd-%d-%d", p.cmd, i)
				env["message_id"] = fmt.Sprint("msg-", i)
				if c.kind == "order.cancel" {
					tokens[p.cmd].Lock()
					if keys[p.cmd].Load() == nil {
						// 428 → confirm → the command, once per logical command.
						st, m, _, err := post("/commands", env)
						if err != nil || st != 428 {
							tokens[p.cmd].Unlock()
							errs <- fmt.Errorf("order.cancel without token: %d %v %v", st, m, err)
							return
						}
						key := m["idempotency_key"].(string)
						st, m, _, err = post("/confirmations", map[string]any{"tenant_id": env["tenant_id"], "actor_id": env["actor_id"],
							"command_id": env["command_id"], "idempotency_key": key})
						if err != nil || st != 201 {
							tokens[p.cmd].Unlock()
							errs <- fmt.Errorf("confirmation: %d %v %v", st, m, err)
							return
						}
						env["confirmation_token"] = m["token"]
					}
				}
				st, m, d, err := post("/commands", env)
				if c.kind == "order.cancel" {
					if st == 201 {
						keys[p.cmd].Store(m["idempotency_key"])
					}
					tokens[p.cmd].Unlock()
				}
				if err != nil || (st != 200 && st != 201 && st != 202) {
					errs <- fmt.Errorf("%s: %d %v %v", c.kind, st, m, err)
					return
				}
				if k, ok := m["idempotency_key"].(string); ok {
					keys[p.cmd].Store(k)
				}
				statuses[w][st]++
				samples[w] = append(samples[w], sample{p.dup, d})
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		return err
	}
	want := map[string]bool{}
	for i, c := range cmds {
		if c.kind == "balance.get" {
			continue
		}
		if k, ok := keys[i].Load().(string); ok {
			want[k] = true
		}
	}
	// Wait for the outbox (and the resumer) to deliver every effect.
	drainStart := time.Now()
	var total int
	var got map[string]int
	for {
		total, got = sk.counts()
		if total >= len(want) || time.Since(drainStart) > 30*time.Second {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	drained := time.Since(drainStart)

	var all, firsts, dups []time.Duration
	by := map[int]int{}
	for w := range workers {
		for _, s := range samples[w] {
			all = append(all, s.d)
			if s.dup {
				dups = append(dups, s.d)
			} else {
				firsts = append(firsts, s.d)
			}
		}
		for st, c := range statuses[w] {
			by[st] += c
		}
	}
	fmt.Fprintf(out, "IDS reference server in-process, %d workers, %d commands (%d logical, %.0f %% duplicates), SQLite WAL synchronous=FULL, sink on loopback\n",
		workers, n, len(cmds), 100*float64(n-len(cmds))/float64(n))
	fmt.Fprintf(out, "elapsed %v: %.0f commands/s (answers: %d×200 %d×201 %d×202)\n", elapsed.Round(time.Millisecond),
		float64(n)/elapsed.Seconds(), by[200], by[201], by[202])
	fmt.Fprintf(out, "all        n=%-6d p50 %-10v p99 %v\n", len(all), pct(all, 0.5), pct(all, 0.99))
	fmt.Fprintf(out, "first      n=%-6d p50 %-10v p99 %v\n", len(firsts), pct(firsts, 0.5), pct(firsts, 0.99))
	fmt.Fprintf(out, "duplicate  n=%-6d p50 %-10v p99 %v\n", len(dups), pct(dups, 0.5), pct(dups, 0.99))
	bad := 0
	for k := range want {
		if got[k] != 1 {
			bad++
		}
	}
	for k := range got {
		if !want[k] {
			bad++
		}
	}
	fmt.Fprintf(out, "effects at the sink %d, distinct keys %d, outbox drained %v after the last answer\n", total, len(want), drained.Round(time.Millisecond))
	if total != len(want) || bad != 0 {
		return fmt.Errorf("exactly-once check FAILED: %d effects for %d distinct keys, %d keys without exactly one effect", total, len(want), bad)
	}
	fmt.Fprintln(out, "exactly-once check: OK (effects == distinct keys, one effect per key)")
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
