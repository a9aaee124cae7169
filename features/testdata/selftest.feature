Feature: runner self-test
  A tiny suite of the runner's own, so the runner's tests do not depend on
  the real scenarios. Every assertion names the rule it judges, a rule of
  the test catalog in runner_test.go.

  Scenario: health answers a JSON object
    When the client sends GET "/health"
    Then [T-1-health] the status is 200
    And [T-1-health] the body is a JSON object with "ok" true

  Scenario: the target echoes a random key
    When the client posts a random key to "/echo"
    Then [T-2-echo] the status is 200
    And [T-5-mixed] the body echoes the key

  Scenario: the target echoes two random keys and serves the id it drew
    When the client posts a random key to "/echo"
    And the client posts a random key to "/echo"
    Then [T-3-echo-twice] the body echoes the key
    When the client fetches the item of the id it was given
    Then [T-3-echo-twice] the status is 200

  Scenario: a rule this target cannot offer
    Given the target offers nothing for this
    When the client sends GET "/health"
    Then [T-5-mixed] the status is 200

  Scenario: a step nobody wrote
    When nobody wrote this step
    Then [T-6-undefined] the status is 200

  Scenario: a failed precondition blocks what rests on it
    Given the client has a healthy session
    When the client sends GET "/health"
    Then [T-8-after-session] the status is 200

  Scenario: checks of one response stand on their own, until the next request
    When the client sends GET "/health"
    Then [T-9-header] the header "X-Test" is "yes"
    And [T-10-same-response] the body is a JSON object with "ok" true
    When the client sends GET "/health"
    Then [T-11-next-request] the status is 200

  Scenario: a failed gate blocks the checks of its response
    When the client sends GET "/gate"
    Then [T-12-gate] the status is 200
    And [T-18-same-gate] the status is 200
    And [T-13-gated] the body is a JSON object with "ok" true

  Scenario: one observation, judged under every reading
    When the client sends GET "/health"
    Then [T-14-reading, reading flavour=sweet] the body has "flavour" "sweet"
    And [T-14-reading, reading flavour=sour] the body has "flavour" "sour"

  Scenario Outline: every row judges its own rule (<path>)
    When the client sends GET "<path>"
    Then [<rule>] the status is <status>

    Examples:
      | rule        | path    | status |
      | T-15-row-a  | /health | 200    |
      | T-16-row-b  | /gate   | 200    |
      | T-17-row-c  | /health | 200    |
