package intent

import (
	"encoding/json"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/idscheck/idscheck/client"
	"github.com/idscheck/idscheck/features"
)

// TestSection: the "intent" section of a target file declares
// require_signatures, --require-signatures overrides it, nothing given
// declares nothing, and a section that is not the schema is refused.
func TestSection(t *testing.T) {
	cases := []struct {
		name  string
		raw   string // "" for no section
		args  []string
		want  any
		fails string
	}{
		{name: "nothing", want: nil},
		{name: "file", raw: `{"require_signatures": true}`, want: Declared{RequireSignatures: true}},
		{name: "file false", raw: `{"require_signatures": false}`, want: Declared{}},
		{name: "flag", args: []string{"--require-signatures"}, want: Declared{RequireSignatures: true}},
		{name: "flag overrides file", raw: `{"require_signatures": true}`, args: []string{"--require-signatures=false"}, want: Declared{}},
		{name: "unknown field", raw: `{"require_signature": true}`, fails: "unknown field"},
		{name: "wrong type", raw: `{"require_signatures": "yes"}`, fails: "require_signatures"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := section()
			if s.Key != SectionKey || s.Help == "" {
				t.Fatalf("section %q, help %q", s.Key, s.Help)
			}
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			merge := s.Flags(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatal(err)
			}
			var raw json.RawMessage
			if c.raw != "" {
				raw = json.RawMessage(c.raw)
			}
			got, secrets, err := merge(raw, func(string) string { return "" })
			if c.fails != "" {
				if err == nil || !strings.Contains(err.Error(), c.fails) {
					t.Fatalf("error %v, want one naming %q", err, c.fails)
				}
				return
			}
			if err != nil || got != c.want || len(secrets) != 0 {
				t.Fatalf("got %#v, %v, %v; want %#v", got, secrets, err, c.want)
			}
		})
	}
}

// TestDeclared: the steps read the section's value by value or pointer,
// and nothing (or another profile's value) declares nothing.
func TestDeclared(t *testing.T) {
	yes := Declared{RequireSignatures: true}
	for _, c := range []struct {
		described any
		want      bool
	}{{nil, false}, {yes, true}, {&yes, true}, {(*Declared)(nil), false}, {struct{ RequireSignatures bool }{true}, false}} {
		if got := declared(features.Target{Described: c.described}).RequireSignatures; got != c.want {
			t.Errorf("declared(%#v) = %v, want %v", c.described, got, c.want)
		}
	}
}

// TestCredentials: the profile lists the three credentials its steps read,
// each with its help, and a target lacking one makes the rules that need
// it N/A.
func TestCredentials(t *testing.T) {
	var names []string
	for _, c := range Profile().Credentials {
		if c.Help == "" {
			t.Errorf("credential %s has no help", c.Name)
		}
		names = append(names, c.Name)
	}
	if want := []string{CredentialAdminToken, CredentialMetricsToken, CredentialDashboardPassword}; !slices.Equal(names, want) {
		t.Fatalf("credentials %v, want %v", names, want)
	}
	w := testWorld()
	w.env.Target.BaseURL = "http://127.0.0.1:1"
	for _, need := range []func() error{w.needAdmin, w.needDashboard, w.needSignatures} {
		if err := need(); err == nil || !strings.Contains(err.Error(), "not applicable") {
			t.Errorf("a target without the credential: %v, want N/A", err)
		}
	}
	for _, actor := range []string{actorAdmin, actorDashboard, actorScraper} {
		if _, _, err := w.actor(actor); err == nil || !strings.Contains(err.Error(), "not applicable") {
			t.Errorf("actor %s without credentials: %v, want N/A", actor, err)
		}
	}
	w.env.Target.Credentials = map[string]string{CredentialAdminToken: "adm", CredentialDashboardPassword: "pw"}
	w.env.Target.Described = Declared{RequireSignatures: true}
	for _, need := range []func() error{w.needAdmin, w.needDashboard, w.needSignatures} {
		if err := need(); err != nil {
			t.Errorf("a target with the credential: %v", err)
		}
	}
	_, h, err := w.actor(actorScraper)
	if err != nil || h.Get(HeaderAdminToken) != "adm" {
		t.Errorf("the scraper without a metrics token: %v, headers %v; want the admin token", err, h)
	}
	w.env.Target.Credentials[CredentialMetricsToken] = "met"
	w.clients = map[string]*client.Client{}
	if _, h, err := w.actor(actorScraper); err != nil || h.Get("Authorization") != "Bearer met" {
		t.Errorf("the scraper with a metrics token: %v, headers %v", err, h)
	}
}
