package realmw_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idscheck/idscheck/features"
	"github.com/idscheck/idscheck/profiles/httpidem"
	"github.com/idscheck/idscheck/profiles/httpidem/realmw"
	"github.com/idscheck/idscheck/verdict"
)

var update = flag.Bool("update", false, "rewrite testdata/realmw/*.golden.json with what idscheck reports now")

// endpointJSON describes the payments endpoint as a target file's
// "http_idempotency" object does (docs/http-idempotency.md, the worked
// example), under variant %s. What it declares is what the middleware
// and the handler do: the key travels raw in Idempotency-Key ("token":
// the middleware compares the header's bytes and parses no RFC 8941
// String), its published format is a UUID (the default KeyHeaderValidate
// wants 36 characters), it lives 30 minutes (the default Lifetime), a
// request without a key is let through (requires_key false), and two
// callers who mean their keys to be theirs (key_scope caller).
const endpointJSON = `{
  "variant": %q,
  "method": "POST",
  "path": "/v1/payments",
  "body": {"reference": "{{unique}}", "amount": 1000},
  "vary": {"amount": 2000},
  "invalid": {"amount": 0},
  "key": {"header": "Idempotency-Key"},
  "key_format": "token",
  "key_spec": {"uuid": true},
  "key_ttl_seconds": 1800,
  "id": "id",
  "count": {"path": "/v1/payments?reference={{unique}}", "pointer": "/count"},
  "slow": {"delay_ms": 1500},
  "key_scope": "caller",
  "callers": [
    {"headers": {"Authorization": "Bearer caller-one"}},
    {"headers": {"Authorization": "Bearer caller-two"}}
  ]
}`

// certify serves the endpoint of Fiber version behind a fresh middleware
// on 127.0.0.1 and runs the http-idempotency profile against it under
// variant, as steps_test.go runs it against the bundled endpoint.
func certify(t *testing.T, version, variant string) *features.RunResult {
	t.Helper()
	ep, err := httpidem.ParseEndpoint(json.RawMessage(fmt.Sprintf(endpointJSON, variant)), os.Getenv)
	if err != nil {
		t.Fatalf("the target file's description: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := realmw.Start(version, ln, realmw.Options{})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Close(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	res, err := httpidem.Profile().Run(ctx, features.RunConfig{Seed: 1, Budget: 8 * time.Second,
		Target: features.Target{BaseURL: srv.URL, TimeScale: 1, Described: ep}})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// goldenRule is one rule's verdict in a golden file.
type goldenRule struct {
	Verdict   verdict.Verdict `json:"verdict"`
	BlockedBy string          `json:"blocked_by,omitempty"`
}

func goldenOf(res *features.RunResult) map[string]goldenRule {
	out := map[string]goldenRule{}
	for _, r := range res.Rules {
		out[r.RuleID] = goldenRule{Verdict: r.Verdict, BlockedBy: r.BlockedBy}
	}
	return out
}

// goldenDiff says, rule by rule, how now differs from want ("" when not).
func goldenDiff(want, now map[string]goldenRule) string {
	var ids []string
	for id := range want {
		ids = append(ids, id)
	}
	for id := range now {
		if _, ok := want[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	show := func(g goldenRule, ok bool) string {
		switch {
		case !ok:
			return "(no rule)"
		case g.BlockedBy != "":
			return fmt.Sprintf("%s by %s", g.Verdict, g.BlockedBy)
		}
		return string(g.Verdict)
	}
	var b strings.Builder
	for _, id := range ids {
		w, wok := want[id]
		n, nok := now[id]
		if wok != nok || w != n {
			fmt.Fprintf(&b, "  %-32s golden %-28s now %s\n", id, show(w, wok), show(n, nok))
		}
	}
	return b.String()
}

// deviations are what the middlewares do against a variant's text,
// confirmed by hand in their source (middleware/idempotency of Fiber
// v2.52.15 and v3.1.0, the same on both): rule → why. Whatever the golden
// says, none of these rules may PASS.
var deviations = map[string]map[string]string{
	httpidem.VariantIETF: {
		// idempotency.go stores {status, headers, body} under the key alone:
		// no fingerprint of the request, a reused key replays the first answer.
		"IETF-2.7-mismatch-422": "no payload fingerprint: another payload under a used key gets the first answer (201), not 422",
		// locker.go: a duplicate blocks on the key's mutex, then takes the
		// stored answer: never a conflict.
		"IETF-2.6-concurrent-conflict": "a duplicate in flight waits on the key's lock and gets the replay, never a resource conflict",
		"IETF-2.7-concurrent-409":      "a duplicate in flight waits on the key's lock and gets the replay, never 409",
		// The storage key is the header's value alone.
		"IETF-5-composite-key": "keys are not scoped to the caller: a second caller's request under the same key gets the first caller's answer",
		// config.go: KeyHeaderValidate's plain error is answered 500 by
		// Fiber's default error handler. A key outside the published format
		// is no well-formed request: the 500 is evidence against the rule
		// on validating keys, not a server-error finding (issue 29).
		"IETF-5-validate-key": "a key outside the published format (a UUID) is answered 500, not refused with a 4xx",
	},
	httpidem.VariantT0: {
		"T0-KEYS-caller-scope": "keys are not scoped to the caller: a second caller's request under the same key gets the first caller's answer",
		// Any answer the handler wrote (err == nil from c.Next) is stored,
		// a 400 included: the corrected call gets the rejection again.
		"T0-REPLAY-rejection-keeps-key": "a rejection is stored as the key's result: the corrected call under the same key gets the rejection again",
		"T0-REPLAY-accepted-only":       "a rejection is committed to replay: the corrected call gets the stored 400",
	},
	httpidem.VariantStripe: {
		"STRIPE-IDEM-params-compared": "no payload fingerprint: another payload under a used key gets the first answer, not an error",
		"STRIPE-IDEM-not-saved":       "a validation failure is stored as the key's result: the corrected retry gets the 400 again",
		// config.go: KeyHeaderValidate wants len(key) == 36, its error is
		// a plain error, which Fiber's default error handler answers 500.
		"STRIPE-IDEM-key-255": "a key must be 36 characters long: a 255-character key is refused (500), and a 256-character key is answered 500, not refused with a 4xx",
		// Lifetime defaults to 30 minutes.
		"STRIPE-IDEM-kept-24h":      "a key lives 30 minutes (Lifetime's default), not a day",
		"RFC9110-15.6-server-error": "a 255-character key is answered 500",
	},
}

// correct are the rules on which the middlewares follow the variant's
// text: none may FAIL (or be NON-STRICT); those marked must PASS.
var correct = map[string]map[string]bool{
	httpidem.VariantIETF: {
		"IETF-2.6-first-request": true,
		"IETF-2.6-retry-result":  true, // the retry gets the same status and body; "A" created exactly one thing
		"IETF-2.5-identify-key":  true, // a new key with the same body is a new payment (READING new-key-seen-payload=pair)
	},
	httpidem.VariantT0: {
		"T0-R1-original-response":   true,
		"T0-CAT-same-outcome":       true,
		"T0-0-no-further-effect":    true, // "A" created exactly one thing
		"T0-R2-wait-in-flight":      true, // the duplicate waits on the key's lock, then gets the replay
		"T0-R3-no-duplicate-error":  true,
		"T0-R3-key-tells-new":       true,
		"RFC9110-15.6-server-error": true, // every key idscheck sends under t0 is a UUID
	},
	httpidem.VariantStripe: {
		"STRIPE-IDEM-post-accepts-keys": true,
		"STRIPE-IDEM-same-result":       true,
	},
}

// TestFiberIdempotencyGolden certifies each middleware under each variant
// and holds the verdicts to testdata/realmw/<fiberv2|fiberv3>-<variant>.golden.json
// (go test -run Golden -update rewrites them), and to what was confirmed
// by hand: every deviation found, no false alarm.
func TestFiberIdempotencyGolden(t *testing.T) {
	for _, v := range realmw.Versions() {
		for _, variant := range httpidem.Variants() {
			t.Run("fiber"+v+"-"+variant, func(t *testing.T) {
				res := certify(t, v, variant)
				byID := map[string]verdict.RuleResult{}
				for _, r := range res.Rules {
					byID[r.RuleID] = r
				}
				checkGolden(t, filepath.Join("testdata", "realmw", "fiber"+v+"-"+variant+".golden.json"), goldenOf(res))
				for id, why := range deviations[variant] {
					r, ok := byID[id]
					if !ok {
						t.Errorf("%s: no verdict (a deviation: %s)", id, why)
					} else if r.Verdict == verdict.Pass {
						t.Errorf("%s: PASS, a false pass: the middleware deviates (%s)", id, why)
					} else if r.Verdict != verdict.Fail && r.Verdict != verdict.NonStrict {
						t.Logf("%s: deviation not found by this run (%s): %s", id, r.Verdict, r.Reason)
					}
				}
				for id, mustPass := range correct[variant] {
					r, ok := byID[id]
					if !ok {
						t.Errorf("%s: no verdict", id)
						continue
					}
					// where the text leaves a choice open, the reading
					// followed is what a correct middleware can show
					passed := r.Verdict == verdict.Pass || r.Verdict == verdict.Reading
					bad := r.Verdict == verdict.Fail || r.Verdict == verdict.NonStrict || (mustPass && !passed)
					if !bad {
						continue
					}
					want := "not FAIL"
					if mustPass {
						want = "PASS"
					}
					t.Errorf("%s: %s, want %s: the middleware is correct here: %s", id, r.Verdict, want, r.Reason)
				}
			})
		}
	}
}

// checkGolden compares now with the golden file at path, or rewrites it
// under -update.
func checkGolden(t *testing.T, path string, now map[string]goldenRule) {
	t.Helper()
	if *update {
		raw, err := json.MarshalIndent(now, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run Golden -update writes it)", err)
	}
	var want map[string]goldenRule
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d := goldenDiff(want, now); d != "" {
		t.Errorf("the verdicts differ from %s (go test -run Golden -update rewrites it, after you checked the change):\n%s", path, d)
	}
}
