package atp

// Mutant is a deliberate, realistic bug of the ATP reference server,
// switched on by Config.Mutant: a small guarded branch. Breaks is the ID of
// the ATP rule (seed 000) it violates; idscheck must catch every one by
// that rule.
type Mutant struct{ Name, Description, Breaks string }

// Mutant names.
const (
	MutantDoubleChargeOnRetry     = "double-charge-on-retry"
	MutantNoReservation           = "no-reservation"
	MutantFreshRowOnRetry         = "fresh-row-on-retry"
	MutantReceiptBeforeSettlement = "receipt-before-settlement"
	MutantNonCanonicalSignature   = "non-canonical-signature"
	MutantStateRegression         = "state-regression"
	MutantNonceReusable           = "nonce-reusable"
	MutantNoReconciliation        = "no-reconciliation"
	MutantExpiredExecutable       = "expired-executable"
	MutantKeyNotBound             = "key-not-bound"
	MutantPreconditionIgnored     = "precondition-ignored"
	MutantActionDedupIgnored      = "action-dedup-ignored"
	MutantVerifyAcceptsAnything   = "verify-accepts-anything"
	MutantCompensationUnsigned    = "compensation-unsigned"
	MutantShortKeysOnly           = "short-keys-only"
	MutantGuessOnRailLoss         = "guess-on-rail-loss"
	MutantNonceFirstConsumedNow   = "nonce-first-consumed-now"
	MutantCallbackTrusted         = "callback-trusted"
	MutantNoncePerIntent          = "nonce-per-intent"
	MutantVerifyByLookup          = "verify-by-lookup"
	MutantExpiryMargin            = "expiry-margin"
	MutantReplicaLocalCache       = "replica-local-cache"
	MutantCheckThenInsert         = "check-then-insert"
)

// Mutants lists every mutant, in a fixed order.
func Mutants() []Mutant {
	return []Mutant{
		{MutantDoubleChargeOnRetry, "a retried execute of a row found executing, executed, settled or compensated creates a fresh payment intent at the rail (no Idempotency-Key) and confirms it, then answers the stored row", "ATP-2-no-second-effect"},
		{MutantNoReservation, "execute reads the row on the read pool and charges (a fresh payment intent each time) without the atomic authorized → executing move: concurrent duplicates each charge", "ATP-2-no-second-effect"},
		{MutantFreshRowOnRetry, "a retried authorize under the same key rewrites the row: new created_at and updated_at, the body stored again re-encoded", "ATP-2-retry-verbatim"},
		{MutantReceiptBeforeSettlement, "a signed settlement receipt is put in the row when it enters executing, before the rail charged", "ATP-4-never-speculative"},
		{MutantNonCanonicalSignature, "receipts are signed over the encoder's bytes of the body (struct member order, indented), not its JCS form", "ATP-4-settlement-signed"},
		{MutantStateRegression, "the sweep, finding nothing charged at the rail, sends the executing row back to authorized instead of compensating it", "ATP-1-no-executing-to-authorized"},
		{MutantNonceReusable, "nonces are never checked: the same signed intent under another key creates a second transaction", "ATP-7-nonce-single-use"},
		{MutantNoReconciliation, "no reconciliation sweep: a row whose rail answer was lost stays executing unless a callback comes", "ATP-6-reconciliation"},
		{MutantExpiredExecutable, "execute ignores expires_at: an authorized intent past its expiry is charged", "ATP-5-expired-410"},
		{MutantKeyNotBound, "rows are looked up by idempotency_key alone: the same key on another intent answers the first intent's row", "ATP-3-key-bound-to-intent"},
		{MutantPreconditionIgnored, "the precondition intent_settled is not evaluated at authorize", "ATP-8-precondition-at-authorize"},
		{MutantActionDedupIgnored, "a duplicate action_dedup_key within the declared window is authorized", "ATP-7-action-dedup"},
		{MutantVerifyAcceptsAnything, "POST /api/atp/receipts/verify answers valid without checking the signature", "ATP-4-verify-no-secret"},
		{MutantCompensationUnsigned, "a compensated row gets no compensation receipt", "ATP-4-compensation-receipt"},
		{MutantShortKeysOnly, "Idempotency-Keys longer than 64 characters are refused (400)", "ATP-3-key-any-16-128"},
		{MutantGuessOnRailLoss, "a confirm the rail did not answer compensates the row at once (with a compensation receipt), while the rail may have charged", "ATP-6-executing-until-resolved"},
		{MutantNonceFirstConsumedNow, "409 nonce_consumed carries the time of the replay as first_consumed_at, not the time the nonce was first consumed", "ATP-9-nonce-first-consumed-at"},
		{MutantCallbackTrusted, "a rail callback is acted on as it says, without reading the payment intent back from the rail: a forged payment_intent.succeeded settles a row the rail never charged", "ATP-6-executing-until-resolved"},
		{MutantNoncePerIntent, "a nonce is consumed per intent_id: the same signed intent replayed is refused, but a new intent of the agent that reuses a consumed nonce is authorized", "ATP-7-nonce-single-use"},
		{MutantVerifyByLookup, "POST /api/atp/receipts/verify answers valid only for the bytes of a receipt it stored, without checking the signature: a genuine receipt re-serialized by a third party (members reordered, indented) is answered invalid", "ATP-4-verify-no-secret"},
		{MutantExpiryMargin, "authorize refuses with 410 intent_expired every intent that expires within the next minute (a safety margin applied to the agent), though it has not expired", "ATP-5-expired-410"},
	}
}

// ReplicaMutants are the mutants that are correct on one replica and
// charge twice across several sharing the store (Config.Store
// postgres://…): the single-replica suite cannot kill them, idscheck chaos
// over replicas must.
func ReplicaMutants() []Mutant {
	return []Mutant{
		{MutantReplicaLocalCache, "a per-process cache of the rows executed is consulted before the store: a row the replica has not seen executed is taken for a new one, moved to executing if it is authorized and charged with a payment intent of its own, whatever the store says; correct on one replica, an execute retried on another replica charges again", "ATP-2-no-second-effect"},
		{MutantCheckThenInsert, "execute reads the row, then moves it to executing in another transaction with a write its state does not refuse, under a lock of the process, and charges with a payment intent of its own; correct on one replica, duplicates on two replicas both find it authorized and both charge", "ATP-2-no-second-effect"},
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
