package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/idscheck/idscheck/redact"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/profiles"
	"github.com/idscheck/idscheck/spec"
)

// targetFlags is the target description that every subcommand talking to a
// target shares (run, chaos, check): the base URL, the credentials, the
// readings the target follows, its time scale, its start command, the
// effect sink and the profile's own section. It comes from --target-file
// (JSON, targetFileHelp), the same fields as flags, and the IDSCHECK_*
// environment variables, in this order of precedence:
//
//	a flag given on the command line  >  the target file  >  $IDSCHECK_API_KEY etc.
//
// The credentials besides the API key and the section are the profile's
// (harness.Profile.Credentials and .Section): this file names none.
//
// Use: register on the command's FlagSet with the profile, parse, load,
// validate; then read the exported fields, Target() and Secrets().
type targetFlags struct {
	// File is --target-file: "" when none was given.
	File string

	// The resolved description.
	URL    string // base URL; "" for the bundled reference server
	APIKey string
	// Creds are the profile's named credentials given (name → value).
	Creds map[string]string
	// TimeScale is the factor the target divides protocol durations by; 0
	// when neither the file nor a flag gave it (the command's default then
	// applies: see withDefaultTimeScale).
	TimeScale  float64
	Readings   declaredReadings // decision ID -> reading name; nil when none
	TargetCmd  string           // shell command that starts the target
	EffectSink effectSink
	// ReplicaList are the target's replicas ("replicas" in the target
	// file): the first is URL; nil for a target of one process.
	ReplicaList []replicaEntry
	// Store is the URL of the store the replicas share ("store" in the
	// target file; "": none declared).
	Store string
	// StoreProxy is "proxy" of the target file's "store": idscheck stands
	// a proxy between each replica and the store.
	StoreProxy bool
	// Described is the value of the profile's section (nil: none given).
	Described any

	prof           harness.Profile
	sectionRaw     json.RawMessage // the file's section of the profile (nil: none)
	sectionMerge   func(raw json.RawMessage, getenv func(string) string) (any, []string, error)
	sectionSecrets []string

	// cli holds what the command line gave, before merging.
	cli struct {
		url, apiKey, targetCmd, effectSink string
		creds                              map[string]*string
		timeScale                          float64
		readings                           declaredReadings
	}
	// origin names where each field's value came from ("--api-key",
	// `"api_key" in t.json`, "$IDSCHECK_API_KEY"), for error messages.
	origin map[string]string
	// fromEnv lists the credential flags filled from IDSCHECK_* variables
	// (sorted), for the reproduce line.
	fromEnv []string
	// readingFromFile marks the readings the file declared (not a flag).
	readingFromFile map[string]bool
	// offline is set by a command that never contacts the target (check):
	// a variable the file names that is not set is no error there, only a
	// secret it cannot know (Unset lists them).
	offline bool
	// Unset lists the variables the file names that were not set (offline).
	Unset []string
}

// unsetMarker stands, offline, for the value of a variable that is not set,
// so that what reads it goes on; Secrets leaves it out.
const unsetMarker = "\x00idscheck-unset:"

// effectSink is where the harness counts external side effects: the
// implementation calls URL once per effect; the harness listens on Listen.
type effectSink struct {
	Listen string `json:"listen,omitempty"` // host:port the harness listens on, e.g. 127.0.0.1:9090
	URL    string `json:"url,omitempty"`    // URL the implementation calls, e.g. http://10.0.0.5:9090
}

// replicaEntry is one replica of the target file's "replicas".
type replicaEntry struct {
	URL string `json:"url"`           // its base URL
	Cmd string `json:"cmd,omitempty"` // the shell command that starts it (as target_cmd)
}

var replicaKeys = []string{"url", "cmd"}

// storeKeys are the fields of the target file's "store".
var storeKeys = []string{"url", "proxy"}

// credential is one secret of the description: the API key or a named
// credential of the profile, with its flag, file field and variable.
type credential struct {
	name  string  // "api-key", "admin-token": the flag
	field string  // "api_key": the file's field (and field+"_env")
	env   string  // IDSCHECK_API_KEY: read when nothing else gives it
	help  string  // for -h
	value *string // the resolved value
	cli   *string // what the flag gave
}

// credentialEnvName is the variable a credential is read from when neither
// a flag nor the file gives it: IDSCHECK_ and its name in upper case.
func credentialEnvName(name string) string {
	return "IDSCHECK_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// credentials lists the API key and the profile's named credentials.
func (t *targetFlags) credentials() []credential {
	out := []credential{{name: "api-key", field: "api_key", env: credentialEnvName("api-key"),
		help: "the target's API key (X-API-Key)", value: &t.APIKey, cli: &t.cli.apiKey}}
	if t.Creds == nil {
		t.Creds = map[string]string{}
	}
	if t.cli.creds == nil {
		t.cli.creds = map[string]*string{}
	}
	for _, c := range t.prof.Credentials {
		if t.cli.creds[c.Name] == nil {
			t.cli.creds[c.Name] = new(string)
		}
		v := t.Creds[c.Name]
		out = append(out, credential{name: c.Name, field: strings.ReplaceAll(c.Name, "-", "_"), env: credentialEnvName(c.Name),
			help: c.Help, value: &v, cli: t.cli.creds[c.Name]})
	}
	return out
}

// setCredential stores the value of a named credential.
func (t *targetFlags) setCredential(c credential, v string) {
	*c.value = v
	if c.name != "api-key" {
		t.Creds[c.name] = v
	}
}

// genericTargetFlags are the flags register adds whatever the profile.
var genericTargetFlags = []string{"target-file", "target", "api-key", "time-scale", "reading", "target-cmd", "effect-sink"}

// targetFileHelpHead documents the --target-file schema; register appends
// it, the profile's credentials and section to the command's -h.
const targetFileHelpHead = `
Target file (--target-file FILE): one JSON object describing the target, the
same for run, chaos and check. Every field is optional. A flag given on the
command line overrides the file's field; the file overrides the IDSCHECK_*
environment variables. An unknown field is an error.

  field                              flag                  value
  url                                --target              base URL: http(s)://host[:port][/prefix]
  api_key or api_key_env             --api-key             the key, or the NAME of a variable holding it
`

const targetFileHelpTail = `  time_scale                         --time-scale          a number > 0: the target divides every protocol
                                                           duration by it (1: real time, the default)
  readings                           --reading             {"DECISION": "READING", ...}; a --reading
                                                           overrides the file for its decision only
  target_cmd                         --target-cmd          shell command that starts the target
  effect_sink                        --effect-sink         {"listen": "host:port", "url": "http://..."}:
                                                           where the harness's effect sink listens
                                                           (the flag sets listen), for a profile whose
                                                           targets send their external effects to it
  replicas                                                 [{"url": "http://...", "cmd": "..."}, ...]: a
                                                           target of several replicas over one store; the
                                                           first is the target's url (a url given beside
                                                           is that one's; no target_cmd); each cmd
                                                           (optional) starts its replica as target_cmd
                                                           does, with $IDSCHECK_STORE_URL set to the
                                                           store's URL (through its proxy, when asked)
  store                              --store (bundled)     {"url": "postgres://...", "proxy": true}: the
                                                           store the replicas share (its password is a
                                                           secret; "local": idscheck starts a throwaway
                                                           PostgreSQL cluster); with no url, the bundled server's
                                                           --store; proxy (--store-proxy): a proxy
                                                           between each replica and the store, for the
                                                           faults store-partition and store-lost-reply
`

const targetFileHelpExample = `
For example, with the secrets in the environment, not in the file:

  {
    "url": "http://127.0.0.1:8080",
    "api_key_env": "MY_KEY",
    "time_scale": 60,
    "target_cmd": "SECRET=\"$MY_KEY\" ./server --addr 127.0.0.1:8080"
  }

A credential is given as its value or by the name of its variable, never
both; a named variable must be set. Every credential, and the value of any
VAR=value or --flag=value of target_cmd whose name looks secret (KEY, TOKEN,
SECRET, PASSWORD, ...), is redacted from every file written and every line
printed; the reproduce line names --target-file, never a credential.
`

// targetFileHelp is the schema of the target file for profile p.
func targetFileHelp(p harness.Profile) string {
	var b strings.Builder
	b.WriteString(targetFileHelpHead)
	for _, c := range p.Credentials {
		field := strings.ReplaceAll(c.Name, "-", "_")
		fmt.Fprintf(&b, "  %-34s %-21s %s\n", field+" or ..._env", "--"+c.Name, c.Help)
	}
	b.WriteString(targetFileHelpTail)
	if s := p.Section; s != nil {
		fmt.Fprintf(&b, "  %-34s %-21s the profile's own section (below)\n", s.Key, "")
	}
	b.WriteString(targetFileHelpExample)
	if s := p.Section; s != nil && s.Help != "" {
		b.WriteString("\n" + strings.TrimLeft(s.Help, "\n"))
		if !strings.HasSuffix(s.Help, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// targetFileKeys are the fields of the target file for the profile, in the
// order the help shows them; effectSinkKeys those of its "effect_sink".
func (t *targetFlags) targetFileKeys() []string {
	keys := []string{"url"}
	for _, c := range t.credentials() {
		keys = append(keys, c.field, c.field+"_env")
	}
	keys = append(keys, "time_scale", "readings", "target_cmd", "effect_sink", "replicas", "store")
	if s := t.prof.Section; s != nil {
		keys = append(keys, s.Key)
	}
	return keys
}

// otherProfileSection says which profile a section of the file belongs to
// when it is not the run's profile's: a section of another profile with
// the default profile is a file meant for that profile's --profile, not an
// unknown field.
func (t *targetFlags) otherProfileSection(top map[string]json.RawMessage) error {
	for _, name := range profiles.Names() {
		p, _ := profiles.Lookup(name)
		if p.Section == nil || p.Name == t.prof.Name || (t.prof.Section != nil && t.prof.Section.Key == p.Section.Key) {
			continue
		}
		if _, ok := top[p.Section.Key]; ok {
			return fmt.Errorf("%q is the section of profile %s, and this command's profile is %s: add --profile %s", p.Section.Key, p.Name, t.prof.Name, p.Name)
		}
	}
	return nil
}

var effectSinkKeys = []string{"listen", "url"}

// register adds --target-file and the target flags of profile p to fs (its
// credentials and its section's flags among them), and appends the
// target-file schema to fs's -h.
func (t *targetFlags) register(fs *flag.FlagSet, p harness.Profile) {
	t.prof = p
	flagSetProfile.Store(fs, p.Name)
	fs.StringVar(&t.File, "target-file", "", "JSON file describing the target (URL, credentials or the names of variables holding them, readings, time scale, start command: see below); flags override its fields")
	fs.StringVar(&t.cli.url, "target", "", "base URL of the target (http://host:port[/prefix]); empty: the bundled reference server")
	for _, c := range t.credentials() {
		help := c.help
		if c.name == "api-key" {
			help += "; required with --target where the protocol authenticates every call"
		}
		fs.StringVar(c.cli, c.name, "", help+" (default $"+c.env+")")
	}
	fs.Float64Var(&t.cli.timeScale, "time-scale", 0, "the target divides every protocol duration by this factor (default 1: real time; the bundled server runs at its profile's scale)")
	fs.Var(&t.cli.readings, "reading", "DECISION=READING the target follows where the text is open (repeatable; idscheck rules --readings --profile NAME lists the decisions); a declared reading is judged strictly")
	fs.StringVar(&t.cli.effectSink, "effect-sink", "", "host:port the harness's effect sink listens on, for a profile whose targets send their external effects to it: give the target http://host:port as its sink (effect_sink.listen in the target file)")
	fs.StringVar(&t.cli.targetCmd, "target-cmd", "", "shell command that starts the target on --target (idscheck owns the process: it waits for /health and stops it at the end)")
	if p.Section != nil && p.Section.Flags != nil {
		t.sectionMerge = p.Section.Flags(fs)
	}
	prev := fs.Usage
	fs.Usage = func() {
		if prev != nil {
			prev()
		}
		fmt.Fprint(fs.Output(), targetFileHelp(p))
	}
}

// flagSetProfile maps a FlagSet that register filled to its profile, so
// that an unknown flag another profile defines is named as such
// (otherProfilesFlag).
var flagSetProfile sync.Map // *flag.FlagSet → spec.Profile

// otherProfilesFlag names the profiles other than fs's whose target flags
// define name (--variant of http-idempotency, asked of intent); "" when fs
// has no profile or none does.
func otherProfilesFlag(fs *flag.FlagSet, name string) string {
	v, ok := flagSetProfile.Load(fs)
	if !ok {
		return ""
	}
	var with []string
	for _, n := range profiles.Names() {
		if n == v.(spec.Profile) {
			continue
		}
		p, _ := profiles.Lookup(n)
		scratch := flag.NewFlagSet("", flag.ContinueOnError)
		var t targetFlags
		t.register(scratch, p)
		flagSetProfile.Delete(scratch)
		if scratch.Lookup(name) != nil {
			with = append(with, string(n))
		}
	}
	if len(with) == 0 {
		return ""
	}
	return fmt.Sprintf("the %s profile has no --%s: it is a flag of --profile %s", v, name, strings.Join(with, ", --profile "))
}

// isTargetFlag says whether a flag of fs is one register added.
func (t *targetFlags) isTargetFlag(name string) bool {
	if containsString(genericTargetFlags, name) {
		return true
	}
	for _, c := range t.prof.Credentials {
		if c.Name == name {
			return true
		}
	}
	return false
}

// load resolves the description once fs is parsed: the target file's
// fields, overridden by every target flag given on the command line, then
// the IDSCHECK_* variables for credentials still empty when there is a
// target URL; then the profile's section. getenv reads the environment
// (os.Getenv; tests pass their own). The error says what to change.
func (t *targetFlags) load(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	t.origin = map[string]string{}
	t.readingFromFile = map[string]bool{}
	t.credentials() // the maps exist
	fileEnv := getenv
	if t.offline {
		fileEnv = func(name string) string {
			if v := getenv(name); v != "" {
				return v
			}
			if !slices.Contains(t.Unset, name) {
				t.Unset = append(t.Unset, name)
			}
			return unsetMarker + name
		}
	}
	if t.File != "" {
		if err := t.loadFile(fileEnv); err != nil {
			return err
		}
	}
	set := func(field, flagName string, dst *string, v string) {
		if given[flagName] {
			*dst = v
			t.origin[field] = "--" + flagName
		}
	}
	if len(t.ReplicaList) > 0 && (given["target"] || given["target-cmd"]) {
		return fmt.Errorf(`--target and --target-cmd describe a target of one process; %s lists the replicas in "replicas": drop the flag`, t.File)
	}
	set("url", "target", &t.URL, t.cli.url)
	set("target_cmd", "target-cmd", &t.TargetCmd, t.cli.targetCmd)
	set("effect_sink", "effect-sink", &t.EffectSink.Listen, t.cli.effectSink)
	for _, c := range t.credentials() {
		if given[c.name] {
			t.setCredential(c, *c.cli)
			t.origin[c.field] = "--" + c.name
		}
	}
	if given["time-scale"] {
		t.TimeScale = t.cli.timeScale
		t.origin["time_scale"] = "--time-scale"
	}
	if given["reading"] {
		if t.Readings == nil {
			t.Readings = declaredReadings{}
		}
		for d, name := range t.cli.readings {
			t.Readings[d] = name // a flag overrides the file's reading of the same decision
			delete(t.readingFromFile, d)
		}
	}
	t.fromEnv = nil
	if t.URL != "" {
		for _, c := range t.credentials() {
			if *c.value != "" || given[c.name] || t.origin[c.field] != "" {
				continue
			}
			if v := getenv(c.env); v != "" {
				t.setCredential(c, v)
				t.origin[c.field] = "$" + c.env
				t.fromEnv = append(t.fromEnv, c.name)
			}
		}
	}
	sort.Strings(t.fromEnv)
	if t.sectionMerge != nil {
		v, secrets, err := t.sectionMerge(t.sectionRaw, fileEnv)
		if err != nil {
			if t.File != "" && t.sectionRaw != nil {
				return fmt.Errorf("target file %s: %w", t.File, err)
			}
			return err
		}
		t.Described, t.sectionSecrets = v, secrets
		if t.sectionRaw != nil {
			t.origin[t.prof.Section.Key] = strconv.Quote(t.prof.Section.Key) + " in " + t.File
		}
	}
	return nil
}

// maxTargetFile bounds what loadFile reads: a target description is small.
const maxTargetFile = 1 << 20

// loadFile reads t.File into the description.
func (t *targetFlags) loadFile(getenv func(string) string) error {
	name := t.File
	b, err := readLimited(name, maxTargetFile+1)
	if err != nil {
		return fmt.Errorf("--target-file: %v (it names a JSON file describing the target: see -h)", err)
	}
	if len(b) > maxTargetFile {
		return fmt.Errorf("--target-file %s: more than %d bytes: not a target description", name, maxTargetFile)
	}
	ferr := func(format string, a ...any) error {
		return fmt.Errorf("target file %s: "+format, append([]any{name}, a...)...)
	}
	// Unknown fields first, by their exact names (the file is held to the
	// documented names).
	if len(bytes.TrimSpace(b)) == 0 {
		return ferr(`empty: want a JSON object such as {"url": "http://127.0.0.1:8080", "api_key_env": "MY_KEY"}`)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return ferr("%s", jsonErrorText(b, err))
	}
	if top == nil {
		return ferr("want a JSON object, got null")
	}
	if err := t.otherProfileSection(top); err != nil {
		return ferr("%v", err)
	}
	if err := unknownKeys(top, t.targetFileKeys(), ""); err != nil {
		return ferr("%v", err)
	}
	in := func(field string) string { return strconv.Quote(field) + " in " + name }
	isNull := func(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }
	// field decodes one top-level field into dst; false when it is absent
	// or null.
	field := func(key string, dst any, want string) (bool, error) {
		raw, ok := top[key]
		if !ok || isNull(raw) {
			return false, nil
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			return false, ferr("%q: want %s, got a JSON %s", key, want, jsonValueKind(raw))
		}
		return true, nil
	}
	var url, cmd string
	if ok, err := field("url", &url, "a string, the base URL"); err != nil {
		return err
	} else if ok && strings.TrimSpace(url) != "" {
		t.URL, t.origin["url"] = strings.TrimSpace(url), in("url")
	}
	if ok, err := field("target_cmd", &cmd, "a string, a shell command"); err != nil {
		return err
	} else if ok && cmd != "" {
		t.TargetCmd, t.origin["target_cmd"] = cmd, in("target_cmd")
	}
	for _, c := range t.credentials() {
		var value, env string
		if _, err := field(c.field, &value, "a string"); err != nil {
			return err
		}
		envField := c.field + "_env"
		if _, err := field(envField, &env, "a string, the NAME of an environment variable"); err != nil {
			return err
		}
		switch {
		case value != "" && env != "":
			return ferr("give %q or %q, not both", c.field, envField)
		case value != "":
			t.setCredential(c, value)
			t.origin[c.field] = in(c.field)
		case env != "":
			if !envName.MatchString(env) {
				return ferr("%q is %q: want the NAME of an environment variable (letters, digits, _), e.g. \"MY_KEY\", not its value", envField, redactEnvValue(env))
			}
			v := getenv(env)
			if strings.HasPrefix(v, unsetMarker) {
				continue // offline: a secret check cannot know, and needs not
			}
			if v == "" {
				return ferr("%q names $%s, which is not set (or empty): export it, or give the credential another way", envField, env)
			}
			t.setCredential(c, v)
			t.origin[c.field] = in(envField) + " ($" + env + ")"
		}
	}
	var scale float64
	if ok, err := field("time_scale", &scale, "a number"); err != nil {
		return err
	} else if ok {
		t.TimeScale, t.origin["time_scale"] = scale, in("time_scale")
		if scale <= 0 {
			return ferr(`"time_scale" must be > 0, got %v`, scale)
		}
	}
	var readings map[string]string
	if _, err := field("readings", &readings, `an object {"DECISION": "READING", ...}`); err != nil {
		return err
	}
	if len(readings) > 0 {
		t.Readings = declaredReadings{}
		for d, r := range readings {
			d, r = strings.TrimSpace(d), strings.TrimSpace(r)
			if d == "" || r == "" {
				return ferr(`"readings": want {"DECISION": "READING", ...} (e.g. {"lease-expiry": "immediate"}), got %q: %q`, d, r)
			}
			t.Readings[d] = r
			t.readingFromFile[d] = true
		}
	}
	if raw, ok := top["effect_sink"]; ok && !isNull(raw) {
		var sink map[string]json.RawMessage
		if err := json.Unmarshal(raw, &sink); err != nil {
			return ferr(`"effect_sink": want an object {"listen": "host:port", "url": "http://..."}`)
		}
		if err := unknownKeys(sink, effectSinkKeys, "effect_sink."); err != nil {
			return ferr("%v", err)
		}
		if err := json.Unmarshal(raw, &t.EffectSink); err != nil {
			return ferr(`"effect_sink": %s`, jsonErrorText(raw, err))
		}
		if t.EffectSink.Listen != "" || t.EffectSink.URL != "" {
			t.origin["effect_sink"] = in("effect_sink")
		}
	}
	if raw, ok := top["replicas"]; ok && !isNull(raw) {
		if err := t.loadReplicas(raw, in); err != nil {
			return ferr("%v", err)
		}
	}
	if raw, ok := top["store"]; ok && !isNull(raw) {
		var store map[string]json.RawMessage
		if err := json.Unmarshal(raw, &store); err != nil {
			return ferr(`"store": want an object {"url": "postgres://..."}, got a JSON %s`, jsonValueKind(raw))
		}
		if err := unknownKeys(store, storeKeys, "store."); err != nil {
			return ferr("%v", err)
		}
		var u string
		if err := json.Unmarshal(store["url"], &u); err != nil || strings.TrimSpace(u) == "" {
			return ferr(`"store.url": want "local" or a postgres:// URL string`)
		}
		u = strings.TrimSpace(u)
		if u != localStore && !strings.HasPrefix(u, "postgres://") && !strings.HasPrefix(u, "postgresql://") {
			return ferr(`"store.url" is %q: want "local" (idscheck starts a throwaway PostgreSQL) or a postgres:// URL`, redactStore(u))
		}
		t.Store, t.origin["store"] = u, in("store")
		if raw, ok := store["proxy"]; ok && json.Unmarshal(raw, &t.StoreProxy) != nil {
			return ferr(`"store.proxy": want true or false`)
		}
	}
	if s := t.prof.Section; s != nil {
		if raw, ok := top[s.Key]; ok && !isNull(raw) {
			t.sectionRaw = raw
		}
	}
	return nil
}

// loadReplicas reads the target file's "replicas": a list of objects,
// each with its base URL and, optionally, the command that starts it.
// The first replica is the target's URL.
func (t *targetFlags) loadReplicas(raw json.RawMessage, in func(string) string) error {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf(`"replicas": want a list [{"url": "http://...", "cmd": "..."}, ...], got a JSON %s`, jsonValueKind(raw))
	}
	if len(list) == 0 {
		return errors.New(`"replicas": an empty list: give each replica's {"url": ...}, or leave the field out`)
	}
	if t.TargetCmd != "" {
		return errors.New(`"replicas" names the target's commands: give no "target_cmd" beside it (each replica's "cmd" starts it)`)
	}
	seen := map[string]int{}
	for i, r := range list {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r, &m); err != nil || m == nil {
			return fmt.Errorf(`"replicas"[%d]: want an object {"url": "http://...", "cmd": "..."}, got a JSON %s`, i, jsonValueKind(r))
		}
		if err := unknownKeys(m, replicaKeys, fmt.Sprintf("replicas[%d].", i)); err != nil {
			return err
		}
		var e replicaEntry
		if err := json.Unmarshal(r, &e); err != nil {
			return fmt.Errorf(`"replicas"[%d]: "url" and "cmd" are strings: %s`, i, jsonErrorText(r, err))
		}
		e.URL = strings.TrimSpace(e.URL)
		if e.URL == "" {
			return fmt.Errorf(`"replicas"[%d]: no "url": each replica needs its base URL`, i)
		}
		if err := checkBaseURL(e.URL); err != nil {
			return fmt.Errorf(`"replicas"[%d].url is %q: %v`, i, redactURL(e.URL), err)
		}
		if j, dup := seen[e.URL]; dup {
			return fmt.Errorf(`"replicas"[%d].url is the url of "replicas"[%d]: each replica has its own`, i, j)
		}
		seen[e.URL] = i
		t.ReplicaList = append(t.ReplicaList, e)
	}
	// "url" beside "replicas" is the first replica (docs/http-idempotency.md
	// gives both): the same URL, or none.
	if t.URL != "" && strings.TrimRight(t.URL, "/") != strings.TrimRight(t.ReplicaList[0].URL, "/") {
		return fmt.Errorf(`"url" is %q and "replicas"[0].url %q: "url" is the first replica; give it that replica's URL, or leave "url" out`,
			redactURL(t.URL), redactURL(t.ReplicaList[0].URL))
	}
	t.URL, t.origin["url"] = t.ReplicaList[0].URL, in("replicas")
	return nil
}

// replicaURLs are the base URLs of the target's replicas after the first.
func (t *targetFlags) replicaURLs() []string {
	var out []string
	for _, r := range t.ReplicaList[min(1, len(t.ReplicaList)):] {
		out = append(out, r.URL)
	}
	return out
}

// readLimited reads at most n bytes of the file name.
func readLimited(name string, n int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// redactEnvValue shows at most a few characters of what was given where an
// environment variable's name belongs: it may be the secret itself.
func redactEnvValue(s string) string {
	if len(s) <= 4 {
		return s
	}
	return s[:2] + "…"
}

// unknownKeys names the first key of m (sorted) that known does not list,
// with the nearest known name when one is close.
func unknownKeys(m map[string]json.RawMessage, known []string, prefix string) error {
	var bad []string
	for k := range m {
		if !containsString(known, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	k := bad[0]
	msg := fmt.Sprintf("unknown field %q", prefix+k)
	if near := nearest(k, known); near != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", prefix+near)
	}
	if len(bad) > 1 {
		msg += fmt.Sprintf(", and %d more unknown", len(bad)-1)
	}
	return fmt.Errorf("%s; the fields are: %s", msg, strings.Join(known, ", "))
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// nearest returns the known name closest to k (case, '-' for '_', or an
// edit distance of at most 2), or "".
func nearest(k string, known []string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	best, bestD := "", 3
	for _, n := range known {
		if norm(n) == norm(k) {
			return n
		}
		if d := editDistance(norm(k), n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// jsonErrorText turns a decoding error into "line L, column C: ..." and a
// type mismatch into the field and the type wanted.
func jsonErrorText(b []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		line, col := lineCol(b, se.Offset)
		return fmt.Sprintf("not valid JSON at line %d, column %d: %v", line, col, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("want a JSON object, got a JSON %s", te.Value)
		}
		return fmt.Sprintf("%q: want a %s, got a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	return err.Error()
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "string"
	case "bool":
		return "boolean (true or false)"
	case "float64":
		return "number"
	case "map", "struct", "ptr":
		return "JSON object"
	}
	return k
}

func lineCol(b []byte, off int64) (int, int) {
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	line, col := 1, 1
	for _, c := range b[:off] {
		if c == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// name is how an error message names a field: the flag or the file field
// its value came from, or the flag when it is unset.
func (t *targetFlags) name(field, flagName string) string {
	if o := t.origin[field]; o != "" && !strings.HasPrefix(o, "$") {
		return o
	}
	return "--" + flagName
}

// validate checks the resolved description against profile p. online is
// set for commands that talk to the target (run, chaos): a target URL then
// needs an API key where the protocol authenticates every call, and
// credentials and a start command need a target URL (without one the
// bundled reference server is started, with its own secrets). check,
// offline, passes online=false: nothing is required.
func (t *targetFlags) validate(p spec.Profile, online bool) error {
	if t.URL != "" {
		if err := checkBaseURL(t.URL); err != nil {
			return fmt.Errorf("%s is %q: %v", t.name("url", "target"), redactURL(t.URL), err)
		}
	}
	if (t.origin["time_scale"] != "" && t.TimeScale <= 0) || t.TimeScale < 0 {
		return fmt.Errorf("%s must be > 0, got %v", t.name("time_scale", "time-scale"), t.TimeScale)
	}
	for d, r := range t.Readings {
		if err := checkReadings(p, map[string]string{d: r}); err != nil {
			if t.readingFromFile[d] {
				return fmt.Errorf("%q in %s: %s", "readings", t.File, strings.TrimPrefix(err.Error(), "--reading "))
			}
			return err
		}
	}
	if s := t.prof.Section; s != nil && s.Check != nil {
		if err := s.Check(t.Described, t.URL != ""); err != nil {
			if o := t.origin[s.Key]; o != "" {
				return fmt.Errorf("%s: %w", o, err)
			}
			return err
		}
	}
	if s := t.EffectSink; s.Listen != "" {
		if _, _, err := net.SplitHostPort(s.Listen); err != nil {
			where := "--effect-sink"
			if o := t.origin["effect_sink"]; strings.HasPrefix(o, `"`) {
				where = `"effect_sink.listen" in ` + t.File
			}
			return fmt.Errorf("%s is %q: want host:port, e.g. 127.0.0.1:9090", where, s.Listen)
		}
	}
	if s := t.EffectSink; s.URL != "" {
		if err := checkBaseURL(s.URL); err != nil {
			return fmt.Errorf(`"effect_sink.url" in %s is %q: %v`, t.File, redactURL(s.URL), err)
		}
	}
	if !online {
		return nil
	}
	if t.URL == "" {
		for _, c := range t.credentials() {
			if o := t.origin[c.field]; o != "" && !strings.HasPrefix(o, "$") {
				return fmt.Errorf("%s needs --target (or \"url\" in the target file): the bundled server draws its own secrets", o)
			}
		}
		if o := t.origin["target_cmd"]; o != "" {
			return fmt.Errorf("%s needs --target (or \"url\" in the target file): the URL the started process serves", o)
		}
		return nil
	}
	if t.APIKey == "" && t.prof.APIKeyRequired {
		return fmt.Errorf("an API key is required with %s: every call of the %s protocol carries it: give --api-key, \"api_key\" or \"api_key_env\" in the target file, or set IDSCHECK_API_KEY", t.name("url", "target"), p)
	}
	return nil
}

// checkBaseURL accepts an http or https URL with a host (and an optional
// path prefix).
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http:// or https:// URL with a host, such as http://127.0.0.1:8080")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("want a base URL without a query or fragment, such as http://127.0.0.1:8080/prefix")
	}
	if _, err := strconv.Atoi(u.Port()); u.Port() != "" && err != nil {
		return fmt.Errorf("port %q is not a number", u.Port())
	}
	return nil
}

// redactURL hides the password of a URL's user info, for error messages
// written before the secrets are known.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	}
	return u.String()
}

// withDefaultTimeScale returns the time scale, or def when none was given.
func (t *targetFlags) withDefaultTimeScale(def float64) float64 {
	if t.TimeScale > 0 {
		return t.TimeScale
	}
	return def
}

// Target is the description as the scenario runner takes it. TimeScale is
// 1 when none was given.
func (t *targetFlags) Target() features.Target {
	ft := features.Target{
		BaseURL: t.URL, APIKey: t.APIKey,
		TimeScale: t.withDefaultTimeScale(1),
		Described: t.Described,
	}
	for name, v := range t.Creds {
		if v != "" {
			if ft.Credentials == nil {
				ft.Credentials = map[string]string{}
			}
			ft.Credentials[name] = v
		}
	}
	if len(t.Readings) > 0 {
		ft.Readings = map[string]string(t.Readings)
	}
	ft.Replicas = t.replicaURLs()
	return ft
}

// variant is the variant the target declares in the profile's section
// ("": the profile's default, or a profile without variants).
func (t *targetFlags) variant() string { return t.variantOf(t.Described) }

// variantOf is the variant a target's description declares (the bundled
// server's own, once started), for the reports.
func (t *targetFlags) variantOf(described any) string {
	if s := t.prof.Section; s != nil && s.Variant != nil {
		return s.Variant(described)
	}
	return ""
}

// Secrets lists every secret value of the description, longest first, for
// redaction: the credentials (and the HTTP Basic header value of each),
// the secrets of the profile's section, the password of a URL's user info, the values of target_cmd's
// VAR=value assignments and --flag=value options whose name looks secret
// (KEY, TOKEN, SECRET, PASSWORD, ...). A literal occurrence of a credential
// inside target_cmd is covered by the credential itself. A value of any
// length counts (redact.Redactor replaces a short one as a token of its own).
func (t *targetFlags) Secrets() []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] && !strings.Contains(s, unsetMarker) {
			seen[s] = true
			out = append(out, s)
		}
	}
	creds := []string{t.APIKey}
	for _, name := range slices.Sorted(maps.Keys(t.Creds)) {
		creds = append(creds, t.Creds[name])
	}
	for _, v := range creds {
		if v != "" {
			add(v)
			add(base64.StdEncoding.EncodeToString([]byte("admin:" + v)))
		}
	}
	urls := []string{t.URL, t.EffectSink.URL, t.Store}
	cmds := []string{t.TargetCmd}
	for _, r := range t.ReplicaList {
		urls, cmds = append(urls, r.URL), append(cmds, r.Cmd)
	}
	for _, u := range urls {
		if pu, err := url.Parse(u); err == nil && pu.User != nil {
			if pw, ok := pu.User.Password(); ok {
				add(pw)
				add(url.QueryEscape(pw))
				add(url.PathEscape(pw))
			}
		}
	}
	for _, c := range cmds {
		for _, v := range redact.CommandSecrets(c, nil) {
			add(v)
		}
	}
	for _, v := range t.sectionSecrets {
		add(v)
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unquoteShell(s string) string {
	if len(s) >= 2 && s[0] == '\'' && s[len(s)-1] == '\'' {
		return s[1 : len(s)-1]
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\$`, `$`, "\\`", "`").Replace(s[1 : len(s)-1])
	}
	return s
}

// reproduceFlag renders a target flag given on the command line for a
// reproduce line: a credential as "$IDSCHECK_…", never its value; each
// --reading apart; ok is false for a flag that is not a target flag.
// --target-file is repeated as given: the file, not the line, holds the
// rest of the description.
func (t *targetFlags) reproduceFlag(name, value string) (parts []string, ok bool) {
	if !t.isTargetFlag(name) {
		return nil, false
	}
	secret := name == "api-key"
	for _, c := range t.prof.Credentials {
		secret = secret || c.Name == name
	}
	switch {
	case secret:
		return []string{"--" + name + `="$` + credentialEnvName(name) + `"`}, true
	case name == "reading":
		for _, kv := range strings.Split(t.cli.readings.String(), ",") {
			parts = append(parts, "--reading="+shellQuote(kv))
		}
		return parts, true
	}
	if name == "target-cmd" {
		value = replayCommand(value, t.Secrets(), new(replayNeeds))
	}
	return []string{"--" + name + "=" + shellQuote(value)}, true
}

// reproduceArgs renders every target flag set on fs (after Parse), in
// fs.Visit's order, then the credentials taken from IDSCHECK_* variables:
// the target's part of a reproduce line, for a command that builds its own.
func (t *targetFlags) reproduceArgs(fs *flag.FlagSet) []string {
	var parts []string
	fs.Visit(func(f *flag.Flag) {
		if p, ok := t.reproduceFlag(f.Name, f.Value.String()); ok {
			parts = append(parts, p...)
		}
	})
	return append(parts, t.reproduceEnv()...)
}

// reproduceEnv renders the credentials taken from IDSCHECK_* variables, for
// the end of a reproduce line.
func (t *targetFlags) reproduceEnv() []string {
	var parts []string
	for _, name := range t.fromEnv {
		parts = append(parts, "--"+name+`="$`+credentialEnvName(name)+`"`)
	}
	return parts
}

// redactAll replaces every secret (and its JSON-escaped form) in s.
func redactAll(s string, secrets []string) string {
	return redact.NewRedactor(secrets...).String(s)
}

// jsonValueKind names the kind of a JSON value: string, number, object, …
func jsonValueKind(raw json.RawMessage) string {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
