package intent

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idscheck/idscheck/checker"
	"github.com/idscheck/idscheck/faults"
	sut "github.com/idscheck/idscheck/sut/intent"
	"github.com/idscheck/idscheck/verdict"
	"github.com/pingcap/failpoint"
)

const timeScale = 60 // a 1 s lease

// bundled starts the reference server in-process (with mutant, if any) on a
// fresh SQLite file and returns its URL and API key.
func bundled(t *testing.T, mutant string) (string, string) {
	t.Helper()
	const key = "chaos-test-key"
	srv, err := sut.Open(context.Background(), sut.Config{
		DBPath: filepath.Join(t.TempDir(), "bus.db"), Secret: key, AdminSecret: "admin",
		TimeScale: timeScale, Mutant: mutant, Seed: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs.URL, key
}

func run(t *testing.T, cfg ChaosConfig) (*ChaosResult, checker.Report) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := RunChaos(ctx, cfg)
	if err != nil {
		t.Fatalf("RunChaos: %v", err)
	}
	rep := Check(res.History, res.Ledger, Options{Timeout: 30 * time.Second, MaxEffects: -1, ExpiredIsLost: true, MustFinish: true, Undrained: !res.Drained})
	return res, rep
}

func TestCleanServerUnderNetworkFaultsAndStormsHasNoAnomaly(t *testing.T) {
	url, key := bundled(t, "")
	faults.SilenceToxiproxy()
	network, err := faults.NewNetwork(strings.TrimPrefix(url, "http://"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer network.Close()
	list := faults.All(faults.Config{Network: network, StormDo: func(context.Context, int) {}, StormMax: 50})
	usable, _ := faults.Usable(faults.Select(list, []string{"net", "storm"}))
	if len(usable) < 8 {
		t.Fatalf("want every network fault and the storm usable, got %d", len(usable))
	}
	res, rep := run(t, ChaosConfig{
		BaseURL: network.URL(), APIKey: key, Seed: 42, Duration: 4 * time.Second, Workers: 12,
		Lease: time.Minute / timeScale, Faults: usable, StormMax: 50,
		ScheduleOptions: faults.ScheduleOptions{MinHold: 100 * time.Millisecond, MaxHold: 400 * time.Millisecond, MinGap: 50 * time.Millisecond, MaxGap: 200 * time.Millisecond},
	})
	// Every usable fault was injected, each at least once (the schedule
	// starts with every one of them).
	var requested []string
	for _, f := range usable {
		requested = append(requested, f.Name())
	}
	for _, c := range faults.Cover(requested, nil, res.Schedule, res.Timeline) {
		if !c.OK() {
			t.Errorf("%s not injected in a 4 s run: %s", c.Fault, c)
		}
	}
	if rep.Queue.Acknowledged == 0 || rep.Queue.Fulfilled == 0 {
		t.Fatalf("the workload did nothing: %+v", rep.Queue)
	}
	if v := rep.Verdict(); v != verdict.Pass {
		for _, a := range rep.Anomalies {
			t.Logf("%s %s: %s", a.Kind, a.Key, a.Explanation)
		}
		t.Fatalf("clean server: verdict %s, counts %v, models %+v", v, rep.Counts, rep.Models)
	}
}

// TestMutantsAreCaught: each realistic bug of the issue is caught within
// seconds, by the anomaly that names it.
func TestMutantsAreCaught(t *testing.T) {
	cases := []struct {
		mutant string
		want   []checker.AnomalyKind // any of these
		storms bool                  // duplicate storms in the schedule
	}{
		{sut.MutantStaleTokenAccepted, []checker.AnomalyKind{StaleTokenAccepted}, false},
		{sut.MutantClaimNonAtomic, []checker.AnomalyKind{DoubleLease}, false},
		{sut.MutantIdemKeyIgnored, []checker.AnomalyKind{checker.IdempotencyViolation, checker.Duplicated}, false},
		{sut.MutantLeaseNeverExpires, []checker.AnomalyKind{checker.Lost, StaleTokenAccepted}, false},
		{sut.MutantIdemCheckRacy, []checker.AnomalyKind{checker.IdempotencyViolation, checker.Duplicated}, true},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for _, tc := range cases {
		t.Run(tc.mutant, func(t *testing.T) {
			url, key := bundled(t, tc.mutant)
			cfg := ChaosConfig{
				BaseURL: url, APIKey: key, Seed: 7, Duration: 3 * time.Second, Workers: 12,
				Lease: time.Minute / timeScale,
			}
			if tc.mutant == sut.MutantIdemCheckRacy {
				// Its race shows only when two duplicates interleave between
				// the lookup and the write; the failpoint holds the first
				// until the second has looked up too: every storm gets
				// through, at every run, whatever the machine's load.
				enableFailpoint(t, sut.FailpointIdemRacyWindow, `return("barrier")`)
			}
			if tc.mutant == sut.MutantClaimNonAtomic {
				// Likewise for two claims that read the same open intent.
				enableFailpoint(t, sut.FailpointClaimRacyWindow, `return("barrier")`)
			}
			if tc.storms {
				// The workload replaces the storm with its own publish storms.
				cfg.Faults = []faults.Fault{&faults.DuplicateStorm{Min: 2, Max: 50, Do: func(context.Context, int) {}}}
				cfg.StormMax = 50
				cfg.ScheduleOptions = faults.ScheduleOptions{MinGap: 50 * time.Millisecond, MaxGap: 150 * time.Millisecond}
			}
			_, rep := run(t, cfg)
			for _, k := range tc.want {
				if rep.Counts[k] > 0 {
					t.Logf("caught: %v", rep.Counts)
					return
				}
			}
			t.Fatalf("mutant %s survived: want one of %v, got counts %v", tc.mutant, tc.want, rep.Counts)
		})
	}
}

func TestSameSeedSameSchedule(t *testing.T) {
	// The fault schedule and the workload's choices come from the seed alone.
	f := []faults.Fault{&faults.Partition{}, &faults.Latency{}}
	a := faults.NewSchedule(rand.New(rand.NewPCG(1, 2)), f, 10*time.Second, faults.ScheduleOptions{})
	b := faults.NewSchedule(rand.New(rand.NewPCG(1, 2)), f, 10*time.Second, faults.ScheduleOptions{})
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("schedules differ in length: %d vs %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d differs: %v vs %v", i, a[i], b[i])
		}
	}
}

// enableFailpoint arms a failpoint of the in-process server for the test.
func enableFailpoint(t *testing.T, path, term string) {
	t.Helper()
	if err := failpoint.Enable(path, term); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { failpoint.Disable(path) })
}

// TestIdemRacyWindowLetsEveryDuplicateThrough: with the failpoint, two
// concurrent publishes of one key to the idem-check-racy mutant always create
// two intents (the mutant's bug, shown deterministically), and the clean
// server, which has no such window, still creates one.
func TestIdemRacyWindowLetsEveryDuplicateThrough(t *testing.T) {
	enableFailpoint(t, sut.FailpointIdemRacyWindow, `return("barrier")`)
	for _, tc := range []struct {
		mutant string
		want   int // distinct intent ids answered
	}{{sut.MutantIdemCheckRacy, 2}, {"", 1}} {
		url, key := bundled(t, tc.mutant)
		for round := range 5 {
			ids := make([]string, 2)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range ids {
				wg.Go(func() {
					<-start
					body := fmt.Sprintf(`{"goal":"racy","payload":{"round":%d}}`, round)
					req, _ := http.NewRequest(http.MethodPost, url+"/intent", strings.NewReader(body))
					req.Header.Set("X-API-KEY", key)
					req.Header.Set("Idempotency-Key", fmt.Sprintf("racy-%s-%d", tc.mutant, round))
					req.Header.Set("Content-Type", "application/json")
					resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					defer resp.Body.Close()
					var r struct{ ID string }
					json.NewDecoder(resp.Body).Decode(&r)
					ids[i] = r.ID
				})
			}
			close(start)
			wg.Wait()
			distinct := map[string]bool{}
			for _, id := range ids {
				if id == "" {
					t.Fatalf("mutant %q round %d: a publish got no id: %v", tc.mutant, round, ids)
				}
				distinct[id] = true
			}
			if len(distinct) != tc.want {
				t.Fatalf("mutant %q round %d: %d intents for one key %v, want %d", tc.mutant, round, len(distinct), ids, tc.want)
			}
		}
	}
}

// TestLoadIsBoundedInCount: the workload stops at MaxOps operations, before
// its time is up, and the run says it did not drain (what is still open is
// pending, not lost).
func TestLoadIsBoundedInCount(t *testing.T) {
	url, key := bundled(t, "")
	const maxOps = 300
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := RunChaos(ctx, ChaosConfig{BaseURL: url, APIKey: key, Seed: 3, Duration: 2 * time.Second, Workers: 8,
		Lease: time.Minute / timeScale, MaxOps: maxOps})
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the run took %s", took)
	}
	// The loops stop at the bound; operations in flight then, and the final
	// status reads, are the only ones past it (recorded up to MaxOps, the
	// rest dropped and reported).
	if n := len(res.History.Ops); n > maxOps {
		t.Errorf("%d operations recorded, bound %d", n, maxOps)
	}
	if res.Drained {
		t.Error("a run cut by its bound says it drained")
	}
	if err != nil && !strings.Contains(err.Error(), "not recorded past the bound") {
		t.Errorf("RunChaos: %v", err)
	}
	t.Logf("%d operations recorded; %v", len(res.History.Ops), err)
}

// TestSameSeedSameWorkload goes through RunChaos twice with one seed and
// run ID, once with the seed and another run ID, and once with another
// seed, against fresh servers: each publisher's first publishes (key and
// body) and the fault schedule are the seed's and the run ID's alone; the
// seed alone fixes the schedule and which publishes come (their number and
// order), the run ID makes the keys the run's own. Which worker claims
// what depends on timing; what the harness chooses does not.
func TestSameSeedSameWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("four chaos runs")
	}
	const firstN = 5
	stream := func(seed uint64, runID string) (map[int][]string, []faults.Planned) {
		url, key := bundled(t, "")
		res, _ := run(t, ChaosConfig{BaseURL: url, APIKey: key, Seed: seed, RunID: runID, Duration: 1500 * time.Millisecond, Workers: 4,
			Lease: time.Second, Faults: []faults.Fault{&faults.Latency{}}, Namespace: "same-seed"})
		per := map[int][]string{}
		for _, op := range res.History.Ops {
			if op.Kind == checker.OpPublish && len(per[op.ClientID]) < firstN {
				per[op.ClientID] = append(per[op.ClientID], op.Key+" "+op.Input.Body)
			}
		}
		return per, res.Schedule
	}
	a, sa := stream(21, "r1")
	b, sb := stream(21, "r1")
	d, sd := stream(21, "r2")
	c, sc := stream(22, "r1")
	if len(a) == 0 || !reflect.DeepEqual(a, b) || !reflect.DeepEqual(sa, sb) {
		t.Errorf("same seed and run ID, different workload:\n%v\n%v\nschedules %v\n%v", a, b, sa, sb)
	}
	if !reflect.DeepEqual(sa, sd) {
		t.Errorf("same seed, another run ID: the schedule changed:\n%v\n%v", sa, sd)
	}
	for client, pubs := range d {
		for i, p := range pubs {
			if i < len(a[client]) && p == a[client][i] {
				t.Errorf("run IDs r1 and r2 of one seed published the same key: %s", p)
			}
		}
	}
	if reflect.DeepEqual(a, c) {
		t.Errorf("seeds 21 and 22 drew the same publishes: %v", a)
	}
	if reflect.DeepEqual(sa, sc) && len(sa) > 1 {
		t.Errorf("seeds 21 and 22 drew the same schedule: %v", sa)
	}
}

// TestHistoryCarriesTheKeyIdentityNotTheKey: every operation names the API
// key it was sent with by a digest, never the key.
func TestHistoryCarriesTheKeyIdentityNotTheKey(t *testing.T) {
	url, key := bundled(t, "")
	res, _ := run(t, ChaosConfig{BaseURL: url, APIKey: key, Seed: 5, Duration: time.Second, Workers: 2, Lease: time.Second, Namespace: "key-id"})
	if len(res.History.Ops) == 0 {
		t.Fatal("no operation recorded")
	}
	id := res.History.Ops[0].KeyID
	for _, op := range res.History.Ops {
		if op.KeyID == "" || op.KeyID != id || strings.Contains(op.KeyID, key) {
			t.Fatalf("operation %+v: key id %q, want one digest for the run's key", op, op.KeyID)
		}
	}
}
