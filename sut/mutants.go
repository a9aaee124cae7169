package sut

// Mutant is a deliberate, realistic bug of the reference server, switched on
// by Config.Mutant (or serve --mutant): a small guarded branch. Breaks names
// the rule of seed 004 it violates; idscheck must catch every one.
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
		{MutantIdemKeyIgnored, "POST /intent ignores Idempotency-Key: every retry creates a new intent", "004 §7.2 same key and body return the same response"},
		{MutantIdemConflictAccepted, "a reused Idempotency-Key with a different body replays the first 201 instead of 422", "004 §7.2 different canonical body returns 422"},
		{MutantClaimNonAtomic, "claim selects on the read pool, then updates by id in a later transaction: concurrent workers get the same intent", "004 §7.3 atomic selection and locking"},
		{MutantStaleTokenAccepted, "fulfill, fail and extend_claim check the status but not the claim token, the claimer or the lease", "004 §3.3 stale or overwritten claim_token gets 404"},
		{MutantLeaseNeverExpires, "a claimed intent is never reclaimed nor dead-lettered when its lease lapses", "004 §3.2 lease expiry requeues or kills"},
		{MutantMaxAttemptsIgnored, "max_attempts is never enforced: a failing intent is retried forever, never dead", "004 §3.3 dead when claim_attempts >= max_attempts"},
		{MutantPriorityInverted, "claim picks the lowest priority first", "004 §6.3 descending priority order"},
		{MutantNamespaceLeak, "claim ignores the namespace", "004 §6.1 intents never cross namespaces"},
		{MutantVisibilityLeak, "claim ignores visibility: any key claims private intents", "004 §6.2 private intents go to the publisher's key only"},
		{MutantNonceReplayAccepted, "a signed request with a reused nonce is accepted", "004 §5.2 reject reused nonces within 300 s"},
		{MutantNoRetryAfter, "204 from /claim (and 429/503) carry no Retry-After", "004 §7.3 the 204 response includes Retry-After: 1"},
		{MutantNonJSON404, "unknown paths get net/http's plain-text 404", "004 §11 every error uses the JSON error shape"},
		{MutantMissingSecurityHeaders, "responses lack the five security headers", "004 §10 all responses include the security headers"},
		{MutantExtendAfterExpiry, "extend_claim revives a lease that has already expired", "004 §7.4 an extension fails when the lease has expired"},
		{MutantNoBackoff, "fail requeues the intent immediately, with no backoff", "004 §3.3 requeue with exponential backoff"},
		{MutantAdminSecretFallback, "X-Admin-Token also accepts BUS_SECRET", "004 §5.3 no fallback from X-Admin-Token to BUS_SECRET"},
		{MutantIdemCheckRacy, "the idempotency key is looked up before the write transaction, not inside it, and a second row for the key is silently dropped: concurrent duplicates each create an intent", "004 §7.2 same key and body return the same response"},
		{MutantLostOnCrash, "acknowledges each batch before its commit and runs synchronous=OFF: acknowledged writes vanish on a crash", "004 §2 jobs are not silently lost; acknowledged writes are durable"},
	}
}

func knownMutant(name string) bool {
	for _, m := range Mutants() {
		if m.Name == name {
			return true
		}
	}
	return false
}

func mutantNames() []string {
	var out []string
	for _, m := range Mutants() {
		out = append(out, m.Name)
	}
	return out
}
