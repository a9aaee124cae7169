package intent

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idscheck/idscheck/pgtest"
)

// serveProc is `idscheck serve` running as a child process.
type serveProc struct {
	cmd  *exec.Cmd
	base string
}

// startServe starts the binary on 127.0.0.1 with a free port and waits for
// the address it prints.
func startServe(t *testing.T, bin, db string, extra ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--log-level", "warn"}, extra...)...)
	cmd.Env = append(os.Environ(), "BUS_SECRET="+testSecret, "BUS_ADMIN_SECRET="+testAdmin)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				lines <- a
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case base := <-lines:
		return &serveProc{cmd: cmd, base: base}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("serve did not print its address within 20 s")
		return nil
	}
}

func (p *serveProc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

// crashClient talks to the child over loopback.
type crashClient struct {
	hc   *http.Client
	base string
}

func (c *crashClient) do(ctx context.Context, method, path, body string, hdr ...string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set(hdrAPIKey, testSecret)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, b, err
}

// TestCrashSafety kills `idscheck serve` with SIGKILL at seeded random
// moments under concurrent publish/claim/fulfil load, restarts it on the same
// file, and proves: every 201 intent exists, every 200 fulfil is fulfilled,
// replayed idempotency keys return the same id, and no key made two intents.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it five times")
	}
	testCrashSafety(t, "", 1)
}

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// idscheckBinary builds cmd/idscheck once per test process into a
// temporary directory that TestMain removes.
func idscheckBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sut-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		buildBin = filepath.Join(dir, "idscheck")
		if out, err := exec.Command("go", "build", "-o", buildBin, "github.com/idscheck/idscheck/cmd/idscheck").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

var binDir string

func TestMain(m *testing.M) {
	code := pgtest.Main(m) // stops the PostgreSQL cluster TestPostgres started
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func testCrashSafety(t *testing.T, mutant string, seed uint64) (lostPublishes, lostFulfils int) {
	dir := t.TempDir()
	bin := idscheckBinary(t)
	db := filepath.Join(dir, "crash.db")
	rnd := rand.New(rand.NewPCG(seed, 42))
	var mu sync.Mutex
	published := map[string]string{} // idempotency key → id (201 seen)
	fulfilled := map[string]bool{}   // id → 200 seen
	var unknown []string             // keys whose publish outcome is unknown
	next := 0
	var extra []string
	if mutant != "" {
		extra = []string{"--mutant", mutant}
	}
	const rounds, workers = 5, 8
	for round := range rounds {
		p := startServe(t, bin, db, extra...)
		c := &crashClient{hc: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}, base: p.base}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10000 && ctx.Err() == nil; i++ {
					mu.Lock()
					next++
					key := fmt.Sprintf("job-%d", next)
					mu.Unlock()
					st, b, err := c.do(ctx, "POST", pathIntent, fmt.Sprintf(`{"goal":"crash","payload":{"k":%q}}`, key), hdrIdempotencyKey, key)
					if err != nil || st != 201 {
						mu.Lock()
						unknown = append(unknown, key)
						mu.Unlock()
						continue
					}
					var cr createIntentResponse
					json.Unmarshal(b, &cr)
					mu.Lock()
					published[key] = cr.ID
					mu.Unlock()
					st, b, err = c.do(ctx, "POST", pathClaim, "")
					if err != nil || st != 200 {
						continue
					}
					var cl claimResponse
					json.Unmarshal(b, &cl)
					st, _, err = c.do(ctx, "POST", pathFulfill+cl.ID, fmt.Sprintf(`{"claim_token":%q}`, cl.ClaimToken))
					if err == nil && st == 200 {
						mu.Lock()
						fulfilled[cl.ID] = true
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(time.Duration(150+rnd.IntN(600)) * time.Millisecond)
		p.kill()
		cancel()
		wg.Wait()
		mu.Lock()
		t.Logf("round %d: %d published, %d fulfilled so far", round, len(published), len(fulfilled))
		mu.Unlock()
	}
	p := startServe(t, bin, db, extra...)
	defer p.kill()
	c := &crashClient{hc: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}, base: p.base}
	ctx := context.Background()
	// The checks run on the load's workers: the lost-on-crash mutant holds
	// each commit for earlyCommitDelay, and one request at a time would
	// wait out every hold in turn.
	forEach := func(n int, check func(i int)) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
					check(i)
				}
			}()
		}
		wg.Wait()
	}
	pubKeys := slices.Sorted(maps.Keys(published))
	forEach(len(pubKeys), func(i int) {
		key := pubKeys[i]
		id := published[key]
		st, b, err := c.do(ctx, "GET", pathStatus+id, "")
		if err != nil || st != 200 {
			mu.Lock()
			lostPublishes++
			mu.Unlock()
			if mutant == "" {
				t.Errorf("acknowledged intent %s (key %s) lost: %d %s %v", id, key, st, b, err)
			}
			return
		}
		var v intentView
		json.Unmarshal(b, &v)
		if fulfilled[id] && v.Status != stateFulfilled {
			mu.Lock()
			lostFulfils++
			mu.Unlock()
			if mutant == "" {
				t.Errorf("acknowledged fulfil of %s lost: status %s", id, v.Status)
			}
		}
		// Replay the key: the same id.
		st, b, err = c.do(ctx, "POST", pathIntent, fmt.Sprintf(`{"goal":"crash","payload":{"k":%q}}`, key), hdrIdempotencyKey, key)
		var cr createIntentResponse
		json.Unmarshal(b, &cr)
		if err != nil || st != 201 || cr.ID != id {
			mu.Lock()
			lostPublishes++
			mu.Unlock()
			if mutant == "" {
				t.Errorf("replay of key %s: %d %s, want id %s", key, st, b, id)
			}
		}
	})
	// Keys of unknown outcome: a replay creates at most one intent.
	forEach(len(unknown), func(i int) {
		key := unknown[i]
		c.do(ctx, "POST", pathIntent, fmt.Sprintf(`{"goal":"crash","payload":{"k":%q}}`, key), hdrIdempotencyKey, key)
	})
	p.kill()
	sdb, err := sql.Open("sqlite", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	var intents, keys, dupKeys int
	sdb.QueryRow(`SELECT COUNT(*) FROM intents`).Scan(&intents)
	sdb.QueryRow(`SELECT COUNT(*) FROM idempotency`).Scan(&keys)
	sdb.QueryRow(`SELECT COUNT(*) FROM (SELECT json_extract(payload, '$.k') k FROM intents GROUP BY k HAVING COUNT(*) > 1)`).Scan(&dupKeys)
	if mutant == "" {
		if intents != keys || dupKeys != 0 {
			t.Errorf("%d intents, %d idempotency rows, %d keys with several intents", intents, keys, dupKeys)
		}
		if len(published) < 50 || len(fulfilled) < 10 {
			t.Errorf("too little load to prove anything: %d published, %d fulfilled", len(published), len(fulfilled))
		}
	}
	t.Logf("%d acknowledged publishes, %d acknowledged fulfils, %d unknown; lost %d/%d", len(published), len(fulfilled), len(unknown), lostPublishes, lostFulfils)
	return lostPublishes, lostFulfils
}

// TestCrashSafetyCatchesLostOnCrash: the same proof fails against the
// mutant that acknowledges before it commits.
func TestCrashSafetyCatchesLostOnCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it five times")
	}
	lp, lf := testCrashSafety(t, MutantLostOnCrash, 1)
	if lp+lf == 0 {
		t.Fatal("the crash test did not notice acknowledged writes lost by the lost-on-crash mutant")
	}
}

// TestFailpointExit: with after-commit-before-reply set to return("exit")
// the server dies between commit and reply; after a restart the write is
// there (a replay of its idempotency key is a replay, not a new intent).
func TestFailpointExit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := idscheckBinary(t)
	db := filepath.Join(dir, "fp.db")
	t.Setenv("GO_FAILPOINTS", FailpointAfterCommitBeforeReply+`=return("exit")`)
	p := startServe(t, bin, db)
	os.Unsetenv("GO_FAILPOINTS")
	c := &crashClient{hc: &http.Client{Timeout: 10 * time.Second}, base: p.base}
	ctx := context.Background()
	body := `{"goal":"fp","payload":1}`
	if st, b, err := c.do(ctx, "POST", pathIntent, body, hdrIdempotencyKey, "fp1"); err == nil {
		t.Fatalf("the server answered %d %s although the failpoint exits", st, b)
	}
	err := p.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 137 {
		t.Fatalf("exit: %v, want status 137", err)
	}
	p = startServe(t, bin, db)
	defer p.kill()
	c.base = p.base
	req, _ := http.NewRequest("POST", p.base+pathIntent, strings.NewReader(body))
	req.Header.Set(hdrAPIKey, testSecret)
	req.Header.Set(hdrIdempotencyKey, "fp1")
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 201 || res.Header.Get(hdrIdempotentReplay) != "true" {
		t.Fatalf("after restart: %d replayed=%q; the committed write was lost", res.StatusCode, res.Header.Get(hdrIdempotentReplay))
	}
}

// TestGracefulShutdown: SIGTERM under load drops no acknowledged write: the
// process exits 0, and after a restart every 201 intent exists.
func TestGracefulShutdown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := idscheckBinary(t)
	db := filepath.Join(t.TempDir(), "term.db")
	p := startServe(t, bin, db)
	c := &crashClient{hc: &http.Client{Timeout: 10 * time.Second}, base: p.base}
	var mu sync.Mutex
	var ids []string
	loaded := make(chan struct{}) // closed at the 50th acknowledged publish
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10000 && ctx.Err() == nil; i++ {
				st, b, err := c.do(ctx, "POST", pathIntent, `{"goal":"term","payload":1}`)
				if err == nil && st == 201 {
					var cr createIntentResponse
					json.Unmarshal(b, &cr)
					mu.Lock()
					ids = append(ids, cr.ID)
					if len(ids) == 50 {
						close(loaded)
					}
					mu.Unlock()
				}
			}
		}()
	}
	// SIGTERM under load: once 50 publishes are acknowledged, while eight
	// workers keep publishing (no guess of how long that takes).
	select {
	case <-loaded:
	case <-time.After(20 * time.Second):
		p.kill()
		cancel()
		wg.Wait()
		t.Fatal("no 50 acknowledged publishes within 20 s")
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	err := p.cmd.Wait()
	cancel()
	wg.Wait()
	if err != nil {
		t.Fatalf("serve exited with %v after SIGTERM, want status 0", err)
	}
	p = startServe(t, bin, db)
	defer p.kill()
	c.base = p.base
	for _, id := range ids {
		if st, b, err := c.do(context.Background(), "GET", pathStatus+id, ""); err != nil || st != 200 {
			t.Fatalf("acknowledged intent %s lost over a graceful shutdown: %d %s %v", id, st, b, err)
		}
	}
	if len(ids) < 50 {
		t.Fatalf("only %d intents published: no load", len(ids))
	}
}
