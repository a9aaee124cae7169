package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoShortSecretInAnyOutput: secrets of 3 characters, given by flag and
// inside --target-cmd, appear in nothing run and chaos print or write: not
// in the reproduce and replay lines (variables there), not in the notes
// naming what to set, not in the reports.
func TestNoShortSecretInAnyOutput(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	secrets := []string{"Qj7", "Zx9", "Wq4", "Vv8"}
	cmd := "BUS_SECRET=Wq4 ./no-such-server --admin-token=Vv8 --addr " + addr
	for _, args := range [][]string{
		{"run", "--target", "http://" + addr, "--api-key", "Qj7", "--admin-token", "Zx9", "--target-cmd", cmd, "--health-wait", "300ms"},
		{"chaos", "--target", "http://" + addr, "--api-key", "Qj7", "--admin-token", "Zx9", "--target-cmd", cmd, "--health-wait", "300ms", "--duration", "1s"},
		{"chaos", "--target", "http://" + addr, "--api-key", "Qj7", "--admin-token", "Zx9", "--health-wait", "300ms", "--duration", "1s"},
	} {
		out := filepath.Join(t.TempDir(), "out")
		var stdout, stderr bytes.Buffer
		code := cli(t.Context(), append(args, "--out", out), &stdout, &stderr)
		if code != exitUnreachable {
			t.Errorf("%s: exit %d, want 3\n%s", args[0], code, stderr.String())
		}
		texts := map[string]string{"stdout": stdout.String(), "stderr": stderr.String()}
		entries, _ := os.ReadDir(out)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(out, e.Name()))
			texts[e.Name()] = string(b)
		}
		if len(entries) == 0 {
			t.Errorf("%s wrote no report", args[0])
		}
		for where, text := range texts {
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Errorf("%s: %s holds the secret %q:\n%s", args[0], where, s, text)
				}
			}
		}
		if args[0] == "run" && !strings.Contains(stdout.String(), "export IDSCHECK_API_KEY=… (the key you gave --api-key)") {
			t.Errorf("run: the reproduce line does not say what to set:\n%s", stdout.String())
		}
		if strings.Contains(texts["stdout"], "REDACTED") && strings.Contains(texts["stdout"], "reproduce:") {
			for _, line := range strings.Split(texts["stdout"], "\n") {
				if strings.HasPrefix(line, "reproduce:") && strings.Contains(line, "REDACTED") {
					t.Errorf("the reproduce line says REDACTED, not a variable: %s", line)
				}
			}
		}
	}
}
