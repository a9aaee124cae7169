package httpidem

import (
	"encoding/json"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestSection: the target file's "http_idempotency" and --variant merge
// into the *Endpoint the steps read, callers' variables resolved and their
// values listed as secrets; what is wrong is refused with the field named.
func TestSection(t *testing.T) {
	env := map[string]string{"ALICE": "Bearer tok_alice_secret", "BOB": "Bearer tok_bob_secret"}
	getenv := func(k string) string { return env[k] }
	good := `{"path": "/v1/payments", "body": {"amount": 1, "reference": "{{unique}}"},
		"callers": [{"headers_env": {"Authorization": "ALICE"}}, {"headers": {"Authorization": "Bearer tok_bob_secret"}}]}`
	for _, tc := range []struct {
		name    string
		raw     string
		args    []string
		variant string // of the value; "-": no value
		secrets []string
		err     string // a part of the error; "": none
	}{
		{name: "nothing", variant: "-"},
		{name: "null", raw: "null", variant: "-"},
		{name: "flag alone", args: []string{"--variant", "t0"}, variant: "t0"},
		{name: "file", raw: good, variant: "",
			secrets: []string{"Bearer tok_alice_secret", "Bearer tok_bob_secret", "tok_alice_secret", "tok_bob_secret"}},
		{name: "flag over file", raw: `{"variant": "ietf", "path": "/p", "body": {"a": 1}}`, args: []string{"--variant", "stripe"}, variant: "stripe"},
		{name: "bad flag", args: []string{"--variant", "paypal"}, err: "--variant is \"paypal\""},
		{name: "bad variant in the file", raw: `{"variant": "paypal"}`, err: `"http_idempotency.variant" is "paypal"`},
		{name: "unknown member", raw: `{"path": "/p", "bodi": {}}`, err: `unknown field "bodi"`},
		{name: "wrong type", raw: `{"path": 3}`, err: `"http_idempotency.path": want a JSON string`},
		{name: "invalid endpoint", raw: `{"path": "p", "body": {"a": 1}}`, err: `path "p"`},
		{name: "unset variable", raw: `{"path": "/p", "body": {"a": 1}, "callers": [{"headers_env": {"Authorization": "CAROL"}}]}`, err: "$CAROL, which is not set"},
		{name: "a value for a name", raw: `{"path": "/p", "body": {"a": 1}, "callers": [{"headers_env": {"Authorization": "Bearer tok_x"}}]}`, err: "want the NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			merge := Section().Flags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var raw json.RawMessage
			if tc.raw != "" {
				raw = json.RawMessage(tc.raw)
			}
			v, secrets, err := merge(raw, getenv)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "tok_x") {
					t.Errorf("the error shows the value given for a name: %v", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if tc.variant == "-" {
				if v != nil {
					t.Fatalf("value %#v, want none", v)
				}
				return
			}
			e, ok := v.(*Endpoint)
			if !ok || e == nil {
				t.Fatalf("value %#v, want an *Endpoint", v)
			}
			if e.Variant != tc.variant {
				t.Errorf("variant %q, want %q", e.Variant, tc.variant)
			}
			if !slices.Equal(secrets, tc.secrets) {
				t.Errorf("secrets %q, want %q", secrets, tc.secrets)
			}
			if tc.name == "file" && e.Callers[0].Headers["Authorization"] != env["ALICE"] {
				t.Errorf("caller 1's header %q not resolved from $ALICE", e.Callers[0].Headers)
			}
		})
	}
	if !strings.Contains(Section().Help, "headers_env") || Section().Key != "http_idempotency" {
		t.Error("the section's help does not document its schema")
	}
}
