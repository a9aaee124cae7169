package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Impl is one implementation's impl.json (/work/wt/CONTRACT29.md, "Files
// in each folder"): a middleware behind the contract's payments endpoint,
// with one row per store it is certified on.
type Impl struct {
	Name       string `json:"name"`
	Ecosystem  string `json:"ecosystem"`
	Package    string `json:"package"`
	Version    string `json:"version"`
	Source     string `json:"source"`
	Framework  string `json:"framework"`
	Install    string `json:"install"`
	Rows       []Row  `json:"rows"`
	Target     string `json:"target"`
	Documented string `json:"documented"`

	// Folder is the folder's name under conformance/ (set by LoadImpls).
	Folder string `json:"-"`
	// Dir is the folder itself (set by LoadImpls): under conformance/, or
	// under --extra for a folder kept outside the repository.
	Dir string `json:"-"`
	// Outside marks a folder of --extra: its rows are on the pages, but a
	// clean clone cannot regenerate them (the pages say so).
	Outside bool `json:"-"`
}

// Row is one certified configuration of an implementation: its store, the
// command that starts its server and what the server needs.
type Row struct {
	ID     string            `json:"id"`
	Store  string            `json:"store"`
	Start  string            `json:"start"`
	Env    map[string]string `json:"env"`
	Needs  []string          `json:"needs"`
	Target string            `json:"target"`

	// A folder may hold several integrations of one library (an Express and
	// a NestJS one): a row's own package, version, source or framework
	// replaces the implementation's.
	Package   string `json:"package"`
	Version   string `json:"version"`
	Source    string `json:"source"`
	Framework string `json:"framework"`
}

// Of is row r with the implementation's package, version, source and
// framework filled in where the row gives none.
func (im *Impl) Of(r Row) Row {
	for _, f := range []struct {
		row *string
		im  string
	}{{&r.Package, im.Package}, {&r.Version, im.Version}, {&r.Source, im.Source}, {&r.Framework, im.Framework}} {
		if *f.row == "" {
			*f.row = f.im
		}
	}
	return r
}

// Needs a row may declare: the driver provides each (REDIS_URL,
// DATABASE_URL, SQLITE_PATH).
var knownNeeds = map[string]string{"redis": "REDIS_URL", "postgres": "DATABASE_URL", "sqlite": "SQLITE_PATH"}

// Placeholders a row's start command may use, replaced by the driver.
var placeholders = map[string]string{
	"{{fiberpay}}": "the fiberpay binary the driver builds (profiles/httpidem/realmw/cmd/fiberpay)",
}

var (
	rowIDPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)?$`)
	placeholderRef = regexp.MustCompile(`\{\{[^}]*\}\}`)
)

// TargetOf is the target file of row r, relative to the folder.
func (im *Impl) TargetOf(r Row) string {
	if r.Target != "" {
		return r.Target
	}
	return im.Target
}

// ParseImpl reads impl.json's bytes and validates them; folder names the
// folder in errors. Every error says which field is wrong and what it
// should be.
func ParseImpl(data []byte, folder string) (*Impl, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var im Impl
	if err := dec.Decode(&im); err != nil {
		return nil, fmt.Errorf("%s/impl.json: not the contract's impl.json: %v", folder, err)
	}
	im.Folder = folder
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	for _, f := range []struct{ name, v string }{{"name", im.Name}, {"package", im.Package}, {"version", im.Version}, {"source", im.Source}} {
		if strings.TrimSpace(f.v) == "" {
			bad("%q is required", f.name)
		}
	}
	switch im.Ecosystem {
	case "node", "go":
	default:
		bad("\"ecosystem\" is %q: want \"node\" or \"go\"", im.Ecosystem)
	}
	if strings.ContainsAny(im.Version, "^~*<>= ") || strings.HasSuffix(im.Version, ".x") {
		bad("\"version\" is %q: pin one exact version", im.Version)
	}
	if len(im.Rows) == 0 {
		bad("\"rows\" is empty: at least one row (id, store, start)")
	}
	seen := map[string]bool{}
	for i, r := range im.Rows {
		where := fmt.Sprintf("rows[%d]", i)
		if r.ID != "" {
			where = fmt.Sprintf("row %q", r.ID)
		}
		switch {
		case r.ID == "":
			bad("%s: \"id\" is required", where)
		case !rowIDPattern.MatchString(r.ID):
			bad("%s: \"id\" must be lower-case letters, digits, '.', '_' or '-', with at most one '/' (e.g. \"express-idempotency/redis\")", where)
		case seen[r.ID]:
			bad("%s: the id is used twice", where)
		}
		seen[r.ID] = true
		if strings.ContainsAny(r.Version, "^~*<>= ") || strings.HasSuffix(r.Version, ".x") {
			bad("%s: \"version\" is %q: pin one exact version", where, r.Version)
		}
		if strings.TrimSpace(r.Store) == "" {
			bad("%s: \"store\" is required (memory, redis, postgres, sqlite …)", where)
		}
		if strings.TrimSpace(r.Start) == "" {
			bad("%s: \"start\" is required (a shell command run in the working copy, listening on 127.0.0.1:$PORT)", where)
		}
		for _, p := range placeholderRef.FindAllString(r.Start, -1) {
			if _, ok := placeholders[p]; !ok {
				bad("%s: \"start\" uses %s, which the driver does not know (known: %s)", where, p, strings.Join(sortedKeys(placeholders), ", "))
			}
		}
		for _, n := range r.Needs {
			if _, ok := knownNeeds[n]; !ok {
				bad("%s: \"needs\" names %q: want \"redis\", \"postgres\" or \"sqlite\"", where, n)
			}
		}
		for k := range r.Env {
			if k == "PORT" {
				bad("%s: \"env\" sets PORT, which the driver chooses", where)
			}
			for _, n := range r.Needs {
				if knownNeeds[n] == k {
					bad("%s: \"env\" sets %s, which the driver provides for %q", where, k, n)
				}
			}
		}
		t := im.TargetOf(r)
		switch {
		case t == "":
			bad("%s: no target file: set \"target\" on the implementation or the row", where)
		case filepath.IsAbs(t) || strings.Contains(filepath.ToSlash(filepath.Clean(t)), ".."):
			bad("%s: target %q must be a path inside the folder", where, t)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s/impl.json: %s", folder, strings.Join(errs, "; "))
	}
	return &im, nil
}

// LoadImpls reads conformance/*/impl.json under dir (the conformance
// folder), sorted by folder; only names a folder (or one row's id) to keep.
// A folder whose impl.json is invalid is an error naming it.
func LoadImpls(dir, only string) ([]*Impl, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*", "impl.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []*Impl
	var errs []string
	for _, p := range paths {
		folder := filepath.Base(filepath.Dir(p))
		if strings.HasPrefix(folder, ".") {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		im, err := ParseImpl(data, folder)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		im.Dir = filepath.Join(dir, folder)
		for _, r := range im.Rows {
			if _, err := os.Stat(filepath.Join(dir, folder, im.TargetOf(r))); err != nil {
				errs = append(errs, fmt.Sprintf("%s/impl.json: row %q: its target file %s is missing", folder, r.ID, im.TargetOf(r)))
			}
		}
		out = append(out, im)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	if only != "" {
		var kept []*Impl
		for _, im := range out {
			if im.Folder == only {
				kept = append(kept, im)
				continue
			}
			for _, r := range im.Rows {
				if r.ID == only || Slug(r.ID) == only {
					c := *im
					c.Rows = []Row{r}
					kept = append(kept, &c)
				}
			}
		}
		if len(kept) == 0 {
			return nil, fmt.Errorf("--only %s: no folder nor row of that name under %s", only, dir)
		}
		out = kept
	}
	ids := map[string]string{}
	for _, im := range out {
		for _, r := range im.Rows {
			if f, ok := ids[Slug(r.ID)]; ok {
				return nil, fmt.Errorf("row %q of %s and a row of %s have the same name on disk (%s)", r.ID, im.Folder, f, Slug(r.ID))
			}
			ids[Slug(r.ID)] = im.Folder
		}
	}
	return out, nil
}

// Slug is a row id as a file name: "express-idempotency/redis" →
// "express-idempotency-redis".
func Slug(id string) string { return strings.ReplaceAll(id, "/", "-") }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
