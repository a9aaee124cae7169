package intent

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Readings: where seed 004 contradicts itself or leaves a choice open, the
// reference server follows one reading, chosen by Config.Readings (key →
// name; a missing key is the key's default, its first name).
//
// The keys are of two kinds, and the server writes both down itself, from
// the text (the harness keeps its own list of decisions in spec/; a test in
// cmd/idscheck, which may import both, holds the two lists to the same keys,
// names and quotes). The decisions are places where two sentences of the
// text can each be read as binding: every check that rests on one is judged
// under each reading, and the keys' names are the readings' names, with
// Names[0] the default. The server's other answers are places where the
// text allows several answers that every check accepts alike: they are not
// readings (no verdict depends on them), but the alternate server takes the
// other allowed answer so that the harness is seen to accept it.

// Decision keys: the text contradicts itself.
const (
	// ReadingLeaseExpiry: when a lease expires with attempts left, is the
	// intent requeued with a backoff delay (§3.3), or claimable at once (§7.3)?
	ReadingLeaseExpiry = "lease-expiry"
	// ReadingExtend: does an extension end the lease seconds from now, or add
	// seconds to its current end (§7.4)?
	ReadingExtend = "extend"
	// ReadingQueryRepeated: in CANONICAL_PATH, are repeated query parameters
	// ordered by value, or kept in the order sent (§5.2)?
	ReadingQueryRepeated = "query-repeated-order"
	// ReadingAdminResult: do admin credentials alone open /result and
	// /status (§7.7), or must an X-API-KEY come too (§7)?
	ReadingAdminResult = "admin-result-access"
	// ReadingNullPayload: is an explicit JSON null payload a payload (§4.1)
	// or a missing one (§7.2)?
	ReadingNullPayload = "null-payload"
)

// The server's other answers: the text allows several.
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
	ReadingSignatureStatus = "signature-status"

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
	ReadingAccess = "access"
)

// ReadingKey is one key of Config.Readings with the names it accepts.
type ReadingKey struct {
	Key      string
	Names    []string // Names[0] is the default, Names[1] the alternate
	Decision bool     // the text contradicts itself here: a reading of its own per name
	Section  string
	Means    []string // what the server does under each name, as Names
	// Quotes are the words of seed 004 each name rests on, verbatim (up to
	// white space), as Names; decisions only. The other answers rest on a
	// silence of the text, quoted at their constants.
	Quotes []string
}

// decisionKeys are the decision keys, in the order of the text's sections
// as the harness lists them.
var decisionKeys = []ReadingKey{
	{Key: ReadingLeaseExpiry, Decision: true, Section: "3.3, 7.3", Names: []string{"backoff", "immediate"},
		Quotes: []string{
			"On lease expiry or explicit /fail, the bus MUST requeue the intent with a backoff delay: next_run = now + (backoff_base * (2 ^ claim_attempts)) + jitter",
			"Lease expiry does not require a background cleanup pass before an intent can be reclaimed; expired intents are eligible for immediate atomic selection.",
		},
		Means: []string{
			"an expired intent becomes claimable again backoff_base*2^claim_attempts + [0,2) s after its lease ended",
			"an expired intent is claimable the moment its lease ends",
		}},
	{Key: ReadingExtend, Decision: true, Section: "7.4", Names: []string{"from-now", "added"},
		Quotes: []string{
			"Workers performing long-running tasks SHOULD call this periodically to avoid the job being requeued.",
			"Extends the lease on a currently-held intent.",
		},
		Means: []string{
			"a renewal: the lease ends seconds after the extension (a heartbeat may shorten it)",
			"seconds are added to the current end of the lease",
		}},
	{Key: ReadingQueryRepeated, Decision: true, Section: "5.2", Names: []string{queryByValue, queryAsSent},
		Quotes: []string{
			"be sorted lexicographically by key - preserve repeated parameters",
			"preserve repeated parameters - preserve blank values",
		},
		Means: []string{
			"parameters sorted by key, then repeated ones by value",
			"parameters sorted by key with a stable sort: repeated ones keep the order in which they were sent",
		}},
	{Key: ReadingAdminResult, Decision: true, Section: "7, 7.7", Names: []string{"admin-alone", "with-api-key"},
		Quotes: []string{
			"Accessible by the publisher, the current claimer, or an admin.",
			"All regular endpoints require X-API-KEY authentication unless otherwise noted.",
		},
		Means: []string{
			"admin credentials alone open /result and /status",
			"an admin also presents a valid X-API-KEY (of any key); admin credentials then grant access",
		}},
	{Key: ReadingNullPayload, Decision: true, Section: "4.1, 7.2", Names: []string{"a-payload", "missing"},
		Quotes: []string{
			"Arbitrary JSON value passed to the worker.",
			"All fields except goal and payload are optional.",
		},
		Means: []string{
			"null is a JSON value: the intent is published (201)",
			"a null payload is no payload: 400",
		}},
}

// otherAnswers are the keys that are not decisions.
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

// ReadingKeys lists every key Config.Readings accepts: first the decisions,
// then the server's other answers. The slices are fresh copies.
func ReadingKeys() []ReadingKey {
	var out []ReadingKey
	for _, k := range slices.Concat(decisionKeys, otherAnswers) {
		k.Names = slices.Clone(k.Names)
		k.Means = slices.Clone(k.Means)
		k.Quotes = slices.Clone(k.Quotes)
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

// AlternateReadings returns the other name of every key: the second
// reading of every decision, and the other allowed answer of the server's
// own keys (idscheck serve --readings alternate).
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
		leaseImmediate: eff[ReadingLeaseExpiry] == "immediate",
		extendAdded:    eff[ReadingExtend] == "added",
		queryAsSent:    eff[ReadingQueryRepeated] == queryAsSent,
		adminWithKey:   eff[ReadingAdminResult] == "with-api-key",
		nullMissing:    eff[ReadingNullPayload] == "missing",
		signature403:   eff[ReadingSignatureStatus] == "403",
		clamp:          eff[ReadingBounds] == "clamp",
		publisherEmpty: eff[ReadingPublisherFilter] == "empty",
		access404:      eff[ReadingAccess] == "404",
	}, nil
}

// Readings returns the name the server follows for every key.
func (s *Server) Readings() map[string]string { return maps.Clone(s.rd.effective) }
