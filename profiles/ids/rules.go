// Package ids is the IDS profile: RFC-WF-0010, Idempotency & Delivery
// Semantics (seed 001), made certifiable. It holds the text's rules, the
// places where it leaves a choice open, and idscheck's wire binding of it
// (docs/ids-binding.md): the envelope, the key derivation (SHA-256 over
// RFC 8785 JCS) and the envelope fingerprint; its feature file and step
// definitions (ids.feature, steps.go); the checks and the outcome model of
// its chaos runs (checks.go) and its chaos workload (chaos_workload.go,
// chaos.go); and its bundled server as a process (serve.go). Profile
// returns all of it; the bundled server itself is sut/ids.
package ids

import "github.com/idscheck/idscheck/spec"

// Name is the profile's name (--profile ids).
const Name spec.Profile = "ids"

// Source is the seed file of RFC-WF-0010 (profile ids).
const Source = "001_cde8541928f420cc.txt"

// The sentences of seed 001 whose keyword binds the list items under them
// (spec.Rule.Binding).
const (
	bindConformance = "An IDS-compliant implementation MUST pass tests demonstrating:"
	bindCollision   = "If a collision is detected (same idempotency key but envelope differs), the system MUST:"
	bindReplay      = "It MUST return:"
	bindInProgress  = "If the first attempt is in_progress, duplicates MUST return a stable response indicating:"
	bindEvidence    = "When deduplication occurs, the system MUST emit EAS evidence such that an auditor can verify:"
	bindSecurity    = "Idempotency infrastructure is a high-value target. Implementations MUST:"
	bindStore       = "The dedup store MUST record at least:"
	bindWindow      = "The dedupe window MUST be declared per command (CRCD). Defaults:"
	bindConfirm     = "For destructive/admin commands requiring confirmation and/or step-up:"
)

// Untestable reasons.
const (
	untestableDesign = "a design obligation: the harness sees the behaviour it leads to, which other rules judge"
	untestableStore  = "behind the API: the harness cannot reach the dedup store to tamper with it"
)

func init() { spec.RegisterRules(Rules) }

// Rules returns the catalog of seed 001, in the order of the text.
func Rules() []spec.Rule {
	r := func(id, section string, level spec.Level, binding, quote, explanation string) spec.Rule {
		return spec.Rule{ID: id, Profile: Name, Source: Source, Section: section, Level: level,
			Binding: binding, Quote: quote, Explanation: explanation}
	}
	untestable := func(rule spec.Rule, why string) spec.Rule { rule.Untestable = why; return rule }
	readings := func(rule spec.Rule, decisions ...string) spec.Rule { rule.Readings = decisions; return rule }
	return []spec.Rule{
		untestable(r("IDS-I-assume-duplicates", "I", spec.Must, "",
			"Such systems MUST assume at-least-once delivery at boundaries and MUST therefore implement idempotency to prevent duplicate side effects (double charge, double cancel, repeated refunds).",
			"an implementation built for exactly-once delivery double-charges on the first retry"), untestableDesign),
		r("IDS-V-exactly-once-effects", "V", spec.Must, "",
			"Therefore, the system MUST provide exactly-once effects for all state-mutating commands.",
			"a retried or duplicated command charges, cancels or refunds twice"),
		r("IDS-VI-classified", "VI", spec.Must, "",
			"Commands MUST be classified (and declared in CRCD) into one of:",
			"nobody can tell which commands are deduplicated, for how long, or how their effects are shielded"),
		r("IDS-VI-i1-same-outcome", "VI", spec.Must, "",
			"I1 — Strict Idempotent Mutation: Same logical command MUST produce same effects and same outcome.",
			"a resent I1 command changes state again or answers differently"),
		untestable(r("IDS-VI-default-i1", "VI", spec.Must, "",
			"Default for any mutation MUST be I1 unless explicitly justified and declared.",
			"a mutation falls into a weaker class by omission"), "the justification of a class is a design record; the harness checks that every command declares one (IDS-VI-classified)"),
		r("IDS-VII.A-key-derived", "VII.A", spec.Must, "",
			"Every state-mutating command MUST have an idempotency_key computed from a canonical command envelope (CCP), using stable normalization rules.",
			"the same logical command spelled differently (member order, number form) gets another key and executes twice"),
		r("IDS-VII.B-key-inputs", "VII.B", spec.Must, "",
			"The key MUST include, at minimum, the following normalized fields:",
			"two different commands share a key: the second is wrongly replayed the first's outcome and never executes"),
		r("IDS-VII.C-ephemeral-excluded", "VII.C", spec.Must, "",
			"Canonicalization MUST NOT include ephemeral fields such as timestamps, message ids, or random tokens.",
			"a redelivery with a new message id or timestamp is taken for a new command and executes again"),
		r("IDS-VII.D-key-function", "VII.D", spec.Must, "",
			"The key MUST be computed as: idempotency_key = HASH( CANONICAL( key_inputs ) )",
			"clients and auditors cannot derive the key the service uses, so they cannot query or verify it"),
		r("IDS-VII.D-sha256", "VII.D", spec.Should, "",
			"Where HASH SHOULD be SHA-256 (or stronger).",
			"a weak hash lets two envelopes collide"),
		r("IDS-VII.E-effective-actor", "VII.E", spec.Must, "",
			"If policy allows multiple actors to trigger the same logical mutation (e.g., “system retries” on behalf of user), the model MUST define the binding principal explicitly (e.g., effective_actor_id) and use that in key derivation to avoid accidental double effects.",
			"a system retry on behalf of a user executes the user's command a second time"),
		r("IDS-VIII.A-check-and-set", "VIII.A", spec.Must, "",
			"For any mutating command, the system MUST perform an atomic operation:",
			"a duplicate is executed instead of replayed"),
		r("IDS-VIII.A-atomic", "VIII.A", spec.Must, "",
			"This MUST be atomic to prevent race conditions under concurrent duplicates.",
			"concurrent duplicates both find no record and both execute"),
		r("IDS-VIII.B-stored-fields", "VIII.B", spec.Must, bindStore,
			"idempotency_key- command_id(original) - status(in_progress | executed | failed | rejected | compensated) - outcome_ref(pointer to EAS artifact(s) or stored outcome blob) - created_at,updated_at ttl_expires_at",
			"an auditor cannot tell which command a key belongs to, where it stands, or when its window ends"),
		r("IDS-VIII.C-window-declared", "VIII.C", spec.Must, "",
			"The dedupe window MUST be declared per command (CRCD).",
			"clients cannot know how long a retry is safe"),
		r("IDS-VIII.C-financial-24h", "VIII.C", spec.Should, bindWindow,
			"SHOULD be ≥ 24 hours for financial/critical commands",
			"a payment retried the next morning is charged again"),
		r("IDS-VIII.C-expiry-may-execute", "VIII.C", spec.May, "",
			"If TTL expires, the command MAY execute again; therefore TTL must be chosen to prevent unacceptable duplicate effects.",
			"informational: what the target does once a window has passed"),
		r("IDS-VIII.D-reject", "VIII.D", spec.Must, bindCollision,
			"reject the new command as execution.rejectedwith reasonidempotency_conflict, and",
			"a command that reuses another's key is silently answered with the other's outcome, or executed"),
		r("IDS-VIII.D-evidence", "VIII.D", spec.Must, bindCollision,
			"emit evidence capturing both envelope fingerprints (redacted as needed)",
			"an auditor cannot see what collided"),
		r("IDS-IX.A-no-reexecute", "IX.A", spec.Must, "",
			"If a duplicate idempotency key is received within the active window, the system MUST NOT re-execute side effects.",
			"a duplicate charges again"),
		readings(r("IDS-IX.A-same-outcome", "IX.A", spec.Must, bindReplay,
			"the same terminal outcome, or - a reference to the same terminal evidence chain",
			"a client retrying after a timeout sees another outcome than the one that happened"), DecisionReplayForm),
		r("IDS-IX.B-processing", "IX.B", spec.Must, bindInProgress,
			"“processing” status",
			"a client retrying while the first attempt runs cannot tell that it is running"),
		r("IDS-IX.B-correlation", "IX.B", spec.Must, bindInProgress,
			"correlation identifiers",
			"a client cannot tie the in-progress answer to the command it sent first"),
		r("IDS-IX.B-how-to-query", "IX.B", spec.Must, bindInProgress,
			"how to query OoC status",
			"a client told \"processing\" cannot find out how it ended"),
		r("IDS-IX.B-no-parallel", "IX.B", spec.Must, "",
			"The system MUST NOT spawn parallel executions for the same key.",
			"a duplicate arriving mid-execution starts a second execution"),
		r("IDS-IX.C-stable-response", "IX.C", spec.Should, "",
			"User-facing conversational responses SHOULD be stable across replays (same summary, same identifiers), subject to redaction policy.",
			"the user sees a different confirmation for the same command and thinks it ran twice"),
		r("IDS-X-bound", "X", spec.Must, bindConfirm,
			"Confirmation tokens MUST be bound to command_idANDidempotency_key.",
			"a confirmation given for one command authorises another"),
		r("IDS-X-single-use", "X", spec.Must, bindConfirm,
			"A confirmation token MUST be single-use and short-lived.",
			"one human confirmation authorises any number of executions"),
		r("IDS-X-short-lived", "X", spec.Must, bindConfirm,
			"A confirmation token MUST be single-use and short-lived.",
			"a stale confirmation authorises an execution long after the human agreed"),
		r("IDS-X-no-reconfirm", "X", spec.Must, bindConfirm,
			"A replayed duplicate MUST NOT require re-confirmation if the original is already confirmed and executed; instead it MUST replay the outcome.",
			"a replay forces the human to confirm again, or a second confirmation executes again"),
		r("IDS-XI-shielding", "XI", spec.Must, "",
			"For commands classified I3, the system MUST implement at least one shielding strategy:",
			"a provider that lost its reply is called twice: the customer is charged twice"),
		r("IDS-XI-declared", "XI", spec.Must, "",
			"Systems MUST declare which strategy is used per command in CRCD.",
			"an auditor cannot tell how an external effect is protected"),
		r("IDS-XII-executed-or-replayed", "XII", spec.Must, bindEvidence,
			"whether execution was performed or replayed",
			"an auditor cannot tell a replay from an execution"),
		r("IDS-XII-original-ids", "XII", spec.Must, bindEvidence,
			"original command_idandidempotency_key",
			"an auditor cannot tie a replay to the command it replayed"),
		r("IDS-XII-decision", "XII", spec.Must, bindEvidence,
			"dedupe decision ( first_seen | duplicate_replayed | conflict_rejected)",
			"the record says an execution happened where a replay did, or the reverse"),
		r("IDS-XII-outcome-ref", "XII", spec.Must, bindEvidence,
			"the outcome reference returned",
			"an auditor cannot check that a replay returned the original outcome"),
		r("IDS-XIII-1-duplicates", "XIII", spec.Must, bindConformance,
			"Duplicate deliveries of the same mutation do not duplicate effects",
			"§XIII's first conformance test fails: duplicates duplicate effects"),
		r("IDS-XIII-2-concurrent", "XIII", spec.Must, bindConformance,
			"Concurrent duplicates converge to one execution",
			"§XIII's second conformance test fails: concurrent duplicates execute more than once"),
		r("IDS-XIII-3-replay-after-success", "XIII", spec.Must, bindConformance,
			"Duplicate after success replays outcome",
			"§XIII's third conformance test fails: a duplicate after success is not answered with the outcome"),
		r("IDS-XIII-4-in-progress", "XIII", spec.Must, bindConformance,
			"Duplicate during in-progress returns processing status",
			"§XIII's fourth conformance test fails: a duplicate during execution is not told it is processing"),
		r("IDS-XIII-5-collision", "XIII", spec.Must, bindConformance,
			"Collision case rejects with evidence",
			"§XIII's fifth conformance test fails: a collision is not rejected with evidence"),
		r("IDS-XIII-6-confirmation", "XIII", spec.Must, bindConformance,
			"Confirmation binding prevents bypass or double-confirmation abuse",
			"§XIII's sixth conformance test fails: a confirmation is bypassed or abused twice"),
		r("IDS-XV-tenant-scope", "XV", spec.Must, bindSecurity,
			"scope dedupe keys by tenant (mandatory)",
			"one tenant's command is answered with another tenant's outcome"),
		untestable(r("IDS-XV-tamper", "XV", spec.Must, bindSecurity,
			"protect dedupe store from tampering",
			"a tampered record replays a forged outcome"), untestableStore),
		r("IDS-XV-rate-limit", "XV", spec.Must, bindSecurity,
			"rate-limit repeated duplicate submissions",
			"a flood of duplicates of one command costs the service without limit"),
		r("IDS-XV-no-leak", "XV", spec.Must, bindSecurity,
			"ensure replay does not leak sensitive details beyond actor privilege",
			"a replay to another sender shows the original actor's private details"),
	}
}
