package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/profiles/intent"
	sut "github.com/idscheck/idscheck/sut/intent"
)

func TestServeReadingsUsage(t *testing.T) {
	t.Setenv("BUS_SECRET", "serve-test-secret")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown decision", []string{"--reading", "nope=x"}, []string{`unknown reading "nope"`, intent.DecisionLeaseExpiry, sut.ReadingBounds}},
		{"unknown name", []string{"--reading", intent.DecisionExtend + "=later"}, []string{`unknown name "later"`, "from-now, added"}},
		{"unknown name after alternate", []string{"--readings", "alternate", "--reading", sut.ReadingAccess + "=410"}, []string{"403, 404"}},
		{"decision without readings", []string{"--reading", intent.DecisionMaintenance + "=x"}, []string{"unknown reading"}},
		{"no equals sign", []string{"--reading", intent.DecisionExtend}, []string{"want ID=NAME"}},
		{"bad base", []string{"--readings", "other"}, []string{"default or alternate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "x.db")}, tc.args...)
			if code := cli(t.Context(), args, &stdout, &stderr); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUsage, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr.String())
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %q", stdout.String())
			}
		})
	}
}

func TestServeHelpListsReadings(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := cli(t.Context(), []string{"serve", "-h"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"serve --profile intent", "ID=NAME", "-reading value", "-readings string"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("help does not mention %q", w)
		}
	}
	for _, k := range sut.ReadingKeys() {
		if !strings.Contains(stdout.String(), k.Key+": "+strings.Join(k.Names, ", ")) {
			t.Errorf("help does not list %s", k.Key)
		}
	}
}

// TestServeReadingsInHealth starts idscheck serve on a free port and reads
// the readings in effect from GET /health.
func TestServeReadingsInHealth(t *testing.T) {
	t.Setenv("BUS_SECRET", "serve-test-secret")
	for _, tc := range []struct {
		name string
		args []string
		want map[string]string
	}{
		{"default", nil, sut.DefaultReadings()},
		{"alternate", []string{"--readings", "alternate"}, sut.AlternateReadings()},
		{"default plus one", []string{"--reading", intent.DecisionLeaseExpiry + "=immediate"}, func() map[string]string {
			m := sut.DefaultReadings()
			m[intent.DecisionLeaseExpiry] = "immediate"
			return m
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			pr, pw := io.Pipe()
			var stderr bytes.Buffer
			done := make(chan int, 1)
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "s.db"), "--log-level", "error"}, tc.args...)
			go func() {
				code := cli(ctx, args, pw, &stderr)
				pw.Close()
				done <- code
			}()
			line, err := bufio.NewReader(pr).ReadString('\n')
			if err != nil {
				cancel()
				t.Fatalf("no address: %v (exit %d)", err, <-done)
			}
			go io.Copy(io.Discard, pr)
			base := strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
			hc := &http.Client{Timeout: 10 * time.Second}
			res, err := hc.Get(base + intent.PathHealth)
			if err != nil {
				t.Fatal(err)
			}
			var h struct {
				OK       bool              `json:"ok"`
				Readings map[string]string `json:"readings"`
			}
			err = json.NewDecoder(res.Body).Decode(&h)
			res.Body.Close()
			if err != nil || !h.OK || !reflect.DeepEqual(h.Readings, tc.want) {
				t.Fatalf("health: %+v (%v), want readings %v", h, err, tc.want)
			}
			cancel()
			if code := <-done; code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
			}
		})
	}
}
