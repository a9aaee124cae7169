// Package a2a is the a2a profile: Covenant's A2A idempotency policy (seed
// 003) made checkable over the binding of docs/a2a-binding.md, a durable,
// explicitly leased agent-to-agent task queue. Its promise is not "every
// retry is deduplicated" but "the duplicate-work risk is explicit, and
// automation never repeats what is unsafe".
//
// The package is the whole profile: its rules (rules.go), its client of
// the binding (wire.go), its feature file and steps (a2a.feature,
// steps.go), its preflight, and its bundled queue as the harness starts it
// (profile.go) and as a process (serve.go).
package a2a

import "github.com/idscheck/idscheck/spec"

// Name is the profile's name (--profile a2a).
const Name spec.Profile = "a2a"

// Source is the seed text of the profile.
const Source = "003_2a6a959a8422d25a.txt"

// Rule IDs the steps, the mutants and the chaos checks name.
const (
	RuleExplicitLease       = "A2A-INTRO-explicit-lease"
	RuleNoRedelivery        = "A2A-INTRO-no-redelivery"
	RuleGateScope           = "A2A-INTRO-gate-scope"
	RuleRetrySameID         = "A2A-TERMS-retry-same-id"
	RuleKeyValidated        = "A2A-TASK-key-validated"
	RuleMetadataReturned    = "A2A-TASK-metadata-returned"
	RuleUnsafeNotRequeued   = "A2A-CLASS-unsafe-not-requeued"
	RuleKeyedEffects        = "A2A-CLASS-keyed-effects"
	RuleGateIdempotentOnly  = "A2A-CLASS-gate-idempotent-only"
	RuleSendersSameKey      = "A2A-KEY-senders-same-key"
	RuleCacheKeyed          = "A2A-CACHE-keyed"
	RuleCacheReplay         = "A2A-CACHE-replay"
	RuleCachePersisted      = "A2A-CACHE-persisted"
	RuleCacheCompaction     = "A2A-CACHE-compaction-keeps"
	RuleGateDisabledDefault = "A2A-GATE-disabled-default"
	RuleGateSameTaskID      = "A2A-GATE-same-task-id"
	RuleGateAttemptCounter  = "A2A-GATE-attempt-counter"
	RuleGateSkipNoKey       = "A2A-GATE-skip-no-key"
	RuleGateObservable      = "A2A-GATE-observable"
	RuleGateBounds          = "A2A-GATE-bounds"
	RuleSchedOptIn          = "A2A-SCHED-opt-in"
	RuleSchedCapability     = "A2A-SCHED-capability"
	RuleSchedScanRow        = "A2A-SCHED-scan-row"
	RuleSchedRequeueRows    = "A2A-SCHED-requeue-rows"
	RuleRecvConditional     = "A2A-RECV-conditional-writes"
	RuleRecvExternalKey     = "A2A-RECV-external-key"
	RuleRecvResultTwice     = "A2A-RECV-result-twice"
	RuleRepairPosture       = "A2A-REPAIR-posture"
	RuleRepairNoBypass      = "A2A-REPAIR-no-bypass"
)

// Untestable reasons.
const (
	untestableReceiver = "an obligation of the receiver, not of the queue: idscheck's receivers keep it (docs/a2a-binding.md, the effect sink), and idscheck chaos counts their effects"
	untestableRestart  = "needs a restart of the target, which no scenario of a black box can do: judged by idscheck chaos (SIGKILL and restart of the queue) and the bundled queue's crash tests"
)

func init() { spec.RegisterRules(Rules) }

// Rules returns the catalog in the order of the text. The text writes
// "must" in lower case and states its guarantees in the indicative (and the
// retry gate's list in the imperative of a specification: what the gate
// does); each is a MUST whose Guarantee holds its words. What it asks of
// senders and receivers is untestable here: the harness plays them.
func Rules() []spec.Rule {
	r := func(id, section string, level spec.Level, quote, explanation string) spec.Rule {
		return spec.Rule{ID: id, Profile: Name, Source: Source, Section: section, Level: level, Quote: quote, Explanation: explanation}
	}
	g := func(words string, rule spec.Rule) spec.Rule {
		rule.Level, rule.Guarantee = spec.Must, words
		return rule
	}
	untestable := func(rule spec.Rule, why string) spec.Rule { rule.Untestable = why; return rule }
	return []spec.Rule{
		g("explicitly leased queue", r(RuleExplicitLease, "INTRO", spec.Must,
			"Covenant A2A is a durable, explicitly leased queue.",
			"a leased task is leased again without a requeue: two receivers execute it at once")),
		untestable(g("does not automatically redeliver leased work after restart", r(RuleNoRedelivery, "INTRO", spec.Must,
			"It does not automatically redeliver leased work after restart.",
			"a restart hands work a receiver may already have performed to another receiver")), untestableRestart),
		g("can requeue only stale tasks that declare idempotent duplicate safety and carry a non-empty key", r(RuleGateScope, "INTRO", spec.Must,
			"a disabled-by-default retry scan can requeue only stale tasks that declare idempotent duplicate safety and carry a non-empty key.",
			"the scan requeues a lease that is not stale: work still running is handed to a second receiver")),
		g("without changing the task id", r(RuleRetrySameID, "TERMS", spec.Must,
			"Retry. Requeueing a task for another attempt without changing the task id.",
			"a manual requeue makes a new task: the receiver cannot tell a retry from new work")),
		g("validates that a present key is non-empty", r(RuleKeyValidated, "TASK", spec.Must,
			"The daemon validates that a present key is non-empty, persists the metadata, and returns it through queue/status surfaces.",
			"an empty key is stored: every task with it shares one cache entry and the gate's key check means nothing")),
		g("persists the metadata, and returns it through queue/status surfaces", r(RuleMetadataReturned, "TASK", spec.Must,
			"The daemon validates that a present key is non-empty, persists the metadata, and returns it through queue/status surfaces.",
			"an operator or receiver cannot see whether a task is safe to repeat")),
		g("must not automatically requeue these tasks", r(RuleUnsafeNotRequeued, "CLASS", spec.Must,
			"unsafe: duplicate execution may cause external effects. The system must not automatically requeue these tasks.",
			"automation repeats work that may charge, mail or write twice")),
		untestable(r(RuleKeyedEffects, "CLASS", spec.Should,
			"Any side effects must be keyed or conditional such that duplicates do not create new external effects.",
			"a task declared idempotent creates a second external effect when repeated"), untestableReceiver),
		g("only accepts task metadata marked idempotent", r(RuleGateIdempotentOnly, "CLASS", spec.Must,
			"The automated retry gate only accepts task metadata marked idempotent.",
			"the gate requeues a task without metadata, which the text treats as unsafe")),
		untestable(r(RuleSendersSameKey, "KEY", spec.Should,
			"senders should provide the same key so receivers can forward it consistently.",
			"a receiver forwards another key on a retry and the provider executes again"), "an obligation of the sender: idscheck's senders keep it"),
		g("stores a cached payload keyed by sender, recipient, current task kind, and idempotency key", r(RuleCacheKeyed, "CACHE", spec.Must,
			"When an idempotent task posts a result, the mailbox stores a cached payload keyed by sender, recipient, current task kind, and idempotency key.",
			"a task of another kind (or sender, recipient, key) gets a result computed for different work")),
		g("receives a replayed result immediately instead of being leased again", r(RuleCacheReplay, "CACHE", spec.Must,
			"A later task with the same cache key receives a replayed result immediately instead of being leased again.",
			"a duplicate of finished idempotent work is executed again")),
		untestable(r(RuleCachePersisted, "CACHE", spec.Should,
			"JSONL-backed mailboxes persist cache entries in the event log.",
			"cache entries are lost with the process"), "the storage form of Covenant's mailbox (a JSONL log): a target may store otherwise; that entries survive restart is judged under "+RuleCacheCompaction+" by the crash tests"),
		g("Task compaction removes resolved task history but keeps cache entries", r(RuleCacheCompaction, "CACHE", spec.Must,
			"Task compaction removes resolved task history but keeps cache entries, so future duplicates can still short-circuit after restart.",
			"after compaction a duplicate of finished work is executed again")),
		g("is disabled by default and reports what it would do", r(RuleGateDisabledDefault, "GATE", spec.Must,
			"covenant a2a retry-stale is disabled by default and reports what it would do unless the operator passes --enable.",
			"a dry run requeues work, or does not say what it would requeue")),
		g("Retries requeue the same task id", r(RuleGateSameTaskID, "GATE", spec.Must,
			"Never synthesize a new task id. Retries requeue the same task id and increment the attempt counter on the next lease.",
			"an automated retry makes a new task: the receiver cannot tell a retry from new work")),
		g("increment the attempt counter on the next lease", r(RuleGateAttemptCounter, "GATE", spec.Must,
			"Never synthesize a new task id. Retries requeue the same task id and increment the attempt counter on the next lease.",
			"a retry is invisible: the attempt counter does not show it")),
		g("Skip tasks without a non-empty idempotency key", r(RuleGateSkipNoKey, "GATE", spec.Must,
			"Skip tasks without a non-empty idempotency key.",
			"the gate requeues a task whose receiver cannot forward a key: its external call is repeated unkeyed")),
		g("Make retry decisions observable via auto_requeueaudit rows and skipped-task report entries", r(RuleGateObservable, "GATE", spec.Must,
			"Make retry decisions observable via auto_requeueaudit rows and skipped-task report entries.",
			"an automated requeue leaves no trace, or a skipped task no reason")),
		g("Bound retry behavior with explicit maximum attempts, maximum requeues, minimum lease age, and scan limits", r(RuleGateBounds, "GATE", spec.Must,
			"Bound retry behavior with explicit maximum attempts, maximum requeues, minimum lease age, and scan limits.",
			"automation retries without end, too many at once, too early, or scans without limit")),
		untestable(r(RuleSchedOptIn, "SCHED", spec.Must,
			"The daemon can run the same retry gate on a timer through an explicit environment opt-in.",
			"a scheduler runs that nobody turned on"), "the daemon's environment is the deployment's: a black box cannot see it; the bundled queue's tests hold its scheduler off without COVENANT_A2A_AUTO_RETRY_SCHEDULER"),
		untestable(r(RuleSchedCapability, "SCHED", spec.Must,
			"It does not bypass the a2a.repair.requeue capability gate.",
			"the scheduler requeues what its operator may not"), "the binding has one operator and no capability model (docs/a2a-binding.md)"),
		g("Every scheduler pass records an a2a_auto_retry_scheduler_scan audit summary", r(RuleSchedScanRow, "SCHED", spec.Must,
			"Every scheduler pass records an a2a_auto_retry_scheduler_scan audit summary.",
			"scheduler passes leave no trace")),
		g("Actual mutations still produce per-task auto_requeue repair rows", r(RuleSchedRequeueRows, "SCHED", spec.Must,
			"Actual mutations still produce per-task auto_requeue repair rows.",
			"the scheduler requeues a task without an audit row")),
		untestable(r(RuleRecvConditional, "RECV", spec.Should,
			"persistent writes are conditional on the task id (or explicit idempotency key) so replays do not create new records;",
			"a receiver's replay creates a second record"), untestableReceiver),
		untestable(r(RuleRecvExternalKey, "RECV", spec.Should,
			"external calls that support idempotency keys receive the key consistently across retries;",
			"a provider executes a retried call again"), untestableReceiver),
		g("posting the same result twice must not corrupt mailbox state", r(RuleRecvResultTwice, "RECV", spec.Must,
			"results are safe to post multiple times (posting the same result twice must not corrupt mailbox state).",
			"a receiver's retried post queues a second result or moves the task")),
		g("requires an explicit duplicate-risk posture", r(RuleRepairPosture, "REPAIR", spec.Must,
			"Manual lease repair already requires an explicit duplicate-risk posture (idempotent vs operator_accepted).",
			"an operator requeues work without saying whether repeating it is safe")),
		g("must never bypass this classification", r(RuleRepairNoBypass, "REPAIR", spec.Must,
			"The retry gate is effectively a daemon-initiated requeue, so it must use task metadata and must never bypass this classification.",
			"the gate requeues an unsafe task because an operator once accepted its risk by hand")),
	}
}
