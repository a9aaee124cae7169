Feature: http-idempotency — any HTTP endpoint with an idempotency key
  The target describes one mutating endpoint (docs/http-idempotency.md): its body, where the key
  travels, how to make another payload or a rejected one, its callers, and how an effect is observed
  (a count read, the effect sink, or at least the created resource's identifier). It declares the
  variant it follows: the IETF draft (ietf), t-0's receiver rules (t0) or Stripe's conventions
  (stripe). The texts disagree on what matters, so each scenario names its variant: the rules of
  the other variants are N/A, and the report says which variant decided.

  Background:
    Given the endpoint the target describes

  # The IETF draft, §2.6 and §2.7
  Scenario: ietf — a first request is processed, and a retry after it completed gets its result
    Given the endpoint follows the ietf variant
    And a request "A"
    When I send "A"
    Then [RFC9110-15.6-server-error] no request of this scenario was answered with a 5xx
    And [IETF-2.6-first-request] the last answer is a 2xx
    When I send "A" again
    Then [IETF-2.6-retry-result] the last answer has the status and body of the first answer to "A"
    And [IETF-2.6-retry-result] "A" created exactly one thing
    And [IETF-2.6-retry-result] the effect sink saw no further effect after the first answer to "A"

  Scenario: ietf — a retry after an error gets the error
    Given the endpoint follows the ietf variant
    And a request "A"
    And the effect sink fails the next call
    When I send "A"
    And the first answer to "A" is a 5xx
    And I send "A" again
    Then [IETF-2.6-retry-result] the last answer has the status and body of the first answer to "A"

  Scenario: ietf — the key is an RFC 8941 String
    Given the endpoint follows the ietf variant
    And a request "A" whose key needs escaping as a String
    When I send "A"
    And I send "A" again
    Then [IETF-2.1-string-key] the last answer has the status and body of the first answer to "A"
    And [IETF-2.1-string-key] "A" created exactly one thing

  Scenario: ietf — a new key with a seen body is a new request, or refused where the fingerprint identifies it
    Given the endpoint follows the ietf variant
    And a request "A"
    And a request "B" with the body of "A" under a new key
    When I send "A"
    And I send "B"
    Then [IETF-2.5-identify-key, reading new-key-seen-payload=pair] the last answer is a 2xx
    And [IETF-2.5-identify-key, reading new-key-seen-payload=pair] "A" and "B" together created exactly two things
    And [IETF-2.5-identify-key, reading new-key-seen-payload=fingerprint] the last answer is a 4xx refusal
    And [IETF-2.5-identify-key, reading new-key-seen-payload=fingerprint] "A" and "B" together created exactly one thing

  Scenario: ietf — a key outside the published format is refused before it is processed
    Given the endpoint follows the ietf variant
    And a request "A" whose key is outside the published format
    When I send "A"
    Then [IETF-5-validate-key] the last answer is a 4xx refusal
    And [IETF-5-validate-key] "A" created nothing

  Scenario: ietf — a key one character longer than the published maximum is refused
    Given the endpoint follows the ietf variant
    And a request "A" whose key is one character longer than the published maximum
    When I send "A"
    Then [IETF-5-validate-key] the last answer is a 4xx refusal
    And [IETF-5-validate-key] "A" created nothing

  Scenario: ietf — a retry while the original is in flight gets a resource conflict error
    Given the endpoint follows the ietf variant
    And a request "A"
    When I send "A" and its effect is held
    And I send "A" again while the first is held
    And the effect is released
    Then [IETF-2.6-first-request] the first answer to "A" is a 2xx
    And [IETF-2.6-concurrent-conflict] "A" created at most one thing
    And [IETF-2.6-concurrent-conflict] the last answer is 409 Conflict
    And [IETF-2.7-concurrent-409] the last answer is 409 with a problem description

  # A second duplicate, sent once the first was answered and while the original is still in
  # flight: a layer whose rejection of the first released the original's claim executes it
  # (two creations under one key). The count comes first: it is what the schedule shows.
  Scenario: ietf — a second retry while the original is still in flight gets a resource conflict error too
    Given the endpoint follows the ietf variant
    And a request "A"
    When I send "A" and its effect is held
    And I send "A" again while the first is held
    And I send "A" a third time while the first is held
    And the effect is released
    Then [IETF-2.6-concurrent-conflict] "A" created at most one thing
    And [IETF-2.6-concurrent-conflict] the second duplicate's answer is 409 Conflict

  Scenario: ietf — a request without its required key is refused
    Given the endpoint follows the ietf variant
    And the endpoint requires a key
    And a request "A"
    When I send "A" without a key
    Then [IETF-2.7-missing-400] the last answer is 400 with a link to documentation

  # The MUST of §2.7 is judged apart from the SHOULDs that name the statuses:
  # a refusal with another status still has to be repeated.
  Scenario: ietf — a request without its required key is refused, every time
    Given the endpoint follows the ietf variant
    And the endpoint requires a key
    And a request "A"
    When I send "A" without a key
    And [IETF-2.7-missing-400] the endpoint refused it
    And I send "A" without a key again
    Then [IETF-2.7-fail-uncorrected] the last answer is a 4xx that fails the request
    And [IETF-2.7-fail-uncorrected] "A" created nothing

  Scenario: ietf — a key reused with another payload is refused
    Given the endpoint follows the ietf variant
    And a request "A"
    When I send "A"
    And I send "A" with another payload
    Then [IETF-2.7-mismatch-422] the last answer is 422 with a link to documentation
    And [IETF-2.7-mismatch-422] "A" created exactly one thing

  Scenario: ietf — a key reused with another payload is refused, every time
    Given the endpoint follows the ietf variant
    And a request "A"
    When I send "A"
    And I send "A" with another payload
    And [IETF-2.7-mismatch-422] the endpoint refused it
    And I send "A" with another payload again
    Then [IETF-2.7-fail-uncorrected] the last answer is a 4xx that fails the request
    And [IETF-2.7-fail-uncorrected] "A" created exactly one thing

  Scenario: ietf — two callers with the same key are two requests
    Given the endpoint follows the ietf variant
    And two callers
    And a request "A"
    And a request "B" of the second caller under the key of "A"
    When I send "A"
    And I send "B"
    Then [IETF-5-composite-key] the last answer is a 2xx that is not the first answer to "A"
    And [IETF-5-composite-key] "B" created exactly one thing

  # t-0's receiver rules
  Scenario: t0 — a repeat returns the original result and causes no further effect
    Given the endpoint follows the t0 variant
    And a request "A"
    When I send "A"
    Then [RFC9110-15.6-server-error] no request of this scenario was answered with a 5xx
    When I send "A" again 2 times
    Then [T0-R1-original-response] the last answer has the status and body of the first answer to "A"
    And [T0-CAT-same-outcome] the last answer has the outcome of the first answer to "A"
    And [T0-0-no-further-effect] "A" created exactly one thing
    And [T0-0-no-further-effect] the effect sink saw no further effect after the first answer to "A"

  Scenario: t0 — a new key is a genuinely new request, whatever its fields
    Given the endpoint follows the t0 variant
    And a request "A"
    And a request "B" with the body of "A" under a new key
    When I send "A"
    And I send "B"
    Then [T0-R3-key-tells-new] the last answer is a 2xx
    And [T0-R3-key-tells-new] "A" and "B" together created exactly two things

  Scenario: t0 — a duplicate of a request in flight waits for it and gets the same response
    Given the endpoint follows the t0 variant
    And a request "A"
    When I send "A" and its effect is held
    And I send "A" again while the first is held
    And the effect is released
    Then [T0-R2-wait-in-flight] the duplicate was answered after the release, with the status and body of the first answer to "A"
    And [T0-R3-no-duplicate-error] the duplicate's answer is a 2xx
    And [T0-R2-wait-in-flight] "A" created exactly one thing

  Scenario: t0 — a rejection retried unchanged is evaluated again, never replayed
    Given the endpoint follows the t0 variant
    And the endpoint declares a request it rejects
    And the endpoint documents a replay header
    And a request "A"
    When I send "A" made invalid
    And the endpoint rejected it
    And I send "A" made invalid
    Then [T0-REPLAY-accepted-only] the last answer does not carry the documented replay header
    And [T0-REPLAY-accepted-only] "A" created nothing

  Scenario: t0 — a second duplicate while the original is still in flight causes no further effect
    Given the endpoint follows the t0 variant
    And a request "A"
    When I send "A" and its effect is held
    And I send "A" again while the first is held
    And I send "A" a third time while the first is held
    And the effect is released
    Then [T0-0-no-further-effect] "A" created exactly one thing
    And [T0-R2-wait-in-flight] the second duplicate was answered after the release, with the status and body of the first answer to "A"
    And [T0-R3-no-duplicate-error] the second duplicate's answer is a 2xx

  Scenario: t0 — a rejection does not consume the key: the corrected call is evaluated afresh
    Given the endpoint follows the t0 variant
    And the endpoint declares a request it rejects
    And a request "A"
    When I send "A" made invalid
    And the endpoint rejected it
    Then [T0-REPLAY-accepted-only] "A" created nothing
    When I send "A"
    Then [T0-REPLAY-accepted-only] the last answer is not the rejection of "A" replayed
    And [T0-REPLAY-rejection-keeps-key] the last answer is a 2xx
    And [T0-REPLAY-rejection-keeps-key] "A" created exactly one thing

  Scenario: t0 — keys are scoped to the authenticated caller
    Given the endpoint follows the t0 variant
    And two callers
    And the endpoint's key is scoped to the caller
    And a request "A"
    And a request "B" of the second caller under the key of "A"
    When I send "A"
    And I send "B"
    Then [T0-KEYS-caller-scope] the last answer is a 2xx that is not the first answer to "A"
    And [T0-KEYS-caller-scope] "B" created exactly one thing

  # Stripe's conventions
  Scenario: stripe — a retry gets the status and body of the first request
    Given the endpoint follows the stripe variant
    And a request "A"
    When I send "A"
    Then [RFC9110-15.6-server-error] no request of this scenario was answered with a 5xx
    And [STRIPE-IDEM-post-accepts-keys] the last answer is a 2xx
    When I send "A" again
    Then [STRIPE-IDEM-same-result] the last answer has the status and body of the first answer to "A"
    And [STRIPE-IDEM-same-result] "A" created exactly one thing
    And [STRIPE-IDEM-same-result] the effect sink saw no further effect after the first answer to "A"

  Scenario: stripe — a retry gets the result of a failed first request, a 500 included
    Given the endpoint follows the stripe variant
    And a request "A"
    And the effect sink fails the next call
    When I send "A"
    And the first answer to "A" is a 5xx
    And I count what "A" created
    And I send "A" again
    Then [STRIPE-IDEM-same-result] the last answer has the status and body of the first answer to "A"
    And [STRIPE-IDEM-same-result] "A" created nothing since it was counted

  Scenario: stripe — a key of 255 characters is accepted
    Given the endpoint follows the stripe variant
    And a request "A" whose key is 255 characters long
    When I send "A"
    And I send "A" again
    Then [STRIPE-IDEM-key-255] the last answer has the status and body of the first answer to "A"
    And [STRIPE-IDEM-key-255] "A" created exactly one thing

  # A key over 255 characters is not judged: "Idempotency keys are up to
  # 255 characters long" tells clients the limit; an endpoint that also
  # accepts a longer key breaks no reading of it.

  Scenario: stripe — a key reused with other parameters is an error
    Given the endpoint follows the stripe variant
    And a request "A"
    When I send "A"
    And I send "A" with another payload
    Then [STRIPE-IDEM-params-compared] the last answer is a 4xx
    And [STRIPE-IDEM-params-compared] "A" created exactly one thing

  Scenario: stripe — a request that failed validation does not save its key
    Given the endpoint follows the stripe variant
    And the endpoint declares a request it rejects
    And a request "A"
    When I send "A" made invalid
    And the endpoint rejected it
    And I send "A"
    Then [STRIPE-IDEM-not-saved] the last answer is not the rejection of "A" replayed
    And [STRIPE-IDEM-not-saved] the last answer is a 2xx
    And [STRIPE-IDEM-not-saved] "A" created exactly one thing

  Scenario: stripe — a request that met a concurrent one is not saved: its retry gets the original's result
    Given the endpoint follows the stripe variant
    And a request "A"
    When I send "A" and its effect is held
    And I send "A" again while the first is held
    And the effect is released
    Then [STRIPE-IDEM-not-saved] the duplicate's answer is an error or the result of the first answer to "A"
    When I send "A" again
    Then [STRIPE-IDEM-not-saved] the last answer has the status and body of the first answer to "A"
    And [STRIPE-IDEM-same-result] "A" created exactly one thing

  Scenario: stripe — a second request that meets the one executing is not saved either: one result for the key
    Given the endpoint follows the stripe variant
    And a request "A"
    When I send "A" and its effect is held
    And I send "A" again while the first is held
    And I send "A" a third time while the first is held
    And the effect is released
    Then [STRIPE-IDEM-same-result] "A" created exactly one thing
    And [STRIPE-IDEM-not-saved] the second duplicate's answer is an error or the result of the first answer to "A"

  Scenario: stripe — a key the endpoint expires in under 24 hours is still kept for 24 hours
    Given the endpoint follows the stripe variant
    And the endpoint declares a key lifetime under 24 hours
    And a request "A"
    When I send "A"
    And I wait past the declared key lifetime
    And I send "A" again
    Then [STRIPE-IDEM-kept-24h] the last answer has the status and body of the first answer to "A"
    And [STRIPE-IDEM-kept-24h] "A" created exactly one thing

  Scenario: stripe — a key is kept for at least 24 hours
    Given the endpoint follows the stripe variant
    And a request "A"
    When I send "A"
    And I wait half of 24 hours
    And I send "A" again
    Then [STRIPE-IDEM-kept-24h] the last answer has the status and body of the first answer to "A"
    And [STRIPE-IDEM-kept-24h] "A" created exactly one thing
