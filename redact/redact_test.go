package redact

import (
	"slices"
	"strings"
	"testing"
)

func TestCommandSecretsAndRedaction(t *testing.T) {
	cmd := `BUS_SECRET=s3cr3t-value BUS_ADMIN_SECRET='adm in-pw' PORT=8080 DB_PASSWORD="p@ss word" ./server --api-key=k3yk3y --token tok-tok-1 --addr 127.0.0.1:8080 --key $API_KEY`
	got := CommandSecrets(cmd, []string{"HOME=/home/x", "MY_TOKEN=envtok-123", "SHORT_KEY=abc", "PWD=/tmp/work", "OLDPWD=/srv/x", "DB_PWD=pw-in-env"})
	want := []string{"s3cr3t-value", "adm in-pw", "p@ss word", "k3yk3y", "tok-tok-1", "envtok-123", "pw-in-env"}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("CommandSecrets lacks %q: %q", w, got)
		}
	}
	if slices.Contains(got, "8080") || slices.Contains(got, "abc") || slices.Contains(got, "/home/x") || slices.Contains(got, "$API_KEY") ||
		slices.Contains(got, "/tmp/work") || slices.Contains(got, "/srv/x") {
		t.Errorf("CommandSecrets holds a non-secret: %q", got)
	}
	r := NewRedactor(append(got, "the-api-key")...)
	shown := r.Command(cmd + " --verbose the-api-key")
	for _, s := range []string{"s3cr3t-value", "adm in-pw", "p@ss word", "k3yk3y", "tok-tok-1", "the-api-key"} {
		if strings.Contains(shown, s) {
			t.Errorf("redacted command still holds %q: %s", s, shown)
		}
	}
	for _, keep := range []string{`BUS_SECRET="$BUS_SECRET"`, `DB_PASSWORD="$DB_PASSWORD"`, "PORT=8080", "--addr 127.0.0.1:8080", "./server", "--api-key=REDACTED", "--key $API_KEY"} {
		if !strings.Contains(shown, keep) {
			t.Errorf("redacted command lacks %q: %s", keep, shown)
		}
	}
	t.Logf("shown: %s", shown)
	if s := r.String("log: tok-tok-1 and envtok-123"); s != "log: REDACTED and REDACTED" {
		t.Errorf("String = %q", s)
	}
	var nilR *Redactor
	if nilR.String("x") != "x" || nilR.Secrets() != nil {
		t.Error("a nil Redactor must replace nothing")
	}
}

// TestShortSecretsAreRedacted: a secret of any length goes (issue 18, case
// 8): a 3-character key wherever it stands as a token, never inside a word;
// a credential header's value whatever it holds.
func TestShortSecretsAreRedacted(t *testing.T) {
	r := NewRedactorMarker("[x]", "abc", "q", "a-long-secret")
	for in, want := range map[string]string{
		"abc":                         "[x]",
		`{"api_key":"abc","n":1}`:     `{"api_key":"[x]","n":1}`,
		"key=abc&other=abcdef":        "key=[x]&other=abcdef",
		"abc abc":                     "[x] [x]",
		"the q is q":                  "the [x] is [x]",
		"quick abcd xabc":             "quick abcd xabc",
		"token a-long-secret and abc": "token [x] and [x]",
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	h := r.Header(map[string][]string{"X-Api-Key": {"zz"}, "X-Metrics-Token": {"t0k"}, "Idempotency-Key": {"k-abc"}, "Content-Type": {"abc"}})
	if h["X-Api-Key"][0] != "[x]" || h["X-Metrics-Token"][0] != "[x]" {
		t.Errorf("credential headers kept a value: %v", h)
	}
	if h["Idempotency-Key"][0] != "k-abc" || h["Content-Type"][0] != "[x]" {
		t.Errorf("an ordinary header was blanked or kept a secret: %v", h)
	}
	if NewRedactor("abc").String("abcabc") != "abcabc" {
		t.Error("a short secret inside a word was replaced")
	}
}
