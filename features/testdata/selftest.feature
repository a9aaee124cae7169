Feature: runner self-test
  A tiny suite of the runner's own, so the runner's tests do not depend on
  the real scenarios. Tags are rule IDs of the test catalog in runner_test.go.

  @T-1-health
  Scenario: health answers a JSON object
    When the client sends GET "/health"
    Then the status is 200
    And the body is a JSON object with "ok" true

  @T-2-echo @T-5-mixed
  Scenario: the target echoes a random key
    When the client posts a random key to "/echo"
    Then the status is 200
    And the body echoes the key

  @T-3-echo-twice
  Scenario: the target echoes two random keys and serves the id it drew
    When the client posts a random key to "/echo"
    And the client posts a random key to "/echo"
    Then the body echoes the key
    When the client fetches the item of the id it was given
    Then the status is 200

  @T-5-mixed
  Scenario: a rule this target cannot offer
    Given the target offers nothing for this
    When the client sends GET "/health"

  @T-6-undefined
  Scenario: a step nobody wrote
    When nobody wrote this step
