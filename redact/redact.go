// Package redact is the harness's one redaction: which names hold secrets,
// which values of a start command are secrets, and the Redactor that
// replaces them in whatever the harness prints or writes.
package redact

import (
	"bytes"
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
	if shellDirName.MatchString(name) {
		return false // the shell's working directories: "pwd" is no password there
	}
	return secretName.MatchString(name) && !notSecretName.MatchString(name)
}

// shellDirName matches PWD and OLDPWD, which every shell sets to a
// directory.
var shellDirName = regexp.MustCompile(`^(?i:OLD)?PWD$`)

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
// A secret of 4 bytes or more is replaced wherever it stands; a shorter one
// (a 3-character API key) wherever it stands as a token of its own — not
// inside a longer word, which would shred ordinary text — and always as the
// whole value of a credential header (SecretHeader).
type Redactor struct {
	secrets []string
	marker  string
	rep     *strings.Replacer
	short   *regexp.Regexp // the secrets shorter than minSecret, as tokens
}

// NewRedactor returns a Redactor of the given secret values that writes
// Redacted in their place (longest first, so a secret that contains
// another goes whole; empty values ignored).
func NewRedactor(secrets ...string) *Redactor {
	return NewRedactorMarker(Redacted, secrets...)
}

// NewRedactorMarker is NewRedactor writing marker in place of a secret.
func NewRedactorMarker(marker string, secrets ...string) *Redactor {
	var ss []string
	for _, s := range secrets {
		if s != "" && !slices.Contains(ss, s) {
			ss = append(ss, s)
		}
	}
	slices.SortFunc(ss, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	r := &Redactor{secrets: ss, marker: marker}
	var pairs, short []string
	for _, s := range ss {
		if len(s) < minSecret {
			short = append(short, regexp.QuoteMeta(s))
			continue
		}
		pairs = append(pairs, s, marker)
		// its JSON-escaped forms, as it stands inside a JSON string (with
		// and without HTML escaping)
		for _, html := range []bool{true, false} {
			var q bytes.Buffer
			e := json.NewEncoder(&q)
			e.SetEscapeHTML(html)
			if e.Encode(s) == nil {
				if esc := strings.TrimSpace(q.String()); len(esc) > 2 && esc[1:len(esc)-1] != s && !slices.Contains(pairs, esc[1:len(esc)-1]) {
					pairs = append(pairs, esc[1:len(esc)-1], marker)
				}
			}
		}
	}
	if len(pairs) > 0 {
		r.rep = strings.NewReplacer(pairs...)
	}
	if len(short) > 0 {
		r.short = regexp.MustCompile(`(^|[^\w-])(` + strings.Join(short, "|") + `)($|[^\w-])`)
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

// String replaces every secret value in s with the marker.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	if r.rep != nil {
		s = r.rep.Replace(s)
	}
	if r.short != nil {
		// The pattern consumes the characters around a match: run it until
		// nothing is left, so that two short secrets side by side both go.
		for i := 0; i < 4 && r.short.MatchString(s); i++ {
			s = r.short.ReplaceAllString(s, "${1}"+r.marker+"${3}")
		}
	}
	return s
}

// Header returns a copy of the header h with every secret replaced, and
// with the whole value of every credential header (SecretHeader) replaced
// whatever it holds. h itself is never modified (it may be shared).
func (r *Redactor) Header(h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	marker := Redacted
	if r != nil {
		marker = r.marker
	}
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		n := make([]string, len(vs))
		for i, v := range vs {
			if SecretHeader(k) && v != "" {
				n[i] = marker
			} else {
				n[i] = r.String(v)
			}
		}
		out[k] = n
	}
	return out
}

// secretHeaders are the request and response headers whose values are
// credentials.
var secretHeaders = map[string]bool{
	"authorization":       true,
	"proxy-authorization": true,
	"x-api-key":           true,
	"x-admin-token":       true,
	"cookie":              true,
	"set-cookie":          true,
}

// SecretHeader reports whether a header's value is a credential
// (Authorization, X-API-Key, Cookie, …) or is named like one (any header
// whose name says token, secret, key or password: X-Metrics-Token).
func SecretHeader(name string) bool {
	l := strings.ToLower(name)
	return secretHeaders[l] || (strings.HasPrefix(l, "x-") && SecretName(l) && !strings.Contains(l, "idempotency"))
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
