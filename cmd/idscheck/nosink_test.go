package main

import (
	"strings"
	"testing"

	"github.com/idscheck/idscheck/profiles/httpidem"
)

// TestNoSinkNoteNamesTheCountRead: an http-idempotency endpoint without an
// effect sink whose target file declares a count read is judged by that
// read; the run must not announce the effect rules as N/A (it did).
func TestNoSinkNoteNamesTheCountRead(t *testing.T) {
	prof, err := lookupProfile("http-idempotency")
	if err != nil {
		t.Fatal(err)
	}
	withCount := &httpidem.Endpoint{Path: "/v1/payments", Count: &httpidem.CountRead{Path: "/v1/payments/count", Pointer: "/count"}}
	if got := noSinkNote(prof, withCount); strings.Contains(got, "N/A") || !strings.Contains(got, "GET /v1/payments/count") {
		t.Errorf("with a count read: %q, want the rules judged by GET /v1/payments/count", got)
	}
	if got := noSinkNote(prof, &httpidem.Endpoint{Path: "/v1/payments"}); !strings.Contains(got, "N/A") {
		t.Errorf("without a count read: %q, want the effect rules N/A", got)
	}
	ids, err := lookupProfile("ids")
	if err != nil {
		t.Fatal(err)
	}
	if got := noSinkNote(ids, nil); !strings.Contains(got, "N/A") {
		t.Errorf("ids: %q, want the effect rules N/A", got)
	}
}
