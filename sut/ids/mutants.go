package ids

// Mutant is a deliberate, realistic bug of the IDS reference server,
// switched on by Config.Mutant: a small guarded branch. Breaks is the ID of
// the IDS rule (RFC-WF-0010) it violates; idscheck must catch every one by
// that rule.
type Mutant struct{ Name, Description, Breaks string }

// Mutant names.
const (
	MutantNoReservation          = "no-reservation"
	MutantEphemeralInKey         = "ephemeral-in-key"
	MutantTenantNotInKey         = "tenant-not-in-key"
	MutantReplayReexecutes       = "replay-reexecutes"
	MutantInFlightExecutes       = "in-flight-executes"
	MutantConflictAccepted       = "conflict-accepted"
	MutantConflictNoFingerprints = "conflict-no-fingerprints"
	MutantEvidenceAsFirstSeen    = "evidence-as-first-seen"
	MutantReplayFreshID          = "replay-fresh-id"
	MutantConfirmationReusable   = "confirmation-reusable"
	MutantTokenUnbound           = "token-unbound"
	MutantReplayAsksConfirmation = "replay-asks-confirmation"
	MutantOutboxDoubleDispatch   = "outbox-double-dispatch"
	MutantNoRateLimit            = "no-rate-limit"
	MutantReplayLeaksPrivate     = "replay-leaks-private"
	MutantEffectiveActorIgnored  = "effective-actor-ignored"
	MutantTokenUnverified        = "token-unverified"
	MutantWindowHalved           = "window-halved"
	MutantReplicaLocalCache      = "replica-local-cache"
	MutantCheckThenInsert        = "check-then-insert"
)

// Mutants lists every mutant, in a fixed order.
func Mutants() []Mutant {
	return []Mutant{
		{MutantNoReservation, "the key is looked up on the read pool, then the command executes and its record is written with INSERT OR REPLACE: no atomic reservation, concurrent duplicates each execute", "IDS-VIII.A-atomic"},
		{MutantEphemeralInKey, "message_id is one of the key inputs: a redelivery with a new message id is another command and executes again", "IDS-VII.C-ephemeral-excluded"},
		{MutantTenantNotInKey, "tenant_id is neither a key input nor the scope of the store: two tenants' identical commands share one record", "IDS-XV-tenant-scope"},
		{MutantReplayReexecutes, "a duplicate of a terminal command calls the sink again, then replays the stored outcome", "IDS-IX.A-no-reexecute"},
		{MutantInFlightExecutes, "a duplicate of an in-progress command executes it in parallel instead of answering processing", "IDS-IX.B-no-parallel"},
		{MutantConflictAccepted, "a collision (a stored key sent with another envelope) replays the stored outcome with its 2xx instead of 409", "IDS-VIII.D-reject"},
		{MutantConflictNoFingerprints, "the evidence of a collision records no envelope fingerprints", "IDS-VIII.D-evidence"},
		{MutantEvidenceAsFirstSeen, "duplicates are recorded in the evidence with the decision first_seen", "IDS-XII-decision"},
		{MutantReplayFreshID, "a replay carries a freshly drawn outcome_ref instead of the stored one", "IDS-IX.A-same-outcome"},
		{MutantConfirmationReusable, "confirmation tokens are never marked used", "IDS-X-single-use"},
		{MutantTokenUnbound, "a confirmation token is accepted for any command_id and key of its tenant", "IDS-X-bound"},
		{MutantReplayAsksConfirmation, "a duplicate of an executed command that needed confirmation is answered 428 when it carries no token", "IDS-X-no-reconfirm"},
		{MutantOutboxDoubleDispatch, "the outbox dispatcher POSTs a row found dispatching again without reconciling with GET /effects/{key}", "IDS-XI-shielding"},
		{MutantNoRateLimit, "duplicates of one key are never rate-limited", "IDS-XV-rate-limit"},
		{MutantReplayLeaksPrivate, "a replay to another actor (same principal) carries result.private", "IDS-XV-no-leak"},
		{MutantEffectiveActorIgnored, "actor_id, not effective_actor_id, is the key's principal: a retry by another sender on behalf of the same user executes again", "IDS-VII.E-effective-actor"},
		{MutantTokenUnverified, "a confirmation token that was never issued is accepted when it has the form of one (cft_ and 43 characters): a forged token bypasses the confirmation", "IDS-XIII-6-confirmation"},
		{MutantWindowHalved, "the dedupe record expires at half its declared ttl_seconds: a duplicate inside the declared window executes again", "IDS-IX.A-no-reexecute"},
	}
}

// ReplicaMutants are the mutants that are correct on one replica and
// break exactly-once across several sharing the store (Config.Store): the
// single-replica suite cannot kill them, idscheck chaos over replicas
// must.
func ReplicaMutants() []Mutant {
	return []Mutant{
		{MutantReplicaLocalCache, "a per-process cache of the keys seen is consulted before the store: a key the replica has not seen is taken for a new one and reserved over the store's record; correct on one replica, a retry on another replica executes again", "IDS-V-exactly-once-effects"},
		{MutantCheckThenInsert, "the key is looked up, then reserved in another transaction with an insert the primary key does not refuse, under a lock of the process; correct on one replica, duplicates on two replicas both execute", "IDS-V-exactly-once-effects"},
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
