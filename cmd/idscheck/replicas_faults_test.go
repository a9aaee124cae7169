package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestChaosHelpListsEveryFault: chaos -h lists, one line each with what
// it does, every fault --faults can name: the replicas' and their
// store's too (replica-crash, store-partition, store-lost-reply,
// store-restart), and the profile's own (atp: the rail's).
func TestChaosHelpListsEveryFault(t *testing.T) {
	for profile, own := range map[string][]string{"http-idempotency": nil, "atp": {"rail-lost-replies", "rail-callback-drop"}, "ids": {"sink-lost-replies"}} {
		var stdout, stderr bytes.Buffer
		if code := cli(t.Context(), []string{"chaos", "--profile", profile, "-h"}, &stdout, &stderr); code != exitOK {
			t.Fatalf("chaos --profile %s -h: exit %d\n%s", profile, code, stderr.String())
		}
		lines := strings.Split(stdout.String(), "\n")
		for _, name := range append([]string{"latency", "storm", "crash", "replica-crash", "store-partition", "store-lost-reply", "store-restart"}, own...) {
			found := false
			for _, l := range lines {
				if f := strings.Fields(l); len(f) > 2 && f[0] == name && strings.HasPrefix(l, "  ") {
					found = true
				}
			}
			if !found {
				t.Errorf("chaos --profile %s -h has no line of its own for %s", profile, name)
			}
		}
	}
}
