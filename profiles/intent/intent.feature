Feature: Intent Protocol v2.1 (seed 004)
  Every scenario runs in a namespace of its own ({ns}, and {ns2} when it
  needs a second one) and publishes intents whose goal is {goal}, so that
  nothing another scenario left behind can interfere. "I" is a client with
  the target's main API key; alice and bob are tester keys made with
  POST /admin/generate_key. {id:A} is the id of intent A, {token:A} the claim
  token of its latest claim and {token1:A} the token of its first claim.
  Protocol durations are waited for at the target's time scale; a scenario
  that needs more waiting than the run's budget is N/A, with the time it needs.
  Idempotency-Keys are sent prefixed with the scenario's namespace, so keys of
  earlier runs never collide with this one.

  How this file is judged: every Then step names, in brackets, the one rule
  it judges, and only that rule can fail on it. Given and When steps are
  preconditions: when one fails, the checks after it are BLOCKED by the rule
  that covers it, never failed. Where the text allows several answers, a
  check accepts all of them; where it contradicts itself, one observation is
  judged under each reading ("[RULE, reading DECISION=NAME]") and the report
  says which reading the target follows.

  A When that names a rule ("When [RULE] the claim returns intent "A"")
  repeats a check as the precondition of what follows: where a rule's check
  genuinely rests on another rule's answer, it is BLOCKED when that answer
  is missing, never judged without it. A rule forbidding a hand-out is
  judged by the intent not being handed out (the 204 of an empty selection
  is §7.3's row, judged on its own); a rule about a state by reading the
  state back. A check that holds only until some time after a request ("the
  answer came less than N protocol seconds after ...") is N/A on an answer
  that came later: the harness does not control how long a loaded machine
  takes.

  # ---------------------------------------------------------------- 7.1 health

  # §7.1 states the status; the body after it is an example.
  Scenario: health answers without authentication
    When an anonymous client sends GET "/health"
    Then [INTENT-7.1-health] the response status is 200
    And [INTENT-7-json-content-type] the response header "Content-Type" contains "application/json"

  # ------------------------------------------------------- 10 response headers

  Scenario Outline: every response carries the security and version headers (<what>)
    When <actor> sends <method> "<path>"
    Then [INTENT-10-x-frame-options] the response header "X-Frame-Options" is "DENY"
    And [INTENT-10-x-content-type-options] the response header "X-Content-Type-Options" is "nosniff"
    And [INTENT-10-referrer-policy] the response header "Referrer-Policy" is "no-referrer"
    And [INTENT-10-cache-control] the response header "Cache-Control" is "no-store"
    And [INTENT-10-version-header] the response header "X-Intent-Version" is "2.1"
    And [INTENT-17-version-advertised] the response header "X-Intent-Version" is "2.1"

    Examples:
      | what               | actor                | method | path                   |
      | health             | an anonymous client  | GET    | /health                |
      | no key             | an anonymous client  | POST   | /claim?namespace={ns}  |
      | empty queue        | I                    | POST   | /claim?namespace={ns}  |
      | unknown intent     | I                    | GET    | /status/{unknown}      |
      | unknown route      | I                    | GET    | /no-such-route         |

  # ---------------------------------------------------------- 11 error format

  Scenario Outline: every regular endpoint requires an API key (<what>)
    When an anonymous client sends <method> "<path>"
    Then [INTENT-7-auth-required] the response status is one of "4xx"
    And [INTENT-11-code-unauthorized] the response is an error with status 401 and code "unauthorized"
    And [INTENT-11-error-shape] the response is a JSON error
    And [INTENT-7-json-content-type] the response header "Content-Type" contains "application/json"

    Examples:
      | what                 | method | path                         |
      | no key on publish    | POST   | /intent                      |
      | no key on claim      | POST   | /claim?namespace={ns}        |
      | no key on status     | GET    | /status/{unknown}            |
      | no key on result     | GET    | /result/{unknown}            |
      | no key on kv         | GET    | /get/k                       |
      | no key on fulfil     | POST   | /fulfill/{unknown}           |

  Scenario Outline: an unknown intent is not found (<what>)
    When I send GET "<path>"
    Then [INTENT-11-code-not-found] the response is an error with status 404 and code "not_found"
    And [INTENT-11-error-shape] the response is a JSON error
    And [INTENT-7-json-content-type] the response header "Content-Type" contains "application/json"

    Examples:
      | what            | path               |
      | unknown intent  | /status/{unknown}  |
      | unknown result  | /result/{unknown}  |

  # §11 gives every error response the error shape; what an unknown route
  # answers (404 or 405) it does not say.
  Scenario: an unknown route answers an error with the error shape
    When I send GET "/no-such-route"
    Then [INTENT-11-error-shape] the response is a JSON error
    And [INTENT-7-json-content-type] the response header "Content-Type" contains "application/json"

  Scenario: a wrong API key is unauthorized
    Given the next request has header "X-API-KEY" set to "not-a-key-{ns}"
    When I send POST "/claim?namespace={ns}"
    Then [INTENT-7-auth-required] the response status is one of "4xx"
    And [INTENT-11-code-unauthorized] the response is an error with status 401 and code "unauthorized"
    And [INTENT-11-error-shape] the response is a JSON error

  Scenario: malformed JSON is a 400 with an invalid_* code
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "payload": {
      """
    Then [INTENT-7.2-bad-request-400] the response status is 400
    And [INTENT-11-error-shape] the response is a JSON error
    And [INTENT-11-code-invalid-payload] the response is an error whose code starts with "invalid_"

  # ------------------------------------------------------- 7.2 create intent

  # §7.2's "201 Created" is a table row without a keyword: it is judged here
  # alone, and everything else accepts any 2xx for a publish.
  Scenario: a publish is answered 201 Created
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "payload": {"message": "Hello"}, "namespace": "{ns}"}
      """
    Then [INTENT-7.2-created-201] the response status is 201

  # §7.2's reply body is an example: what it must carry is the id. Its
  # "published" is no state of §3.1, so a reply may give the state (open);
  # the namespace echo is up to the bus.
  Scenario: a minimal intent is published and open
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "payload": {"message": "Hello"}, "namespace": "{ns}"}
      """
    And the publish was accepted
    Then [INTENT-7.2-publish-response] the response field "id" matches "^.+$"
    And [INTENT-7.2-publish-response] the response field "status" is absent or one of "published, open"
    And [INTENT-7.2-publish-response] the response field "namespace" is absent or one of "{ns}"
    And [INTENT-4.2-id-format] the response field "id" matches "^[0-9a-fA-F]{32}$"
    When I remember the published id as "A"
    Then [INTENT-3.1-states] the status of "A" is "open"
    And [INTENT-4.1-visibility-default] the response field "visibility" is absent or one of "private"

  Scenario: an intent without a namespace lands in "default", where a claim without a namespace finds it
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "payload": 1}
      """
    And the publish was accepted
    Then [INTENT-4.1-namespace-default] the response field "namespace" is absent or one of "default"
    When I remember the published id as "A"
    And I send POST "/claim?goal={goal}"
    Then [INTENT-7.3-claim-namespace-default] the claim returns intent "A"
    And [INTENT-4.1-namespace-default] the claim returns intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    Then [INTENT-7.5-fulfill] the response status is one of "2xx"

  # "All fields except goal and payload are optional" makes them required
  # and gives no status: the refusal is judged on its own, the 400 by
  # §7.2's row.
  Scenario Outline: a publish without a required field is refused (<what>)
    When I send POST "/intent" with body:
      """
      <body>
      """
    Then [INTENT-7.2-required-fields] the request was refused with any 4xx
    And [INTENT-7.2-bad-request-400] the response status is 400
    And [INTENT-11-code-invalid-request] the response is an error with status 400 and code "invalid_request"
    And [INTENT-11-error-shape] the response is a JSON error

    Examples:
      | what       | body                                    |
      | no goal    | {"payload": 1, "namespace": "{ns}"}     |
      | no payload | {"goal": "{goal}", "namespace": "{ns}"} |

  # §4.1 states each field's range, and no status: a value outside it is
  # refused (any 4xx); the 400 is §7.2's row for invalid fields.
  Scenario Outline: a publish with an invalid field is refused (<what>)
    When I send POST "/intent" with body:
      """
      <body>
      """
    Then [<rule>] the request was refused with any 4xx
    And [INTENT-7.2-bad-request-400] the response status is 400
    And [INTENT-11-error-shape] the response is a JSON error
    And [INTENT-11-invalid-specific] the response is an error whose code starts with "invalid_"

    Examples:
      | what                  | rule                          | body                                                                          |
      | empty goal            | INTENT-4.1-goal-length        | {"goal": "", "payload": 1, "namespace": "{ns}"}                               |
      | goal of 257 chars     | INTENT-4.1-goal-length        | {"goal": "{x:257}", "payload": 1, "namespace": "{ns}"}                        |
      | goal not a string     | INTENT-4.1-goal-length        | {"goal": 7, "payload": 1, "namespace": "{ns}"}                                |
      | namespace with slash  | INTENT-4.1-namespace-format   | {"goal": "{goal}", "payload": 1, "namespace": "a/b"}                          |
      | namespace of 65 chars | INTENT-4.1-namespace-format   | {"goal": "{goal}", "payload": 1, "namespace": "{x:65}"}                       |
      | visibility unknown    | INTENT-4.1-visibility-values  | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "visibility": "team"}   |
      | priority -1           | INTENT-4.1-priority-range     | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "priority": -1}         |
      | priority 1001         | INTENT-4.1-priority-range     | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "priority": 1001}       |
      | priority not integer  | INTENT-4.1-priority-range     | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "priority": 1.5}        |
      | max_attempts 0        | INTENT-4.1-max-attempts-range | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "max_attempts": 0}      |
      | max_attempts 21       | INTENT-4.1-max-attempts-range | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "max_attempts": 21}     |
      | backoff_base 0.5      | INTENT-4.1-backoff-base-range | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "backoff_base": 0.5}    |
      | backoff_base 3600.5   | INTENT-4.1-backoff-base-range | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "backoff_base": 3600.5} |
      | delay not a number    | INTENT-4.1-delay              | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "delay": "soon"}        |
      | body not an object    | INTENT-7.2-bad-request-400    | [1, 2, 3]                                                                     |

  Scenario Outline: boundary values are accepted (<what>)
    When I send POST "/intent" with body:
      """
      <body>
      """
    Then [<rule>] the response status is one of "2xx"

    Examples:
      | what                  | rule                          | body                                                                            |
      | goal of 256 chars     | INTENT-4.1-goal-length        | {"goal": "{x:256}", "payload": 1, "namespace": "{ns}"}                          |
      | goal of 1 char        | INTENT-4.1-goal-length        | {"goal": "g", "payload": 1, "namespace": "{ns}"}                                |
      | namespace chars       | INTENT-4.1-namespace-format   | {"goal": "{goal}", "payload": 1, "namespace": "{ns}.a-b_C9"}                    |
      | namespace of 64 chars | INTENT-4.1-namespace-format   | {"goal": "{goal}", "payload": 1, "namespace": "{x:64}"}                         |
      | priority 0            | INTENT-4.1-priority-range     | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "priority": 0}            |
      | priority 1000         | INTENT-4.1-priority-range     | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "priority": 1000}         |
      | max_attempts 1        | INTENT-4.1-max-attempts-range | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "max_attempts": 1}        |
      | max_attempts 20       | INTENT-4.1-max-attempts-range | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "max_attempts": 20}       |
      | backoff_base 1.0      | INTENT-4.1-backoff-base-range | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "backoff_base": 1.0}      |
      | backoff_base 3600.0   | INTENT-4.1-backoff-base-range | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "backoff_base": 3600.0}   |

  Scenario: a null payload is a payload, or a missing one, by the reading the target follows
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "payload": null, "namespace": "{ns}"}
      """
    Then [INTENT-7.2-required-fields, reading null-payload=a-payload] the response status is one of "2xx"
    And [INTENT-7.2-required-fields, reading null-payload=missing] the response status is one of "4xx"

  # Sizes on which every reading of "KB" agrees: a 6,990-character payload is
  # under 7,000 bytes serialized; 7,300 is over 7,168; a body of some 8,400
  # bytes is over 8,192 while its payload stays under 7,000.
  Scenario: a payload over 7KB is refused
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "namespace": "{ns}", "payload": "{x:7300}"}
      """
    Then [INTENT-4.1-payload-limit] the response status is one of "4xx"
    And [INTENT-15-size-limits] the response status is one of "4xx"
    And [INTENT-11-error-shape] the response is a JSON error
    And [INTENT-11-code-payload-too-large] if the response status is 413, it is an error with code "payload_too_large"

  Scenario: a body over 8KB is refused with 413
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "namespace": "{ns}",{sp:1500}"payload": "{x:6900}"}
      """
    Then [INTENT-7.2-body-limit-413] the response status is 413
    And [INTENT-11-code-payload-too-large] the response is an error with status 413 and code "payload_too_large"
    And [INTENT-11-error-shape] the response is a JSON error

  # §15 sets the limit and gives no status (413 is §7.2's row, judged
  # above): the refusal is judged on its own, so that it rests on no 413.
  Scenario: a body over 8KB is refused
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "namespace": "{ns}",{sp:1500}"payload": "{x:6900}"}
      """
    Then [INTENT-15-size-limits] the response status is one of "4xx"

  Scenario: a payload just under 7KB is accepted
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "namespace": "{ns}", "payload": "{x:6990}"}
      """
    Then [INTENT-4.1-payload-limit] the response status is one of "2xx"
    And [INTENT-15-size-limits] the response status is one of "2xx"

  # ------------------------------------------------------------ idempotency

  Scenario: the same Idempotency-Key and the same body return the same response, whatever the key order and whitespace
    Given I publish with Idempotency-Key "k1" the body:
      """
      {"goal": "{goal}", "payload": {"a": 1, "b": [1, 2]}, "namespace": "{ns}", "priority": 5}
      """
    And the publish was accepted
    And I remember the response as "first"
    When I publish with Idempotency-Key "k1" the body:
      """
      {"goal": "{goal}", "payload": {"a": 1, "b": [1, 2]}, "namespace": "{ns}", "priority": 5}
      """
    Then [INTENT-7.2-idem-replay] the response is the same as "first"
    When I publish with Idempotency-Key "k1" the body:
      """
      {  "priority":5,"namespace" : "{ns}",
         "payload": {"b": [1,2], "a": 1},
         "goal": "{goal}"  }
      """
    Then [INTENT-7.2-idem-semantic] the response is the same as "first"
    And [INTENT-7.2-idem-replay] the namespace holds 1 open intent

  Scenario: the same Idempotency-Key with a different body is a 422
    Given I publish with Idempotency-Key "k2" the body:
      """
      {"goal": "{goal}", "payload": {"a": 1}, "namespace": "{ns}"}
      """
    And the publish was accepted
    When I publish with Idempotency-Key "k2" the body:
      """
      {"goal": "{goal}", "payload": {"a": 2}, "namespace": "{ns}"}
      """
    Then [INTENT-7.2-idem-conflict] the response status is 422
    And [INTENT-11-code-idempotency-conflict] the response is an error with status 422 and code "idempotency_conflict"
    And [INTENT-11-error-shape] the response is a JSON error
    And [INTENT-7.2-idem-conflict] the namespace holds 1 open intent

  Scenario: Idempotency-Keys are scoped per API key
    Given a tester key "alice"
    And I publish with Idempotency-Key "k3" the body:
      """
      {"goal": "{goal}", "payload": 1, "namespace": "{ns}"}
      """
    And the publish was accepted
    And I remember the response as "mine"
    When alice publishes with Idempotency-Key "k3" the body:
      """
      {"goal": "{goal}", "payload": 1, "namespace": "{ns}"}
      """
    Then [INTENT-7.2-idem-per-key] the response status is one of "2xx"
    And [INTENT-7.2-idem-per-key] the response field "id" differs from "mine"
    And [INTENT-12-isolation] the response field "id" differs from "mine"

  # One intent is idempotency's (7.2); at-least-once (12) asks only that
  # the intent the publishes were answered with is delivered.
  Scenario: concurrent duplicates of one Idempotency-Key create exactly one intent
    When 20 clients publish concurrently with Idempotency-Key "storm" the body:
      """
      {"goal": "{goal}", "payload": {"n": 1}, "namespace": "{ns}"}
      """
    Then [INTENT-7.2-idem-replay] every one of them got the same id
    When I claim every intent in turn
    Then [INTENT-12-at-least-once] every intent they were answered with was claimed
    And [INTENT-7.2-idem-replay] 1 intent was claimed

  # --------------------------------------------------------------- 7.3 claim

  # The count and the state are read only once the claim handed "A" out
  # (the When that repeats the check): they rest on that, and on nothing
  # of the example's fields of the reply, judged after them.
  Scenario: a claim hands out the intent with a fresh claim token
    Given I publish intent "A" with:
      """
      {"payload": {"message": "Hello"}, "priority": 7}
      """
    When I claim
    Then [INTENT-3.2-claim-transition] the claim returns intent "A"
    When [INTENT-3.2-claim-transition] the claim returns intent "A"
    Then [INTENT-3.3-attempts-increment] the claim_attempts of "A" is 1
    And [INTENT-4.2-claim-attempts] the claim_attempts of "A" is 1
    And [INTENT-7.3-claim-response] the response field "goal" is "{goal}"
    And [INTENT-7.3-claim-response] the response field "payload" is {"message": "Hello"}
    And [INTENT-7.3-claim-response] the response field "claim_timeout" is a number
    And [INTENT-7.3-claim-response] the claim token is a non-empty string
    And [INTENT-3.2-claim-transition] the status of "A" is "claimed"
    And [INTENT-3.1-states] the response field "status" is one of "open, claimed, fulfilled, dead"

  # "The 204 response MUST include Retry-After: 1." binds a 204: another
  # answer (the 204 is a table row, judged after it) leaves it N/A.
  Scenario: an empty namespace answers 204 with Retry-After: 1
    When I claim
    Then [INTENT-7.3-retry-after] if the response status is 204, its header "Retry-After" is "1"
    And [INTENT-7.3-no-content-204] the response status is 204

  # "No eligible intent" is also a namespace whose only intent the claimer
  # may not take.
  Scenario: a claim that finds only an intent it may not take answers 204
    Given a tester key "alice"
    And I publish intent "A"
    When alice claims
    Then [INTENT-7.3-retry-after] if the response status is 204, its header "Retry-After" is "1"
    And [INTENT-7.3-no-content-204] the response status is 204

  Scenario: many concurrent workers never share an intent
    Given I publish 30 public intents
    When 50 workers claim concurrently
    Then [INTENT-2-concurrent-requests] every one of the 30 intents was handed out, and every answer was 200 or 204
    And [INTENT-7.3-atomic-claim] no intent is held by two live leases
    And [INTENT-12-atomic-claiming] no intent is held by two live leases
    And [INTENT-2-atomic-isolation] no intent is held by two live leases
    And [INTENT-2-no-lease-hijack] every claim token is distinct
    And [INTENT-12-isolated-claim-locks] every claim token is distinct

  # §4.1's default priority (100) is a table value no rule judges: "mid"
  # states it, so the order rests on priorities the text fixes.
  Scenario: higher priority is claimed first
    Given I publish intent "low" with:
      """
      {"priority": 10}
      """
    And I publish intent "high" with:
      """
      {"priority": 900}
      """
    And I publish intent "mid" with:
      """
      {"priority": 100}
      """
    When I claim every intent in turn
    Then [INTENT-7.3-highest-priority] the intents were claimed in the order "high, mid, low"
    And [INTENT-6.3-priority-order] the intents were claimed in the order "high, mid, low"
    And [INTENT-7.3-selection-order] the intents were claimed in the order "high, mid, low"
    And [INTENT-4.1-priority-range] the intents were claimed in the order "high, mid, low"

  # "late" is not eligible before its delay has passed, so which of the two
  # the first claim returns is eligibility's question, not the tie-breakers'
  # (judged below on intents that are all eligible). "late" is judged not
  # handed out only on answers that came before its delay could have passed
  # (the harness does not control how long a loaded machine takes), and the
  # second claim rests on the first having taken "early", which is then
  # fulfilled so that no lapsed lease of it comes before "late".
  Scenario: a delayed intent is not handed out before its delay has passed
    Given I publish intent "late" with:
      """
      {"delay": 300}
      """
    And I remember the response as "late"
    And I publish intent "early" with:
      """
      {}
      """
    When I claim
    And the answer came less than 300 protocol seconds after "late" was sent
    Then [INTENT-7.3-eligible-run-at] the claim does not return intent "late"
    And [INTENT-4.1-delay] the claim does not return intent "late"
    When [INTENT-3.2-claim-transition] the claim returns intent "early"
    And I claim
    And the answer came less than 300 protocol seconds after "late" was sent
    Then [INTENT-7.3-eligible-run-at] the claim does not return intent "late"
    And [INTENT-4.1-delay] the claim does not return intent "late"
    When I send POST "/fulfill/{id:early}" with body:
      """
      {"claim_token": "{token:early}"}
      """
    And [INTENT-3.2-fulfill-transition] the status of "early" is "fulfilled"
    And "late" is due
    And I claim
    Then [INTENT-4.1-delay] the claim returns intent "late"

  Scenario: the claim order agrees with every tie-breaker the target reports
    Given the target has an admin token
    And I publish 12 intents of priority 50 concurrently
    And I publish intent "retried" with:
      """
      {"priority": 50, "backoff_base": 1.0, "goal": "{goal}-r"}
      """
    And I claim intent "retried" with query "goal={goal}-r"
    And I send POST "/fail/{id:retried}" with body:
      """
      {"claim_token": "{token:retried}", "error": "again"}
      """
    And "retried" is due
    And I note the scheduling fields of every intent
    When I claim every intent in turn
    Then [INTENT-7.3-selection-order] the claim order is by priority desc, run_at, claim_attempts, created_at and id
    And [INTENT-6.3-tie-breakers] the claim order is by priority desc, run_at, claim_attempts, created_at and id

  # ---------------------------------------------------------------- routing

  Scenario: intents never cross namespaces
    Given I publish intent "A" with:
      """
      {"namespace": "{ns2}"}
      """
    When I claim
    Then [INTENT-6.1-namespace-isolation] the claim does not return intent "A"
    When I send POST "/claim?namespace={ns2}"
    Then [INTENT-6.1-namespace-isolation] the claim returns intent "A"

  # "A" is published with no visibility: the default private is judged by
  # what the bus does with it. The rules of eligibility forbid handing "A"
  # to alice; the 204 that finding nothing gets is §7.3's table row, judged
  # apart.
  Scenario: a private intent is claimed only by its publisher's key
    Given a tester key "alice"
    And I publish intent "A"
    When alice claims
    Then [INTENT-7.3-eligible-visibility] the claim does not return intent "A"
    And [INTENT-6.2-private] the claim does not return intent "A"
    And [INTENT-12-isolation] the claim does not return intent "A"
    And [INTENT-4.1-visibility-default] the claim does not return intent "A"
    When I claim
    Then [INTENT-6.2-private] the claim returns intent "A"
    And [INTENT-4.1-visibility-default] the claim returns intent "A"

  Scenario: a public intent is claimed by any key in its namespace
    Given a tester key "alice"
    And I publish intent "A" with:
      """
      {"visibility": "public"}
      """
    When alice claims
    Then [INTENT-6.2-public] the claim returns intent "A"
    And [INTENT-4.1-visibility-values] the claim returns intent "A"

  # The text allows a publisher filter to an admin or to the key itself; it
  # gives no answer for another key's filter: refusing it (any 4xx) and
  # finding nothing are both within the text, handing out the intent is not.
  # bob's "B" outranks "A", so a filter of alice's own key shows itself by
  # passing over "B" (whose lease, unlike a re-claim of "A", no clock ends).
  Scenario: a worker may filter by its own publisher key only
    Given a tester key "alice"
    And a tester key "bob"
    And alice publishes intent "A" with:
      """
      {"visibility": "public"}
      """
    When bob claims with query "publisher={key:alice}"
    Then [INTENT-7.3-publisher-filter] the claim does not return intent "A"
    And [INTENT-7.3-publisher-filter] the response status is one of "204, 4xx"
    And [INTENT-11-code-forbidden] if the response status is 403, it is an error with code "forbidden"
    When bob publishes intent "B" with:
      """
      {"visibility": "public", "priority": 900}
      """
    And alice claims with query "publisher={key:alice}"
    Then [INTENT-7.3-publisher-filter] the claim returns intent "A"
    When alice claims with query "publisher={key:alice}"
    Then [INTENT-7.3-publisher-filter] the claim does not return intent "B"

  Scenario: the goal filter returns only intents of that goal
    Given I publish intent "other" with:
      """
      {"goal": "{goal}-other"}
      """
    And I publish intent "A"
    When I claim with query "goal={goal}"
    Then [INTENT-7.3-goal-filter] the claim returns intent "A"

  Scenario Outline: a targeted intent goes only to its worker (<how>)
    Given I publish intent "A" with:
      """
      {"target_worker": "w-{ns}"}
      """
    When I claim with query "worker_id=someone-else"
    Then [INTENT-7.3-eligible-target] the claim does not return intent "A"
    And [INTENT-6.4-target-worker] the claim does not return intent "A"
    When I claim
    Then [INTENT-7.3-eligible-target] the claim does not return intent "A"
    And [INTENT-6.4-target-worker] the claim does not return intent "A"
    When <claim>
    Then [INTENT-6.4-target-worker] the claim returns intent "A"

    Examples:
      | how                  | claim                                                                 |
      | X-Worker-ID header   | I claim with header "X-Worker-ID" set to "w-{ns}"                     |
      | worker_id parameter  | I claim with query "worker_id=w-{ns}"                                 |

  Scenario Outline: a capability-bound intent goes only to a worker advertising it (<how>)
    Given I publish intent "A" with:
      """
      {"required_capability": "gpu"}
      """
    When I claim
    Then [INTENT-7.3-eligible-capability] the claim does not return intent "A"
    And [INTENT-6.5-capability] the claim does not return intent "A"
    When <claim>
    Then [INTENT-6.5-capability] the claim returns intent "A"

    Examples:
      | how                        | claim                                                             |
      | X-Worker-Capabilities      | I claim with header "X-Worker-Capabilities" set to "cpu,gpu"      |
      | capabilities parameter     | I claim with query "capabilities=cpu,gpu"                         |

  Scenario Outline: capability matching is case-sensitive and exact (<what>)
    Given I publish intent "A" with:
      """
      {"required_capability": "gpu"}
      """
    When <claim>
    Then [INTENT-7.3-eligible-capability] the claim does not return intent "A"
    And [INTENT-6.5-capability-exact] the claim does not return intent "A"

    Examples:
      | what                    | claim                                                                   |
      | other case and prefixes | I claim with header "X-Worker-Capabilities" set to "GPU,gpu-small, cpu" |
      | substrings              | I claim with query "capabilities=gp,gpux"                               |

  # ------------------------------------------------------- tokens and leases

  Scenario: fulfil stores the result and the intent stays fulfilled
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "result": {"status": "sent"}}
      """
    Then [INTENT-7.5-fulfill] the response status is one of "2xx"
    When I send GET "/result/{id:A}"
    Then [INTENT-7.7-result-fields] the response status is one of "2xx"
    And [INTENT-3.2-fulfill-transition] the response field "status" is "fulfilled"
    And [INTENT-7.7-result-fields] the response field "result" is {"status": "sent"}
    And [INTENT-7.5-result-type-default] the response field "result_type" is one of "json" where present
    And [INTENT-7.7-result-fields] the response field "completed_at" is absent or a number
    And [INTENT-7.7-result-fields] the response field "goal" is absent or one of "{goal}"
    When I send GET "/status/{id:A}"
    Then [INTENT-7.8-status] the response field "status" is "fulfilled"
    And [INTENT-7.8-status] the response field "result" is absent

  # What follows rests on "A" being fulfilled (the Given that reads it
  # back). "Terminal" is a property of the state: a repeated fulfil may be
  # refused or answered as a no-op, and is judged by reading the intent back
  # (still fulfilled, its first result kept, never handed out again).
  Scenario: a fulfilled intent stays fulfilled and is never handed out again
    Given I publish intent "A"
    And I claim intent "A"
    And I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "result": {"status": "sent"}}
      """
    And [INTENT-3.2-fulfill-transition] the status of "A" is "fulfilled"
    When I claim
    Then [INTENT-7.3-eligible-status] the claim does not return intent "A"
    And [INTENT-3.1-fulfilled-terminal] the claim does not return intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "result": {"status": "again"}}
      """
    Then [INTENT-3.1-fulfilled-terminal] the response status is one of "2xx, 4xx"
    And [INTENT-3.1-fulfilled-terminal] the status of "A" is "fulfilled"
    When I send GET "/result/{id:A}"
    Then [INTENT-3.1-fulfilled-terminal] the response field "result" is {"status": "sent"}

  Scenario: fulfil with nothing but the claim token stores no result
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    Then [INTENT-7.5-fulfill-without-result] the response status is one of "2xx"
    When I send GET "/result/{id:A}"
    Then [INTENT-7.5-fulfill-without-result] the response field "status" is "fulfilled"
    And [INTENT-7.5-fulfill-without-result] the response field "result" is null

  # "result_type MUST be json or text" binds the worker; the bus's side is
  # the field's type: a result it keeps has result_type json or text.
  Scenario: a result of type text is kept as text
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "result": "plain words", "result_type": "text"}
      """
    Then [INTENT-7.5-fulfill] the response status is one of "2xx"
    When I send GET "/result/{id:A}"
    Then [INTENT-4.2-result-type-values] the response field "result_type" is one of "text" where present

  Scenario: a result of another type is refused, or kept as json or text
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "result": "plain words", "result_type": "xml"}
      """
    Then [INTENT-4.2-result-type-values] the response status is one of "2xx, 4xx"
    When I send GET "/result/{id:A}"
    Then [INTENT-4.2-result-type-values] the response field "result_type" is absent or one of "json, text"

  Scenario Outline: a mutation without the claim token is refused (<op>, <what>)
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/<op>/{id:A}" with body:
      """
      <body>
      """
    Then [<rule>] the response status is one of "4xx"
    And [INTENT-11-error-shape] the response is a JSON error
    And [<rule>] the status of "A" is "claimed"

    Examples:
      | op           | what          | rule                               | body                                       |
      | fulfill      | no token      | INTENT-7.5-fulfill-token-required  | {"result": 1}                              |
      | fail         | no token      | INTENT-7.6-fail-token-required     | {"error": "x"}                             |
      | extend_claim | no token      | INTENT-7.4-extend-token-required   | {"seconds": 60}                            |
      | fulfill      | another token | INTENT-15-claim-token-validation   | {"claim_token": "{x:32}"}                  |
      | fail         | another token | INTENT-15-claim-token-validation   | {"claim_token": "{x:32}", "error": "x"}    |
      | extend_claim | another token | INTENT-15-claim-token-validation   | {"claim_token": "{x:32}", "seconds": 60}   |

  Scenario Outline: another key holding the right token is not the claimer (<op>)
    Given a tester key "alice"
    And I publish intent "A" with:
      """
      {"visibility": "public"}
      """
    And I claim intent "A"
    When alice sends POST "/<op>/{id:A}" with body:
      """
      <body>
      """
    Then [<rule>] the response status is 404
    And [INTENT-11-code-not-found] the response is an error with status 404 and code "not_found"
    And [INTENT-2-no-lease-hijack] the status of "A" is "claimed"

    Examples:
      | op           | rule                 | body                                        |
      | fulfill      | INTENT-7.5-fulfill-404 | {"claim_token": "{token:A}"}              |
      | fail         | INTENT-7.6-fail-404    | {"claim_token": "{token:A}", "error": "x"} |
      | extend_claim | INTENT-7.4-extend-404  | {"claim_token": "{token:A}", "seconds": 60} |

  # §3.3 gives the 404; §7.4's "A lease extension MUST fail" gives no
  # status, so it is judged by the refusal alone (a check that does not
  # gate the 404 after it: both judge the same answer).
  Scenario Outline: an expired claim token gets 404 (<op>)
    Given I publish intent "A" with:
      """
      {"backoff_base": 1.0}
      """
    And I claim intent "A"
    When the lease of "A" has expired
    And I send POST "/<op>/{id:A}" with body:
      """
      <body>
      """
    Then [<rule>] <refused>
    And [INTENT-3.3-token-expired-404] the response status is 404

    Examples:
      | op           | rule                            | refused                              | body                                           |
      | fulfill      | INTENT-7.5-fulfill-404          | the response status is 404           | {"claim_token": "{token1:A}"}                  |
      | fail         | INTENT-7.6-fail-404             | the response status is 404           | {"claim_token": "{token1:A}", "error": "late"} |
      | extend_claim | INTENT-7.4-extend-expired-lease | the request was refused with any 4xx | {"claim_token": "{token1:A}", "seconds": 60}   |

  Scenario Outline: a claim token superseded by a later claim gets 404 (<op>)
    Given I publish intent "A" with:
      """
      {"backoff_base": 1.0}
      """
    And I claim intent "A"
    When the lease of "A" has expired
    Then [INTENT-3.3-lease-expiry] I can claim intent "A" again
    And [INTENT-3.2-expiry-requeue] the claim returns intent "A"
    And [INTENT-12-at-least-once] the claim returns intent "A"
    And [INTENT-2-redelivery] the claim returns intent "A"
    When I send POST "/<op>/{id:A}" with body:
      """
      <body>
      """
    Then [INTENT-3.3-token-overwritten-404] the response status is 404
    And [<rule>] the response status is 404
    And [INTENT-15-claim-token-validation] the status of "A" is "claimed"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    Then [INTENT-7.5-fulfill] the response status is one of "2xx"
    And [INTENT-3.2-fulfill-transition] the status of "A" is "fulfilled"
    And [INTENT-3.3-attempts-increment] the claim_attempts of "A" is 2

    Examples:
      | op           | rule                   | body                                           |
      | fulfill      | INTENT-7.5-fulfill-404 | {"claim_token": "{token1:A}"}                  |
      | fail         | INTENT-7.6-fail-404    | {"claim_token": "{token1:A}", "error": "late"} |
      | extend_claim | INTENT-7.4-extend-404  | {"claim_token": "{token1:A}", "seconds": 60}   |

  # The text says both: §3.3 requeues an expired lease with a backoff delay,
  # §7.3 makes expired intents "eligible for immediate atomic selection".
  # Under the first reading "A" is not due before 1800 * 2^1 protocol
  # seconds after its claim: the claim after the lease is judged only if it
  # was answered before then.
  Scenario: an expired lease is requeued with backoff, or handed out at once, by the reading the target follows
    Given I publish intent "A" with:
      """
      {"backoff_base": 1800.0}
      """
    And I claim intent "A"
    And I remember the response as "claim"
    When the lease of "A" has expired
    And I claim
    And the answer came less than 3600 protocol seconds after "claim" was sent
    Then [INTENT-3.3-expiry-backoff, reading lease-expiry=backoff] the claim does not return intent "A"
    And [INTENT-3.3-expiry-backoff, reading lease-expiry=immediate] the claim returns intent "A"
    And [INTENT-7.3-immediate-reclaim, reading lease-expiry=backoff] the claim does not return intent "A"
    And [INTENT-7.3-immediate-reclaim, reading lease-expiry=immediate] the claim returns intent "A"

  Scenario: extend_claim moves the lease
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/extend_claim/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "seconds": 3600}
      """
    Then [INTENT-7.4-extend] the response status is one of "2xx"
    And [INTENT-7.4-extend] the lease of "A" ends at least 3000 protocol seconds after the extension was sent

  Scenario Outline: extend_claim accepts seconds between 10 and 3600 (<seconds>)
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/extend_claim/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "seconds": <seconds>}
      """
    Then [INTENT-7.4-extend] the response status is one of "2xx"

    Examples:
      | seconds |
      | 10      |
      | 3600    |

  # The text constrains the request ("seconds MUST be between 10 and 3600")
  # and says nothing of what the bus does with another value: refusing with
  # any 4xx, clamping into 10–3600 and honouring it are all within it.
  Scenario Outline: extend_claim outside 10–3600 seconds is refused, clamped or honoured (<seconds>)
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/extend_claim/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "seconds": <seconds>}
      """
    Then [INTENT-7.4-extend] the extension of "A" by <seconds> seconds was refused, clamped into 10 to 3600 seconds or honoured

    Examples:
      | seconds |
      | 1       |
      | 7200    |

  # ------------------------------------------------------ backoff and dead

  # "The response MUST include error when last_error is present": the error
  # is there and carries the failure's message (§4.2's last_error), which a
  # bus may word around.
  Scenario Outline: fail requeues with backoff_base * 2^attempts + [0, 2) (attempt <n>)
    Given I publish intent "A" with:
      """
      {"backoff_base": <base>, "max_attempts": 5}
      """
    When I fail "A" <n> times
    And I remember the response as "fail"
    Then [INTENT-3.3-fail-backoff] the run_at of "A" is within the backoff window of attempt <n> after the last fail
    And [INTENT-3.3-backoff-formula] the run_at of "A" is within the backoff window of attempt <n> after the last fail
    And [INTENT-3.3-backoff-jitter] the run_at of "A" is within the backoff window of attempt <n> after the last fail
    And [INTENT-12-retry-backoff] the run_at of "A" is within the backoff window of attempt <n> after the last fail
    And [INTENT-3.2-fail-requeue] the status of "A" is "open"
    And [INTENT-7.6-fail] the status of "A" is "open"
    And [INTENT-4.2-claim-attempts] the claim_attempts of "A" is <n>
    When I send GET "/result/{id:A}"
    Then [INTENT-7.7-result-error-field] the response field "error" contains "attempt <n>"
    When I claim
    And the answer came less than <due> protocol seconds after "fail" was sent
    Then [INTENT-12-retry-backoff] the claim does not return intent "A"

    # due: base * 2^n, before which "A" cannot be due again (attempt 2
    # waits out the backoff of attempt 1, so its base stays small).
    Examples:
      | n | base  | due |
      | 1 | 300.0 | 600 |
      | 2 | 20.0  | 80  |

  Scenario: the default backoff_base is 5 seconds
    Given I publish intent "A"
    When I fail "A" 1 times
    Then [INTENT-3.3-default-backoff-base] the run_at of "A" is within the backoff window of attempt 1 with base 5 after the last fail

  Scenario: an intent whose attempts reach max_attempts is dead
    Given I publish intent "A" with:
      """
      {"backoff_base": 1.0, "max_attempts": 2}
      """
    When I fail "A" 2 times
    Then [INTENT-3.3-dead-at-max-attempts] the status of "A" is "dead"
    And [INTENT-3.2-fail-dead] the status of "A" is "dead"
    And [INTENT-12-dead-letter-archival] the status of "A" is "dead"

  # §3.3's default (a table value without a keyword) is judged alone: the
  # MUSTs of a dead intent below rest on a max_attempts the scenario states.
  Scenario: the third fail of a default intent dead-letters it
    Given I publish intent "A" with:
      """
      {"backoff_base": 1.0}
      """
    When I fail "A" 3 times
    Then [INTENT-3.3-default-max-attempts] the status of "A" is "dead"

  # The first claim is judged by the attempts alone (claim_attempts has
  # reached max_attempts whatever the state), once the backoff a retry would
  # have (1 * 2^3 + [0, 2) s) is over; the second by the state, once it is
  # read back dead.
  Scenario: an intent failed max_attempts times is dead, archived and never handed out again
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"backoff_base": 1.0, "max_attempts": 3, "payload": {"keep": "me-{ns}"}}
      """
    When I fail "A" 3 times
    And 10 protocol seconds pass
    And I claim
    Then [INTENT-7.3-eligible-attempts] the claim does not return intent "A"
    And [INTENT-3.3-dead-at-max-attempts] the status of "A" is "dead"
    And [INTENT-3.2-fail-dead] the response field "status" is "dead"
    And [INTENT-3.3-dead-at-max-attempts] the claim_attempts of "A" is 3
    And [INTENT-12-dead-letter-archival] "A" is in the dead-letter queue
    When I claim
    Then [INTENT-7.3-eligible-status] the claim does not return intent "A"
    And [INTENT-3.1-dead-terminal] the claim does not return intent "A"
    When the admin sends GET "/admin/dead"
    Then [INTENT-8.6-dead-list] the response status is one of "2xx"
    And [INTENT-8.6-dead-list] the response body contains "{id:A}"
    When the admin sends GET "/admin/dead/{id:A}"
    Then [INTENT-8.6-dead-detail] the response status is one of "2xx"
    And [INTENT-8.6-dead-detail] the response body contains "me-{ns}"

  # "Directly" rules out a pass through open, not a lazy cleanup (§16
  # "Cleanup is lazy", §8.4's expired_claims_dead): the state is read after
  # a cleanup pass.
  Scenario: a lease that expires on the last attempt dead-letters the intent
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"max_attempts": 1}
      """
    And I claim intent "A"
    When the lease of "A" has expired
    And the admin sends POST "/admin/cleanup"
    Then [INTENT-3.3-expiry-dead-direct] the status of "A" is "dead"
    And [INTENT-3.2-expiry-dead] the response field "status" is "dead"
    And [INTENT-12-dead-letter-archival] "A" is in the dead-letter queue
    When I claim
    Then [INTENT-3.3-expiry-dead-direct] the claim does not return intent "A"

  # ------------------------------------------------------------- 7.7 / 7.8

  Scenario: results and status are readable by the publisher and the claimer, not by another key
    Given a tester key "alice"
    And a tester key "bob"
    And I publish intent "A" with:
      """
      {"visibility": "public"}
      """
    When bob sends GET "/result/{id:A}"
    Then [INTENT-7.7-result-access] the response status is one of "403, 404"
    And [INTENT-11-error-shape] the response is a JSON error
    And [INTENT-11-code-forbidden] if the response status is 403, it is an error with code "forbidden"
    And [INTENT-12-isolation] the response status is one of "403, 404"
    When bob sends GET "/status/{id:A}"
    Then [INTENT-7.8-status-access] the response status is one of "403, 404"
    When alice claims intent "A"
    And alice sends GET "/result/{id:A}"
    Then [INTENT-7.7-result-access] the response status is one of "2xx"
    When alice sends GET "/status/{id:A}"
    Then [INTENT-7.8-status-access] the response status is one of "2xx"
    When I send GET "/status/{id:A}"
    Then [INTENT-7.8-status-access] the response status is one of "2xx"
    And [INTENT-7.8-status] the response field "status" is "claimed"

  # §7.7 lets an admin read a result; §7 requires X-API-KEY on every regular
  # endpoint. An admin token alone is enough under the first reading only;
  # the text gives /result no status, so access is any 2xx, refusal any 4xx.
  Scenario: an admin reads a result with admin credentials, alone or beside an API key by the reading the target follows
    Given the target has an admin token
    And I publish intent "A"
    When the admin sends GET "/result/{id:A}"
    Then [INTENT-7.7-result-access, reading admin-result-access=admin-alone] the response status is one of "2xx"
    And [INTENT-7.7-result-access, reading admin-result-access=with-api-key] the response status is one of "4xx"

  # -------------------------------------------------------------- 7.9 KV

  Scenario: a stored value is read back
    When I send POST "/set/k-{ns}" with body:
      """
      {"value": "hello"}
      """
    And the value was stored
    And I send GET "/get/k-{ns}"
    Then [INTENT-7.9-kv-get] the response status is 200
    And [INTENT-7.9-kv-get] the response field "value" is "hello"

  # Isolation reads my value back the way §7.9 shows it: it rests on that
  # reading (the When that repeats the check), judged above.
  Scenario: the key-value store is scoped per API key
    Given a tester key "alice"
    When I send POST "/set/k-{ns}" with body:
      """
      {"value": "hello"}
      """
    And the value was stored
    And I send GET "/get/k-{ns}"
    And [INTENT-7.9-kv-get] the response field "value" is "hello"
    And alice sends GET "/get/k-{ns}"
    Then [INTENT-12-isolation] the response field "value" is not "hello"
    And [INTENT-7.9-kv-isolation] the response status is 404
    And [INTENT-11-code-not-found] the response is an error with status 404 and code "not_found"
    When alice sends POST "/set/k-{ns}" with body:
      """
      {"value": "alice's"}
      """
    And I send GET "/get/k-{ns}"
    Then [INTENT-7.9-kv-isolation] the response field "value" is "hello"
    And [INTENT-12-isolation] the response field "value" is "hello"

  # "Maximum 86400" constrains the request; the reply table has no 400:
  # refusing (any 4xx) and accepting (clamped) are both within the text.
  Scenario: a KV ttl over 86400 is refused or accepted, and a value expires after its ttl
    When I send POST "/set/k-{ns}" with body:
      """
      {"value": "v", "ttl": 86401}
      """
    Then [INTENT-7.9-kv-ttl] the response status is one of "2xx, 4xx"
    When I send POST "/set/k2-{ns}" with body:
      """
      {"value": "v", "ttl": 2}
      """
    Then [INTENT-7.9-kv-ttl] the response status is one of "2xx"
    When 3 protocol seconds pass
    And I send GET "/get/k2-{ns}"
    Then [INTENT-7.9-kv-ttl] the response status is 404

  # The value must still be there only on an answer that came before 600
  # protocol seconds could have passed since the set was sent.
  Scenario: a KV value without ttl lives 600 seconds
    When I send POST "/set/k-{ns}" with body:
      """
      {"value": "v"}
      """
    And I remember the response as "set"
    And 540 protocol seconds pass
    And I send GET "/get/k-{ns}"
    And the answer came less than 600 protocol seconds after "set" was sent
    Then [INTENT-7.9-kv-ttl] the response status is 200
    When 70 protocol seconds pass
    And I send GET "/get/k-{ns}"
    Then [INTENT-7.9-kv-ttl] the response status is 404

  # ------------------------------------------------------------- 5.2 HMAC

  Scenario: correctly signed requests are accepted, with odd JSON formatting and empty bodies
    When I send a signed POST "/intent" with body:
      """
      {  "payload":{"z":1,  "a":2}, "goal":"{goal}",
        "namespace":"{ns}"}
      """
    Then [INTENT-5.2-body-exact-bytes] the response status is one of "2xx"
    And [INTENT-5.2-validate-if-present] the response status is one of "2xx"
    When I send a signed GET "/health"
    Then [INTENT-5.2-empty-body] the response status is one of "2xx"
    When I send a signed POST "/claim?namespace={ns}"
    Then [INTENT-5.2-empty-body] the response status is one of "2xx"
    And [INTENT-5.2-signing-optional] the response status is one of "2xx"

  # Repeated parameters here are already in value order (the blank value
  # first), where every reading of the canonical query agrees.
  Scenario: the canonical path sorts by key, keeps repeated and blank parameters, and encodes / as %2F
    Given I publish intent "A" with:
      """
      {"goal": "a/b c"}
      """
    When I send a signed POST "/claim?worker_id=&namespace={ns}&goal=a%2Fb%20c&capabilities=&capabilities=x"
    Then [INTENT-5.2-query-canonical] the claim returns intent "A"
    And [INTENT-5.2-query-percent-encoding] the claim returns intent "A"

  # §5.2 sorts by key and preserves repeated parameters; whether repeated ones
  # are then ordered by value or kept as sent, it does not say.
  Scenario: repeated query parameters sent out of value order are signed by value, or as sent, by the reading the target follows
    When I send a signed POST "/claim?namespace={ns}&capabilities=x&capabilities=" both ways
    Then [INTENT-5.2-query-canonical, reading query-repeated-order=by-value] the request signed by value was accepted
    And [INTENT-5.2-query-canonical, reading query-repeated-order=as-sent] the request signed as sent was accepted

  # The text gives no status for a refused signature: 401 unauthorized and
  # 403 invalid_signature alike are any 4xx with the error shape.
  Scenario Outline: a badly signed request is refused (<what>)
    When I send a signed POST "/claim?namespace={ns}" with <flaw>
    Then [<rule>] the response status is one of "4xx"
    And [INTENT-11-error-shape] the response is a JSON error

    Examples:
      | what                  | rule                               | flaw                              |
      | wrong signature       | INTENT-5.2-signature-valid         | a wrong signature                 |
      | signed by another key | INTENT-5.2-signature-valid         | the signature of another key      |
      | timestamp 301 s old   | INTENT-5.2-timestamp-window        | a timestamp 301 seconds old       |
      | timestamp 301 s ahead | INTENT-5.2-timestamp-window        | a timestamp 301 seconds ahead     |
      | no nonce              | INTENT-5.2-signature-headers       | no nonce                          |
      | no timestamp          | INTENT-2-hmac-timestamp-validation | no timestamp                      |
      | lower-case method     | INTENT-5.2-method-uppercase        | the method signed in lower case   |
      | signed path differs   | INTENT-5.2-validate-if-present     | a signature over another path     |

  Scenario: a reused nonce is refused within the window
    Given I send a signed POST "/claim?namespace={ns}" with nonce "n-{ns}"
    And the signed request was accepted
    When I send a signed POST "/claim?namespace={ns}" with nonce "n-{ns}"
    Then [INTENT-5.2-nonce-replay] the response status is one of "4xx"
    And [INTENT-15-replay-mitigation] the response status is one of "4xx"
    And [INTENT-11-error-shape] the response is a JSON error

  Scenario: with BUS_REQUIRE_SIGNATURES an unsigned request is refused
    Given the target requires signatures
    When I send an unsigned POST "/claim?namespace={ns}"
    Then [INTENT-14-require-signatures] the response status is one of "4xx"
    And [INTENT-11-error-shape] the response is a JSON error

  # ------------------------------------------------------------- 5.3 admin

  Scenario: admin endpoints accept the admin token and Basic auth
    Given the target has an admin token
    And the target has a dashboard password
    When the admin sends GET "/admin/dead"
    Then [INTENT-5.3-admin-token] the response status is one of "2xx"
    And [INTENT-5.3-admin-methods] the response status is one of "2xx"
    When the dashboard user sends GET "/admin/dead"
    Then [INTENT-5.3-admin-basic] the response status is one of "2xx"
    And [INTENT-5.3-admin-methods] the response status is one of "2xx"

  Scenario Outline: admin endpoints refuse anything but admin credentials (<what>)
    When <request>
    Then [<rule>] the response status is one of "401, 403"
    And [INTENT-11-error-shape] the response is a JSON error

    Examples:
      | what                           | rule                      | request                                                                    |
      | no credentials                 | INTENT-8-admin-auth       | an anonymous client sends GET "/admin/dead"                                |
      | main API key                   | INTENT-5.3-separate-auth  | I send GET "/admin/dead"                                                   |
      | main API key as admin token    | INTENT-5.3-no-fallback    | I send GET "/admin/dead" with the API key as X-Admin-Token                 |
      | wrong admin token              | INTENT-8-admin-auth       | I send GET "/admin/dead" with X-Admin-Token "wrong-{ns}"                   |
      | wrong Basic password           | INTENT-8-admin-auth       | I send GET "/admin/dead" with Basic auth "admin" "wrong-{ns}"              |
      | main key as Basic password     | INTENT-5.3-no-fallback    | I send GET "/admin/dead" with the API key as Basic password                |
      | no credentials on purge        | INTENT-8-admin-auth       | an anonymous client sends POST "/admin/purge"                              |
      | main API key on generate_key   | INTENT-5.3-separate-auth  | I send POST "/admin/generate_key"                                          |

  # ------------------------------------------------------------- 8 admin API

  Scenario: the dashboard is HTML behind a Basic auth prompt
    Given the target has a dashboard password
    When an anonymous client sends GET "/admin/dashboard"
    Then [INTENT-8.1-dashboard-basic-prompt] the response status is 401
    And [INTENT-8.1-dashboard-basic-prompt] the response header "WWW-Authenticate" contains "Basic"
    When the dashboard user sends GET "/admin/dashboard"
    Then [INTENT-8.1-dashboard] the response status is one of "2xx"
    And [INTENT-8.1-dashboard] the response header "Content-Type" contains "text/html"

  Scenario: a generated tester key works until it is revoked
    Given the target has an admin token
    When the admin sends POST "/admin/generate_key" with body:
      """
      {"owner": "o-{ns}"}
      """
    Then [INTENT-8.2-generate-key] the response status is 201
    And [INTENT-8.2-generate-key] the response field "api_key" matches "^.+$"
    When I take the generated key as "carol"
    And carol sends POST "/claim?namespace={ns}"
    Then [INTENT-8.2-generate-key] the response status is one of "2xx"
    When the admin sends POST "/admin/revoke_key" with body:
      """
      {"api_key": "{key:carol}"}
      """
    Then [INTENT-8.2-revoke-key] the response status is one of "2xx"
    When carol sends POST "/claim?namespace={ns}"
    Then [INTENT-8.2-revoke-key] the response status is one of "4xx"
    And [INTENT-11-code-unauthorized] the response is an error with status 401 and code "unauthorized"

  Scenario: an admin cancels a claimed intent into the dead-letter queue
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"payload": {"secret": "p-{ns}"}}
      """
    When the admin sends GET "/admin/intents/{id:A}"
    Then [INTENT-8.5-admin-detail] the response status is one of "2xx"
    And [INTENT-8.5-admin-detail] the response body contains "p-{ns}"
    When I claim intent "A"
    And the admin sends POST "/admin/intents/{id:A}/cancel"
    Then [INTENT-8.5-admin-cancel] the response status is one of "2xx"
    And [INTENT-3.2-admin-cancel] the status of "A" is "dead"
    And [INTENT-8.5-admin-cancel] "A" is in the dead-letter queue
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    Then [INTENT-3.1-dead-terminal] the response status is one of "2xx, 4xx"
    And [INTENT-3.1-dead-terminal] the status of "A" is "dead"
    When I claim
    Then [INTENT-3.1-dead-terminal] the claim does not return intent "A"

  Scenario: an admin retry revives a dead intent with a clean slate
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"max_attempts": 1, "backoff_base": 1.0}
      """
    And I fail "A" 1 times
    And "A" is dead
    When the admin sends POST "/admin/intents/{id:A}/retry"
    Then [INTENT-8.5-admin-retry] the response status is one of "2xx"
    And [INTENT-3.2-admin-retry] the status of "A" is "open"
    And [INTENT-8.5-admin-retry] the claim_attempts of "A" is 0
    And [INTENT-8.5-admin-retry] "A" is not in the dead-letter queue
    When I send GET "/result/{id:A}"
    Then [INTENT-8.5-admin-retry] the response field "error" is absent
    And [INTENT-8.5-admin-retry] the response field "claim_expires_at" is null
    When I claim intent "A"
    Then [INTENT-8.5-admin-retry] the claim_attempts of "A" is 1

  Scenario: purge needs confirm and, given a namespace, purges only that one
    Given the target has an admin token
    And I publish intent "A"
    And I publish intent "B" with:
      """
      {"namespace": "{ns2}"}
      """
    When the admin sends POST "/admin/purge" with body:
      """
      {"namespace": "{ns}"}
      """
    Then [INTENT-8.3-purge-confirm] the response status is one of "4xx"
    And [INTENT-8.3-purge-confirm] the status of "A" is "open"
    When the admin sends POST "/admin/purge" with body:
      """
      {"confirm": true, "namespace": "{ns}"}
      """
    Then [INTENT-8.3-purge-namespace] the response status is one of "2xx"
    When I send GET "/status/{id:A}"
    Then [INTENT-8.3-purge-namespace] the response status is 404
    And [INTENT-8.3-purge-namespace] the status of "B" is "open"

  Scenario: manual cleanup runs and reports its stats
    Given the target has an admin token
    When the admin sends POST "/admin/cleanup"
    Then [INTENT-8.4-cleanup] the response status is one of "2xx"
    And [INTENT-8.4-cleanup] the response is a JSON object

  # -------------------------------------------------------------- 9 metrics

  Scenario: metrics are Prometheus text behind the metrics token or admin credentials
    Given I publish intent "A"
    When the metrics scraper sends GET "/metrics"
    Then [INTENT-9-metrics-auth] the response status is one of "2xx"
    And [INTENT-9-metrics-format] the response body is Prometheus text
    And [INTENT-2-metrics-endpoint] the response status is one of "2xx"
    When an anonymous client sends GET "/metrics"
    Then [INTENT-9-metrics-auth] the response status is one of "401, 403"
    When I send GET "/metrics"
    Then [INTENT-9-metrics-auth] the response status is one of "401, 403"
    When I send GET "/metrics" with X-Admin-Token "wrong-{ns}"
    Then [INTENT-9-metrics-auth] the response status is one of "401, 403"

  # ------------------------------------------------- 15 rate limit, open cap

  # §7.2's 429 row is a reply to POST /intent: the burst is of publishes,
  # which the per-key rate limit counts like any request. The row gives the
  # status, §11's table the code.
  Scenario: a tester key is limited to 60 requests a minute, and admin routes are not
    Given the target has an admin token
    And a tester key "alice"
    When alice sends 130 publishes within one rate-limit window
    Then [INTENT-15-rate-limit] at least one was refused with 429
    And [INTENT-7.2-too-many-429] at least one was refused with 429
    And [INTENT-11-code-rate-limited] at least one was refused with 429 and code "rate_limited"
    When the admin sends GET "/admin/dead"
    Then [INTENT-8-admin-exempt-limits] the response status is one of "2xx"

  Scenario: a tester key may hold at most 2000 open intents
    Given a tester key "alice"
    When alice publishes 2000 intents, paced by the rate limit
    And alice publishes intent "over" without checking the status
    Then [INTENT-15-open-cap] the request was refused with any 4xx
    And [INTENT-7.2-too-many-429] the response status is 429
    And [INTENT-11-code-limit-exceeded] the response is an error with status 429 and code "limit_exceeded"

  Scenario: the main key is exempt from the open-intent cap
    When I publish 2001 intents
    Then [INTENT-15-open-cap-main-exempt] every one of them was accepted

  # ------------------------------------------------------- TTL and retention

  Scenario: an intent expires 24 hours after it was created
    Given the target has an admin token
    And I publish intent "A"
    Then [INTENT-4.2-expires-at-default] the intent "A" expires 86400 protocol seconds after it was created

  Scenario: an expired open intent is removed by cleanup, never dead-lettered
    Given the target has an admin token
    And I publish intent "A"
    When 86401 protocol seconds pass
    And I claim
    Then [INTENT-7.3-eligible-expires] the claim does not return intent "A"
    When the admin sends POST "/admin/cleanup"
    Then [INTENT-3.1-expired-open-not-dead] "A" is not in the dead-letter queue
    When I send GET "/status/{id:A}"
    Then [INTENT-3.1-expired-open-not-dead] the response status is 404

  Scenario: a fulfilled intent is kept 7 days
    Given the target has an admin token
    And I publish intent "A"
    And I claim intent "A"
    And I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    And I remember the response as "done"
    When 600000 protocol seconds pass
    And the admin sends POST "/admin/cleanup"
    And I send GET "/result/{id:A}"
    And the answer came less than 604800 protocol seconds after "done" was sent
    Then [INTENT-15-fulfilled-retention] the response status is one of "2xx"
    When 5000 protocol seconds pass
    And the admin sends POST "/admin/cleanup"
    And I send GET "/result/{id:A}"
    Then [INTENT-15-fulfilled-retention] the response status is 404

  Scenario: a dead letter is kept 7 days
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"max_attempts": 1}
      """
    And I fail "A" 1 times
    And I remember the response as "fail"
    When 600000 protocol seconds pass
    And the admin sends POST "/admin/cleanup"
    And the admin sends GET "/admin/dead"
    And the answer came less than 604800 protocol seconds after "fail" was sent
    Then [INTENT-15-dead-retention] the response status is one of "2xx"
    And [INTENT-15-dead-retention] the response body contains "{id:A}"
    When 5000 protocol seconds pass
    And the admin sends POST "/admin/cleanup"
    Then [INTENT-15-dead-retention] "A" is not in the dead-letter queue

  # ----------------------------------------------- destructive: keep it last

  Scenario: purge without a namespace removes every intent and dead letter
    Given the target has an admin token
    And I publish intent "A"
    And I publish intent "B" with:
      """
      {"namespace": "{ns2}", "max_attempts": 1}
      """
    And I fail "B" 1 times
    When the admin sends POST "/admin/purge" with body:
      """
      {"confirm": true}
      """
    Then [INTENT-8.3-purge-all] the response status is one of "2xx"
    When I send GET "/status/{id:A}"
    Then [INTENT-8.3-purge-all] the response status is 404
    And [INTENT-8.3-purge-all] "B" is not in the dead-letter queue
