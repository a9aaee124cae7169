package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodImpl = `{
  "name": "express-idempotency",
  "ecosystem": "node",
  "package": "express-idempotency",
  "version": "1.0.6",
  "source": "https://www.npmjs.com/package/express-idempotency",
  "framework": "express 5.1.0",
  "install": "npm ci --no-audit --no-fund",
  "rows": [
    {"id": "express-idempotency/memory", "store": "memory", "start": "node server.js", "env": {"STORE": "memory"}},
    {"id": "express-idempotency/redis", "store": "redis", "start": "node server.js", "env": {"STORE": "redis"}, "needs": ["redis"]}
  ],
  "target": "target.json",
  "documented": "replays the stored response"
}`

func TestParseImplAcceptsTheContractsExample(t *testing.T) {
	im, err := ParseImpl([]byte(goodImpl), "express-idempotency")
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Rows) != 2 || im.Rows[1].Needs[0] != "redis" || im.TargetOf(im.Rows[0]) != "target.json" || im.Folder != "express-idempotency" {
		t.Fatalf("parsed %+v", im)
	}
}

// Each invalid impl.json is refused with an error naming the folder, the
// field (and row) and what it should be.
func TestParseImplRefusesWithClearErrors(t *testing.T) {
	cases := []struct{ name, from, to, want string }{
		{"unknown field", `"documented"`, `"documneted"`, `unknown field "documneted"`},
		{"no name", `"name": "express-idempotency"`, `"name": ""`, `"name" is required`},
		{"ecosystem", `"ecosystem": "node"`, `"ecosystem": "python"`, `"ecosystem" is "python": want "node" or "go"`},
		{"range", `"version": "1.0.6"`, `"version": "^1.0.6"`, `"version" is "^1.0.6": pin one exact version`},
		{"row id", `"id": "express-idempotency/memory"`, `"id": "Express Memory"`, `row "Express Memory": "id" must be lower-case`},
		{"duplicate id", `"id": "express-idempotency/redis"`, `"id": "express-idempotency/memory"`, `the id is used twice`},
		{"no start", `"start": "node server.js", "env": {"STORE": "memory"}`, `"start": "", "env": {"STORE": "memory"}`, `row "express-idempotency/memory": "start" is required`},
		{"placeholder", `"start": "node server.js", "env": {"STORE": "memory"}`, `"start": "{{nodepay}} server.js", "env": {"STORE": "memory"}`, `uses {{nodepay}}, which the driver does not know (known: {{fiberpay}})`},
		{"need", `"needs": ["redis"]`, `"needs": ["mongo"]`, `"needs" names "mongo": want "redis", "postgres" or "sqlite"`},
		{"env PORT", `"env": {"STORE": "memory"}`, `"env": {"PORT": "8080"}`, `"env" sets PORT, which the driver chooses`},
		{"env provided", `"env": {"STORE": "redis"}`, `"env": {"REDIS_URL": "redis://x"}`, `"env" sets REDIS_URL, which the driver provides for "redis"`},
		{"no target", `"target": "target.json",`, ``, `no target file`},
		{"row version", `"needs": ["redis"]`, `"needs": ["redis"], "version": "^2.0.0"`, `row "express-idempotency/redis": "version" is "^2.0.0": pin one exact version`},
		{"target outside", `"target": "target.json"`, `"target": "../x.json"`, `must be a path inside the folder`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := strings.Replace(goodImpl, c.from, c.to, 1)
			if src == goodImpl {
				t.Fatalf("the case changes nothing: %q", c.from)
			}
			_, err := ParseImpl([]byte(src), "express-idempotency")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "express-idempotency/impl.json: ") {
				t.Fatalf("error %q, want it to start with the file and hold %q", err, c.want)
			}
		})
	}
	empty := `{"name": "x", "ecosystem": "go", "package": "p", "version": "v1.0.0", "source": "s", "install": "", "rows": [], "target": "t.json"}`
	if _, err := ParseImpl([]byte(empty), "x"); err == nil || !strings.Contains(err.Error(), `"rows" is empty`) {
		t.Fatalf("no rows: %v", err)
	}
}

// The repository's own folders parse, each row's target file is there, and
// --only picks a folder or a row.
// A row's own package, version, source and framework replace the
// implementation's (one folder, two integrations of a library).
func TestRowOverridesThePackage(t *testing.T) {
	src := strings.Replace(goodImpl, `"needs": ["redis"]`, `"needs": ["redis"], "package": "@x/nestjs", "version": "1.0.4", "framework": "nestjs 10"`, 1)
	im, err := ParseImpl([]byte(src), "express-idempotency")
	if err != nil {
		t.Fatal(err)
	}
	mem, red := im.Of(im.Rows[0]), im.Of(im.Rows[1])
	if mem.Package != "express-idempotency" || mem.Version != "1.0.6" || mem.Framework != "express 5.1.0" {
		t.Errorf("the memory row: %+v", mem)
	}
	if red.Package != "@x/nestjs" || red.Version != "1.0.4" || red.Framework != "nestjs 10" || red.Source != im.Source {
		t.Errorf("the redis row: %+v", red)
	}
}

func TestLoadImplsOfTheRepository(t *testing.T) {
	impls, err := LoadImpls(filepath.Join("..", "..", "conformance"), "")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, im := range impls {
		seen[im.Folder] = true
	}
	for _, f := range []string{"fiber-v2", "fiber-v3"} {
		if !seen[f] {
			t.Errorf("conformance/%s/impl.json not found", f)
		}
	}
	one, err := LoadImpls(filepath.Join("..", "..", "conformance"), "fiber-v3")
	if err != nil || len(one) != 1 || one[0].Rows[0].ID != "fiber-v3/memory" || one[0].Rows[1].ID != "fiber-v3/redis" {
		t.Fatalf("--only fiber-v3: %v %v", one, err)
	}
	if _, err := LoadImpls(filepath.Join("..", "..", "conformance"), "no-such-row"); err == nil || !strings.Contains(err.Error(), "no folder nor row") {
		t.Fatalf("--only no-such-row: %v", err)
	}
}

func TestLoadImplsNamesAMissingTargetFile(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "express-idempotency"), 0o755)
	os.WriteFile(filepath.Join(dir, "express-idempotency", "impl.json"), []byte(goodImpl), 0o644)
	_, err := LoadImpls(dir, "")
	if err == nil || !strings.Contains(err.Error(), `row "express-idempotency/memory": its target file target.json is missing`) {
		t.Fatalf("got %v", err)
	}
	os.WriteFile(filepath.Join(dir, "express-idempotency", "target.json"), []byte(`{}`), 0o644)
	impls, err := LoadImpls(dir, "express-idempotency/redis")
	if err != nil || len(impls) != 1 || len(impls[0].Rows) != 1 || impls[0].Rows[0].Store != "redis" {
		t.Fatalf("--only a row: %v %v", impls, err)
	}
	if impls, err := LoadImpls(dir, "express-idempotency-redis"); err != nil || len(impls) != 1 {
		t.Fatalf("--only a row's slug: %v %v", impls, err)
	}
}
