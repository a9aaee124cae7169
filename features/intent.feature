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

  # ---------------------------------------------------------------- 7.1 health

  @INTENT-7.1-health @INTENT-7-json-content-type
  Scenario: health answers without authentication
    When an anonymous client sends GET "/health"
    Then the response status is 200
    And the response header "Content-Type" contains "application/json"
    And the response field "ok" is true
    And the response field "ts" is a number
    And the response field "version" is present

  # ------------------------------------------------------- 10 response headers

  @INTENT-10-x-frame-options @INTENT-10-x-content-type-options @INTENT-10-referrer-policy @INTENT-10-cache-control @INTENT-10-version-header @INTENT-17-version-advertised
  Scenario Outline: every response carries the security and version headers (<what>)
    When <actor> sends <method> "<path>"
    Then the response status is <status>
    And the response carries the security and version headers

    Examples:
      | what               | actor                | method | path                   | status |
      | health             | an anonymous client  | GET    | /health                | 200    |
      | no key             | an anonymous client  | POST   | /claim?namespace={ns}  | 401    |
      | empty queue        | I                    | POST   | /claim?namespace={ns}  | 204    |
      | unknown intent     | I                    | GET    | /status/{unknown}      | 404    |
      | unknown route      | I                    | GET    | /no-such-route         | 404    |

  # ---------------------------------------------------------- 11 error format

  @INTENT-11-error-shape @INTENT-11-code-unauthorized @INTENT-11-code-not-found @INTENT-5.1-api-key-required @INTENT-7-auth-required @INTENT-7-json-content-type
  Scenario Outline: every error response has the error shape (<what>)
    When <actor> sends <method> "<path>"
    Then the response is an error with status <status> and code "<code>"
    And the response header "Content-Type" contains "application/json"

    Examples:
      | what                 | actor               | method | path                         | status | code         |
      | no key on publish    | an anonymous client | POST   | /intent                      | 401    | unauthorized |
      | no key on claim      | an anonymous client | POST   | /claim?namespace={ns}        | 401    | unauthorized |
      | no key on status     | an anonymous client | GET    | /status/{unknown}            | 401    | unauthorized |
      | no key on result     | an anonymous client | GET    | /result/{unknown}            | 401    | unauthorized |
      | no key on kv         | an anonymous client | GET    | /get/k                       | 401    | unauthorized |
      | no key on fulfil     | an anonymous client | POST   | /fulfill/{unknown}           | 401    | unauthorized |
      | unknown intent       | I                   | GET    | /status/{unknown}            | 404    | not_found    |
      | unknown result       | I                   | GET    | /result/{unknown}            | 404    | not_found    |
      | unknown route        | I                   | GET    | /no-such-route               | 404    | not_found    |

  @INTENT-11-error-shape @INTENT-11-code-unauthorized
  Scenario: a wrong API key is unauthorized
    Given the next request has header "X-API-KEY" set to "not-a-key-{ns}"
    When I send POST "/claim?namespace={ns}"
    Then the response is an error with status 401 and code "unauthorized"

  @INTENT-11-error-shape @INTENT-11-code-invalid-payload @INTENT-11-invalid-specific @INTENT-7.2-bad-request-400
  Scenario: malformed JSON is a 400 with an invalid_* code
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "payload": {
      """
    Then the response status is 400
    And the response is an error whose code starts with "invalid_"

  # ------------------------------------------------------- 7.2 create intent

  @INTENT-7.2-created-201 @INTENT-7.2-publish-response @INTENT-4.2-id-format @INTENT-7.2-required-fields @INTENT-3.1-states @INTENT-4.1-visibility-default @INTENT-4.1-namespace-default
  Scenario: a minimal intent is published and open
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "payload": {"message": "Hello"}, "namespace": "{ns}"}
      """
    Then the response status is 201
    And the response field "status" is "published"
    And the response field "namespace" is "{ns}"
    And the response field "id" matches "^[0-9a-f]{32}$"
    When I remember the published id as "A"
    Then the status of "A" is "open"
    And the response field "visibility" is "private"

  @INTENT-4.1-namespace-default @INTENT-6.1-claim-namespace-default @INTENT-7.3-goal-filter
  Scenario: an intent without a namespace lands in "default", where a claim without a namespace finds it
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "payload": 1}
      """
    Then the response status is 201
    And the response field "namespace" is "default"
    When I remember the published id as "A"
    And I send POST "/claim?goal={goal}"
    Then the claim returns intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    Then the response status is 200

  @INTENT-7.2-bad-request-400 @INTENT-7.2-required-fields @INTENT-11-error-shape @INTENT-11-invalid-specific @INTENT-11-code-invalid-request @INTENT-4.1-goal-length @INTENT-4.1-namespace-format @INTENT-4.1-visibility-values @INTENT-4.1-priority-range @INTENT-4.1-max-attempts-range @INTENT-4.1-backoff-base-range @INTENT-4.1-delay
  Scenario Outline: a publish with a missing or invalid field is refused (<what>)
    When I send POST "/intent" with body:
      """
      <body>
      """
    Then the response status is 400
    And the response is an error whose code starts with "invalid_"

    Examples:
      | what                  | body                                                                          |
      | no goal               | {"payload": 1, "namespace": "{ns}"}                                           |
      | no payload            | {"goal": "{goal}", "namespace": "{ns}"}                                       |
      | empty goal            | {"goal": "", "payload": 1, "namespace": "{ns}"}                               |
      | goal of 257 chars     | {"goal": "{x:257}", "payload": 1, "namespace": "{ns}"}                        |
      | goal not a string     | {"goal": 7, "payload": 1, "namespace": "{ns}"}                                |
      | namespace with slash  | {"goal": "{goal}", "payload": 1, "namespace": "a/b"}                          |
      | namespace of 65 chars | {"goal": "{goal}", "payload": 1, "namespace": "{x:65}"}                       |
      | visibility unknown    | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "visibility": "team"}   |
      | priority -1           | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "priority": -1}         |
      | priority 1001         | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "priority": 1001}       |
      | priority not integer  | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "priority": 1.5}        |
      | max_attempts 0        | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "max_attempts": 0}      |
      | max_attempts 21       | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "max_attempts": 21}     |
      | backoff_base 0.5      | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "backoff_base": 0.5}    |
      | backoff_base 3600.5   | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "backoff_base": 3600.5} |
      | delay not a number    | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "delay": "soon"}        |
      | body not an object    | [1, 2, 3]                                                                     |

  @INTENT-4.1-goal-length @INTENT-4.1-namespace-format @INTENT-4.1-priority-range @INTENT-4.1-max-attempts-range @INTENT-4.1-backoff-base-range
  Scenario Outline: boundary values are accepted (<what>)
    When I send POST "/intent" with body:
      """
      <body>
      """
    Then the response status is 201

    Examples:
      | what                  | body                                                                                             |
      | goal of 256 chars     | {"goal": "{x:256}", "payload": 1, "namespace": "{ns}"}                                           |
      | goal of 1 char        | {"goal": "g", "payload": 1, "namespace": "{ns}"}                                                 |
      | namespace chars       | {"goal": "{goal}", "payload": 1, "namespace": "{ns}.a-b_C9"}                                     |
      | priority 1000         | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "priority": 1000}                          |
      | max_attempts 20       | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "max_attempts": 20, "priority": 0}         |
      | backoff_base 3600.0   | {"goal": "{goal}", "payload": 1, "namespace": "{ns}", "backoff_base": 3600.0, "max_attempts": 1} |
      | backoff_base 1.0      | {"goal": "{goal}", "payload": null, "namespace": "{ns}", "backoff_base": 1.0}                    |

  @INTENT-7.2-body-limit-413 @INTENT-11-code-payload-too-large @INTENT-4.1-payload-limit @INTENT-15-size-limits @INTENT-11-error-shape
  Scenario Outline: oversized requests are refused with 413 (<what>)
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "namespace": "{ns}", "payload": "<payload>"}
      """
    Then the response is an error with status 413 and code "payload_too_large"

    Examples:
      | what                          | payload   |
      | payload field over 7KB        | {x:7300}  |
      | total body over 8KB           | {x:8400}  |

  @INTENT-4.1-payload-limit @INTENT-15-size-limits
  Scenario: a payload just under 7KB is accepted
    When I send POST "/intent" with body:
      """
      {"goal": "{goal}", "namespace": "{ns}", "payload": "{x:7000}"}
      """
    Then the response status is 201

  # ------------------------------------------------------------ idempotency

  @INTENT-7.2-idem-replay @INTENT-7.2-idem-semantic
  Scenario: the same Idempotency-Key and the same body return the same response, whatever the key order and whitespace
    When I publish with Idempotency-Key "k1" the body:
      """
      {"goal": "{goal}", "payload": {"a": 1, "b": [1, 2]}, "namespace": "{ns}", "priority": 5}
      """
    Then the response status is 201
    And I remember the response as "first"
    When I publish with Idempotency-Key "k1" the body:
      """
      {"goal": "{goal}", "payload": {"a": 1, "b": [1, 2]}, "namespace": "{ns}", "priority": 5}
      """
    Then the response is the same as "first"
    When I publish with Idempotency-Key "k1" the body:
      """
      {  "priority":5,"namespace" : "{ns}",
         "payload": {"b": [1,2], "a": 1},
         "goal": "{goal}"  }
      """
    Then the response is the same as "first"
    And the namespace holds 1 open intent

  @INTENT-7.2-idem-conflict @INTENT-11-code-idempotency-conflict @INTENT-11-error-shape
  Scenario: the same Idempotency-Key with a different body is a 422
    When I publish with Idempotency-Key "k2" the body:
      """
      {"goal": "{goal}", "payload": {"a": 1}, "namespace": "{ns}"}
      """
    Then the response status is 201
    When I publish with Idempotency-Key "k2" the body:
      """
      {"goal": "{goal}", "payload": {"a": 2}, "namespace": "{ns}"}
      """
    Then the response is an error with status 422 and code "idempotency_conflict"
    And the namespace holds 1 open intent

  @INTENT-7.2-idem-per-key @INTENT-12-isolation
  Scenario: Idempotency-Keys are scoped per API key
    Given a tester key "alice"
    When I publish with Idempotency-Key "k3" the body:
      """
      {"goal": "{goal}", "payload": 1, "namespace": "{ns}"}
      """
    Then the response status is 201
    And I remember the response as "mine"
    When alice publishes with Idempotency-Key "k3" the body:
      """
      {"goal": "{goal}", "payload": 1, "namespace": "{ns}"}
      """
    Then the response status is 201
    And the response field "id" differs from "mine"

  @INTENT-7.2-idem-replay @INTENT-12-at-least-once
  Scenario: concurrent duplicates of one Idempotency-Key create exactly one intent
    When 20 clients publish concurrently with Idempotency-Key "storm" the body:
      """
      {"goal": "{goal}", "payload": {"n": 1}, "namespace": "{ns}"}
      """
    Then every one of them got the same id
    And the namespace holds 1 open intent

  # --------------------------------------------------------------- 7.3 claim

  @INTENT-3.2-claim-transition @INTENT-7.3-claim-response @INTENT-3.3-attempts-increment @INTENT-4.2-claim-attempts @INTENT-3.1-states @INTENT-12-isolated-claim-locks
  Scenario: a claim hands out the intent with a fresh claim token
    Given I publish intent "A" with:
      """
      {"payload": {"message": "Hello"}, "priority": 7}
      """
    When I claim
    Then the claim returns intent "A"
    And the response field "goal" is "{goal}"
    And the response field "payload" is {"message": "Hello"}
    And the response field "claim_attempts" is 1
    And the response field "priority" is 7
    And the response field "namespace" is "{ns}"
    And the response field "claim_timeout" is a number
    And the claim token is 32 lowercase hex characters
    And the status of "A" is "claimed"
    And the response field "claim_attempts" is 1

  @INTENT-7.3-no-content-204 @INTENT-7.3-retry-after
  Scenario: an empty namespace answers 204 with Retry-After: 1
    When I claim
    Then the response status is 204
    And the response header "Retry-After" is "1"

  @INTENT-7.3-atomic-claim @INTENT-12-atomic-claiming @INTENT-2-atomic-isolation @INTENT-2-concurrent-requests @INTENT-2-no-lease-hijack
  Scenario: many concurrent workers never share an intent
    Given I publish 30 public intents
    When 50 workers claim concurrently
    Then 30 claims returned an intent
    And no intent is held by two live leases
    And every claim token is distinct

  @INTENT-6.3-priority-order @INTENT-7.3-selection-order @INTENT-4.1-priority-range
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
      {}
      """
    When I claim every intent in turn
    Then the intents were claimed in the order "high, mid, low"

  @INTENT-6.3-tie-breakers @INTENT-7.3-selection-order @INTENT-4.1-delay @INTENT-7.3-eligible-run-at
  Scenario: within one priority an earlier run_at goes first, and a delayed intent waits
    Given I publish intent "late" with:
      """
      {"delay": 30}
      """
    And I publish intent "early" with:
      """
      {}
      """
    When I claim
    Then the claim returns intent "early"
    When I claim
    Then the response status is 204
    When "late" is due
    And I claim
    Then the claim returns intent "late"

  @INTENT-6.3-tie-breakers @INTENT-7.3-selection-order @INTENT-8.5-admin-detail
  Scenario: the claim order agrees with every tie-breaker the target reports
    Given the target has an admin token
    And I publish 12 intents of priority 50 concurrently
    And I publish intent "retried" with:
      """
      {"priority": 50, "backoff_base": 1.0, "goal": "{goal}-r"}
      """
    When I claim intent "retried" with query "goal={goal}-r"
    And I send POST "/fail/{id:retried}" with body:
      """
      {"claim_token": "{token:retried}", "error": "again"}
      """
    And "retried" is due
    And I note the scheduling fields of every intent
    And I claim every intent in turn
    Then the claim order is by priority desc, run_at, claim_attempts, created_at and id

  # ---------------------------------------------------------------- routing

  @INTENT-6.1-namespace-isolation @INTENT-12-isolation
  Scenario: intents never cross namespaces
    Given I publish intent "A" with:
      """
      {"namespace": "{ns2}"}
      """
    When I claim
    Then the response status is 204
    When I send POST "/claim?namespace={ns2}"
    Then the claim returns intent "A"

  @INTENT-6.2-private @INTENT-4.1-visibility-default @INTENT-12-isolation
  Scenario: a private intent is claimed only by its publisher's key
    Given a tester key "alice"
    And I publish intent "A"
    When alice claims
    Then the response status is 204
    When I claim
    Then the claim returns intent "A"

  @INTENT-6.2-public @INTENT-4.1-visibility-values
  Scenario: a public intent is claimed by any key in its namespace
    Given a tester key "alice"
    And I publish intent "A" with:
      """
      {"visibility": "public"}
      """
    When alice claims
    Then the claim returns intent "A"

  @INTENT-7.3-publisher-filter @INTENT-11-code-forbidden @INTENT-11-error-shape
  Scenario: a worker may filter by its own publisher key only
    Given a tester key "alice"
    And a tester key "bob"
    And I publish intent "mine" with:
      """
      {"visibility": "public"}
      """
    And alice publishes intent "A" with:
      """
      {"visibility": "public"}
      """
    When bob claims with query "publisher={key:alice}"
    Then the response is an error with status 403 and code "forbidden"
    When alice claims with query "publisher={key:alice}"
    Then the claim returns intent "A"
    When alice claims with query "publisher={key:alice}"
    Then the response status is 204

  @INTENT-7.3-goal-filter
  Scenario: the goal filter returns only intents of that goal
    Given I publish intent "other" with:
      """
      {"goal": "{goal}-other"}
      """
    And I publish intent "A"
    When I claim with query "goal={goal}"
    Then the claim returns intent "A"

  @INTENT-6.4-target-worker
  Scenario Outline: a targeted intent goes only to its worker (<how>)
    Given I publish intent "A" with:
      """
      {"target_worker": "w-{ns}"}
      """
    When I claim with query "worker_id=someone-else"
    Then the response status is 204
    When I claim
    Then the response status is 204
    When <claim>
    Then the claim returns intent "A"

    Examples:
      | how                  | claim                                                                 |
      | X-Worker-ID header   | I claim with header "X-Worker-ID" set to "w-{ns}"                     |
      | worker_id parameter  | I claim with query "worker_id=w-{ns}"                                 |

  @INTENT-6.5-capability @INTENT-6.5-capability-exact
  Scenario Outline: a capability-bound intent goes only to a worker advertising exactly it (<how>)
    Given I publish intent "A" with:
      """
      {"required_capability": "gpu"}
      """
    When I claim with header "X-Worker-Capabilities" set to "GPU,gpu-small, cpu"
    Then the response status is 204
    When I claim with query "capabilities=gp,gpux"
    Then the response status is 204
    When I claim
    Then the response status is 204
    When <claim>
    Then the claim returns intent "A"

    Examples:
      | how                        | claim                                                             |
      | X-Worker-Capabilities      | I claim with header "X-Worker-Capabilities" set to "cpu,gpu"      |
      | capabilities parameter     | I claim with query "capabilities=cpu,gpu"                         |

  # ------------------------------------------------------- tokens and leases

  @INTENT-3.2-fulfill-transition @INTENT-7.5-fulfill @INTENT-7.5-result-type-default @INTENT-7.7-result-fields @INTENT-3.1-fulfilled-terminal @INTENT-3.1-states @INTENT-7.8-status
  Scenario: fulfil stores the result and the intent stays fulfilled
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "result": {"status": "sent"}}
      """
    Then the response status is 200
    When I send GET "/result/{id:A}"
    Then the response status is 200
    And the response field "status" is "fulfilled"
    And the response field "result" is {"status": "sent"}
    And the response field "result_type" is "json"
    And the response field "completed_at" is a number
    And the response field "goal" is "{goal}"
    When I send GET "/status/{id:A}"
    Then the response field "status" is "fulfilled"
    And the response field "result" is absent
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    Then the response is an error with status 404 and code "not_found"
    When I claim
    Then the response status is 204

  @INTENT-7.5-fulfill-without-result @INTENT-7.5-fulfill
  Scenario: fulfil with nothing but the claim token stores no result
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    Then the response status is 200
    When I send GET "/result/{id:A}"
    Then the response field "status" is "fulfilled"
    And the response field "result" is null

  @INTENT-7.5-result-type
  Scenario Outline: result_type must be json or text (<type>)
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "result": "plain words", "result_type": "<type>"}
      """
    Then the response status is <status>

    Examples:
      | type | status |
      | xml  | 400    |
      | text | 200    |

  @INTENT-7.5-fulfill-token-required @INTENT-7.6-fail-token-required @INTENT-7.4-extend-token-required @INTENT-15-claim-token-validation @INTENT-2-no-lease-hijack
  Scenario Outline: a mutation without the claim token is refused (<op>)
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/<op>/{id:A}" with body:
      """
      <body>
      """
    Then the response status is not 200
    And the response is a JSON error
    And the status of "A" is "claimed"

    Examples:
      | op           | body                                       |
      | fulfill      | {"result": 1}                              |
      | fail         | {"error": "x"}                             |
      | extend_claim | {"seconds": 60}                            |
      | fulfill      | {"claim_token": "{x:32}"}                  |
      | fail         | {"claim_token": "{x:32}", "error": "x"}    |
      | extend_claim | {"claim_token": "{x:32}", "seconds": 60}   |

  @INTENT-7.5-fulfill-404 @INTENT-7.6-fail-404 @INTENT-7.4-extend-404 @INTENT-2-no-lease-hijack @INTENT-11-code-not-found
  Scenario Outline: another key holding the right token is not the claimer (<op>)
    Given a tester key "alice"
    And I publish intent "A" with:
      """
      {"visibility": "public"}
      """
    And I claim intent "A"
    When alice sends POST "/<op>/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "seconds": 60, "error": "x"}
      """
    Then the response is an error with status 404 and code "not_found"
    And the status of "A" is "claimed"

    Examples:
      | op           |
      | fulfill      |
      | fail         |
      | extend_claim |

  @INTENT-3.3-token-overwritten-404 @INTENT-3.3-token-expired-404 @INTENT-7.4-extend-expired-lease @INTENT-7.5-fulfill-404 @INTENT-7.6-fail-404 @INTENT-7.4-extend-404 @INTENT-3.3-lease-expiry @INTENT-7.3-immediate-reclaim @INTENT-3.2-expiry-requeue @INTENT-3.3-expiry-backoff @INTENT-2-redelivery @INTENT-12-at-least-once @INTENT-15-claim-token-validation
  Scenario Outline: an expired or superseded claim token gets 404 (<op>)
    Given I publish intent "A" with:
      """
      {"backoff_base": 1.0}
      """
    And I claim intent "A"
    When the lease of "A" has expired
    And I send POST "/<op>/{id:A}" with body:
      """
      {"claim_token": "{token1:A}", "seconds": 60, "error": "late"}
      """
    Then the response is an error with status 404 and code "not_found"
    When I claim until intent "A" is returned
    Then the response field "claim_attempts" is 2
    When I send POST "/<op>/{id:A}" with body:
      """
      {"claim_token": "{token1:A}", "seconds": 60, "error": "late"}
      """
    Then the response is an error with status 404 and code "not_found"
    And the status of "A" is "claimed"
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    Then the response status is 200

    Examples:
      | op           |
      | fulfill      |
      | fail         |
      | extend_claim |

  @INTENT-3.3-expiry-backoff @INTENT-3.3-lease-expiry
  Scenario: an expired lease is requeued with backoff, not handed out at once
    Given I publish intent "A" with:
      """
      {"backoff_base": 60.0}
      """
    And I claim intent "A"
    When the lease of "A" has expired
    And I claim
    Then the response status is 204

  @INTENT-7.4-extend
  Scenario: extend_claim moves the lease
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/extend_claim/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "seconds": 3600}
      """
    Then the response status is 200
    And the lease of "A" ends at least 3000 protocol seconds from now

  @INTENT-7.4-extend-seconds-range
  Scenario Outline: extend_claim seconds must be between 10 and 3600 (<seconds>)
    Given I publish intent "A"
    And I claim intent "A"
    When I send POST "/extend_claim/{id:A}" with body:
      """
      {"claim_token": "{token:A}", "seconds": <seconds>}
      """
    Then the response status is <status>

    Examples:
      | seconds | status |
      | 9       | 400    |
      | 3601    | 400    |
      | 10      | 200    |
      | 3600    | 200    |

  # ------------------------------------------------------ backoff and dead

  @INTENT-3.2-fail-requeue @INTENT-7.6-fail @INTENT-3.3-fail-backoff @INTENT-3.3-backoff-formula @INTENT-3.3-backoff-jitter @INTENT-12-retry-backoff @INTENT-7.7-result-error-field
  Scenario Outline: fail requeues with backoff_base * 2^attempts + [0, 2) (attempt <n>)
    Given I publish intent "A" with:
      """
      {"backoff_base": <base>, "max_attempts": 5}
      """
    When I fail "A" <n> times
    Then the run_at of "A" is within the backoff window of attempt <n> after the last fail
    And the status of "A" is "open"
    And the response field "claim_attempts" is <n>
    When I send GET "/result/{id:A}"
    Then the response field "error" is "attempt <n>"
    When I claim
    Then the response status is 204

    Examples:
      | n | base  |
      | 1 | 30.0  |
      | 2 | 20.0  |

  @INTENT-3.3-default-backoff-base @INTENT-3.3-backoff-formula
  Scenario: the default backoff_base is 5 seconds
    Given I publish intent "A"
    When I fail "A" 1 times
    Then the run_at of "A" is within the backoff window of attempt 1 with base 5 after the last fail

  @INTENT-3.2-fail-dead @INTENT-3.3-dead-at-max-attempts @INTENT-3.3-default-max-attempts @INTENT-3.1-dead-terminal @INTENT-7.3-eligible-attempts @INTENT-12-dead-letter-archival @INTENT-8.6-dead-list @INTENT-8.6-dead-detail
  Scenario: the third fail of a default intent dead-letters it
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"backoff_base": 1.0, "payload": {"keep": "me"}}
      """
    When I fail "A" 3 times
    Then the status of "A" is "dead"
    And the response field "claim_attempts" is 3
    When I claim
    Then the response status is 204
    And "A" is in the dead-letter queue
    When the admin sends GET "/admin/dead/{id:A}"
    Then the response status is 200
    And the response body contains "me"

  @INTENT-3.2-expiry-dead @INTENT-3.3-expiry-dead-direct @INTENT-3.3-lease-expiry @INTENT-12-dead-letter-archival
  Scenario: a lease that expires on the last attempt dead-letters the intent
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"max_attempts": 1}
      """
    And I claim intent "A"
    When the lease of "A" has expired
    Then the status of "A" is "dead"
    And "A" is in the dead-letter queue
    When I claim
    Then the response status is 204

  # ------------------------------------------------------------- 7.7 / 7.8

  @INTENT-7.7-result-access @INTENT-7.8-status-access @INTENT-11-code-forbidden @INTENT-12-isolation
  Scenario: results and status are readable by the publisher, the claimer and an admin only
    Given the target has an admin token
    And a tester key "alice"
    And a tester key "bob"
    And I publish intent "A" with:
      """
      {"visibility": "public"}
      """
    When bob sends GET "/result/{id:A}"
    Then the response status is 403 or 404
    And the response is a JSON error
    When bob sends GET "/status/{id:A}"
    Then the response status is 403 or 404
    When alice claims intent "A"
    And alice sends GET "/result/{id:A}"
    Then the response status is 200
    When alice sends GET "/status/{id:A}"
    Then the response status is 200
    When the admin sends GET "/result/{id:A}"
    Then the response status is 200
    When I send GET "/status/{id:A}"
    Then the response field "status" is "claimed"

  # -------------------------------------------------------------- 7.9 KV

  @INTENT-7.9-kv-isolation @INTENT-7.9-kv-get @INTENT-12-isolation
  Scenario: the key-value store is scoped per API key
    Given a tester key "alice"
    When I send POST "/set/k-{ns}" with body:
      """
      {"value": "hello"}
      """
    Then the response status is 200 or 201
    When I send GET "/get/k-{ns}"
    Then the response field "value" is "hello"
    When alice sends GET "/get/k-{ns}"
    Then the response is an error with status 404 and code "not_found"
    When alice sends POST "/set/k-{ns}" with body:
      """
      {"value": "alice's"}
      """
    And I send GET "/get/k-{ns}"
    Then the response field "value" is "hello"

  @INTENT-7.9-kv-ttl
  Scenario: a KV value expires after its ttl, which is at most 86400
    When I send POST "/set/k-{ns}" with body:
      """
      {"value": "v", "ttl": 86401}
      """
    Then the response status is 400
    When I send POST "/set/k-{ns}" with body:
      """
      {"value": "v", "ttl": 2}
      """
    Then the response status is 200 or 201
    When 3 protocol seconds pass
    And I send GET "/get/k-{ns}"
    Then the response status is 404

  @INTENT-7.9-kv-ttl
  Scenario: a KV value without ttl lives 600 seconds
    When I send POST "/set/k-{ns}" with body:
      """
      {"value": "v"}
      """
    And 540 protocol seconds pass
    And I send GET "/get/k-{ns}"
    Then the response status is 200
    When 70 protocol seconds pass
    And I send GET "/get/k-{ns}"
    Then the response status is 404

  # ------------------------------------------------------------- 5.2 HMAC

  @INTENT-5.2-signing-optional @INTENT-5.2-empty-body @INTENT-5.2-body-exact-bytes @INTENT-5.2-method-uppercase @INTENT-5.2-digest-lowercase-hex
  Scenario: correctly signed requests are accepted, with odd JSON formatting and empty bodies
    When I send a signed POST "/intent" with body:
      """
      {  "payload":{"z":1,  "a":2}, "goal":"{goal}",
        "namespace":"{ns}"}
      """
    Then the response status is 201
    When I send a signed GET "/health"
    Then the response status is 200
    When I send a signed POST "/claim?namespace={ns}"
    Then the response status is 200

  @INTENT-5.2-query-canonical @INTENT-5.2-query-percent-encoding
  Scenario: the canonical path sorts, keeps repeated and blank parameters, and encodes / as %2F
    Given I publish intent "A" with:
      """
      {"goal": "a/b c"}
      """
    When I send a signed POST "/claim?worker_id=&namespace={ns}&goal=a%2Fb%20c&capabilities=x&capabilities="
    Then the claim returns intent "A"

  @INTENT-5.2-validate-if-present @INTENT-5.2-signature-valid @INTENT-5.2-timestamp-window @INTENT-5.2-signature-headers @INTENT-5.2-method-uppercase @INTENT-5.2-digest-lowercase-hex @INTENT-2-hmac-timestamp-validation @INTENT-11-code-unauthorized
  Scenario Outline: a badly signed request is refused (<what>)
    When I send a signed POST "/claim?namespace={ns}" with <flaw>
    Then the response status is 401
    And the response is a JSON error

    Examples:
      | what                  | flaw                              |
      | wrong signature       | a wrong signature                 |
      | signed by another key | the signature of another key      |
      | timestamp 301 s old   | a timestamp 301 seconds old       |
      | timestamp 301 s ahead | a timestamp 301 seconds ahead     |
      | no nonce              | no nonce                          |
      | no timestamp          | no timestamp                      |
      | lower-case method     | the method signed in lower case   |
      | upper-case digest     | an upper-case digest              |
      | signed path differs   | a signature over another path     |

  @INTENT-5.2-nonce-replay @INTENT-15-replay-mitigation
  Scenario: a reused nonce is refused within the window
    When I send a signed POST "/claim?namespace={ns}" with nonce "n-{ns}"
    Then the response status is 204
    When I send a signed POST "/claim?namespace={ns}" with nonce "n-{ns}"
    Then the response status is 401
    And the response is a JSON error

  @INTENT-5.2-require-signatures
  Scenario: with BUS_REQUIRE_SIGNATURES an unsigned request is refused
    Given the target requires signatures
    When I send an unsigned POST "/claim?namespace={ns}"
    Then the response status is 401
    And the response is a JSON error

  # ------------------------------------------------------------- 5.3 admin

  @INTENT-5.3-admin-methods @INTENT-5.3-admin-token @INTENT-5.3-admin-basic @INTENT-8-admin-auth
  Scenario: admin endpoints accept the admin token and Basic auth
    Given the target has an admin token
    And the target has a dashboard password
    When the admin sends GET "/admin/dead"
    Then the response status is 200
    When the dashboard user sends GET "/admin/dead"
    Then the response status is 200

  @INTENT-5.3-no-fallback @INTENT-5.3-separate-auth @INTENT-8-admin-auth @INTENT-11-error-shape
  Scenario Outline: admin endpoints refuse anything but admin credentials (<what>)
    When <request>
    Then the response status is 401 or 403
    And the response is a JSON error

    Examples:
      | what                           | request                                                                    |
      | no credentials                 | an anonymous client sends GET "/admin/dead"                                |
      | main API key                   | I send GET "/admin/dead"                                                   |
      | main API key as admin token    | I send GET "/admin/dead" with the API key as X-Admin-Token                 |
      | wrong admin token              | I send GET "/admin/dead" with X-Admin-Token "wrong-{ns}"                   |
      | wrong Basic password           | I send GET "/admin/dead" with Basic auth "admin" "wrong-{ns}"              |
      | main key as Basic password     | I send GET "/admin/dead" with the API key as Basic password                |
      | no credentials on purge        | an anonymous client sends POST "/admin/purge"                              |
      | main API key on generate_key   | I send POST "/admin/generate_key"                                          |

  # ------------------------------------------------------------- 8 admin API

  @INTENT-8.1-dashboard @INTENT-8.1-dashboard-basic-prompt
  Scenario: the dashboard is HTML behind a Basic auth prompt
    Given the target has a dashboard password
    When an anonymous client sends GET "/admin/dashboard"
    Then the response status is 401
    And the response header "WWW-Authenticate" contains "Basic"
    When the dashboard user sends GET "/admin/dashboard"
    Then the response status is 200
    And the response header "Content-Type" contains "text/html"

  @INTENT-8.2-generate-key @INTENT-8.2-revoke-key
  Scenario: a generated tester key works until it is revoked
    Given the target has an admin token
    When the admin sends POST "/admin/generate_key" with body:
      """
      {"owner": "o-{ns}"}
      """
    Then the response status is 201
    And the response field "api_key" matches "^tk_"
    And the response field "owner" is "o-{ns}"
    When I take the generated key as "carol"
    And carol sends POST "/claim?namespace={ns}"
    Then the response status is 204
    When the admin sends POST "/admin/revoke_key" with body:
      """
      {"api_key": "{key:carol}"}
      """
    Then the response status is 200
    When carol sends POST "/claim?namespace={ns}"
    Then the response is an error with status 401 and code "unauthorized"

  @INTENT-3.2-admin-cancel @INTENT-8.5-admin-cancel @INTENT-8.5-admin-detail @INTENT-3.1-dead-terminal
  Scenario: an admin cancels a claimed intent into the dead-letter queue
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"payload": {"secret": "p-{ns}"}}
      """
    When the admin sends GET "/admin/intents/{id:A}"
    Then the response status is 200
    And the response body contains "p-{ns}"
    When I claim intent "A"
    And the admin sends POST "/admin/intents/{id:A}/cancel"
    Then the response status is 200
    And the status of "A" is "dead"
    And "A" is in the dead-letter queue
    When I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    Then the response status is 404
    When I claim
    Then the response status is 204

  @INTENT-3.2-admin-retry @INTENT-8.5-admin-retry
  Scenario: an admin retry revives a dead intent with a clean slate
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"max_attempts": 1, "backoff_base": 1.0}
      """
    And I fail "A" 1 times
    And the status of "A" is "dead"
    When the admin sends POST "/admin/intents/{id:A}/retry"
    Then the response status is 200
    And the status of "A" is "open"
    And the response field "claim_attempts" is 0
    And "A" is not in the dead-letter queue
    When I send GET "/result/{id:A}"
    Then the response field "error" is absent
    And the response field "claim_expires_at" is null
    When I claim intent "A"
    Then the response field "claim_attempts" is 1

  @INTENT-8.3-purge-confirm @INTENT-8.3-purge-namespace
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
    Then the response status is 400
    And the status of "A" is "open"
    When the admin sends POST "/admin/purge" with body:
      """
      {"confirm": true, "namespace": "{ns}"}
      """
    Then the response status is 200
    When I send GET "/status/{id:A}"
    Then the response status is 404
    And the status of "B" is "open"

  @INTENT-8.4-cleanup
  Scenario: manual cleanup runs and reports its stats
    Given the target has an admin token
    When the admin sends POST "/admin/cleanup"
    Then the response status is 200
    And the response has the number fields "expired_open_deleted, expired_claims_requeued, expired_claims_dead, fulfilled_deleted, dead_deleted, dead_letters_deleted, store_deleted, rate_limits_deleted, idempotency_deleted, nonces_deleted"

  # -------------------------------------------------------------- 9 metrics

  @INTENT-9-metrics-auth @INTENT-9-metrics-format @INTENT-2-metrics-endpoint
  Scenario: metrics are Prometheus text behind the metrics token or admin credentials
    Given I publish intent "A"
    When the metrics scraper sends GET "/metrics"
    Then the response status is 200
    And the response body contains "intent_bus_intents_total"
    And the response body contains "intent_bus_dead_letters_total"
    And the response body contains "intent_bus_tester_keys_total"
    When an anonymous client sends GET "/metrics"
    Then the response status is 401 or 403
    When I send GET "/metrics"
    Then the response status is 401 or 403
    When I send GET "/metrics" with X-Admin-Token "wrong-{ns}"
    Then the response status is 401 or 403

  # ------------------------------------------------- 15 rate limit, open cap

  @INTENT-15-rate-limit @INTENT-7.2-too-many-429 @INTENT-11-code-rate-limited @INTENT-8-admin-exempt-limits
  Scenario: a tester key is limited to 60 requests a minute, and admin routes are not
    Given the target has an admin token
    And a tester key "alice"
    When alice sends 130 claims within one rate-limit window
    Then at least one was refused with 429 and code "rate_limited"
    When the admin sends GET "/admin/dead"
    Then the response status is 200

  @INTENT-15-open-cap @INTENT-7.2-too-many-429 @INTENT-11-code-limit-exceeded
  Scenario: a tester key may hold at most 2000 open intents
    Given a tester key "alice"
    When alice publishes 2000 intents, paced by the rate limit
    And alice publishes intent "over" without checking the status
    Then the response is an error with status 429 and code "limit_exceeded"

  @INTENT-15-open-cap-main-exempt
  Scenario: the main key is exempt from the open-intent cap
    When I publish 2001 intents
    Then every one of them was accepted

  # ------------------------------------------------------- TTL and retention

  @INTENT-4.2-expires-at-default
  Scenario: an intent expires 24 hours after it was created
    Given the target has an admin token
    And I publish intent "A"
    Then the intent "A" expires 86400 protocol seconds after it was created

  @INTENT-3.1-expired-open-not-dead @INTENT-7.3-eligible-expires
  Scenario: an expired open intent is removed by cleanup, never dead-lettered
    Given the target has an admin token
    And I publish intent "A"
    When 86401 protocol seconds pass
    And I claim
    Then the response status is 204
    When the admin sends POST "/admin/cleanup"
    Then "A" is not in the dead-letter queue
    When I send GET "/status/{id:A}"
    Then the response status is 404

  @INTENT-15-fulfilled-retention
  Scenario: a fulfilled intent is kept 7 days
    Given the target has an admin token
    And I publish intent "A"
    And I claim intent "A"
    And I send POST "/fulfill/{id:A}" with body:
      """
      {"claim_token": "{token:A}"}
      """
    When 600000 protocol seconds pass
    And the admin sends POST "/admin/cleanup"
    And I send GET "/result/{id:A}"
    Then the response status is 200
    When 5000 protocol seconds pass
    And the admin sends POST "/admin/cleanup"
    And I send GET "/result/{id:A}"
    Then the response status is 404

  @INTENT-15-dead-retention
  Scenario: a dead letter is kept 7 days
    Given the target has an admin token
    And I publish intent "A" with:
      """
      {"max_attempts": 1}
      """
    And I fail "A" 1 times
    When 600000 protocol seconds pass
    And the admin sends POST "/admin/cleanup"
    Then "A" is in the dead-letter queue
    When 5000 protocol seconds pass
    And the admin sends POST "/admin/cleanup"
    Then "A" is not in the dead-letter queue

  # ----------------------------------------------- destructive: keep it last

  @INTENT-8.3-purge-all
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
    Then the response status is 200
    When I send GET "/status/{id:A}"
    Then the response status is 404
    And "B" is not in the dead-letter queue
