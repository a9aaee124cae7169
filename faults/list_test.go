package faults

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func names(fs []Fault) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name()
	}
	return out
}

func TestAllIsTheExplicitList(t *testing.T) {
	empty := All(Config{})
	want := []string{"latency", "bandwidth", "slicer", "reset_peer", "blackhole", "lost_response", "partition", "truncate", "storm", "crash"}
	if !slices.Equal(names(empty), want) {
		t.Errorf("All(Config{}) = %v, want %v", names(empty), want)
	}
	// Nothing to act on: every fault is listed, none is usable, each says why.
	usable, unavailable := Usable(empty)
	if len(usable) != 0 || len(unavailable) != len(want) {
		t.Errorf("usable %v, unavailable %v", names(usable), unavailable)
	}
	for name, err := range unavailable {
		if !errors.Is(err, ErrNotAvailable) {
			t.Errorf("%s: %v, want ErrNotAvailable", name, err)
		}
	}

	c := newCounter(t, nil)
	n := newNet(t, c)
	full := All(Config{
		Network: n,
		StormDo: func(ctx context.Context, i int) {},
		Failpoints: map[string]string{
			"github.com/idscheck/idscheck/sut/intent/inside-cleanup":            "sleep(100)",
			"github.com/idscheck/idscheck/sut/intent/after-commit-before-reply": `return("error")`,
		},
	})
	usable, unavailable = Usable(full)
	wantUsable := []string{"latency", "bandwidth", "slicer", "reset_peer", "blackhole", "lost_response", "partition", "truncate", "storm",
		"failpoint/after-commit-before-reply", "failpoint/inside-cleanup"}
	if !slices.Equal(names(usable), wantUsable) {
		t.Errorf("usable = %v, want %v", names(usable), wantUsable)
	}
	if len(unavailable) != 1 || unavailable["crash"] == nil {
		t.Errorf("unavailable = %v, want only crash", unavailable)
	}
	if _, ok := full[len(full)-1].(*Failpoint); !ok {
		t.Errorf("without FailpointAddr a failpoint is %T, want *Failpoint", full[len(full)-1])
	}
	remote := All(Config{FailpointAddr: "127.0.0.1:1", Failpoints: map[string]string{"x/y": "return"}})
	if _, ok := remote[len(remote)-1].(*RemoteFailpoint); !ok {
		t.Errorf("with FailpointAddr a failpoint is %T, want *RemoteFailpoint", remote[len(remote)-1])
	}
}

func TestParseKindsAndSelect(t *testing.T) {
	list := All(Config{Failpoints: map[string]string{"a/after-commit": "return"}})
	for _, tc := range []struct {
		flag    string
		want    []string // selected fault names
		wantErr string
	}{
		{"net", []string{"latency", "bandwidth", "slicer", "reset_peer", "blackhole", "lost_response", "partition", "truncate"}, ""},
		{"storm, crash", []string{"storm", "crash"}, ""},
		{"crash,crash", []string{"crash"}, ""},
		{"lost_response,failpoint", []string{"lost_response", "failpoint/after-commit"}, ""},
		{"failpoint/after-commit", []string{"failpoint/after-commit"}, ""},
		{"all", names(list), ""},
		{"net,quake", nil, `unknown fault "quake"`},
		{" , ", nil, "empty list"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			toks, err := ParseKinds(tc.flag)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseKinds(%q) = %v, %v; want error %q", tc.flag, toks, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := names(Select(list, toks)); !slices.Equal(got, tc.want) {
				t.Errorf("Select(%q) = %v, want %v", tc.flag, got, tc.want)
			}
		})
	}
}

// TestParseKindsNone: "none" alone asks for no fault (an empty list, not
// an error); beside another token it is refused, naming why.
func TestParseKindsNone(t *testing.T) {
	got, err := ParseKinds(" none ")
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("none: %v, %v; want an empty list", got, err)
	}
	if _, err := ParseKinds("none,net"); err == nil || !strings.Contains(err.Error(), "alone") {
		t.Fatalf("none beside net: %v", err)
	}
}
