package sut

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/idscheck/idscheck/spec"
)

// Readings: where seed 004 contradicts itself or leaves a choice open, the
// reference server follows one reading, chosen by Config.Readings (key →
// name; a missing key is the key's default, its first name).
//
// The keys are of two kinds. The decisions of spec.IntentDecisions that list
// readings are judged under each reading; their names are the readings'
// names and their default is Readings[0]. The keys below are places where
// the text allows several answers that every check accepts alike: they are
// not readings (no verdict depends on them), but the alternate server takes
// the other allowed answer so that the harness is seen to accept it.
const (
	// ReadingSignatureStatus: the status of a refused signature, timestamp or
	// nonce. "401" (default): 401 with signature_required, invalid_timestamp,
	// invalid_signature or nonce_reused. "403": 403 invalid_signature for each.
	// §5.2 says what servers MUST reject but names no status: "Servers MUST:
	// - Reject timestamps outside ±300 seconds of server time - Reject reused
	// nonces within the same 300-second window per API key - Validate the HMAC
	// signature"; §11: "forbidden | 403 | Valid key but insufficient
	// permission" and "Additional specific invalid_* errors MAY be returned
	// for malformed fields."
	ReadingSignatureStatus = spec.DecisionSignatureStatus

	// ReadingBounds: an extension's seconds or a KV ttl out of range. "reject"
	// (default): 400 invalid_seconds / invalid_ttl. "clamp": the value is
	// brought into range (seconds to 10–3600, ttl to 1–86400) and the request
	// succeeds. §7.4: "seconds MUST be between 10 and 3600."; §7.9: "ttl
	// defaults to 600 seconds. Maximum 86400." The text bounds the value the
	// server uses; it does not say that a request outside them is refused.
	ReadingBounds = "bounds"

	// ReadingPublisherFilter: a POST /claim whose publisher filter names
	// another key, from a caller that is not an admin. "forbidden" (default):
	// 403 forbidden. "empty": the filter matches nothing the caller may see,
	// 204 No Content with Retry-After: 1. §7.3: "publisher | Filter by
	// publisher key (admin only, or own key)" (no status named) and "204 No
	// Content | No eligible intent (worker should back off and retry)".
	ReadingPublisherFilter = "publisher-filter"

	// ReadingAccess: GET /result or /status of an intent the valid key may
	// not read. "403" (default): 403 forbidden. "404": 404 not_found, as for
	// an unknown id (the intent's existence is not revealed). §7.7:
	// "Accessible by the publisher, the current claimer, or an admin."; §11:
	// "forbidden | 403 | Valid key but insufficient permission" and
	// "not_found | 404 | Intent or resource not found".
	ReadingAccess = spec.DecisionAccess
)

// ReadingKey is one key of Config.Readings with the names it accepts.
type ReadingKey struct {
	Key      string
	Names    []string // Names[0] is the default, Names[1] the alternate
	Decision bool     // a decision of spec.IntentDecisions with readings
	Section  string
	Means    []string // what the server does under each name, as Names
}

// otherAnswers are the keys that are not decisions with readings.
var otherAnswers = []ReadingKey{
	{Key: ReadingSignatureStatus, Names: []string{"401", "403"}, Section: "5.2, 11",
		Means: []string{"401 with signature_required, invalid_timestamp, invalid_signature or nonce_reused", "403 invalid_signature"}},
	{Key: ReadingBounds, Names: []string{"reject", "clamp"}, Section: "7.4, 7.9",
		Means: []string{"extend seconds outside 10–3600 and KV ttl outside 1–86400: 400", "extend seconds clamped to 10–3600, KV ttl to 1–86400"}},
	{Key: ReadingPublisherFilter, Names: []string{"forbidden", "empty"}, Section: "7.3",
		Means: []string{"a publisher filter naming another key: 403 forbidden", "a publisher filter naming another key: 204, nothing claimed"}},
	{Key: ReadingAccess, Names: []string{"403", "404"}, Section: "7.7, 7.8, 11",
		Means: []string{"/result and /status of an intent the key may not read: 403 forbidden", "the same: 404 not_found"}},
}

// ReadingKeys lists every key Config.Readings accepts: first the decisions
// of spec.IntentDecisions with readings, then the server's other answers.
func ReadingKeys() []ReadingKey {
	var out []ReadingKey
	for _, d := range spec.IntentDecisions() {
		if len(d.Readings) < 2 {
			continue
		}
		k := ReadingKey{Key: d.ID, Decision: true, Section: d.Section}
		for _, r := range d.Readings {
			k.Names = append(k.Names, r.Name)
			k.Means = append(k.Means, r.Means)
		}
		out = append(out, k)
	}
	for _, k := range otherAnswers {
		k.Names = slices.Clone(k.Names)
		k.Means = slices.Clone(k.Means)
		out = append(out, k)
	}
	return out
}

// DefaultReadings returns the name the server follows for every key when
// Config.Readings is empty.
func DefaultReadings() map[string]string {
	out := map[string]string{}
	for _, k := range ReadingKeys() {
		out[k.Key] = k.Names[0]
	}
	return out
}

// AlternateReadings returns the other name of every key: Readings[1] of
// every decision with readings, and the other allowed answer of the
// server's own keys (idscheck serve --readings alternate).
func AlternateReadings() map[string]string {
	out := map[string]string{}
	for _, k := range ReadingKeys() {
		out[k.Key] = k.Names[1]
	}
	return out
}

// CheckReadings reports the first unknown key or name of m; the error lists
// the valid ones.
func CheckReadings(m map[string]string) error {
	keys := ReadingKeys()
	for _, id := range slices.Sorted(maps.Keys(m)) {
		i := slices.IndexFunc(keys, func(k ReadingKey) bool { return k.Key == id })
		if i < 0 {
			var valid []string
			for _, k := range keys {
				valid = append(valid, k.Key)
			}
			return fmt.Errorf("unknown reading %q (valid: %s)", id, strings.Join(valid, ", "))
		}
		if !slices.Contains(keys[i].Names, m[id]) {
			return fmt.Errorf("reading %s: unknown name %q (valid: %s)", id, m[id], strings.Join(keys[i].Names, ", "))
		}
	}
	return nil
}

// readings is Config.Readings resolved into switches.
type readings struct {
	effective map[string]string // every key, defaults filled in

	leaseImmediate bool // lease-expiry=immediate: run_at = claim_expires_at
	extendAdded    bool // extend=added: seconds added to the current end
	queryAsSent    bool // query-repeated-order=as-sent
	adminWithKey   bool // admin-result-access=with-api-key
	nullMissing    bool // null-payload=missing
	signature403   bool // signature-status=403
	clamp          bool // bounds=clamp
	publisherEmpty bool // publisher-filter=empty
	access404      bool // access=404
}

func resolveReadings(m map[string]string) (readings, error) {
	if err := CheckReadings(m); err != nil {
		return readings{}, err
	}
	eff := DefaultReadings()
	maps.Copy(eff, m)
	return readings{
		effective:      eff,
		leaseImmediate: eff[spec.DecisionLeaseExpiry] == "immediate",
		extendAdded:    eff[spec.DecisionExtend] == "added",
		queryAsSent:    eff[spec.DecisionQueryRepeated] == queryAsSent,
		adminWithKey:   eff[spec.DecisionAdminResult] == "with-api-key",
		nullMissing:    eff[spec.DecisionNullPayload] == "missing",
		signature403:   eff[ReadingSignatureStatus] == "403",
		clamp:          eff[ReadingBounds] == "clamp",
		publisherEmpty: eff[ReadingPublisherFilter] == "empty",
		access404:      eff[ReadingAccess] == "404",
	}, nil
}

// Readings returns the name the server follows for every key.
func (s *Server) Readings() map[string]string { return maps.Clone(s.rd.effective) }
