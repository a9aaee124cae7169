package a2a

// Mutant is a deliberate, realistic bug of the queue, switched on by
// Config.Mutant: a small guarded branch. Breaks is the ID of the a2a rule
// it violates.
type Mutant struct{ Name, Description, Breaks string }

// Mutant names.
const (
	MutantUnsafeRequeued        = "unsafe-requeued"
	MutantNewTaskIDOnRetry      = "new-task-id-on-retry"
	MutantEmptyKeyAccepted      = "empty-key-accepted"
	MutantCacheWithoutKind      = "cache-without-kind"
	MutantCompactionDropsCache  = "compaction-drops-cache"
	MutantGateEnabledByDefault  = "gate-enabled-by-default"
	MutantMaxAttemptsIgnored    = "max-attempts-ignored"
	MutantNoAuditRow            = "no-audit-row"
	MutantMissingKeyRequeued    = "missing-key-requeued"
	MutantAttemptNotIncremented = "attempt-not-incremented"
	MutantResultReposted        = "result-reposted"
	MutantLeaseExpires          = "lease-expires"
	MutantNoScanRow             = "no-scan-row"
	MutantMetadataDropped       = "metadata-dropped"
	MutantRepairWithoutPosture  = "repair-without-posture"
	MutantAcceptedRiskBypass    = "accepted-risk-bypass"
	MutantYoungLeaseRequeued    = "young-lease-requeued"
	MutantNoCacheReplay         = "no-cache-replay"
	MutantReplicaLocalCache     = "replica-local-cache"
	MutantCheckThenInsert       = "check-then-insert"
)

// Mutants lists every mutant, in a fixed order.
func Mutants() []Mutant {
	return []Mutant{
		{MutantUnsafeRequeued, "the retry gate requeues stale unsafe tasks too (the duplicate-safety check is skipped)", "A2A-CLASS-unsafe-not-requeued"},
		{MutantNewTaskIDOnRetry, "an automated requeue enqueues a copy of the task under a new id and force-closes the old one", "A2A-GATE-same-task-id"},
		{MutantEmptyKeyAccepted, "an idempotency key of \"\" is stored instead of refused", "A2A-TASK-key-validated"},
		{MutantCacheWithoutKind, "the result cache is keyed by sender, recipient and key, without the task kind", "A2A-CACHE-keyed"},
		{MutantCompactionDropsCache, "compaction drops the cache entries of the tasks it removes", "A2A-CACHE-compaction-keeps"},
		{MutantGateEnabledByDefault, "retry-stale mutates unless \"enabled\": false is sent", "A2A-GATE-disabled-default"},
		{MutantMaxAttemptsIgnored, "the gate ignores max_attempts", "A2A-GATE-bounds"},
		{MutantNoAuditRow, "an automated requeue writes no auto_requeue audit row", "A2A-GATE-observable"},
		{MutantMissingKeyRequeued, "the gate requeues idempotent tasks that carry no key", "A2A-GATE-skip-no-key"},
		{MutantAttemptNotIncremented, "a lease after a requeue does not increment the attempt counter", "A2A-GATE-attempt-counter"},
		{MutantResultReposted, "posting a result again after the sender drained it queues it again", "A2A-RECV-result-twice"},
		{MutantLeaseExpires, "an in-flight lease older than 200 ms is leased again to the next receiver that asks", "A2A-INTRO-explicit-lease"},
		{MutantNoScanRow, "scheduler passes record no a2a_auto_retry_scheduler_scan summary", "A2A-SCHED-scan-row"},
		{MutantMetadataDropped, "the status surface leaves out the idempotency metadata", "A2A-TASK-metadata-returned"},
		{MutantRepairWithoutPosture, "a manual requeue without duplicate_risk is accepted", "A2A-REPAIR-posture"},
		{MutantAcceptedRiskBypass, "the gate requeues an unsafe task an operator once requeued with operator_accepted", "A2A-REPAIR-no-bypass"},
		{MutantYoungLeaseRequeued, "the gate ignores min_lease_age_ms", "A2A-INTRO-gate-scope"},
		{MutantNoCacheReplay, "a task with a cached result is queued and leased again", "A2A-CACHE-replay"},
	}
}

// ReplicaMutants are the mutants that are correct on one replica and
// break their rule only across several sharing the store (--store
// postgres://…): the single-replica suite cannot kill them, idscheck chaos
// over replicas must.
func ReplicaMutants() []Mutant {
	return []Mutant{
		{MutantReplicaLocalCache, "the result cache is a map of the process (warmed from the store at start, filled by the results posted to this replica) consulted instead of the store at enqueue; correct on one replica, a task whose cache key's result was posted to another replica is queued and executed again", "A2A-CACHE-replay"},
		{MutantCheckThenInsert, "a lease looks up the recipient's oldest queued task, then writes its lease in another transaction over whatever the row holds, under a lock of the process; correct on one replica, two replicas leasing at once lease one task twice", "A2A-INTRO-explicit-lease"},
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
