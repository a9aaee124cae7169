package realmw_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/profiles/httpidem"
	"github.com/idscheck/idscheck/profiles/httpidem/realmw"
)

// TestPreflightPassesTheMiddlewares: the preflight's probes (the declared
// endpoint sent a body that is not JSON under a fresh key, the count read
// of a value no request used) never stop a real middleware described as
// the worked example describes it, under any variant.
func TestPreflightPassesTheMiddlewares(t *testing.T) {
	for _, version := range realmw.Versions() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv, err := realmw.Start(version, ln, realmw.Options{})
		if err != nil {
			ln.Close()
			t.Fatal(err)
		}
		for _, variant := range httpidem.Variants() {
			ep, err := httpidem.ParseEndpoint(json.RawMessage(fmt.Sprintf(endpointJSON, variant)), os.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			if err := httpidem.Profile().Preflight(t.Context(), features.Target{BaseURL: srv.URL, Described: ep}, 5*time.Second); err != nil {
				t.Errorf("fiber %s, %s: the preflight stops the middleware: %v", version, variant, err)
			}
		}
		if err := srv.Close(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
}
