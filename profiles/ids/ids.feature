Feature: IDS — idempotency and exactly-once effects (RFC-WF-0010)
  The wire is idscheck's binding (docs/ids-binding.md). Effects are counted at the harness's effect
  sink, so a verdict is about effects, not responses. Every logical command of a scenario is built
  from the registry's args examples with a fresh tenant and target, so scenarios never meet.

  Background:
    Given the command registry of the target

  # §VI, §VIII.C, §XI: what the registry (CRCD) declares
  Scenario: the registry declares a class and a window per command, and a strategy per I3 command
    Then [IDS-VI-classified] every command declares a class I0, I1, I2 or I3
    And [IDS-VIII.C-window-declared] every mutating command declares its dedupe window
    And [IDS-XI-declared] every I3 command declares a shielding strategy S1 to S4
    And [IDS-VIII.C-financial-24h] every financial command declares a window of at least 24 hours

  # §VII: key derivation
  Scenario: the key is SHA-256 over the RFC 8785 canonical form of the key inputs
    Given a mutating command "A"
    When I send "A"
    Then [IDS-VII.D-key-function] the answer carries the key the binding derives for "A"
    And [IDS-VII.D-sha256] the answer's key is a digest of at least 256 bits

  Scenario Outline: a redelivery that differs only in <field> is the same command
    Given a mutating command "A"
    When I send "A"
    And the first answer to "A" is an outcome
    And I send "A" again with a new <field>
    Then [IDS-VII.C-ephemeral-excluded] the last answer carries the idempotency_key of the first answer to "A"
    And [IDS-IX.A-no-reexecute] the sink saw at most 1 effect for "A"
    And [IDS-IX.A-same-outcome, reading replay-form=outcome] the last answer has the status and outcome document of the first answer to "A"
    And [IDS-IX.A-same-outcome, reading replay-form=reference] the last answer has the outcome_ref and command_id of the first answer to "A"

    Examples:
      | field      |
      | timestamp  |
      | message_id |
      | trace_id   |
      | command_id |

  Scenario: a redelivery whose args are spelled otherwise is the same command
    Given a mutating command "A" whose args have several members
    When I send "A"
    And the first answer to "A" is an outcome
    And I send "A" again with its args members in another order and other whitespace
    Then [IDS-VII.A-key-derived] the last answer carries the idempotency_key of the first answer to "A"
    And [IDS-IX.A-no-reexecute] the sink saw at most 1 effect for "A"

  Scenario Outline: a command that differs in its <input> is another command
    Given a mutating command "A"
    When I send "A"
    And I send a copy of "A" with another <input> as "B"
    Then [IDS-VII.B-key-inputs] the answer to "B" is not an answer to "A"
    And [IDS-VII.B-key-inputs] the sink saw as many effects for "B" as for "A"

    Examples:
      | input  |
      | tenant |
      | actor  |
      | target |
      | args   |

  Scenario: a resend by another actor on behalf of the same principal does not execute again
    Given a mutating command "A"
    When I send "A"
    And the first answer to "A" is an outcome
    And another actor sends "A" again on behalf of its actor
    Then [IDS-VII.E-effective-actor] the last answer carries the idempotency_key of the first answer to "A"
    And [IDS-IX.A-no-reexecute] the last answer is no new execution of "A"
    And [IDS-IX.A-no-reexecute] the sink saw at most 1 effect for "A"

  # §XIII 1: duplicate deliveries
  Scenario: duplicate deliveries of a mutation do not duplicate its effect
    Given a mutating command "A"
    When I send "A"
    And I send "A" again 3 times
    Then [IDS-XIII-1-duplicates] the sink saw at most 1 effect for "A"
    And [IDS-VIII.A-check-and-set] the sink saw at most 1 effect for "A"
    And [IDS-V-exactly-once-effects] the sink saw at most 1 effect for "A"

  # §XIII 2: concurrent duplicates
  # Every answer may be 202 processing (and past the declared rate limit 429):
  # the outcome is then at the status URL they name, read before anything is judged.
  Scenario: 200 concurrent duplicates converge to one execution
    Given a mutating command "A" whose window outlasts the scenario
    When 200 clients send "A" at once
    And I follow the status URL of "A" until it reports an outcome, if no answer of the storm is one
    Then [IDS-XIII-2-concurrent] the sink saw at most 1 effect for "A"
    And [IDS-VIII.A-atomic] the sink saw at most 1 effect for "A"
    And [IDS-XIII-2-concurrent] the storm converged on one outcome of "A": the same in every answer that is one, or at the status URL when none is
    And [IDS-VIII.A-atomic] the storm converged on one outcome of "A": the same in every answer that is one, or at the status URL when none is
    And [IDS-V-exactly-once-effects] the sink saw at most 1 effect for "A"

  # §XIII 3 and §IX.A: duplicate after success
  Scenario: a duplicate after success replays the outcome
    Given a mutating command "A"
    When I send "A"
    And the first answer to "A" is an outcome
    And I send "A" again
    Then [IDS-XIII-3-replay-after-success] the last answer is the first answer to "A" again
    And [IDS-IX.A-same-outcome, reading replay-form=outcome] the last answer has the status and outcome document of the first answer to "A"
    And [IDS-IX.A-same-outcome, reading replay-form=reference] the last answer has the outcome_ref and command_id of the first answer to "A"
    And [IDS-IX.A-no-reexecute] the sink saw at most 1 effect for "A"
    # "stable across replays": a replay by reference is not the first
    # answer's bytes, so two replays are compared with each other.
    When I send "A" again
    Then [IDS-IX.C-stable-response] the last answer is byte for byte the answer before it to "A"

  Scenario: a duplicate of a command the command itself refused gets the same refusal
    Given a mutating command "A" with args it refuses
    When I send "A"
    And the first answer to "A" is an outcome
    And I send "A" again
    Then [IDS-IX.A-same-outcome, reading replay-form=outcome] the last answer has the status and outcome document of the first answer to "A"
    And [IDS-IX.A-same-outcome, reading replay-form=reference] the last answer has the outcome_ref and command_id of the first answer to "A"
    And [IDS-IX.A-no-reexecute] the sink saw no new effect for "A" since its first answer

  Scenario: an I1 command produces the same effects and outcome when resent
    Given an I1 command "A"
    When I send "A"
    And the first answer to "A" is an outcome
    And I send "A" again 2 times
    Then [IDS-VI-i1-same-outcome] the last answer is the first answer to "A" again
    And [IDS-VI-i1-same-outcome] the sink saw at most 1 effect for "A"

  # §XIII 4 and §IX.B: duplicate while in progress
  Scenario: a duplicate while the first delivery is in progress is told it is processing
    Given a command "A" that calls the sink while it executes
    When I send "A" and the sink holds its effect
    And I send "A" again while the first delivery is held
    Then [IDS-IX.B-no-parallel] the sink saw 1 call for "A" while the first delivery was held
    And [IDS-XIII-4-in-progress] the last answer says the command is processing
    And [IDS-IX.B-processing] the last answer says the command is processing
    And [IDS-IX.B-correlation] the last answer carries the original command_id and the key of "A"
    When the sink releases "A"
    Then [IDS-IX.B-how-to-query] the status URL of the last answer reports "A" executed within the budget
    And [IDS-IX.B-no-parallel] the sink saw exactly 1 effect for "A"

  # §XIII 5 and §VIII.D: collision
  Scenario: a command under another command's key is rejected with evidence
    Given a mutating command "A"
    When I send "A"
    And I send another command "B" under the key of "A"
    Then [IDS-VIII.D-reject] the last answer rejects "B" as execution.rejected with reason idempotency_conflict
    And [IDS-XIII-5-collision] the last answer refuses "B"
    And [IDS-XIII-5-collision] the sink saw no effect for "B"
    When I read the evidence of "A"
    Then [IDS-VIII.D-evidence] the evidence of "A" records the conflict with the fingerprints of "A" and "B"
    And [IDS-XIII-5-collision] the evidence of "A" records the conflict

  # §XII: evidence of dedupe decisions
  Scenario: the evidence tells an auditor what was executed and what was replayed
    Given a mutating command "A"
    When I send "A"
    And the first answer to "A" is an outcome
    And I send "A" again with a new command_id
    And I read the evidence of "A"
    Then [IDS-XII-decision] the evidence of "A" is first_seen then duplicate_replayed for every later delivery
    And [IDS-XII-executed-or-replayed] the evidence of "A" says the first was executed and every later one replayed
    And [IDS-XII-original-ids] every evidence item of "A" carries its original command_id and key
    And [IDS-XII-outcome-ref] every evidence item of "A" carries the outcome_ref of the first answer

  # §VIII.B: the stored record
  Scenario: the record of a command shows what the dedup store must record
    Given a mutating command "A"
    When I send "A"
    And the first answer to "A" is an outcome
    And I read the status of "A"
    Then [IDS-VIII.B-stored-fields] the status of "A" shows its key, original command_id, status, outcome_ref, created_at, updated_at and ttl_expires_at

  # §VIII.C: the window
  Scenario: after its window a command may execute again
    Given a mutating command "A" whose window fits the budget
    When I send "A"
    And the first answer to "A" is an outcome
    And I wait for the window of "A" to pass
    And I send "A" again
    Then [IDS-VIII.C-expiry-may-execute] the last answer is a replay or a new execution, and the report says which

  Scenario: a duplicate just inside its window is replayed, not executed again
    Given a mutating command "A" whose window fits the budget
    When I send "A"
    And the first answer to "A" is an outcome
    And I wait for three quarters of the window of "A"
    And I send "A" again
    Then [IDS-IX.A-no-reexecute] the last answer is no new execution of "A"
    And [IDS-IX.A-no-reexecute] the sink saw at most 1 effect for "A"

  # §X and §XIII 6: confirmation binding
  Scenario: a command that needs confirmation is not executed without it, and its replay needs none
    Given a command "A" that requires confirmation
    When I send "A"
    Then [IDS-XIII-6-confirmation] the last answer does not execute "A"
    And [IDS-XIII-6-confirmation] the sink saw no effect for "A"
    When I get a confirmation token for "A"
    And I send "A" with the token
    And the last answer to "A" is executed
    And I send "A" again without the token
    Then [IDS-X-no-reconfirm] the last answer is the executed answer to "A" again
    And [IDS-X-no-reconfirm] the sink saw at most 1 effect for "A"
    And [IDS-XIII-6-confirmation] the sink saw at most 1 effect for "A"

  Scenario Outline: a confirmation token is bound to its command_id and key: <case>
    Given a command "A" that requires confirmation
    When I get a confirmation token for "A"
    And I send "A" with the token but <case>
    Then [IDS-X-bound] the last answer does not execute "A"
    And [IDS-X-bound] the sink saw no effect for "A"
    And [IDS-XIII-6-confirmation] the sink saw no effect for "A"

    Examples:
      | case                 |
      | another command_id   |
      | another key          |

  Scenario: a forged confirmation token is refused
    Given a command "A" that requires confirmation
    When I get a confirmation token for "A"
    And I send "A" with a forged token of the same form
    Then [IDS-XIII-6-confirmation] the last answer does not execute "A"
    And [IDS-XIII-6-confirmation] the sink saw no effect for "A"

  Scenario: a confirmation token is single-use
    Given a command "A" that requires confirmation and whose window fits the budget
    When I get a confirmation token for "A"
    And I send "A" with the token
    And the last answer to "A" is executed
    And I wait for the window of "A" to pass
    And I send "A" again with the token
    Then [IDS-X-single-use] the last answer is no new execution of "A"
    And [IDS-X-single-use] the sink saw at most 1 effect for "A"
    And [IDS-XIII-6-confirmation] the sink saw at most 1 effect for "A"

  Scenario: a confirmation token is short-lived
    Given a command "A" that requires confirmation
    When I get a confirmation token for "A"
    And I wait for the token to expire
    And I send "A" with the token
    Then [IDS-X-short-lived] the last answer does not execute "A"
    And [IDS-X-short-lived] the sink saw no effect for "A"

  # §XI: shielding external effects
  Scenario: every I3 command makes one effect when its provider acts and loses the reply
    Given the I3 commands of the registry
    When I send each of them while the sink loses its first reply
    Then [IDS-XI-shielding] the sink saw exactly 1 effect for each, once the target has resolved the lost reply

  # §XV: security
  Scenario: the same command in two tenants executes in each
    Given a mutating command "A"
    When I send "A"
    And I send a copy of "A" with another tenant as "B"
    Then [IDS-XV-tenant-scope] the answer to "B" is not an answer to "A"
    And [IDS-XV-tenant-scope] the sink saw as many effects for "B" as for "A"

  Scenario: repeated duplicate submissions are rate-limited
    Given a mutating command "A"
    When I send "A"
    And I send "A" again until refused, at most the declared limit and 50 more
    Then [IDS-XV-rate-limit] a duplicate of "A" was refused
    And [IDS-IX.A-no-reexecute] the sink saw at most 1 effect for "A"

  Scenario: a replay to another actor shows nothing private of the original actor
    Given a mutating command "A" whose outcome has private details
    When I send "A"
    And the first answer to "A" is an outcome
    And the first answer to "A" has private details
    And another actor sends "A" again on behalf of its actor
    Then [IDS-XV-no-leak] the last answer shows none of the private details of the first answer to "A"
