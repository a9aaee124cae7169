package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/faults"
	"github.com/idscheck/idscheck/pgtest"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/spec"
)

// docTargetFile is one target file a docs page shows: a ```json block
// whose object has "url" or "replicas".
type docTargetFile struct {
	page    string // docs/NAME.md
	profile spec.Profile
	n       int // its place among the page's JSON blocks (1-based)
	raw     []byte
}

var jsonBlock = regexp.MustCompile("(?s)```json\n(.*?)\n```")

// docTargetFiles are the target files of every docs page, each page's
// profile its name less "-binding".
func docTargetFiles(t *testing.T) []docTargetFile {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs pages: %v", err)
	}
	var out []docTargetFile
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(page), ".md")
		for i, m := range jsonBlock.FindAllSubmatch(b, -1) {
			var top map[string]json.RawMessage
			if json.Unmarshal(m[1], &top) != nil {
				continue // not one object: an answer, a log, with elisions
			}
			if _, ok := top["url"]; !ok {
				if _, ok := top["replicas"]; !ok {
					continue
				}
			}
			out = append(out, docTargetFile{page: "docs/" + name + ".md", profile: spec.Profile(strings.TrimSuffix(name, "-binding")), n: i + 1, raw: m[1]})
		}
	}
	return out
}

// loadTargetFile reads file as the commands do for profile p.
func loadTargetFile(t *testing.T, p spec.Profile, file string, env map[string]string) (*targetFlags, error) {
	t.Helper()
	prof, ok := profiles.Lookup(p)
	if !ok {
		t.Fatalf("no profile %s", p)
	}
	var tf targetFlags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	tf.register(fs, prof)
	if err := fs.Parse([]string{"--target-file", file}); err != nil {
		t.Fatal(err)
	}
	if err := tf.load(fs, envOf(env)); err != nil {
		return &tf, err
	}
	return &tf, tf.validate(p, true)
}

// TestDocsTargetFilesParse: every target file the docs pages show is one
// the target-file parser accepts for the page's profile, the replicas
// example of docs/http-idempotency.md ("url" beside "replicas", a store
// behind proxies) included: its url is its first replica's. (Before:
// refused, "give no url nor target_cmd beside it".)
func TestDocsTargetFilesParse(t *testing.T) {
	files := docTargetFiles(t)
	env := map[string]string{"CALLER_ONE": "Bearer one", "CALLER_TWO": "Bearer two"}
	replicas := 0
	for _, f := range files {
		t.Run(fmt.Sprintf("%s#%d", f.page, f.n), func(t *testing.T) {
			tf, err := loadTargetFile(t, f.profile, writeFile(t, "target.json", string(f.raw)), env)
			if err != nil {
				t.Fatalf("the page's target file is refused: %v\n%s", err, f.raw)
			}
			if len(tf.ReplicaList) == 0 {
				return
			}
			replicas++
			if tf.URL != tf.ReplicaList[0].URL || len(tf.Target().Replicas) != len(tf.ReplicaList)-1 || tf.Store == "" || !tf.StoreProxy {
				t.Errorf("url %q, replicas %v, store %q (proxy %v): want the first replica the url, the store behind proxies", tf.URL, tf.ReplicaList, tf.Store, tf.StoreProxy)
			}
		})
	}
	if replicas == 0 {
		t.Fatal("no docs page shows a target file of replicas")
	}
}

// TestDocsReplicasExampleRuns runs the replicas example of
// docs/http-idempotency.md as the page writes it ("url" beside
// "replicas", each replica started by its cmd with $IDSCHECK_STORE_URL, a
// store behind a proxy per replica), with what is the reader's replaced:
// the addresses (free ports), each cmd (the bundled endpoint over
// $IDSCHECK_STORE_URL), the store (a database of the test cluster) and the
// endpoint's section (the bundled endpoint's, with its callers). run
// passes on it over three replicas.
func TestDocsReplicasExampleRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts replicas over PostgreSQL: skipped in -short")
	}
	pgtest.Shared(t)
	t.Setenv(testBinaryIsCLI, "1")
	var example []byte
	for _, f := range docTargetFiles(t) {
		if f.page == "docs/http-idempotency.md" && strings.Contains(string(f.raw), `"replicas"`) {
			example = f.raw
		}
	}
	if example == nil {
		t.Fatal("docs/http-idempotency.md shows no replicas example")
	}
	var doc map[string]any
	if err := json.Unmarshal(example, &doc); err != nil {
		t.Fatal(err)
	}
	exe, sinkAddr, ep := replicaEndpoint(t, "HI_DOCS_CALLER", "tok_docs_one_5e1a", "tok_docs_two_90c3")
	dir := t.TempDir()
	reps := doc["replicas"].([]any)
	if len(reps) < 2 || doc["url"] != reps[0].(map[string]any)["url"] {
		t.Fatalf("the example is no longer url beside replicas: %s", example)
	}
	for i, r := range reps {
		addr, err := faults.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		rep := r.(map[string]any)
		if !strings.Contains(rep["cmd"].(string), "$IDSCHECK_STORE_URL") {
			t.Fatalf("replica %d's cmd does not use $IDSCHECK_STORE_URL: %v", i, rep["cmd"])
		}
		rep["url"] = "http://" + addr
		rep["cmd"] = fmt.Sprintf(`%s serve --profile http-idempotency --variant ietf --addr %s --db %s --store "$IDSCHECK_STORE_URL" --replica-id docs-%d --sink http://%s --time-scale 20000`,
			shellQuote(exe), addr, shellQuote(filepath.Join(dir, fmt.Sprintf("r%d.db", i))), i, sinkAddr)
	}
	doc["url"] = reps[0].(map[string]any)["url"]
	doc["store"].(map[string]any)["url"] = withPassword(t, pgtest.Database(t), "docs-store-pw-3318")
	doc["http_idempotency"] = ep
	doc["time_scale"] = 20000
	doc["effect_sink"] = map[string]string{"listen": sinkAddr}
	raw, _ := json.Marshal(doc)
	file := filepath.Join(dir, "target.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report")
	code, stdout, stderr := runCLI(t, "--profile", "http-idempotency", "--target-file", file, "--seed", "4", "--out", out)
	if code != exitOK || !strings.Contains(stderr, fmt.Sprintf("%d replicas answer GET /health", len(reps))) ||
		!strings.Contains(stderr, "a proxy between each replica and the store") {
		t.Fatalf("exit %d, want 0 over %d replicas behind store proxies\nstdout:\n%s\nstderr:\n%s", code, len(reps), stdout, stderr)
	}
	if strings.Contains(stdout+stderr, "docs-store-pw-3318") {
		t.Error("the store's password is in the output")
	}
	// The deliveries went round the replicas, and the report says where.
	b, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		u := r.(map[string]any)["url"].(string)
		if !strings.Contains(string(b), `"replica":"`+u+`"`) && !strings.Contains(string(b), `"replica": "`+u+`"`) {
			t.Errorf("no exchange of the report names the replica %s", u)
		}
	}
}
