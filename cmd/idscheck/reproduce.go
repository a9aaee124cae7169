package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/redact"
	"github.com/idscheck/idscheck/verdict"
)

// selfCommand is how a printed command line (reproduce, replay, re-check)
// starts idscheck: the way this process was started (os.Args[0]), so that
// the line runs as printed: "bin/idscheck" for a binary started by its
// path, "idscheck" for one found on $PATH, "go run ./cmd/idscheck" for a
// binary go run built (from the module's root). Tests set it.
var selfCommand = invokedAs(os.Args[0])

// invokedAs is selfCommand for a process started as arg0.
func invokedAs(arg0 string) string {
	base := filepath.Base(arg0)
	switch {
	case arg0 == "" || strings.HasSuffix(base, ".test"):
		return "idscheck" // a test binary stands for idscheck
	case isGoRunBinary(arg0):
		return "go run ./cmd/idscheck"
	case !strings.ContainsRune(arg0, filepath.Separator):
		return arg0 // found on $PATH: runs by its name
	}
	return shellQuote(arg0)
}

// isGoRunBinary says whether arg0 is a binary go run built: it lives in a
// go-build directory of the temporary directory, and is gone once it ends.
func isGoRunBinary(arg0 string) bool {
	dir := filepath.ToSlash(filepath.Dir(arg0))
	return strings.Contains(dir, "/go-build") && strings.HasSuffix(dir, "/exe")
}

// reproOut is the --out of a line that reproduces the run written to out:
// a new folder beside it, never out itself (the line run as printed would
// replace the report it reproduces): out-repro, and out-repro-2, -3, … for
// a reproduction's own.
func reproOut(out string) string {
	out = filepath.Clean(out)
	dir, base := filepath.Split(out)
	if i := strings.LastIndex(base, "-repro"); i > 0 {
		switch rest := base[i+len("-repro"):]; {
		case rest == "":
			return dir + base + "-2"
		case strings.HasPrefix(rest, "-"):
			if n, err := strconv.Atoi(rest[1:]); err == nil && n > 1 {
				return dir + base[:i] + "-repro-" + strconv.Itoa(n+1)
			}
		}
	}
	return out + "-repro"
}

// replayNeeds is what a printed command line needs from the environment:
// each variable it names in place of a secret, and what to set it to.
type replayNeeds []string

// note renders the needs as one line ("" for none): "export
// IDSCHECK_API_KEY=… (the key you gave --api-key); export BUS_SECRET=… (…)".
// Each is exported, not only set: the line reads some of them in a process
// it starts (the target command, a target file's api_key_env).
func (n replayNeeds) note() string {
	if len(n) == 0 {
		return ""
	}
	return strings.Join(n, "; ")
}

func (n *replayNeeds) add(s string) {
	for _, x := range *n {
		if x == s {
			return
		}
	}
	*n = append(*n, s)
}

// secretFlagRedacted finds a flag of a start command whose value
// redact.Redactor.Command replaced: --name=REDACTED or --name REDACTED.
var secretFlagRedacted = regexp.MustCompile(`(^|\s)(--?)([A-Za-z][A-Za-z0-9_-]*)(=|\s+)` + redact.Redacted + `\b`)

// secretAssignmentRef finds an assignment NAME="$NAME" that
// redact.Redactor.Command wrote in place of a secret value.
var secretAssignmentRef = regexp.MustCompile(`(^|[\s;&|(])([A-Za-z_][A-Za-z0-9_]*)="\$([A-Za-z_][A-Za-z0-9_]*)"`)

// replayCommand renders a start command (--target-cmd) for a printed line
// that runs: every secret it carries becomes a reference to a variable of
// the environment, never its value nor REDACTED. An assignment NAME=value
// whose name looks secret becomes NAME="$NAME", a flag --name=value
// --name="$NAME" (NAME: the flag's name in upper case, '-' as '_'); needs
// says which variables to set. A known secret elsewhere in the command
// stays REDACTED, and needs says so.
func replayCommand(cmdline string, secrets []string, needs *replayNeeds) string {
	s := redact.NewRedactor(secrets...).Command(cmdline)
	s = secretFlagRedacted.ReplaceAllStringFunc(s, func(m string) string {
		sub := secretFlagRedacted.FindStringSubmatch(m)
		v := strings.ToUpper(strings.ReplaceAll(sub[3], "-", "_"))
		needs.add("export " + v + "=… (the value you gave " + sub[2] + sub[3] + " in --target-cmd)")
		return sub[1] + sub[2] + sub[3] + sub[4] + `"$` + v + `"`
	})
	for _, m := range secretAssignmentRef.FindAllStringSubmatch(s, -1) {
		if m[2] == m[3] && strings.Contains(cmdline, m[2]+"=") && !strings.Contains(cmdline, m[0][len(m[1]):]) {
			needs.add("export " + m[2] + "=… (the value you gave it in --target-cmd)")
		}
	}
	if strings.Contains(s, redact.Redacted) {
		needs.add(redact.Redacted + " in --target-cmd stands for a secret you gave: write it back, or a variable holding it")
	}
	return s
}

// credentialNeeds lists, for the credentials given by flag (a printed line
// names their variable, not their value), the variable to set.
func (t *targetFlags) credentialNeeds(needs *replayNeeds) {
	var given []credential
	for _, c := range t.credentials() {
		if o := t.origin[c.field]; o == "--"+c.name {
			given = append(given, c)
		}
	}
	sort.Slice(given, func(i, j int) bool { return given[i].name < given[j].name })
	for _, c := range given {
		what := "the " + strings.ReplaceAll(c.name, "-", " ")
		if c.name == "api-key" {
			what = "the key"
		}
		needs.add("export " + c.env + "=… (" + what + " you gave --" + c.name + ")")
	}
}

// shellVar is a secret value and the shell expression that stands for it in
// a printed command line (read from the environment, never the value).
type shellVar struct {
	value string
	expr  string // inside double quotes: ${IDSCHECK_API_KEY}, $(…)
}

// targetShellVars are the credentials of target, each as the variable a
// user sets to it (IDSCHECK_API_KEY, IDSCHECK_ADMIN_TOKEN, …), and the
// HTTP Basic value of each as the expression that computes it; longest
// first. Any other secret a line would carry is REDACTED by the writer.
func targetShellVars(target features.Target) []shellVar {
	var out []shellVar
	add := func(name, v string) {
		if v == "" {
			return
		}
		env := credentialEnvName(name)
		out = append(out, shellVar{v, "${" + env + "}"},
			shellVar{base64.StdEncoding.EncodeToString([]byte("admin:" + v)), `$(printf 'admin:%s' "${` + env + `}" | base64 | tr -d '\n')`})
	}
	add("api-key", target.APIKey)
	for _, name := range slices.Sorted(maps.Keys(target.Credentials)) {
		add(name, target.Credentials[name])
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].value) > len(out[j].value) })
	return out
}

// shellWord quotes s as one shell word in which every secret of vars is
// its variable: 'X-API-Key: '"${IDSCHECK_API_KEY}".
func shellWord(s string, vars []shellVar) string {
	var b strings.Builder
	lit := func(x string) {
		if x != "" {
			b.WriteString("'" + strings.ReplaceAll(x, "'", `'\''`) + "'")
		}
	}
	for s != "" {
		at, which := -1, -1
		for i, v := range vars {
			if len(v.value) < 4 {
				continue // too short to tell from ordinary text
			}
			if j := strings.Index(s, v.value); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			lit(s)
			break
		}
		lit(s[:at])
		b.WriteString(`"` + vars[which].expr + `"`)
		s = s[at+len(vars[which].value):]
	}
	if b.Len() == 0 {
		return "''"
	}
	return b.String()
}

// curlSkipHeaders are the request headers curl sets itself.
var curlSkipHeaders = map[string]bool{"content-length": true, "host": true, "user-agent": true, "accept-encoding": true, "connection": true}

// curlLine renders one exchange as the curl command that sends it again to
// base (to the replica it went to, on replicas), its credentials read from the environment (vars).
func curlLine(base string, ex verdict.Exchange, vars []shellVar) string {
	if ex.Replica != "" {
		base = ex.Replica // the replica that answered
	}
	parts := []string{"curl", "-sS", "-i", "-X", ex.Method, shellWord(strings.TrimRight(redactURL(base), "/")+ex.Path, vars)}
	for _, name := range slices.Sorted(maps.Keys(ex.ReqHeaders)) {
		if curlSkipHeaders[strings.ToLower(name)] {
			continue
		}
		for _, v := range ex.ReqHeaders[name] {
			word := shellWord(name+": "+v, vars)
			for _, sv := range vars {
				if v == sv.value { // a credential of any length, whole
					word = shellWord(name+": ", nil) + `"` + sv.expr + `"`
				}
			}
			parts = append(parts, "-H", word)
		}
	}
	if ex.ReqBody != "" {
		parts = append(parts, "--data-raw", shellWord(ex.ReqBody, vars))
	}
	return strings.Join(parts, " ")
}

// maxCurlsPerRule and maxCurls bound the curl lines a summary prints; the
// report holds every exchange.
const (
	maxCurlsPerRule = 4
	maxCurls        = 16
)

// failedCurls renders the exchanges of the evidence of every failed rule
// (FAIL, NON-STRICT) as curl lines against base, by rule ID; res must not
// be redacted yet (the credentials are told apart by their values, then
// printed as variables).
func failedCurls(res *features.RunResult, base string, vars []shellVar) map[string][]string {
	out := map[string][]string{}
	for _, rr := range res.Rules {
		if rr.Verdict != verdict.Fail && rr.Verdict != verdict.NonStrict {
			continue
		}
		var lines []string
		var times []int
		for _, ev := range rr.Evidence {
			for _, ex := range ev.Exchanges {
				l := curlLine(base, ex, vars)
				if n := len(lines); n > 0 && lines[n-1] == l {
					times[n-1]++ // a storm of the same request: one line
					continue
				}
				lines, times = append(lines, l), append(times, 1)
			}
		}
		for i, l := range lines {
			if times[i] > 1 {
				l += fmt.Sprintf("  # sent %d times", times[i])
			}
			out[rr.RuleID] = append(out[rr.RuleID], l)
		}
	}
	return out
}

// printCurls writes the curl lines of the failed rules in the order of ids,
// bounded (maxCurlsPerRule, maxCurls).
func printCurls(w io.Writer, ids []string, curls map[string][]string, bundled bool) {
	total := 0
	for _, id := range ids {
		total += len(curls[id])
	}
	if total == 0 {
		return
	}
	fmt.Fprintln(w, "\nthe failed exchanges, as curl (credentials from the environment: IDSCHECK_API_KEY, …):")
	if bundled {
		fmt.Fprintln(w, "  (the bundled server of this run has stopped: start one with idscheck serve, or replay them against your --target)")
	}
	shown := 0
	for _, id := range ids {
		lines := curls[id]
		if len(lines) == 0 {
			continue
		}
		if shown >= maxCurls {
			break
		}
		fmt.Fprintf(w, "  %s\n", id)
		for i, l := range lines {
			if i == maxCurlsPerRule || shown >= maxCurls {
				fmt.Fprintf(w, "    … %d more in the report\n", len(lines)-i)
				break
			}
			fmt.Fprintf(w, "    %s\n", l)
			shown++
		}
	}
	if shown < total {
		fmt.Fprintf(w, "  (%d of %d shown; the report has every exchange)\n", shown, total)
	}
}
