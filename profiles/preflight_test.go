package profiles

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
	"github.com/idscheck/idscheck/sink"
)

// bundledTarget starts p's bundled server (mutant, variant: "" for the
// correct one and the default) on 127.0.0.1 and returns its target.
func bundledTarget(t *testing.T, p Profile, mutant, variant string) features.Target {
	t.Helper()
	sinkURL := ""
	if p.EffectSink {
		s, err := sink.Start("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		sinkURL = s.URL()
	}
	b, err := p.Bundled(t.Context(), harness.BundledConfig{Dir: t.TempDir(), TimeScale: p.DefaultTimeScale(), Seed: 1, Mutant: mutant, Variant: variant, SinkURL: sinkURL})
	if err != nil {
		t.Fatalf("%s: starting the bundled server (mutant %q): %v", p.Name, mutant, err)
	}
	srv := httptest.NewServer(b.Handler)
	t.Cleanup(func() {
		srv.Close()
		b.Close()
	})
	tgt := b.Target
	tgt.BaseURL = srv.URL
	return tgt
}

// TestPreflightPassesEveryBundledServer: the preflight's probes never
// stop a target of the protocol: every bundled server passes them, the
// correct one and each mutant (a mutant breaks a rule, which a run must
// judge; it is still the protocol).
func TestPreflightPassesEveryBundledServer(t *testing.T) {
	for _, name := range Names() {
		p, _ := Lookup(name)
		if p.Preflight == nil || p.Bundled == nil {
			continue
		}
		t.Run(string(name), func(t *testing.T) {
			mutants := append([]harness.Mutant{{}}, p.Mutants...)
			for _, m := range mutants {
				if m.Replicas {
					continue
				}
				tgt := bundledTarget(t, p, m.Name, m.Variant)
				if err := p.Preflight(t.Context(), tgt, 5*time.Second); err != nil {
					t.Errorf("mutant %q: the preflight stops the bundled server: %v", m.Name, err)
				}
			}
		})
	}
}

// TestPreflightRefusesAServerThatAnswersEverything (issue 28, case 3): a
// server that answers every request 200 {"id", "status"} (its health
// route too) is not the protocol: each profile's preflight says so in one
// round of calls, naming the call and the answer, before any scenario.
// On main the intent, ids and atp preflights let it through (a run then
// took 5 min 19 s).
func TestPreflightRefusesAServerThatAnswersEverything(t *testing.T) {
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/health" {
			io.WriteString(w, `{"ok":true,"status":"ok"}`)
			return
		}
		io.WriteString(w, `{"id":"x1","status":"ok","kind":"a2a_status","entries":[]}`)
	}))
	defer hostile.Close()
	for _, name := range Names() {
		p, _ := Lookup(name)
		if p.Preflight == nil || p.Bundled == nil {
			continue
		}
		t.Run(string(name), func(t *testing.T) {
			// The bundled server's credentials and what it declares of
			// itself, pointed at the hostile server.
			tgt := bundledTarget(t, p, "", "")
			tgt.BaseURL = hostile.URL
			err := p.Preflight(t.Context(), tgt, 5*time.Second)
			var np *harness.NotProtocolError
			if !errors.As(err, &np) || !strings.Contains(err.Error(), "answered 200") {
				t.Fatalf("preflight: %v, want a NotProtocolError naming the 200", err)
			}
		})
	}
}
