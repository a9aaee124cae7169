package intent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idscheck/idscheck/client"
)

// TestSignRequests: a client with the signer sends X-Timestamp from its
// clock, a 32-hex nonce and a signature that verifies under its API key
// over the canonical request; with a body or a key changed it no longer
// verifies.
func TestSignRequests(t *testing.T) {
	var seen http.Header
	var seenBody []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Clone()
		seenBody, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	now := func() time.Time { return time.Unix(1700000000, 0) }
	c, err := client.New(srv.URL, client.Options{Name: "t", APIKey: "key-1", Sign: SignRequests(now)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(t.Context(), client.Request{Method: "POST", Path: "/claim?namespace=a&goal=b", Body: []byte(`{"a": 1}`)}); err != nil {
		t.Fatal(err)
	}
	if seen.Get(HeaderTimestamp) != "1700000000" || len(seen.Get(HeaderNonce)) != 32 {
		t.Errorf("timestamp %q nonce %q", seen.Get(HeaderTimestamp), seen.Get(HeaderNonce))
	}
	cp, _ := CanonicalPath("/claim", "namespace=a&goal=b")
	msg := SigningString("POST", cp, "1700000000", seen.Get(HeaderNonce), seenBody)
	if !VerifySignature("key-1", msg, seen.Get(HeaderSignature)) {
		t.Errorf("signature %q does not verify", seen.Get(HeaderSignature))
	}
	if VerifySignature("key-2", msg, seen.Get(HeaderSignature)) {
		t.Error("the signature verifies under another key")
	}
	other := SigningString("POST", cp, "1700000000", seen.Get(HeaderNonce), []byte(`{"a": 2}`))
	if VerifySignature("key-1", other, seen.Get(HeaderSignature)) {
		t.Error("the signature verifies over another body")
	}
}
