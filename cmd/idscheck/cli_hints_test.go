package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestMistypedCommandIsNamed (issue 28, case 11): a mistyped subcommand is
// answered with the nearest one, as a mistyped flag is; a word near none
// is not.
func TestMistypedCommandIsNamed(t *testing.T) {
	for typed, want := range map[string]string{"chaso": `did you mean "chaos"?`, "rnu": `did you mean "run"?`, "mutant": `did you mean "mutants"?`,
		"reprot": `did you mean "report"?`, "--serve": `did you mean "serve"?`, "xyzzy": "run 'idscheck help' for the list"} {
		var stdout, stderr bytes.Buffer
		if code := cli(t.Context(), []string{typed}, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), want) {
			t.Errorf("idscheck %s: exit %d, %q; want %d and %q", typed, code, stderr.String(), exitUsage, want)
		}
	}
}

// TestMutantsHelpListsTheMutants (issue 28, case 11): mutants -h lists the
// mutants of the profile asked for (the default one without --profile),
// each with the rule it breaks; those caught over replicas alone apart.
func TestMutantsHelpListsTheMutants(t *testing.T) {
	for _, name := range []string{"intent", "ids", "atp", "http-idempotency", "a2a"} {
		p, err := lookupProfile(name)
		if err != nil {
			t.Fatal(err)
		}
		args := []string{"mutants", "--profile", name, "-h"}
		if name == defaultProfile() {
			args = []string{"mutants", "-h"}
		}
		var stdout, stderr bytes.Buffer
		if code := cli(t.Context(), args, &stdout, &stderr); code != exitOK {
			t.Fatalf("%q: exit %d\n%s", args, code, stderr.String())
		}
		help := stdout.String()
		if !strings.Contains(help, "The mutants of profile "+name) {
			t.Errorf("%q lists no mutant:\n%s", args, help)
		}
		for _, m := range p.Mutants {
			if !strings.Contains(help, "  "+m.Name) || !strings.Contains(help, "breaks "+m.Breaks+"\n      "+m.Description) {
				t.Errorf("%q does not list %s with the rule it breaks (%s)", args, m.Name, m.Breaks)
			}
			if i, j := strings.Index(help, "Caught over several replicas"), strings.Index(help, "\n  "+m.Name); m.Replicas && (i < 0 || j < i) {
				t.Errorf("%q lists the replica mutant %s among the matrix's", args, m.Name)
			}
		}
	}
}

// TestTargetFileOfAnotherProfile (issue 28, case 11): a target file whose
// section is another profile's (http_idempotency, run without --profile)
// says which profile it belongs to, not only "unknown field".
func TestTargetFileOfAnotherProfile(t *testing.T) {
	file := writeFile(t, "payments.json", `{"url": "http://127.0.0.1:1", "http_idempotency": {"path": "/v1/payments", "body": {"a": "{{unique}}"}}}`)
	for _, args := range [][]string{
		{"run", "--target-file", file, "--out", t.TempDir()},
		{"chaos", "--target-file", file, "--out", t.TempDir()},
		{"run", "--profile", "ids", "--target-file", file, "--out", t.TempDir()},
	} {
		var stdout, stderr bytes.Buffer
		code := cli(t.Context(), args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), `"http_idempotency" is the section of profile http-idempotency`) ||
			!strings.Contains(stderr.String(), "add --profile http-idempotency") {
			t.Errorf("%q: exit %d, %q; want %d naming the profile", args, code, stderr.String(), exitUsage)
		}
	}
}
