package features

import (
	"encoding/json"
	"github.com/idscheck/idscheck/verdict"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
)

// Drawn replaces, in RequestSequence, every value the target drew itself.
const Drawn = "<drawn>"

// RequestSequence returns one line per exchange, "METHOD path body
// [headers]", in the order sent: the reproducibility promise of --seed is
// that two runs with the same seed against fresh targets give equal
// sequences, headers included (an Idempotency-Key drawn from outside the
// seed breaks it). What is not the harness's to fix is normalised away:
//
//   - values the target drew (ids, claim tokens: any string of at least 8
//     characters in a JSON response body that no earlier request carried)
//     become Drawn wherever they appear;
//   - requests in flight at the same time (a storm, concurrent publishers)
//     have no order: each such group is sorted;
//   - how often a step polls until the target's clock moves on depends on
//     timing: consecutive identical requests count once;
//   - the signing headers (X-Timestamp is the clock, X-Nonce must never
//     repeat across runs, X-Signature covers both) are left out, and
//     credentials (each run's target has its own) read as <credential>.
func RequestSequence(exs []verdict.Exchange) []string {
	byCall := append([]verdict.Exchange(nil), exs...)
	sort.SliceStable(byCall, func(i, j int) bool { return byCall[i].Call.Before(byCall[j].Call) })

	// A response value is drawn by the target unless the harness sent it
	// first (an echo of our own key is ours, and stays).
	sent := map[string]bool{}
	var drawn []string
	seen := map[string]bool{}
	for _, ex := range byCall {
		for _, tok := range strings.FieldsFunc(ex.Path+" "+ex.ReqBody, notTokenChar) {
			sent[tok] = true
		}
		var body any
		if json.Unmarshal([]byte(ex.RespBody), &body) != nil {
			continue
		}
		walkStrings(body, func(s string) {
			if len(s) >= 8 && !seen[s] && !sent[s] {
				seen[s] = true
				drawn = append(drawn, s)
			}
		})
	}
	// Longest first, so a value that contains another is replaced whole.
	sort.SliceStable(drawn, func(i, j int) bool { return len(drawn[i]) > len(drawn[j]) })
	pairs := make([]string, 0, 2*len(drawn))
	for _, d := range drawn {
		pairs = append(pairs, d, Drawn)
	}
	rep := strings.NewReplacer(pairs...)

	out := make([]string, 0, len(exs))
	group := 0        // index in out where the current group of overlapping exchanges starts
	var end time.Time // latest return in the current group
	for i, ex := range byCall {
		if i > 0 && !ex.Call.Before(end) { // sent after the whole group returned
			sort.Strings(out[group:])
			group = len(out)
		}
		if i == 0 || ex.Return.After(end) {
			end = ex.Return
		}
		out = append(out, rep.Replace(ex.Method+" "+ex.Path+" "+ex.ReqBody+headerLine(ex.ReqHeaders)))
	}
	sort.Strings(out[group:])
	return slices.Compact(out)
}

// notTokenChar splits requests into the tokens a drawn value could be sent
// back as: RFC 3986 unreserved characters.
func notTokenChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == '~')
}

// walkStrings calls f on every string value (not key) of a decoded JSON value.
func walkStrings(v any, f func(string)) {
	switch v := v.(type) {
	case string:
		f(v)
	case []any:
		for _, e := range v {
			walkStrings(e, f)
		}
	case map[string]any:
		for _, e := range v {
			walkStrings(e, f)
		}
	}
}

// unseeded are request headers whose values no seed can fix.
var unseeded = map[string]bool{"X-Timestamp": true, "X-Nonce": true, "X-Signature": true, "Content-Length": true}

// credentials are request headers whose values are the target's secrets.
var credentials = map[string]bool{"X-Api-Key": true, "X-Admin-Token": true, "Authorization": true}

// headerLine renders the request headers that the seed decides, sorted.
func headerLine(h map[string][]string) string {
	var parts []string
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		switch {
		case unseeded[ck]:
		case credentials[ck]:
			parts = append(parts, ck+": <credential>")
		default:
			parts = append(parts, ck+": "+strings.Join(vs, ","))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	sort.Strings(parts)
	return " [" + strings.Join(parts, "; ") + "]"
}
