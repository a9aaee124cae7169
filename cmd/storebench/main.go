// Command storebench puts each bundled server's store side by side: for
// every profile, the same chaos workload with no fault injected
// (idscheck chaos --faults none: the profile's own mix of first requests,
// retries and duplicates, every check still run) against one replica on
// SQLite, one replica on PostgreSQL, and three replicas over one
// PostgreSQL (--store local: a durable cluster idscheck starts, fsync and
// synchronous commit on, so both stores acknowledge only what is on
// disk). It prints, per run, the logical requests per second, the
// deliveries per second, the latency of a delivery (p50, p99) and
// whether the checks found an anomaly (a benchmark of a wrong server is
// no figure).
//
// The harness, the replicas and PostgreSQL share the machine's cores: the
// figures compare stores on one machine, they are not the capacity of a
// deployment.
//
//	go run ./cmd/storebench [-idscheck bin/idscheck] [-duration 10s] [-profiles intent,ids,…] [-workers 40]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

type setup struct {
	name     string
	replicas int
	store    string // "" SQLite; "local" PostgreSQL idscheck starts
}

var setups = []setup{
	{"1 replica, SQLite", 1, ""},
	{"1 replica, PostgreSQL", 1, "local"},
	{"3 replicas, PostgreSQL", 3, "local"},
}

func main() {
	bin := flag.String("idscheck", "bin/idscheck", "the idscheck binary (make build)")
	duration := flag.Duration("duration", 10*time.Second, "load of each run")
	profiles := flag.String("profiles", "intent,ids,atp,http-idempotency,a2a", "profiles, comma-separated")
	workers := flag.Int("workers", 40, "concurrent workers of each run")
	seed := flag.Int("seed", 1, "seed of every run")
	flag.Parse()
	if _, err := os.Stat(*bin); err != nil {
		fmt.Fprintf(os.Stderr, "storebench: %v (build it: make build)\n", err)
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "storebench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "storebench:", err)
		os.Exit(2)
	}
	defer os.RemoveAll(tmp)
	fmt.Printf("storebench: each profile's chaos workload, no fault, %s per run, %d workers, seed %d\n", *duration, *workers, *seed)
	fmt.Printf("%-17s %-23s %10s %12s %8s %8s  %s\n", "profile", "store", "logical/s", "deliveries/s", "p50 ms", "p99 ms", "checks")
	bad := false
	for _, p := range strings.Split(*profiles, ",") {
		for i, s := range setups {
			r := bench(*bin, filepath.Join(tmp, fmt.Sprintf("%s-%d", p, i)), p, s, *duration, *workers, *seed)
			if r.err != nil {
				fmt.Printf("%-17s %-23s %s\n", p, s.name, r.err)
				bad = bad || !r.unsupported
				continue
			}
			verdict := "no anomaly"
			if r.code != 0 {
				verdict, bad = fmt.Sprintf("exit %d: %s", r.code, r.last), true
			}
			fmt.Printf("%-17s %-23s %10.0f %12.0f %8.1f %8.1f  %s\n", p, s.name, r.logical, r.deliveries, r.p50, r.p99, verdict)
		}
	}
	if bad {
		os.Exit(1)
	}
}

type result struct {
	logical, deliveries, p50, p99 float64
	code                          int
	last                          string
	err                           error
	unsupported                   bool
}

func bench(bin, dir, profile string, s setup, d time.Duration, workers, seed int) result {
	args := []string{"chaos", "--profile", profile, "--faults", "none", "--duration", d.String(),
		"--workers", fmt.Sprint(workers), "--seed", fmt.Sprint(seed), "--out", dir}
	if s.store != "" {
		args = append(args, "--replicas", fmt.Sprint(s.replicas), "--store", s.store)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return result{err: err}
	}
	text := strings.TrimSpace(string(out))
	if code == 2 && strings.Contains(text, "own SQLite file only") {
		return result{err: errors.New("-  (its bundled server has no PostgreSQL store)"), unsupported: true}
	}
	var run struct {
		Start, End time.Time
	}
	var chk struct {
		Queue struct {
			Attempted int `json:"attempted"`
		} `json:"queue"`
	}
	if err := readJSON(filepath.Join(dir, "chaos.json"), &run); err != nil {
		return result{err: fmt.Errorf("exit %d, %v: %s", code, err, lastLine(text))}
	}
	if err := readJSON(filepath.Join(dir, "check.json"), &chk); err != nil {
		return result{err: fmt.Errorf("exit %d, %v: %s", code, err, lastLine(text))}
	}
	lat, err := latencies(filepath.Join(dir, "history.jsonl"))
	if err != nil || len(lat) == 0 {
		return result{err: fmt.Errorf("exit %d, history: %v", code, err)}
	}
	secs := run.End.Sub(run.Start).Seconds()
	slices.Sort(lat)
	pct := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] / 1e6 }
	return result{logical: float64(chk.Queue.Attempted) / secs, deliveries: float64(len(lat)) / secs,
		p50: pct(0.50), p99: pct(0.99), code: code, last: lastLine(text)}
}

// latencies are the durations (ns) of the deliveries answered.
func latencies(name string) ([]float64, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []float64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var op struct {
			Call    int64  `json:"call"`
			Ret     int64  `json:"ret"`
			Outcome string `json:"outcome"`
		}
		if json.Unmarshal(sc.Bytes(), &op) != nil || op.Outcome != "ok" || op.Ret <= op.Call {
			continue
		}
		out = append(out, float64(op.Ret-op.Call))
	}
	return out, sc.Err()
}

func readJSON(name string, v any) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
