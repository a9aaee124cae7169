package atp

import "github.com/idscheck/idscheck/spec"

// Name is the profile's name (--profile atp).
const Name spec.Profile = "atp"

// Source is the seed file of the ATP page (profile atp).
const Source = "000_10301691a56e9f75.txt"

// Rule IDs that steps, checks and mutants name.
const (
	RuleUniqueRow             = "ATP-0-unique-row"
	RuleReceiptAfterSettled   = "ATP-0-receipt-after-settled"
	RuleSignedBySiteKey       = "ATP-0-signed-by-site-key"
	RuleNoMaybePaid           = "ATP-0-no-maybe-paid"
	RuleMonotonic             = "ATP-1-monotonic"
	RuleNoExecutingAuthorized = "ATP-1-no-executing-to-authorized"
	RuleRecovery              = "ATP-1-recovery-same-or-later"
	RuleRetryAnyStep          = "ATP-2-retry-any-step"
	RuleRetryVerbatim         = "ATP-2-retry-verbatim"
	RuleNoSecondEffect        = "ATP-2-no-second-effect"
	RuleKeyRequired           = "ATP-3-key-required"
	RuleKeyAny                = "ATP-3-key-any-16-128"
	RuleKeyBound              = "ATP-3-key-bound-to-intent"
	RuleKeyStable             = "ATP-3-key-stable"
	RuleNeverSpeculative      = "ATP-4-never-speculative"
	RuleSettlementSigned      = "ATP-4-settlement-signed"
	RuleCompensationReceipt   = "ATP-4-compensation-receipt"
	RuleExpiredNoReceipt      = "ATP-4-expired-no-receipt"
	RuleVerifyNoSecret        = "ATP-4-verify-no-secret"
	RuleRetryPolicy           = "ATP-5-retry-policy"
	RuleExpired410            = "ATP-5-expired-410"
	RuleReissueAfterLoss      = "ATP-6-reissue-after-loss"
	RuleExecutingUntil        = "ATP-6-executing-until-resolved"
	RuleReconciliation        = "ATP-6-reconciliation"
	RuleSingleWriter          = "ATP-6-single-writer"
	RuleActionDedup           = "ATP-7-action-dedup"
	RuleNonceSingleUse        = "ATP-7-nonce-single-use"
	RuleIndependent           = "ATP-8-independent"
	RulePrecondition          = "ATP-8-precondition-at-authorize"
	RuleRetryExample          = "ATP-9-retry-example"
	RuleFirstConsumedAt       = "ATP-9-nonce-first-consumed-at"
)

func init() { spec.RegisterRules(Rules) }

// Rules returns the catalog of seed 000, in the order of the text.
func Rules() []spec.Rule {
	// The page has no RFC 2119 keyword. What it states as a guarantee, in
	// the indicative ("is UNIQUE", "returns the existing row verbatim"), is
	// a MUST whose Guarantee holds those words (G); what it only
	// recommends, permits, or asks of the agent or the operator stays a
	// SHOULD (S).
	type level struct {
		level     spec.Level
		guarantee string
	}
	S := level{level: spec.Should}
	G := func(words string) level { return level{spec.Must, words} }
	r := func(id, section string, l level, quote, explanation string) spec.Rule {
		return spec.Rule{ID: id, Profile: Name, Source: Source, Section: section, Level: l.level, Guarantee: l.guarantee,
			Quote: quote, Explanation: explanation}
	}
	untestable := func(rule spec.Rule, why string) spec.Rule { rule.Untestable = why; return rule }
	readings := func(rule spec.Rule, decisions ...string) spec.Rule { rule.Readings = decisions; return rule }
	return []spec.Rule{
		r(RuleUniqueRow, "0", G("is UNIQUE in the transactions table"),
			"(intent_id, idempotency_key) is UNIQUE in the transactions table.",
			"a retried or concurrent request under the same (intent_id, idempotency_key) creates a second transaction"),
		r(RuleReceiptAfterSettled, "0", G("A receipt is only emitted after the row transitions to settled"),
			"A receipt is only emitted after the row transitions to settled and is signed by the site key.",
			"an agent holds a settlement receipt for a payment that has not settled"),
		r(RuleSignedBySiteKey, "0", G("is signed by the site key"),
			"A receipt is only emitted after the row transitions to settled and is signed by the site key.",
			"a receipt that the site's published key does not verify proves nothing to a third party"),
		r(RuleNoMaybePaid, "0", G("There is no \"maybe paid\" state"),
			"There is no \"maybe paid\" state.",
			"a transaction ends neither paid nor refused: the agent cannot tell whether money moved"),
		r(RuleMonotonic, "1", G("Transitions are monotonic. Once a row leaves a state it does not return"),
			"Transitions are monotonic. Once a row leaves a state it does not return.",
			"a row that moves back lets a step run twice (execute after executing: a second charge)"),
		r(RuleNoExecutingAuthorized, "1", G("There is no executing → authorized edge"),
			"There is no executing → authorized edge.",
			"an executing row sent back to authorized can be executed again while the first charge is in flight"),
		untestable(r(RuleRecovery, "1", G("Recovery from a crash always re-enters at the same or a later state"),
			"Recovery from a crash always re-enters at the same or a later state.",
			"a crash sends a row back to an earlier state and the step runs again"),
			"a run cannot crash a target: idscheck chaos --profile atp crashes the bundled server and judges every state sequence with a model of the state machine"),
		readings(r(RuleRetryAnyStep, "2", S,
			"agents may retry any step until they observe a terminal state.",
			"an agent that retries a step it saw no answer to is refused, and cannot learn the outcome"),
			DecisionNonceSameKey),
		readings(r(RuleRetryVerbatim, "2", G("returns the existing row verbatim — same body, same receipt, same signature — without invoking the side-effecting handler again"),
			"A retry with the same (intent_id, idempotency_key) returns the existing row verbatim — same body, same receipt, same signature — without invoking the side-effecting handler again.",
			"a retry gets a different body, receipt or signature than the original: the agent holds two receipts for one payment"),
			DecisionNonceSameKey),
		r(RuleNoSecondEffect, "2", G("without invoking the side-effecting handler again"),
			"without invoking the side-effecting handler again.",
			"a retried execute charges the payer a second time"),
		r(RuleKeyRequired, "3", S,
			"Required on every POST /api/atp/authorizeandPOST /api/atp/execute.",
			"an execute without a key cannot be deduplicated: its retry charges again"),
		r(RuleKeyAny, "3", G("Opaque to the server: any 16–128 char string the agent chooses"),
			"Opaque to the server: any 16–128 char string the agent chooses.",
			"an agent's valid key (a 128-character one, or one with punctuation) is refused"),
		r(RuleKeyBound, "3", G("is a different transaction. Cross-intent reuse is allowed"),
			"Bound to the intent: the same key used against a different intent_idis a different transaction. Cross-intent reuse is allowed.",
			"the same key on a second intent is refused, or answered with the first intent's row: the second payment never happens"),
		untestable(r(RuleKeyStable, "3", S,
			"Stable across retries: the agent must persist it before the first attempt.",
			"an agent that retries under a fresh key executes twice"),
			"an obligation of the agent, not the site; idscheck's ATP client keeps one key per transaction across every retry"),
		r(RuleNeverSpeculative, "4", G("They are never issued speculatively"),
			"Receipts are issued only on entry to settled or compensated. They are never issued speculatively.",
			"a receipt shows up on a row that is executing or executed: it proves a payment that may still fail"),
		r(RuleSettlementSigned, "4", G("Ed25519 over JCS canonicalization of the receipt body"),
			"| settled | Yes | Ed25519 over JCS canonicalization of the receipt body |",
			"a settled row carries no receipt, or one whose signature is not Ed25519 over the JCS form of its body: no third party can verify it"),
		r(RuleCompensationReceipt, "4", G("Ed25519, separate document referencing the original intent_id"),
			"| compensated | Yes (compensation receipt) | Ed25519, separate document referencing the original intent_id |",
			"a compensated row carries no signed compensation receipt naming the intent: the agent cannot prove it was not paid"),
		r(RuleExpiredNoReceipt, "4", G("No (none was promised)"),
			"| expired | No (none was promised) | — |",
			"an expired intent carries a receipt for a payment that never happened"),
		r(RuleVerifyNoSecret, "4", G("Receipts are verifiable by any third party at POST /api/atp/receipts/verify with no shared secret"),
			"Receipts are verifiable by any third party at POST /api/atp/receipts/verify with no shared secret.",
			"a third party cannot verify a receipt without the site's credentials, or the site vouches for a forged one"),
		untestable(r(RuleRetryPolicy, "5", S,
			"Exponential backoff, base 250 ms, jitter ±50 %, cap 30 s.",
			"agents that retry without backoff flood a site that is recovering"),
			"a recommendation to agents; idscheck's ATP client follows it (profiles/atp's Policy, tested on its own)"),
		r(RuleExpired410, "5", S,
			"In particular:409 nonce_consumedand410 intent_expiredare terminal.",
			"an intent past its expires_at is still authorized or executed: money moves after the agent gave up"),
		r(RuleReissueAfterLoss, "6", G("If the original request committed, the agent gets the existing terminal record. If it didn't, it executes once"),
			"If the original request committed, the agent gets the existing terminal record. If it didn't, it executes once.",
			"an execute re-issued after a lost answer charges again, or never executes"),
		r(RuleExecutingUntil, "6", G("The intent sits in executinguntil the rail callback or a reconciliation sweep completes"),
			"The intent sits in executinguntil the rail callback or a reconciliation sweep completes.",
			"a row whose charge the site cannot know yet is shown settled or compensated: a guess"),
		r(RuleReconciliation, "6", G("Outcomes resolve tosettledorcompensated"),
			"A periodic job (default 60 s) reconciles executingrows against the rail's idempotent reference (e.g. Stripe PaymentIntent ID). Outcomes resolve tosettledorcompensated.",
			"a row stays executing for ever after the rail's answer was lost, or resolves against what the rail did"),
		untestable(r(RuleSingleWriter, "6", S,
			"ATP assumes a single authoritative writer per (intent_id, idempotency_key).",
			"two writers both execute one transaction"),
			"a deployment obligation: concurrent duplicates (ATP-0-unique-row, ATP-2-no-second-effect) show what it leads to"),
		r(RuleActionDedup, "7", S,
			"Sites that opt in reject duplicateaction_dedup_keywithin the configured window.",
			"a double-clicked checkout is paid twice by a site that says it rejects duplicate action_dedup_key"),
		readings(r(RuleNonceSingleUse, "7", G("the intent nonceis single-use, so an agent that replays the same signed intent gets a deterministic409 nonce_consumed"),
			"Always: the intent nonceis single-use, so an agent that replays the same signed intent gets a deterministic409 nonce_consumed.",
			"a replayed signed intent is authorized a second time: one signature pays twice"),
			DecisionNonceSameKey),
		r(RuleIndependent, "8", G("Intents are independent"),
			"Intents are independent. ATP does not impose a total order between two intents from the same agent or user.",
			"an agent's second intent waits for, or is refused because of, an unrelated first one"),
		r(RulePrecondition, "8", G("The server evaluates the precondition at authorize time"),
			"The server evaluates the precondition at authorize time.",
			"\"execute only if intent X is settled\" is authorized while X is not settled"),
		r(RuleRetryExample, "9", S,
			"→ 200 OK { \"state\": \"settled\", \"receipt\": { ...signed... } } (same row, no double-execution)",
			"a retry after a timeout is answered with an error instead of the settled row"),
		r(RuleFirstConsumedAt, "9", S,
			"→ 409 { \"error\": \"nonce_consumed\", \"first_consumed_at\": \"...\" }",
			"the agent cannot tell when its nonce was consumed, or the answer changes between replays"),
	}
}
