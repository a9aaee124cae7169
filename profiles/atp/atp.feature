Feature: ATP — the transaction state machine, signed receipts and the payment rail
  The wire is idscheck's binding (docs/atp-binding.md). Money is counted at the rail the harness
  hosts, so a verdict is about charges, not responses. Every scenario signs its own intents with a
  fresh agent key, so scenarios never meet. The text has no RFC 2119 keyword: what it states as a
  guarantee is a MUST (its words are the rule's guarantee); what it only recommends stays a SHOULD.

  Background:
    Given the site's configuration and public keys
    And a registered agent

  # §0, §4: one execution, a receipt on entry to settled, signed by the site key
  Scenario: an executed intent settles once with a receipt the site's public key verifies
    Given a signed intent "A"
    When I authorize "A"
    And the site answered "A" with its row
    Then [ATP-4-never-speculative] the answer to "A" carries no receipt
    When I execute "A"
    And "A" reaches a terminal state
    Then [ATP-2-no-second-effect] the rail charged "A" at most once
    And [ATP-4-settlement-signed] "A" is settled with a receipt signed with Ed25519 over the JCS form of its body
    And [ATP-0-signed-by-site-key] the receipt of "A" verifies with the site's public key alone
    And [ATP-0-receipt-after-settled] every answer that showed a receipt of "A" showed it on a settled row
    And [ATP-4-verify-no-secret] the site's verify endpoint accepts the receipt of "A" without credentials
    And [ATP-4-verify-no-secret] the site's verify endpoint refuses the receipt of "A" with its amount changed
    And [ATP-4-verify-no-secret] the site's verify endpoint accepts the receipt of "A" re-serialized, its members reordered and indented
    And [ATP-1-monotonic] the states seen for "A" never went back

  # §9 "Successful retry after timeout", §6 agent ⇄ site loss
  Scenario: a retry after a timeout gets the same row, receipt and signature, and charges nothing more
    Given a signed intent "A"
    When I authorize "A"
    And I execute "A" and give up waiting while the rail holds its charge
    And the rail releases "A"
    And "A" reaches a terminal state
    And I execute "A" again
    Then [ATP-9-retry-example] the last answer is 200 with "A" settled and a receipt
    And [ATP-6-reissue-after-loss] the last answer is the terminal row of "A"
    And [ATP-2-retry-verbatim] the last answer carries the body, receipt and signature of "A" byte for byte
    And [ATP-2-no-second-effect] the rail charged "A" at most once

  # §2: a retry of a step that succeeded
  Scenario: retries of execute after it settled return the stored row verbatim
    Given a signed intent "A"
    When I authorize "A"
    And I execute "A"
    And "A" reaches a terminal state
    And I execute "A" again 3 times
    And I read "A"
    Then [ATP-2-retry-verbatim] every answer to "A" since it settled carries its body, receipt and signature byte for byte
    And [ATP-2-no-second-effect] the rail charged "A" at most once

  # §2, §7: the same signed intent under the key it was authorized with
  Scenario: a retry of authorize under the same key
    Given a signed intent "A"
    When I authorize "A"
    And I authorize "A" again under the same key
    Then [ATP-2-retry-verbatim, reading nonce-same-key=row] the last answer is the row of "A" as first authorized
    And [ATP-2-retry-verbatim, reading nonce-same-key=nonce] the last answer is 409 nonce_consumed
    And [ATP-2-retry-any-step, reading nonce-same-key=row] the last answer is the row of "A" as first authorized
    And [ATP-2-retry-any-step, reading nonce-same-key=nonce] the last answer is 409 nonce_consumed
    And [ATP-7-nonce-single-use, reading nonce-same-key=row] the last answer is the row of "A" as first authorized
    And [ATP-7-nonce-single-use, reading nonce-same-key=nonce] the last answer is 409 nonce_consumed

  # §0, §6 single writer: concurrent duplicates
  Scenario: 200 concurrent executes of one transaction charge once and answer one row
    Given a signed intent "A"
    When I authorize "A"
    And 200 agents execute "A" at once
    And "A" reaches a terminal state
    Then [ATP-0-unique-row] every answer to "A" carries one row: the same created_at and body
    And [ATP-2-no-second-effect] the rail charged "A" at most once
    And [ATP-2-retry-verbatim] every answer to "A" that carries a receipt carries the same one

  # §7, §9 "Nonce reuse (rejected)"
  Scenario: a replay of a signed intent under another key gets 409 nonce_consumed, the same each time
    Given a signed intent "A"
    When I authorize "A"
    And I authorize "A" again under another key
    Then [ATP-7-nonce-single-use] the last answer is 409 nonce_consumed
    And [ATP-9-nonce-first-consumed-at] the last answer carries first_consumed_at
    When I authorize "A" again under a third key
    Then [ATP-7-nonce-single-use] the last answer is 409 nonce_consumed
    And [ATP-9-nonce-first-consumed-at] the last answer carries the same first_consumed_at as before

  # §7: the nonce is single-use: not only a replay of the same signed intent
  Scenario: a new intent that reuses a consumed nonce is refused and never charged
    Given a signed intent "A"
    And a signed intent "B" with the nonce of "A"
    When I authorize "A"
    And I authorize "B"
    Then [ATP-7-nonce-single-use] the last answer is a 4xx
    When I execute "B"
    Then [ATP-7-nonce-single-use] the rail did not charge "B"

  # §5, §4: expiry
  Scenario: an intent already expired is refused with 410 intent_expired, every time
    Given a signed intent "A" that expired a minute ago
    When I authorize "A"
    Then [ATP-5-expired-410] the last answer is 410 intent_expired
    When I authorize "A" again under the same key
    Then [ATP-5-expired-410] the last answer is 410 intent_expired

  Scenario: an intent that expires between authorize and execute is never executed
    Given a signed intent "A" that expires in 2 seconds
    When I authorize "A"
    And I wait until "A" has expired
    And I execute "A"
    Then [ATP-5-expired-410] the last answer is 410 intent_expired
    And [ATP-5-expired-410] the rail did not charge "A"
    When I read "A"
    Then [ATP-4-expired-no-receipt] the last answer carries no receipt

  # §5: the window of expires_at, from inside (two seconds of slack either side)
  Scenario: an intent ten seconds from its expiry is authorized and executed, not refused as expired
    Given a signed intent "A" that expires in 10 seconds
    When I authorize "A"
    Then [ATP-5-expired-410] the last answer is not 410 intent_expired
    When I execute "A"
    Then [ATP-5-expired-410] the last answer is not 410 intent_expired

  # §3: the key
  Scenario: authorize and execute without an Idempotency-Key are refused, and commit nothing
    Given a signed intent "A"
    When I authorize "A" without a key
    Then [ATP-3-key-required] the last answer is a 4xx
    When I authorize "A"
    And I execute "A" without a key
    Then [ATP-3-key-required] the last answer is a 4xx
    And [ATP-3-key-required] the rail did not charge "A"

  Scenario Outline: any key of 16 to 128 characters is accepted: <kind>
    Given a signed intent "A" with a key that is <kind>
    When I authorize "A"
    Then [ATP-3-key-any-16-128] the last answer is a 2xx with "A" authorized
    When I execute "A"
    Then [ATP-3-key-any-16-128] the last answer is a 2xx with the row of "A"

    Examples:
      | kind                    |
      | 16 characters           |
      | 128 characters          |
      | a UUIDv4                |
      | printable punctuation   |

  Scenario: the same key on another intent is another transaction
    Given a signed intent "A"
    And a signed intent "B" under the key of "A"
    When I authorize "A"
    And I authorize "B"
    Then [ATP-3-key-bound-to-intent] the last answer is a 2xx with "B" authorized
    When I execute "A"
    And I execute "B"
    And "A" reaches a terminal state
    And "B" reaches a terminal state
    Then [ATP-3-key-bound-to-intent] "B" is settled
    And [ATP-3-key-bound-to-intent] the rail charged "B" exactly once

  # §6 site ⇄ rail loss after charging
  Scenario: the rail charges and loses its answer, and no callback comes: reconciliation settles it
    Given a signed intent "A"
    And the rail will lose its answer to the next charge and drop its callbacks
    When I authorize "A"
    And I execute "A"
    And I read "A"
    Then [ATP-6-executing-until-resolved] "A" is executing, or resolved as the rail says
    When I wait for a reconciliation sweep
    Then [ATP-6-reconciliation] "A" is settled or compensated, as the rail says
    And [ATP-0-no-maybe-paid] "A" is settled or compensated, as the rail says
    And [ATP-2-no-second-effect] the rail charged "A" at most once
    And [ATP-1-monotonic] the states seen for "A" never went back

  Scenario: the rail charges and loses its answer, and its callback comes
    Given a signed intent "A"
    And the rail will lose its answer to the next charge
    When I authorize "A"
    And I execute "A"
    And I wait for a reconciliation sweep
    Then [ATP-6-executing-until-resolved] "A" is settled or compensated, as the rail says
    And [ATP-2-no-second-effect] the rail charged "A" at most once

  Scenario: a charge the rail never made is resolved, and an executing row never goes back to authorized
    Given a signed intent "A"
    And the rail refuses the charges of "A"
    When I authorize "A"
    And I execute "A"
    And I poll "A" until it is no longer authorized
    Then [ATP-4-never-speculative] the last answer carries no receipt
    When I wait for a reconciliation sweep
    Then [ATP-1-no-executing-to-authorized] the states seen for "A" never went from executing to authorized
    And [ATP-1-monotonic] the states seen for "A" never went back
    When the rail releases "A"
    And "A" reaches a terminal state
    Then [ATP-6-reconciliation] "A" is settled or compensated, as the rail says
    And [ATP-2-no-second-effect] the rail charged "A" at most once

  # §6: a callback is the rail's only when the rail says so (nothing authenticates it)
  Scenario: a forged callback of the rail settles nothing while the rail cannot be asked
    Given a signed intent "A"
    And the rail answers nothing about "A" but its creation
    When I authorize "A"
    And I execute "A"
    And I poll "A" until it is no longer authorized
    And a forged callback says the rail charged "A"
    And I read "A"
    Then [ATP-6-executing-until-resolved] "A" is executing, or resolved as the rail says

  # §4: compensation
  Scenario: a declined charge compensates, with a signed compensation receipt referencing the intent
    Given a signed intent "A"
    And the rail declines "A"
    When I authorize "A"
    And I execute "A"
    And "A" reaches a terminal state
    Then [ATP-4-compensation-receipt] "A" is compensated with a signed receipt referencing "A"
    And [ATP-2-no-second-effect] the rail did not charge "A"

  # §7: duplicate intents
  Scenario: a second intent with the same action_dedup_key is rejected within the window
    Given the site opts in to action_dedup_key
    And a signed intent "A" with action_dedup_key "cart-1"
    And a signed intent "B" with action_dedup_key "cart-1"
    When I authorize "A"
    And I authorize "B"
    Then [ATP-7-action-dedup] the last answer is a 4xx
    When I execute "B"
    Then [ATP-7-action-dedup] the rail did not charge "B"

  # §8: ordering
  Scenario: a precondition is evaluated at authorize
    Given a signed intent "A"
    And a signed intent "B" that requires "A" settled
    And a signed intent "C" that requires "A" settled
    When I authorize "A"
    And I authorize "B"
    Then [ATP-8-precondition-at-authorize] the last answer is a 4xx
    When I execute "A"
    And "A" reaches a terminal state
    And I authorize "C"
    Then [ATP-8-precondition-at-authorize] the last answer is a 2xx with "C" authorized

  Scenario: two intents of one agent settle in either order
    Given a signed intent "A"
    And a signed intent "B"
    When I authorize "A"
    And I authorize "B"
    And I execute "B"
    And "B" reaches a terminal state
    And I execute "A"
    And "A" reaches a terminal state
    Then [ATP-8-independent] "A" is settled
    And [ATP-8-independent] "B" is settled
