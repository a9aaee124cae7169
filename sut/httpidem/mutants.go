package httpidem

// Mutant is a deliberate, realistic bug of the endpoint, switched on by
// Config.Mutant: a small guarded branch. Breaks is the ID of the
// http-idempotency rule it violates; Variant is the variant whose run
// must kill it (the rule's text's).
type Mutant struct{ Name, Description, Breaks, Variant string }

// Mutant names.
const (
	MutantNoReservation         = "no-reservation"
	MutantKeyNotScoped          = "key-not-scoped"
	MutantFingerprintIgnored    = "fingerprint-ignored"
	MutantRejectionConsumesKey  = "rejection-consumes-key"
	MutantInFlightExecuted      = "in-flight-executed"
	MutantConflict409InT0       = "conflict-409-in-t0"
	MutantReplayFreshID         = "replay-fresh-id"
	MutantExpiresEarly          = "expires-early"
	MutantStripe500NotSaved     = "stripe-500-not-saved"
	MutantShortStripeKeys       = "short-stripe-keys"
	MutantMissingKeyExecutes    = "missing-key-executes"
	MutantStripeValidationSaved = "stripe-validation-saved"
	MutantEffectOnReplay        = "effect-on-replay"
	MutantBodyDedup             = "body-dedup"
	MutantReplicaLocalCache     = "replica-local-cache"
	MutantCheckThenInsert       = "check-then-insert"
)

// Mutants lists every mutant, in a fixed order.
func Mutants() []Mutant {
	return []Mutant{
		{MutantNoReservation, "the key is looked up on the read pool and a request that found nothing pays, with no atomic reservation: concurrent duplicates each pay", "IETF-2.6-concurrent-conflict", VariantIETF},
		{MutantKeyNotScoped, "keys are global, not per caller: a second caller's request with a key another caller used gets the first caller's payment", "IETF-5-composite-key", VariantIETF},
		{MutantFingerprintIgnored, "the fingerprint is not compared: another payload under a used key replays the first result", "IETF-2.7-mismatch-422", VariantIETF},
		{MutantRejectionConsumesKey, "t0 stores a validation error under the paymentRef and replays it to the corrected resubmission", "T0-REPLAY-rejection-keeps-key", VariantT0},
		{MutantInFlightExecuted, "a duplicate of a request in flight pays too (no reservation check for it)", "T0-R2-wait-in-flight", VariantT0},
		{MutantConflict409InT0, "t0 answers 409 to a duplicate of a request in flight instead of waiting for its response", "T0-R3-no-duplicate-error", VariantT0},
		{MutantReplayFreshID, "a replay renders the stored payment with a freshly drawn id", "IETF-2.6-retry-result", VariantIETF},
		{MutantExpiresEarly, "keys are forgotten after a tenth of KeyTTL: a retry hours later pays again", "STRIPE-IDEM-kept-24h", VariantStripe},
		{MutantStripe500NotSaved, "a processor failure (502) is not stored under stripe: the retry pays", "STRIPE-IDEM-same-result", VariantStripe},
		{MutantShortStripeKeys, "stripe refuses keys longer than 64 characters (400)", "STRIPE-IDEM-key-255", VariantStripe},
		{MutantMissingKeyExecutes, "a POST without Idempotency-Key is processed (no deduplication) instead of 400", "IETF-2.7-missing-400", VariantIETF},
		{MutantStripeValidationSaved, "stripe stores a validation error under the key: the corrected retry is refused as another payload", "STRIPE-IDEM-not-saved", VariantStripe},
		{MutantBodyDedup, "requests are deduplicated on their body, not their key: a new request under a new key with the body of an earlier one gets the earlier one's payment", "IETF-2.5-identify-key", VariantIETF},
		{MutantEffectOnReplay, "a replay of a created payment calls the payment processor again (the stored response is still returned)", "T0-0-no-further-effect", VariantT0},
	}
}

// ReplicaMutants are the mutants that are correct on one replica and
// break exactly-once across several sharing the store (--store
// postgres://…): the single-replica suite cannot kill them, idscheck chaos
// over replicas must.
func ReplicaMutants() []Mutant {
	return []Mutant{
		{MutantReplicaLocalCache, "a per-process cache of the keys seen is consulted before the store: a key the replica has not seen is taken for a new one and reserved over the store's row; correct on one replica, a retry on another replica pays again", "IETF-2.6-retry-result", VariantIETF},
		{MutantCheckThenInsert, "the key is looked up, then reserved in another transaction with an insert the unique key does not refuse, under a lock of the process; correct on one replica, duplicates on two replicas both pay", "IETF-2.6-concurrent-conflict", VariantIETF},
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
