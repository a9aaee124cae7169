package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/harness"
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
	wctx, cancel := context.WithTimeout(ctx, c.healthWait) // bounds the wait for health, not the process
	defer cancel()
	p, err := faults.StartProcess(wctx, cmd, vars, u+"/health", logger, faults.WithSecrets(secrets...))
	if err != nil {
		return nil, fmt.Errorf("bundled server did not start: %w", err)
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
		return errors.New("--replicas needs --store postgres://…: the store the replicas share")
	case store != "" && !strings.HasPrefix(store, "postgres://") && !strings.HasPrefix(store, "postgresql://"):
		return fmt.Errorf("--store %q: want a postgres:// URL", redactStore(store))
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
		health := strings.TrimRight(r.URL, "/") + "/health"
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
		wctx, cancel := context.WithTimeout(ctx, wait) // bounds the wait for health, not the process
		p, err := faults.StartProcess(wctx, r.Cmd, env, health, logger, faults.WithSecrets(secrets...))
		cancel()
		if err != nil {
			t.close()
			return nil, fmt.Errorf("%w: replica %d: its cmd did not bring up %s within %s: %v", errUnreachable, i, r.URL, wait, err)
		}
		t.replicas, t.urls = append(t.replicas, p), append(t.urls, r.URL)
	}
	t.process = t.replicas[0]
	return t, nil
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

// storeRestarter, when set, returns the restart of a store idscheck
// started (store-restart acts on it), nil for any other. idscheck starts
// no store of its own yet: it is nil but in the tests, which register the
// throwaway cluster (pgtest) they start.
var storeRestarter func(store string) func(ctx context.Context) error

// storeNotStarted is why store-restart is not available without a store
// idscheck started.
const storeNotStarted = "idscheck did not start this store (it starts no PostgreSQL cluster of its own): it restarts only a store it started"

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
	r := &faults.StoreRestart{Why: storeNotStarted}
	if storeRestarter != nil {
		r.Restart = storeRestarter(store)
	}
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
