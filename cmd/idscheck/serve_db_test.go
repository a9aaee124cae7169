package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeWritesNoDatabaseIntoTheCurrentFolder (issue 28, case 11): serve
// without --db wrote infrastructure.db (a2a.db, ids.db, …) into the current
// folder, silently. It now keeps a fresh database in a temporary folder of
// its own, says where, and removes it when it stops; a database the server
// is told of (--db, or BUS_DB_PATH for the Intent bus) is where it says.
func TestServeWritesNoDatabaseIntoTheCurrentFolder(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	t.Setenv("A2A_API_KEY", "serve-db-key")
	t.Setenv("BUS_SECRET", "serve-db-secret")
	named := filepath.Join(t.TempDir(), "named.db")
	for _, tc := range []struct {
		name string
		args []string
		env  string // BUS_DB_PATH
		at   string // where the database must be; "": a fresh temporary one
	}{
		{"a2a", []string{"--profile", "a2a"}, "", ""},
		{"intent", []string{"--profile", "intent"}, "", ""},
		{"intent BUS_DB_PATH", []string{"--profile", "intent"}, named, named},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("BUS_DB_PATH", tc.env)
			ctx, cancel := context.WithCancel(t.Context())
			var stdout, stderr syncBuffer
			done := make(chan int, 1)
			go func() {
				done <- cli(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--log-level", "error"}, tc.args...), &stdout, &stderr)
			}()
			for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stdout.String(), "listening on ") && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			}
			said := stderr.String()
			cancel()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("serve did not stop")
			}
			if !strings.Contains(stdout.String(), "listening on ") {
				t.Fatalf("serve did not start:\n%s\n%s", stdout.String(), stderr.String())
			}
			if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
				t.Errorf("serve wrote %s into the current folder", entries[0].Name())
			}
			if tc.at != "" {
				if _, err := os.Stat(tc.at); err != nil || strings.Contains(said, "idscheck serve: database") {
					t.Errorf("the database named is not where it says (%v), or serve chose another:\n%s", err, said)
				}
				return
			}
			_, rest, ok := strings.Cut(said, "idscheck serve: database ")
			db, _, _ := strings.Cut(rest, " ")
			if !ok || !strings.HasPrefix(db, os.TempDir()) {
				t.Fatalf("serve does not say where its database is:\n%s", said)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("the temporary database %s is left behind (%v)", db, err)
			}
		})
	}
}
