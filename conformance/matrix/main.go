// Command matrix is `make matrix`: it installs, starts and certifies every
// implementation under conformance/ (each folder's impl.json) with idscheck's
// http-idempotency profile under each variant, measures each with the
// plain-HTTP probe and checks the two agree, runs chaos against each, and
// writes docs/conformance/index.html and docs/conformance.md.
//
//	go run ./conformance/matrix [--only ROW-or-FOLDER] [--out DIR] [--chaos-duration 20s]
//
// conformance/README.md describes the folders, impl.json and the
// placeholders a start command may use.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idscheck/idscheck/pgcluster"
)

type config struct {
	root, only, out, docs, idscheck, extra string
	chaosDuration, timeout                 time.Duration
	parallel                               int
	pagesOnly, noChaos                     bool
}

func main() {
	var c config
	fs := flag.NewFlagSet("matrix", flag.ContinueOnError)
	fs.StringVar(&c.root, "root", ".", "the repository's root (holds go.mod and conformance/)")
	fs.StringVar(&c.only, "only", "", "certify one folder (conformance/NAME) or one row id only; the pages keep the other rows' last results")
	fs.StringVar(&c.out, "out", "", "where the runs go (default ROOT/conformance/.work/runs)")
	fs.StringVar(&c.docs, "docs", "", "the docs folder the pages are written to (default ROOT/docs)")
	fs.StringVar(&c.idscheck, "idscheck", "", "an idscheck binary to use instead of building bin/idscheck")
	fs.DurationVar(&c.chaosDuration, "chaos-duration", 20*time.Second, "each row's chaos run (--duration)")
	fs.DurationVar(&c.timeout, "timeout", 40*time.Minute, "bound of the whole matrix")
	fs.IntVar(&c.parallel, "parallel", 1, "rows certified at the same time")
	fs.BoolVar(&c.pagesOnly, "pages-only", false, "write the pages from the runs already there; run nothing")
	fs.BoolVar(&c.noChaos, "no-chaos", false, "skip the chaos runs (the pages say so)")
	fs.StringVar(&c.extra, "extra", "", "a folder of implementation folders kept outside the repository (each with its impl.json), certified beside conformance/'s: for rows whose build may not be committed (built from a fetched repository's source); the pages mark them as not regenerated from a clean clone")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if c.out == "" {
		c.out = filepath.Join(c.root, "conformance", ".work", "runs")
	}
	if c.docs == "" {
		c.docs = filepath.Join(c.root, "docs")
	}
	if c.parallel < 1 {
		c.parallel = 1
	}
	os.Exit(run(c))
}

// driver is one `make matrix`.
type driver struct {
	config
	start    time.Time
	bin      string // idscheck
	fiberpay string
	commit   string
	mu       sync.Mutex              // progress lines; services
	redis    map[string]*redisServer // per row: a flush never meets another row's keys
	pg       *pgcluster.Cluster
	dbs      int
	folders  map[string]*sync.Once
	prepared map[string]error
}

func (d *driver) logf(format string, a ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	el := time.Since(d.start).Round(100 * time.Millisecond)
	fmt.Printf("[%7s] %s\n", el, fmt.Sprintf(format, a...))
}

func run(c config) int {
	d := &driver{config: c, start: time.Now(), folders: map[string]*sync.Once{}, prepared: map[string]error{}, redis: map[string]*redisServer{}}
	confDir := filepath.Join(c.root, "conformance")
	all, err := LoadImpls(confDir, "")
	if err != nil {
		fmt.Fprintf(os.Stderr, "matrix: %v\n", err)
		return 2
	}
	var extra []*Impl
	if c.extra != "" {
		if extra, err = LoadImpls(c.extra, ""); err != nil {
			fmt.Fprintf(os.Stderr, "matrix: --extra: %v\n", err)
			return 2
		}
		if len(extra) == 0 {
			fmt.Fprintf(os.Stderr, "matrix: --extra %s holds no NAME/impl.json\n", c.extra)
			return 2
		}
		for _, im := range extra {
			im.Outside = true
			for _, in := range all {
				if in.Folder == im.Folder {
					fmt.Fprintf(os.Stderr, "matrix: --extra: folder %s is also under %s\n", im.Folder, confDir)
					return 2
				}
			}
		}
		all = append(all, extra...)
	}
	selected := all
	if c.only != "" {
		selected = nil
		for _, dir := range []string{confDir, c.extra} {
			if dir == "" {
				continue
			}
			got, err := LoadImpls(dir, c.only)
			if err != nil {
				continue
			}
			for _, im := range got {
				im.Outside = dir == c.extra
			}
			selected = append(selected, got...)
		}
		if len(selected) == 0 {
			fmt.Fprintf(os.Stderr, "matrix: --only %s: no folder nor row of that name under %s%s\n", c.only, confDir, map[bool]string{true: " or " + c.extra}[c.extra != ""])
			return 2
		}
	}
	// An interrupt ends the running steps (their rows say so), starts no
	// other row, stops redis and PostgreSQL, and still writes the pages.
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sig, c.timeout)
	defer cancel()
	ran := map[string]bool{}
	if !c.pagesOnly {
		if err := d.build(ctx, selected); err != nil {
			fmt.Fprintf(os.Stderr, "matrix: %v\n", err)
			return 2
		}
		defer d.stopServices()
		type job struct {
			im *Impl
			r  Row
		}
		var jobs []job
		for _, im := range selected {
			d.folders[im.Folder] = &sync.Once{}
			for _, r := range im.Rows {
				jobs = append(jobs, job{im, r})
			}
		}
		d.logf("%d row(s) of %d implementation(s), %d at a time", len(jobs), len(selected), c.parallel)
		sem := make(chan struct{}, c.parallel)
		var wg sync.WaitGroup
		for _, j := range jobs {
			sem <- struct{}{}
			if ctx.Err() != nil {
				d.logf("%s: not started: %v", j.r.ID, context.Cause(ctx))
				<-sem
				continue
			}
			ran[j.r.ID] = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				d.certify(ctx, j.im, j.r)
			}()
		}
		wg.Wait()
	}
	m, err := LoadMatrix(all, c.out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "matrix: reading the runs: %v\n", err)
		return 2
	}
	note := fmt.Sprintf("%s of the ietf workload under the faults net,storm: those that apply to a target idscheck does not start", c.chaosDuration)
	if err := WritePages(m, PageOptions{Docs: c.docs, Now: time.Now(), ChaosNote: note}); err != nil {
		fmt.Fprintf(os.Stderr, "matrix: writing the pages: %v\n", err)
		return 2
	}
	d.logf("wrote %s and %s", filepath.Join(c.docs, "conformance", "index.html"), filepath.Join(c.docs, "conformance.md"))
	var problems []string
	for _, rv := range m.Rows {
		if c.pagesOnly || ran[rv.Row.ID] {
			problems = append(problems, rv.Problems()...)
		}
	}
	if err := context.Cause(ctx); err != nil && !c.pagesOnly {
		problems = append(problems, fmt.Sprintf("the matrix did not finish: %v", err))
	}
	for _, line := range headline(m) {
		fmt.Println("headline: " + line)
	}
	if len(problems) > 0 {
		fmt.Printf("matrix: %d problem(s):\n", len(problems))
		for _, p := range problems {
			fmt.Println("  " + p)
		}
		return 1
	}
	fmt.Println("matrix: every row certified, and the probes agree with the verdicts")
	return 0
}

// build makes bin/idscheck (unless --idscheck) and bin/fiberpay when a
// selected row's start uses {{fiberpay}}.
func (d *driver) build(ctx context.Context, impls []*Impl) error {
	// bin/idscheck stays relative to the working folder, so the reports'
	// reproduce lines name no machine's paths.
	binDir := filepath.Join(d.root, "bin")
	goBuild := func(out, pkg string) error {
		t := time.Now()
		abs, err := filepath.Abs(out)
		if err != nil {
			return err
		}
		cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=true", "-o", abs, pkg)
		cmd.Dir = d.root
		if b, err := cmd.CombinedOutput(); err != nil {
			// A worktree without VCS metadata still builds, without the commit.
			cmd = exec.CommandContext(ctx, "go", "build", "-o", abs, pkg)
			cmd.Dir = d.root
			if b2, err2 := cmd.CombinedOutput(); err2 != nil {
				return fmt.Errorf("go build %s: %v\n%s%s", pkg, err2, b, b2)
			}
		}
		d.logf("built %s (%s)", out, time.Since(t).Round(100*time.Millisecond))
		return nil
	}
	if d.idscheck != "" {
		d.bin = d.idscheck
	} else {
		d.bin = filepath.Join(binDir, "idscheck")
		if err := goBuild(d.bin, "./cmd/idscheck"); err != nil {
			return err
		}
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", d.root, "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		d.commit = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "-C", d.root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			d.commit += "+modified"
		}
	}
	for _, im := range impls {
		for _, r := range im.Rows {
			if strings.Contains(r.Start, "{{fiberpay}}") && d.fiberpay == "" {
				fp, err := filepath.Abs(filepath.Join(binDir, "fiberpay"))
				if err != nil {
					return err
				}
				if err := goBuild(fp, "./profiles/httpidem/realmw/cmd/fiberpay"); err != nil {
					return err
				}
				d.fiberpay = fp
			}
		}
	}
	return nil
}

// certify does everything for one row and records it in row.json.
func (d *driver) certify(ctx context.Context, im *Impl, r Row) {
	t0 := time.Now()
	slug := Slug(r.ID)
	dir := filepath.Join(d.out, slug)
	st := RowStatus{ID: r.ID, Status: "certified", Commit: d.commit}
	defer func() {
		d.mu.Lock()
		if rs := d.redis[slug]; rs != nil {
			rs.stop()
			delete(d.redis, slug)
		}
		d.mu.Unlock()
		if err := context.Cause(ctx); err != nil && st.Status == "certified" {
			st.Status, st.Error = "run failed", fmt.Sprintf("interrupted: %v", err)
		}
		st.Finished = time.Now().UTC().Format(time.RFC3339)
		st.Seconds = time.Since(t0).Seconds()
		if err := writeJSON(filepath.Join(dir, "row.json"), st); err != nil {
			d.logf("%s: %v", r.ID, err)
		}
		d.logf("%s: %s in %s", r.ID, st.Status, time.Since(t0).Round(100*time.Millisecond))
	}()
	fail := func(status string, err error) {
		st.Status, st.Error = status, err.Error()
		d.logf("%s: %s: %v", r.ID, status, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		fail("run failed", err)
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("run failed", err)
		return
	}
	work, err := d.prepare(ctx, im)
	if err != nil {
		fail("install failed", err)
		return
	}
	target := filepath.Join(work, im.TargetOf(r))
	targetBytes, err := os.ReadFile(target)
	if err != nil {
		fail("run failed", err)
		return
	}
	for _, v := range Variants {
		step := time.Now()
		srv, err := d.startServer(ctx, im, r, work, filepath.Join(dir, "server-"+v+".log"))
		if err != nil {
			fail("start failed", err)
			return
		}
		out := filepath.Join(dir, v)
		code, err := d.idscheckRun(ctx, filepath.Join(dir, v+".txt"), "run", "--profile", "http-idempotency",
			"--target-file", target, "--target", srv.url, "--variant", v, "--strict", "--out", out)
		srv.stop()
		if err != nil {
			fail("run failed", fmt.Errorf("idscheck run under %s: %v", v, err))
			return
		}
		if code == 2 || code == 3 || !fileExists(filepath.Join(out, "result.json")) {
			fail("run failed", fmt.Errorf("idscheck run under %s exited %d (configuration or target unreachable; see %s)", v, code, filepath.Join(dir, v+".txt")))
			return
		}
		var res runResult
		if err := readJSON(filepath.Join(out, "result.json"), &res); err != nil {
			fail("run failed", err)
			return
		}
		d.logf("%s: %s: exit %d, %s (%s)", r.ID, v, code, gateCell(&RunView{Gate: Gate(res.Summary.Counts, res.Summary.Judged), Counts: res.Summary.Counts, Judged: res.Summary.Judged}), time.Since(step).Round(100*time.Millisecond))
	}
	step := time.Now()
	srv, err := d.startServer(ctx, im, r, work, filepath.Join(dir, "server-probe.log"))
	if err != nil {
		fail("start failed", err)
		return
	}
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Minute)
	table, perr := probeMeasure(pctx, srv.url, targetBytes)
	pcancel()
	srv.stop()
	if perr != nil {
		os.WriteFile(filepath.Join(dir, "probe-error.txt"), []byte(perr.Error()+"\n"), 0o644)
		d.logf("%s: probe: %v (%s)", r.ID, perr, time.Since(step).Round(100*time.Millisecond))
	} else {
		if err := writeJSON(filepath.Join(dir, "probe.json"), table); err != nil {
			fail("run failed", err)
			return
		}
		d.logf("%s: probe: %d behaviours (%s)", r.ID, len(table.Behaviours), time.Since(step).Round(100*time.Millisecond))
	}
	if d.noChaos {
		return
	}
	step = time.Now()
	srv, err = d.startServer(ctx, im, r, work, filepath.Join(dir, "server-chaos.log"))
	if err != nil {
		fail("start failed", err)
		return
	}
	code, err := d.idscheckRun(ctx, filepath.Join(dir, "chaos.txt"), "chaos", "--profile", "http-idempotency",
		"--target-file", target, "--target", srv.url, "--faults", "net,storm", "--duration", d.chaosDuration.String(),
		"--out", filepath.Join(dir, "chaos"))
	srv.stop()
	if err != nil {
		fail("run failed", fmt.Errorf("idscheck chaos: %v", err))
		return
	}
	c, _ := loadChaos(filepath.Join(dir, "chaos"))
	if c == nil {
		c = &ChaosView{ExitCode: code}
	}
	d.logf("%s: chaos: exit %d, %s (%s)", r.ID, code, c.Text(), time.Since(step).Round(100*time.Millisecond))
}

// idscheckRun runs the idscheck binary with args, its output to logPath,
// bounded; it returns idscheck's exit code.
func (d *driver) idscheckRun(ctx context.Context, logPath string, args ...string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	f, err := os.Create(logPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	bin := d.bin
	if !strings.ContainsRune(bin, filepath.Separator) {
		bin = "." + string(filepath.Separator) + bin
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// prepare copies im's folder to conformance/.work/<folder>/ and runs its
// install there, once per driver run; an install whose folder is unchanged
// since the last one (the stamp) is skipped.
func (d *driver) prepare(ctx context.Context, im *Impl) (string, error) {
	work := filepath.Join(d.root, "conformance", ".work", im.Folder)
	d.mu.Lock()
	once := d.folders[im.Folder]
	d.mu.Unlock()
	once.Do(func() {
		src := im.Dir
		sum, err := copyTree(src, work)
		if err != nil {
			d.prepared[im.Folder] = err
			return
		}
		stamp := filepath.Join(work, ".matrix-install-stamp")
		want := sum + " " + im.Install + "\n"
		if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
			d.logf("%s: install skipped (the folder is unchanged since the last install)", im.Folder)
			return
		}
		if strings.TrimSpace(im.Install) != "" {
			t := time.Now()
			ictx, cancel := context.WithTimeout(ctx, 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ictx, "sh", "-c", im.Install)
			cmd.Dir = work
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			os.WriteFile(filepath.Join(work, ".matrix-install.log"), out, 0o644)
			if err != nil {
				d.prepared[im.Folder] = fmt.Errorf("%q in %s: %v: %s", im.Install, work, err, lastLines(out, 5))
				return
			}
			d.logf("%s: installed (%s)", im.Folder, time.Since(t).Round(100*time.Millisecond))
		}
		d.prepared[im.Folder] = os.WriteFile(stamp, []byte(want), 0o644)
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	return work, d.prepared[im.Folder]
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// copyTree copies the files of src into dst (leaving what dst has beside
// them, such as node_modules) and returns a digest of src's files.
func copyTree(src, dst string) (string, error) {
	h := sha256.New()
	var files []string
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && p != src && (e.Name() == "node_modules" || strings.HasPrefix(e.Name(), ".")) {
			return filepath.SkipDir
		}
		if e.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	for _, p := range files {
		rel, _ := filepath.Rel(src, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// server is one started row server.
type server struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
	drop func()
}

// stop sends SIGTERM to the server's process group, then SIGKILL after 5 s.
func (s *server) stop() {
	if s.cmd.Process != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
			}
		}
	}
	s.log.Close()
	if s.drop != nil {
		s.drop()
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts row r's server fresh (its store emptied) and waits,
// bounded, for GET /health to answer 200.
func (d *driver) startServer(ctx context.Context, im *Impl, r Row, work, logPath string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	for _, k := range sortedKeys(r.Env) {
		env = append(env, k+"="+r.Env[k])
	}
	var drop func()
	for _, n := range r.Needs {
		v, cleanup, err := d.provide(ctx, n, Slug(r.ID))
		if err != nil {
			return nil, fmt.Errorf("%s for %s: %v", n, r.ID, err)
		}
		env = append(env, knownNeeds[n]+"="+v)
		if cleanup != nil {
			prev := drop
			drop = func() {
				cleanup()
				if prev != nil {
					prev()
				}
			}
		}
	}
	start := strings.ReplaceAll(r.Start, "{{fiberpay}}", d.fiberpay)
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("sh", "-c", "exec "+start)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, env, lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%q: %v", start, err)
	}
	s := &server{url: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{}), log: lf, drop: drop}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-s.done:
			s.stop()
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("%q exited before GET /health answered (%s): %s", start, cmd.ProcessState, lastLines(b, 5))
		default:
		}
		resp, err := client.Get(s.url + "/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.stop()
			return nil, fmt.Errorf("%q: GET %s/health did not answer 200 within 60 s (see %s)", start, s.url, logPath)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// provide readies what a row needs, emptied, and returns the variable's
// value (and what to do after the server stopped).
func (d *driver) provide(ctx context.Context, need, slug string) (string, func(), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch need {
	case "redis":
		rs := d.redis[slug]
		if rs == nil {
			var err error
			if rs, err = startRedis(ctx, filepath.Join(d.out, slug, "redis")); err != nil {
				return "", nil, err
			}
			d.redis[slug] = rs
		}
		if err := rs.flushAll(); err != nil {
			return "", nil, err
		}
		return rs.url, nil, nil
	case "postgres":
		if d.pg == nil {
			c, err := pgcluster.Start(ctx)
			if err != nil {
				return "", nil, err
			}
			d.pg = c
		}
		d.dbs++
		name := fmt.Sprintf("m%d_%s", d.dbs, strings.NewReplacer("-", "_", ".", "_").Replace(slug))
		u, err := d.pg.CreateDatabase(ctx, name)
		return u, nil, err
	case "sqlite":
		dir, err := os.MkdirTemp("", "matrix-sqlite-")
		if err != nil {
			return "", nil, err
		}
		return filepath.Join(dir, "store.sqlite"), func() { os.RemoveAll(dir) }, nil
	}
	return "", nil, fmt.Errorf("unknown need %q", need)
}

func (d *driver) stopServices() {
	for _, rs := range d.redis {
		rs.stop()
	}
	if d.pg != nil {
		d.pg.Stop()
	}
}
