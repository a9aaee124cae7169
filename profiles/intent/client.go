package intent

import (
	"net/http"
	"strconv"
	"time"

	"github.com/idscheck/idscheck/client"
)

// SignRequests returns a client.Options.Sign that signs every request as
// §5.2 asks, under the API key it carries (HeaderAPIKey): X-Timestamp (now,
// in Unix seconds), a fresh random X-Nonce (never from the run's seed: a
// rerun must not replay nonces) and X-Signature over the canonical request
// (CanonicalPath, SigningString). now nil: time.Now.
func SignRequests(now func() time.Time) func(r *http.Request, body []byte) {
	if now == nil {
		now = time.Now
	}
	return func(r *http.Request, body []byte) {
		key := r.Header.Get(HeaderAPIKey)
		ts := strconv.FormatInt(now().Unix(), 10)
		nonce := client.NewNonce()
		cp, _ := CanonicalPath(r.URL.EscapedPath(), r.URL.RawQuery)
		r.Header.Set(HeaderTimestamp, ts)
		r.Header.Set(HeaderNonce, nonce)
		r.Header.Set(HeaderSignature, Sign(key, SigningString(r.Method, cp, ts, nonce, body)))
	}
}
