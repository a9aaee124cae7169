// Package redact is the harness's one redaction: which names hold secrets,
// which values of a start command are secrets, and the Redactor that
// replaces them in whatever the harness prints or writes.
package redact

import (
	"cmp"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// Redacted replaces a secret value in whatever the harness prints or writes.
const Redacted = "REDACTED"

// minSecret is the shortest value treated as a secret: replacing a shorter
// one would shred ordinary text.
const minSecret = 4

// secretName matches a variable or option name that names a credential.
var secretName = regexp.MustCompile(`(?i)(secret|token|passw|pwd|passphrase|api_?key|apikey|private|credential|auth|cookie|signing|(^|[_-])key($|[_-]))`)

// notSecretName matches names that hold where a secret lives, not the secret.
var notSecretName = regexp.MustCompile(`(?i)([_-](file|path|dir|url|name|env|id|header|ttl|len|length|size))$`)

// SecretName reports whether an environment variable's or a flag's name
// says that its value is a secret: BUS_SECRET, API_KEY, --admin-token,
// DB_PASSWORD, a name ending in KEY as a word; not a name that says where a
// secret lives (…_FILE, …_PATH, …_ENV, …_URL, …).
func SecretName(name string) bool {
	return secretName.MatchString(name) && !notSecretName.MatchString(name)
}

// assignment matches a shell assignment NAME=value (value quoted or bare) at
// the start of a word.
var assignment = regexp.MustCompile(`(^|[\s;&|()` + "`" + `])([A-Za-z_][A-Za-z0-9_]*)=('[^']*'|"(?:[^"\\]|\\.)*"|[^\s;&|()` + "`" + `'"]*)`)

// secretFlag matches --name=value and --name value (one word).
var secretFlag = regexp.MustCompile(`(^|\s)(--?[A-Za-z][A-Za-z0-9_-]*)(=|\s+)('[^']*'|"(?:[^"\\]|\\.)*"|[^\s;&|()'"-][^\s;&|()'"]*)`)

// CommandSecrets returns the secret values a start command carries: the
// values of its assignments NAME=value whose NAME looks secret (SecretName),
// of its flags --name=value or --name value likewise, and of the entries of
// env ("NAME=value", e.g. the process's environment) likewise. Values
// shorter than 4 bytes, and references ($NAME), are left out.
func CommandSecrets(cmdline string, env []string) []string {
	var out []string
	add := func(raw string) {
		v := unquote(raw)
		if len(v) < minSecret || strings.HasPrefix(v, "$") { // $X: a reference, not a value
			return
		}
		for _, x := range []string{v, raw} { // the value, and its quoted form as written
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	for _, m := range assignment.FindAllStringSubmatch(cmdline, -1) {
		if SecretName(m[2]) {
			add(m[3])
		}
	}
	for _, m := range secretFlag.FindAllStringSubmatch(cmdline, -1) {
		if SecretName(strings.TrimLeft(m[2], "-")) {
			add(m[4])
		}
	}
	for _, kv := range env {
		if name, v, ok := strings.Cut(kv, "="); ok && SecretName(name) {
			add(v)
		}
	}
	return out
}

func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	return v
}

// Redactor replaces secrets in text. The zero value and nil replace nothing.
type Redactor struct {
	secrets []string
	rep     *strings.Replacer
}

// NewRedactor returns a Redactor of the given secret values (shorter than 4
// bytes: ignored; longest first, so a secret that contains another goes
// whole).
func NewRedactor(secrets ...string) *Redactor {
	var ss []string
	for _, s := range secrets {
		if len(s) >= minSecret && !slices.Contains(ss, s) {
			ss = append(ss, s)
		}
	}
	slices.SortFunc(ss, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	r := &Redactor{secrets: ss}
	if len(ss) > 0 {
		pairs := make([]string, 0, 4*len(ss))
		for _, s := range ss {
			pairs = append(pairs, s, Redacted)
			// its JSON-escaped form, as it stands inside a JSON string
			if q, _ := json.Marshal(s); len(q) > 2 && string(q[1:len(q)-1]) != s {
				pairs = append(pairs, string(q[1:len(q)-1]), Redacted)
			}
		}
		r.rep = strings.NewReplacer(pairs...)
	}
	return r
}

// Secrets returns the redactor's secret values (for a renderer of its own,
// e.g. reports.Result.Redact).
func (r *Redactor) Secrets() []string {
	if r == nil {
		return nil
	}
	return slices.Clone(r.secrets)
}

// String replaces every secret value in s with Redacted.
func (r *Redactor) String(s string) string {
	if r == nil || r.rep == nil {
		return s
	}
	return r.rep.Replace(s)
}

// Command redacts a start command for display: every known secret value is
// replaced with Redacted, and so is the value of every assignment NAME=value
// and flag --name=value / --name value whose name looks secret, known or not.
// An assignment keeps its shape as a reference to the harness's environment
// (NAME=$NAME), so a printed reproduce line still runs where NAME is set.
func (r *Redactor) Command(cmdline string) string {
	s := r.String(cmdline)
	s = assignment.ReplaceAllStringFunc(s, func(m string) string {
		sub := assignment.FindStringSubmatch(m)
		if !SecretName(sub[2]) || sub[3] == "" {
			return m
		}
		return sub[1] + sub[2] + `="$` + sub[2] + `"`
	})
	s = secretFlag.ReplaceAllStringFunc(s, func(m string) string {
		sub := secretFlag.FindStringSubmatch(m)
		if !SecretName(strings.TrimLeft(sub[2], "-")) || strings.HasPrefix(sub[4], "$") {
			return m
		}
		return sub[1] + sub[2] + sub[3] + Redacted
	})
	return s
}
