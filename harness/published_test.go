package harness

import (
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestParamResolve: a parameter the target publishes is used when none was
// declared (with a note), the declared one when both agree or the target
// publishes none, and a contradiction names both values and their origins.
func TestParamResolve(t *testing.T) {
	pub := ParsePublished([]byte(`{"ok": true, "time_scale": 60, "bad": "x", "zero": 0}`))
	cases := []struct {
		name     string
		p        Param
		want     float64
		from     string
		note, er string
	}{
		{"published, none declared", Param{Name: "time_scale"}, 60, PublishedHealth, "the target publishes time_scale 60: using it", ""},
		{"agree", Param{Name: "time_scale", Declared: 60, From: "--time-scale"}, 60, "--time-scale", "", ""},
		{"not published", Param{Name: "key_ttl_seconds", Declared: 5, From: "f"}, 5, "f", "", ""},
		{"not a number", Param{Name: "bad", Declared: 5, From: "f"}, 5, "f", "", ""},
		{"not positive", Param{Name: "zero"}, 0, "", "", ""},
		{"contradiction", Param{Name: "time_scale", Declared: 1, From: "--time-scale"}, 0, "", "",
			"time_scale is 1 by --time-scale, but the target publishes time_scale 60 (GET /health of the target)"},
		// issue 29: keys that never expire are declared as +Inf; the
		// message says it the way the target file does
		{"contradiction with never", Param{Name: "time_scale", Declared: math.Inf(1), From: `"key_ttl_seconds" in t.json`}, 0, "", "",
			`time_scale is never by "key_ttl_seconds" in t.json, but the target publishes time_scale 60`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.p.Resolve(pub)
			if tc.er != "" {
				var ce *ContradictionError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.er) {
					t.Fatalf("error %v, want a contradiction saying %q", err, tc.er)
				}
				return
			}
			if err != nil || r.Value != tc.want || r.From != tc.from || r.Note != tc.note {
				t.Fatalf("got %+v, %v; want %g from %q, note %q", r, err, tc.want, tc.from, tc.note)
			}
		})
	}
}

// TestResolveReadings: a published reading of a decision is used where none
// was declared, a declared one it contradicts is an error, and published
// keys that are no decision (or name no reading of one) are left alone.
func TestResolveReadings(t *testing.T) {
	pub := ParsePublished([]byte(`{"readings": {"extend": "added", "bounds": "clamp", "lease-expiry": "nonsense"}}`))
	decisions := map[string][]string{"extend": {"from-now", "added"}, "lease-expiry": {"backoff", "immediate"}}
	from := func(string) string { return "--reading" }
	got, notes, err := ResolveReadings(pub, decisions, nil, from)
	if err != nil || len(got) != 1 || got["extend"] != "added" || len(notes) != 1 || !strings.Contains(notes[0], "extend=added") {
		t.Fatalf("got %v %q %v", got, notes, err)
	}
	got, notes, err = ResolveReadings(pub, decisions, map[string]string{"extend": "added"}, from)
	if err != nil || got["extend"] != "added" || len(notes) != 0 {
		t.Fatalf("agreeing: got %v %q %v", got, notes, err)
	}
	if _, _, err := ResolveReadings(pub, decisions, map[string]string{"extend": "from-now"}, from); err == nil ||
		!strings.Contains(err.Error(), "from-now by --reading") || !strings.Contains(err.Error(), "added") {
		t.Fatalf("contradiction: %v", err)
	}
}

// TestReadPublished: GET /health's JSON object is read; anything else
// publishes nothing.
func TestReadPublished(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   bool
	}{{200, `{"time_scale": 20}`, true}, {200, `not json`, false}, {404, `{"time_scale": 20}`, false}} {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
		}))
		v, ok := ReadPublished(t.Context(), hs.URL, time.Second).Number("time_scale")
		hs.Close()
		if ok != tc.want || (ok && v != 20) {
			t.Errorf("%d %s: time_scale %v %t, want published %t", tc.status, tc.body, v, ok, tc.want)
		}
	}
}
