package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/pgcluster"
	"github.com/idscheck/idscheck/redact"
	"github.com/idscheck/idscheck/spec"
)

// childConfig is what starting the profile's bundled server as child
// processes needs (idscheck chaos; idscheck run --replicas N): one
// replica, or several over one shared store.
type childConfig struct {
	profile   spec.Profile
	prof      harness.Profile
	dir       string // the folder of each replica's SQLite file (without a store)
	timeScale float64
	mutant    string
	mutants   []harness.Mutant // the profile's: the failpoints a racy mutant carries
	replicas  int              // how many (at least 1)
	store     string           // the store they share ("": a file each)
	// storeFor, when set, is the store URL replica i is given (through
	// its proxy); else store.
	storeFor   func(i int) string
	child      harness.ServeChild
	readings   map[string]string
	healthWait time.Duration
}

// storeOf is the store URL replica i is started with.
func (c childConfig) storeOf(i int) string {
	if c.storeFor != nil {
		return c.storeFor(i)
	}
	return c.store
}

// startBundledChild starts the profile's bundled server as a child process
// (`idscheck serve --profile P`) on a free port over a fresh database in
// c.dir, given what c.child holds (its secrets in its environment, its own
// flags), its crash points reachable over GO_FAILPOINTS_HTTP, and a racy
// mutant's window widened by the failpoints its harness.Mutant carries
// (they act in its branch alone), so it is caught whatever the load.
// sinkURL, when set, is the effect sink it calls.
func startBundledChild(ctx context.Context, c childConfig, sinkURL string, red *redact.Redactor, logger *slog.Logger) (*chaosTarget, error) {
	n := max(1, c.replicas)
	var first *chaosTarget
	for i := range n {
		t, err := startBundledReplica(ctx, c, sinkURL, red, logger, i)
		if err != nil {
			if first != nil {
				first.close()
			}
			return nil, err
		}
		if first == nil {
			first = t
		}
		first.replicas = append(first.replicas, t.process)
		first.urls = append(first.urls, t.url)
	}
	return first, nil
}

// startBundledReplica starts replica i of the bundled server (--store:
// over the shared store, named replica-i; else on its own file).
func startBundledReplica(ctx context.Context, c childConfig, sinkURL string, red *redact.Redactor, logger *slog.Logger, i int) (*chaosTarget, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bundled server: %w", err)
	}
	addr, err := faults.FreeAddr()
	if err != nil {
		return nil, err
	}
	fpAddr, err := faults.FreeAddr()
	if err != nil {
		return nil, err
	}
	name := "target.db"
	if i > 0 {
		name = fmt.Sprintf("target-%d.db", i)
	}
	db, err := filepath.Abs(filepath.Join(c.dir, name))
	if err != nil {
		return nil, err
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(db + suffix)
	}
	cmd := fmt.Sprintf("%s serve --profile %s --addr %s --db %s --time-scale %g", chaosShellQuote(exe), c.profile, addr, chaosShellQuote(db), c.timeScale)
	if sinkURL != "" {
		cmd += " --sink " + chaosShellQuote(sinkURL)
	}
	if c.mutant != "" {
		cmd += " --mutant " + chaosShellQuote(c.mutant)
	}
	if s := c.storeOf(i); s != "" {
		cmd += fmt.Sprintf(" --store %s --replica-id replica-%d", chaosShellQuote(s), i)
	}
	for _, a := range c.child.Args {
		cmd += " " + chaosShellQuote(a)
	}
	// The bundled server follows the readings declared (its own flags).
	if sv := c.prof.Serve; sv != nil && sv.Readings != nil {
		for _, a := range sv.Readings(c.readings) {
			cmd += " " + chaosShellQuote(a)
		}
	}
	vars := append(slices.Clone(c.child.Env), faults.FailpointsHTTPEnv(fpAddr))
	for _, m := range c.mutants {
		if m.Name == c.mutant && len(m.Failpoints) > 0 {
			fp, err := faults.FailpointsEnv(m.Failpoints)
			if err != nil {
				return nil, fmt.Errorf("mutant %s: %w", m.Name, err)
			}
			vars = append(vars, fp)
		}
	}
	u := "http://" + addr
	secrets := append(red.Secrets(), c.child.Secrets...)
	what := "the bundled server"
	if c.replicas > 1 {
		what = fmt.Sprintf("replica %d of the bundled server", i)
	}
	p, err := startReplicaProcess(ctx, what, u, cmd, vars, c.healthWait, secrets, logger)
	if err != nil {
		return nil, err
	}
	t := c.child.Target
	t.BaseURL, t.TimeScale = u, c.timeScale
	return &chaosTarget{url: u, t: t, bundled: true, process: p, failpointAddr: fpAddr}, nil
}

// checkReplicas checks --replicas N and --store of the bundled server
// (run, chaos); target says a target URL was given.
func checkReplicas(replicas int, store string, target bool) error {
	switch {
	case replicas < 1 || replicas > 16:
		return fmt.Errorf("--replicas %d: want 1 to 16", replicas)
	case (replicas > 1 || store != "") && target:
		return errors.New("--replicas and --store start the bundled server: drop --target")
	case replicas > 1 && store == "":
		return errors.New("--replicas needs --store: local (idscheck starts a throwaway PostgreSQL), or a postgres:// URL the replicas share")
	case store != "" && store != localStore && !strings.HasPrefix(store, "postgres://") && !strings.HasPrefix(store, "postgresql://"):
		return fmt.Errorf("--store %q: want local, or a postgres:// URL", redactStore(store))
	}
	return nil
}

// noSharedStore is the answer to --store for a profile whose bundled
// server keeps its state in its SQLite file alone.
func noSharedStore[P ~string](profile P) string {
	return fmt.Sprintf("the bundled server of profile %s keeps its state in its own SQLite file only: drop --store and --replicas", profile)
}

// storeSecrets are the password of a store URL, as given and escaped.
func storeSecrets(store string) []string {
	u, err := url.Parse(store)
	if err != nil || u.User == nil {
		return nil
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" {
		return nil
	}
	return []string{pw, url.QueryEscape(pw), url.PathEscape(pw)}
}

// storeEnv is the variable a replica's start command ("cmd" of the target
// file's "replicas") finds the store's URL in: the store's, or its proxy's
// for that replica.
const storeEnv = "IDSCHECK_STORE_URL"

// startTargetReplicas starts the replicas the target file lists whose
// "cmd" is given (as --target-cmd is: idscheck owns the process), each
// with $IDSCHECK_STORE_URL set to storeFor(i) when that is not "", and
// waits, bounded by wait, for every replica's GET /health. A replica
// without a command is a process idscheck does not own: its slot in the
// returned processes is nil.
func startTargetReplicas(ctx context.Context, reps []replicaEntry, storeFor func(i int) string, wait time.Duration, secrets []string, logger *slog.Logger) (*chaosTarget, error) {
	t := &chaosTarget{url: reps[0].URL}
	for i, r := range reps {
		if r.Cmd == "" {
			if err := chaosWaitHealthy(ctx, r.URL, wait); err != nil {
				t.close()
				return nil, fmt.Errorf("%w: replica %d (%s): %v", errUnreachable, i, r.URL, err)
			}
			t.replicas, t.urls = append(t.replicas, nil), append(t.urls, r.URL)
			continue
		}
		var env []string
		if s := storeFor(i); s != "" {
			env = append(env, storeEnv+"="+s)
		}
		p, err := startReplicaProcess(ctx, fmt.Sprintf("replica %d", i), r.URL, r.Cmd, env, wait, secrets, logger)
		if err != nil {
			t.close()
			return nil, err
		}
		t.replicas, t.urls = append(t.replicas, p), append(t.urls, r.URL)
	}
	t.process = t.replicas[0]
	return t, nil
}

// startReplicaProcess starts one replica idscheck owns (what names it:
// "replica 1") with cmd, waits, bounded by wait, for base's GET /health,
// and makes sure what answered is that process: an address that accepts
// connections before cmd runs is another process's (its answers would be
// taken for the replica's), and a replica whose process is gone once its
// health answered is not up. Each failure is errUnreachable quoting the
// replica's own output (stdout and stderr, its tail, secrets redacted).
func startReplicaProcess(ctx context.Context, what, base, cmd string, env []string, wait time.Duration, secrets []string, logger *slog.Logger) (*faults.Process, error) {
	red := redact.NewRedactor(secrets...)
	shown := redactURL(base)
	if addr, ok := hostPort(base); ok && addressAnswers(ctx, addr) {
		return nil, fmt.Errorf("%w: %s (%s): its address already accepts connections before its command ran: another process holds %s, and its answers would be taken for the replica's; stop that process or give the replica another address",
			errUnreachable, what, shown, addr)
	}
	out := &outputTail{max: replicaOutputTail}
	wctx, cancel := context.WithTimeout(ctx, wait) // bounds the wait for health, not the process
	defer cancel()
	p, err := faults.StartProcess(wctx, cmd, env, strings.TrimRight(base, "/")+"/health", logger, faults.WithSecrets(secrets...), faults.WithOutput(out))
	switch {
	case errors.Is(err, faults.ErrProcessExited):
		return nil, fmt.Errorf("%w: %s (%s) exited before it answered GET /health; %s", errUnreachable, what, shown, out.quote(red))
	case err != nil && ctx.Err() == nil && wctx.Err() != nil:
		return nil, fmt.Errorf("%w: %s (%s) did not answer GET /health within %s (--health-wait raises the wait); %s", errUnreachable, what, shown, wait, out.quote(red))
	case err != nil:
		return nil, fmt.Errorf("%w: %s (%s) did not start: %v; %s", errUnreachable, what, shown, err, out.quote(red))
	}
	if !p.Running() {
		err := p.ExitErr()
		p.Stop()
		return nil, fmt.Errorf("%w: %s (%s): GET /health answered, but the replica's process had exited (%v): another process answers at its address (a cmd must run its replica in the foreground, on an address no other process holds); %s",
			errUnreachable, what, shown, err, out.quote(red))
	}
	return p, nil
}

// replicaOutputTail is how much of a replica's output is kept to quote.
const replicaOutputTail = 4096

// outputTail keeps the last max bytes written to it (a replica's stdout
// and stderr); safe for the two streams writing at once.
type outputTail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (o *outputTail) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b = append(o.b, p...)
	if len(o.b) > o.max {
		o.b = o.b[len(o.b)-o.max:]
	}
	return len(p), nil
}

// quote is the output kept, redacted and indented under "its output:".
func (o *outputTail) quote(red *redact.Redactor) string {
	o.mu.Lock()
	text := strings.TrimSpace(string(o.b))
	o.mu.Unlock()
	if text == "" {
		return "it wrote no output"
	}
	return "its output:\n    " + strings.ReplaceAll(red.String(text), "\n", "\n    ")
}

// hostPort is the host:port a base URL's server listens on.
func hostPort(base string) (string, bool) {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return "", false
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port), port != ""
}

// addressAnswers says whether something accepts TCP connections at addr
// (a refusal or no answer within a second: nothing does).
func addressAnswers(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// storeProxies are the proxies idscheck stands between each replica and
// the store (--store-proxy): one embedded toxiproxy per replica on a
// loopback port, the replica given the store's URL with the proxy's
// address in place of the store's.
type storeProxies struct {
	store string
	nets  []*faults.Network
}

// startStoreProxies starts n proxies in front of store's host:port.
func startStoreProxies(store string, n int, logger *slog.Logger) (*storeProxies, error) {
	u, err := url.Parse(store)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("--store-proxy: the store URL %q names no host: the proxy needs its host:port", redactStore(store))
	}
	upstream := u.Host
	if u.Port() == "" {
		upstream = net.JoinHostPort(u.Hostname(), "5432")
	}
	p := &storeProxies{store: store}
	for range n {
		nw, err := faults.NewNetwork(upstream, logger)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("--store-proxy: %w", err)
		}
		p.nets = append(p.nets, nw)
	}
	return p, nil
}

// urlFor is the store URL replica i is given: through its proxy.
func (p *storeProxies) urlFor(i int) string {
	u, _ := url.Parse(p.store)
	u.Host = p.nets[i].Addr()
	return u.String()
}

func (p *storeProxies) close() {
	if p == nil {
		return
	}
	for _, n := range p.nets {
		n.Close()
	}
}

// storeNotStarted is why store-restart is not available without a store
// idscheck started.
const storeNotStarted = "idscheck did not start this store: it restarts only the one it starts (--store local)"

// localStore is the value of --store (and "store" of the target file)
// that makes idscheck start a throwaway PostgreSQL cluster of its own on
// loopback for the run, stop it at the end and remove it; store-restart
// restarts it.
const localStore = "local"

// ownedStores are the stores idscheck started in this process (their URL
// -> the cluster), for store-restart and the reproduce line.
var ownedStores sync.Map

// startLocalStore starts a durable throwaway cluster (every acknowledged
// commit survives store-restart, a crash of the cluster) with one
// database, and returns its URL and its stop.
func startLocalStore(ctx context.Context, stderr io.Writer, cmd string) (string, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	start := time.Now()
	c, err := pgcluster.StartWith(ctx, pgcluster.Options{Durable: true})
	if errors.Is(err, pgcluster.ErrNotInstalled) {
		return "", nil, fmt.Errorf("--store local starts a PostgreSQL cluster, and PostgreSQL is not installed here: install it (%s), or give --store postgres://… of a running one", pgcluster.Install)
	}
	if err != nil {
		return "", nil, fmt.Errorf("--store local: %v", err)
	}
	u, err := c.CreateDatabase(ctx, "idscheck")
	if err != nil {
		c.Stop()
		return "", nil, fmt.Errorf("--store local: %v", err)
	}
	ownedStores.Store(u, c)
	fmt.Fprintf(stderr, "idscheck %s: started a PostgreSQL cluster for the replicas' store at 127.0.0.1:%d in %s (%.1fs; stopped and removed at the end)\n",
		cmd, c.Port, c.Dir, time.Since(start).Seconds())
	return u, func() { ownedStores.Delete(u); c.Stop() }, nil
}

// storeRestartOf is the restart of store: of the cluster idscheck started
// (or is to start: local); nil for any other.
func storeRestartOf(store string) func(ctx context.Context) error {
	if store == localStore {
		return func(ctx context.Context) error {
			return errors.New("the local store has not started")
		}
	}
	if v, ok := ownedStores.Load(store); ok {
		return v.(*pgcluster.Cluster).Restart
	}
	return nil
}

// storeArg is store as a reproduce line gives it: local for the cluster
// idscheck started, the URL without its password otherwise.
func storeArg(store string) string {
	if _, ok := ownedStores.Load(store); ok || store == localStore {
		return localStore
	}
	return redactStore(store)
}

// storeFaults are the faults between replicas and their store, when a store
// is known: the proxies' (nil before they start, or without
// --store-proxy) and the store's restart.
func storeFaults(store string, proxies *storeProxies) []faults.Fault {
	if store == "" {
		return nil
	}
	var nets []*faults.Network
	if proxies != nil {
		nets = proxies.nets
	}
	r := &faults.StoreRestart{Why: storeNotStarted, Restart: storeRestartOf(store)}
	return []faults.Fault{&faults.StorePartition{Proxies: nets}, &faults.StoreLostReply{Proxies: nets}, r}
}

// addrs are the proxies' loopback addresses, in replica order.
func (p *storeProxies) addrs() []string {
	var out []string
	for _, n := range p.nets {
		out = append(out, n.Addr())
	}
	return out
}
