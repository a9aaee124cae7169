package intent

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/harness"
)

// The credentials a bus takes besides its API key (harness.Credential): the
// steps read them from features.Target.Credentials by these names, and a
// rule that needs one the target lacks is N/A.
const (
	CredentialAdminToken        = "admin-token"        // X-Admin-Token (BUS_ADMIN_SECRET)
	CredentialMetricsToken      = "metrics-token"      // Bearer token of /metrics (BUS_METRICS_TOKEN)
	CredentialDashboardPassword = "dashboard-password" // HTTP Basic password of user admin (DASHBOARD_PASSWORD)
)

// credentials are the profile's named secrets, in the order -h lists them.
var credentials = []harness.Credential{
	{Name: CredentialAdminToken, Help: "X-Admin-Token of the target; empty: admin rules are N/A"},
	{Name: CredentialMetricsToken, Help: "Bearer token of /metrics; empty: admin credentials are used"},
	{Name: CredentialDashboardPassword, Help: "HTTP Basic password of user admin; empty: Basic-auth rules are N/A"},
}

// SectionKey is the key of the profile's section of a target file.
const SectionKey = "intent"

// Declared is what a bus declares of itself in the "intent" section of its
// target file (or with the section's flags): it reaches the steps as
// features.Target.Described.
type Declared struct {
	// RequireSignatures: the bus runs with BUS_REQUIRE_SIGNATURES=true, and
	// every client of the scenarios signs its requests (§5.2).
	RequireSignatures bool `json:"require_signatures"`
}

// declared returns what the target declares; the zero Declared when it
// declares nothing (or a section of another profile).
func declared(t features.Target) Declared {
	switch d := t.Described.(type) {
	case Declared:
		return d
	case *Declared:
		if d != nil {
			return *d
		}
	}
	return Declared{}
}

// section is the profile's part of the target file: {"intent":
// {"require_signatures": true}}, overridden by --require-signatures.
func section() *harness.TargetSection {
	return &harness.TargetSection{
		Key: SectionKey,
		Help: `  intent.require_signatures          --require-signatures  true or false: the bus requires HMAC-signed requests
                                                           (BUS_REQUIRE_SIGNATURES=true); every client signs (§5.2)`,
		Flags: func(fs *flag.FlagSet) func(raw json.RawMessage, getenv func(string) string) (any, []string, error) {
			require := fs.Bool("require-signatures", false, "the target requires HMAC-signed requests (BUS_REQUIRE_SIGNATURES=true)")
			return func(raw json.RawMessage, _ func(string) string) (any, []string, error) {
				var d Declared
				given := false
				if raw != nil {
					dec := json.NewDecoder(bytes.NewReader(raw))
					dec.DisallowUnknownFields()
					if err := dec.Decode(&d); err != nil {
						return nil, nil, fmt.Errorf("%q: %w (want {\"require_signatures\": true or false})", SectionKey, err)
					}
					given = true
				}
				fs.Visit(func(f *flag.Flag) {
					if f.Name == "require-signatures" {
						d.RequireSignatures, given = *require, true
					}
				})
				if !given {
					return nil, nil, nil
				}
				return d, nil, nil
			}
		},
	}
}
