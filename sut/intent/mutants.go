package intent

// Mutant is a deliberate, realistic bug of the reference server, switched on
// by Config.Mutant (or serve --mutant): a small guarded branch. Breaks is the
// ID of the rule of seed 004 it violates; idscheck must catch every one by
// that rule (idscheck mutants reports breaks_caught).
type Mutant struct{ Name, Description, Breaks string }

// Mutant names.
const (
	MutantIdemKeyIgnored         = "idem-key-ignored"
	MutantIdemConflictAccepted   = "idem-conflict-accepted"
	MutantClaimNonAtomic         = "claim-non-atomic"
	MutantStaleTokenAccepted     = "stale-token-accepted"
	MutantLeaseNeverExpires      = "lease-never-expires"
	MutantMaxAttemptsIgnored     = "max-attempts-ignored"
	MutantPriorityInverted       = "priority-inverted"
	MutantNamespaceLeak          = "namespace-leak"
	MutantVisibilityLeak         = "visibility-leak"
	MutantNonceReplayAccepted    = "nonce-replay-accepted"
	MutantNoRetryAfter           = "no-retry-after"
	MutantNonJSON404             = "non-json-404"
	MutantMissingSecurityHeaders = "missing-security-headers"
	MutantExtendAfterExpiry      = "extend-after-expiry"
	MutantNoBackoff              = "no-backoff"
	MutantAdminSecretFallback    = "admin-secret-fallback"
	MutantLostOnCrash            = "lost-on-crash"
	MutantIdemCheckRacy          = "idem-check-racy"
)

// Mutants lists every mutant, in a fixed order.
func Mutants() []Mutant {
	return []Mutant{
		{MutantIdemKeyIgnored, "POST /intent ignores Idempotency-Key: every retry creates a new intent", "INTENT-7.2-idem-replay"},
		{MutantIdemConflictAccepted, "a reused Idempotency-Key with a different body replays the first 201 instead of 422", "INTENT-7.2-idem-conflict"},
		{MutantClaimNonAtomic, "claim selects on the read pool, then updates by id in a later transaction: concurrent workers get the same intent", "INTENT-7.3-atomic-claim"},
		{MutantStaleTokenAccepted, "fulfill, fail and extend_claim check the status but not the claim token, the claimer or the lease", "INTENT-3.3-token-overwritten-404"},
		{MutantLeaseNeverExpires, "a claimed intent is never reclaimed nor dead-lettered when its lease lapses", "INTENT-3.3-lease-expiry"},
		{MutantMaxAttemptsIgnored, "max_attempts is never enforced: a failing intent is retried forever, never dead", "INTENT-3.3-dead-at-max-attempts"},
		{MutantPriorityInverted, "claim picks the lowest priority first", "INTENT-7.3-highest-priority"},
		{MutantNamespaceLeak, "claim ignores the namespace", "INTENT-6.1-namespace-isolation"},
		{MutantVisibilityLeak, "claim ignores visibility: any key claims private intents", "INTENT-7.3-eligible-visibility"},
		{MutantNonceReplayAccepted, "a signed request with a reused nonce is accepted", "INTENT-5.2-nonce-replay"},
		{MutantNoRetryAfter, "204 from /claim (and 429/503) carry no Retry-After", "INTENT-7.3-retry-after"},
		{MutantNonJSON404, "unknown paths get net/http's plain-text 404", "INTENT-11-error-shape"},
		{MutantMissingSecurityHeaders, "responses lack the five security headers", "INTENT-10-x-frame-options"},
		{MutantExtendAfterExpiry, "extend_claim revives a lease that has already expired", "INTENT-7.4-extend-expired-lease"},
		{MutantNoBackoff, "fail requeues the intent immediately, with no backoff", "INTENT-3.3-fail-backoff"},
		{MutantAdminSecretFallback, "X-Admin-Token also accepts BUS_SECRET", "INTENT-5.3-no-fallback"},
		{MutantIdemCheckRacy, "the idempotency key is looked up before the write transaction, not inside it, and a second row for the key is silently dropped: concurrent duplicates each create an intent", "INTENT-7.2-idem-replay"},
		{MutantLostOnCrash, "acknowledges each batch before its commit and runs synchronous=OFF: acknowledged writes vanish on a crash", "INTENT-3.1-states"},
	}
}

func knownMutant(name string) bool {
	for _, m := range append(Mutants(), ReplicaMutants()...) {
		if m.Name == name {
			return true
		}
	}
	return false
}

func mutantNames() []string {
	var out []string
	for _, m := range append(Mutants(), ReplicaMutants()...) {
		out = append(out, m.Name)
	}
	return out
}
