package main

import (
	"strings"
	"testing"

	"github.com/idscheck/idscheck/profiles"
)

// TestChaosProgressSpeaksTheProfile: the progress header names its counts
// in the words of the profile's protocol; an http-idempotency run spoke of
// "published" and "publishes acknowledged", which are the Intent bus's.
func TestChaosProgressSpeaksTheProfile(t *testing.T) {
	for _, name := range profiles.Names() {
		p, _ := profiles.Lookup(name)
		if p.Chaos == nil {
			continue
		}
		h := chaosProgressHeader(p.Chaos.Columns)
		if p.Name != "intent" && strings.Contains(h, "publish") {
			t.Errorf("%s: the progress header speaks of publishes, the Intent bus's word:\n%s", p.Name, h)
		}
		for _, col := range []string{"ops", "unknown", "fault"} {
			if !strings.Contains(h, col) {
				t.Errorf("%s: header lacks %q:\n%s", p.Name, col, h)
			}
		}
	}
	hi, _ := profiles.Lookup("http-idempotency")
	if h := chaosProgressHeader(hi.Chaos.Columns); !strings.Contains(h, "requests: logical requests started") {
		t.Errorf("http-idempotency header: %s", h)
	}
}
